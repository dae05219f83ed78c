"""What every implementation of the bench hands to the timer: a prepared call, and the layout
conversions the frameworks share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..conformance.runtimes import openvino_native_inputs
from .shapes import Inputs

Result = tuple[np.ndarray, np.ndarray | None]  # [N] losses, [T, N, C] gradient or None
Prepare = Callable[[Inputs, int], "Prepared"]  # (inputs, threads) -> a prepared call


@dataclass(frozen=True)
class Prepared:
    """A call that computes the losses of one batch, the JIT compilation it needed (s), and what
    to run before each later turn of the column (untimed): the process-wide settings that
    another column's library may have changed since (PaddlePaddle's call sets the OpenMP thread
    count that PyTorch shares to 1)."""

    call: Callable[[], Result]
    compile_s: float | None = None
    turn: Callable[[], Any] | None = None


@dataclass(frozen=True)
class Layout:
    """The inputs as the frameworks take them: batch-major float32 logits [N, T, C], frame counts
    [N], targets [N, T] compacted to the front and their lengths [N], int64 (layout only:
    :func:`ctcop.conformance.runtimes.openvino_native_inputs`)."""

    batch_major: np.ndarray
    lengths: np.ndarray
    targets: np.ndarray
    target_lengths: np.ndarray

    @property
    def blank(self) -> int:
        return int(self.batch_major.shape[2]) - 1

    @property
    def narrow_targets(self) -> np.ndarray:
        """The targets' first S columns, S the longest target (at least 1)."""
        width = max(1, int(self.target_lengths.max(initial=0)))
        return np.ascontiguousarray(self.targets[:, :width])


def layout(x: Inputs) -> Layout:
    logits, lengths, targets, target_lengths = openvino_native_inputs(x.logits, x.mask, x.labels)
    return Layout(logits, lengths.astype(np.int64), targets.astype(np.int64), target_lengths.astype(np.int64))


def openvino_config(threads: int) -> dict[str, Any]:
    """OpenVINO's CPU plugin on ``threads`` threads."""
    return {"INFERENCE_NUM_THREADS": threads}


def openvino_infer(compiled: Any, inputs: list[np.ndarray]) -> Prepared:
    """One infer request of ``compiled`` on ``inputs`` (shared, not copied): the first output."""
    request = compiled.create_infer_request()

    def call() -> Result:
        outputs = request.infer(inputs, share_inputs=True)
        return np.array(outputs[0]), None

    return Prepared(call)
