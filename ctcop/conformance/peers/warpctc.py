"""warp-ctc through PaddlePaddle: ``paddle.nn.functional.ctc_loss`` on the CPU, the way Paddle's
users reach Baidu's warp-ctc library (Paddle links it and calls its ``compute_ctc_loss``).

warp-ctc takes unnormalised activations and applies the softmax itself, as CTCLoss-4 does (spec
4.2), so the logits go in as given (:func:`loss_and_gradient`); the gradient is Paddle's autograd
of the sum of the losses with respect to the logits, in the case's layout. Layout only
(:class:`WarpCTCPeer`): float32 and float64, any scalar blank; unsupported: float16 and bfloat16,
``preprocess_collapse_repeated``, ``merge_repeated=false``, ``unique``, a non-scalar blank.

**Processes.** Paddle never runs in the caller's process: each call goes to a child process
(:mod:`ctcop.process.workers`, :func:`kept`); a call that makes Paddle or warp-ctc write outside
their buffers (:func:`unsafe`) gets a throwaway child. When a child dies by a signal, this process
dies by the same signal (:func:`in_child`), so the suite records the crash as the framework's.
"""

from __future__ import annotations

import os
import signal
import warnings
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ...process.frameworks import framework
from ...process.workers import Lost, Worker
from ..protocol import Outcome, Unsupported
from .common import DEFAULT_ATTRIBUTES, Peer, blank, dense_targets, frame_lengths, logits, time_major

if TYPE_CHECKING:
    from ..case import Case

CHILD = f"{__name__}:evaluate"
CHILD_TIMEOUT_S = 60.0


@cache
def paddle() -> Any:
    """Paddle on the CPU, its fault handler off: on a corrupted heap it hangs instead of ending the
    process (its import warns that ccache is missing, which concerns building extensions)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        module = framework("paddle")
    module.set_device("cpu")
    module.disable_signal_handler()
    return module


def tensor(array: np.ndarray, integer: str) -> Any:
    """A Paddle tensor over a copy of ``array``; integer arrays as ``integer``, others as given."""
    given = np.asarray(array)
    return paddle().to_tensor(given.astype(integer) if given.dtype.kind in "iu" else np.array(given, copy=True))


def loss_and_gradient(arrays: dict[str, np.ndarray], spec: bool, blank_id: int) -> tuple[np.ndarray, np.ndarray]:
    """[N] losses and d sum / d logits of ``arrays`` (``logits``: [T, N, C] when ``spec``, else
    [N, T, C], transposed in the graph, so the gradient comes back in the case's layout; ``targets``,
    ``frames``, ``lengths``): ``ctc_loss(logits [T, N, C], labels [N, S] int32 padded, input_lengths
    int64, label_lengths int64, blank, reduction="none", norm_by_times=False)``."""
    p = paddle()
    leaf = p.to_tensor(np.array(arrays["logits"], copy=True), stop_gradient=False)
    loss = p.nn.functional.ctc_loss(
        leaf if spec else p.transpose(leaf, [1, 0, 2]),
        tensor(arrays["targets"], "int32"),
        tensor(arrays["frames"], "int64"),
        tensor(arrays["lengths"], "int64"),
        blank=blank_id,
        reduction="none",
        norm_by_times=False,
    )
    loss.sum().backward()
    return loss.numpy(), leaf.grad.numpy()


def unsafe(arrays: dict[str, np.ndarray], spec: bool) -> bool:
    """Whether the call writes outside Paddle's or warp-ctc's buffers: lengths that are not [N]
    integers, a frame count outside [0, T], a negative target length, or a sample with no frame
    and an empty target, in non-empty logits. Such a call gets a throwaway child, so that the heap
    it corrupts is not the one later calls use."""
    x, frames, lengths = (np.asarray(arrays[name]) for name in ("logits", "frames", "lengths"))
    if x.ndim != 3:
        return True
    if x.size == 0:  # Paddle refuses empty logits before anything is written
        return False
    width, batch = (x.shape[0], x.shape[1]) if spec else (x.shape[1], x.shape[0])
    if any(a.shape != (batch,) or a.dtype.kind not in "iu" for a in (frames, lengths)):
        return True
    return bool(((frames < 0) | (frames > width) | (lengths < 0) | ((frames == 0) & (lengths == 0))).any())


def encode(array: np.ndarray) -> dict[str, Any]:
    return {"dtype": array.dtype.name, "shape": list(array.shape), "data": array.ravel().tolist()}


def decode(item: dict[str, Any]) -> np.ndarray:
    return np.array(item["data"], dtype=item["dtype"]).reshape(item["shape"])


def evaluate(request: dict[str, Any]) -> dict[str, Any]:
    """In a throwaway process: :func:`loss_and_gradient` of the encoded request."""
    arrays = {name: decode(item) for name, item in request["arrays"].items()}
    loss, grad = loss_and_gradient(arrays, request["spec"], request["blank"])
    return {"loss": encode(loss), "grad": encode(grad)}


@cache
def kept() -> Worker:
    """The child process that serves the peer's calls (a fresh one after a child died)."""
    return Worker(CHILD)


def in_child(worker: Worker, arrays: dict[str, np.ndarray], spec: bool, blank_id: int) -> tuple[np.ndarray, ...]:
    """:func:`loss_and_gradient` in ``worker``; its exception is raised here as
    :class:`~ctcop.process.workers.Failed`, its death by a signal kills this process by that signal."""
    request = {"arrays": {name: encode(np.asarray(a)) for name, a in arrays.items()}, "spec": spec, "blank": blank_id}
    try:
        worker.send(request)
        answer = worker.answer(CHILD_TIMEOUT_S)
    except Lost:
        code = worker.process.returncode
        if code is not None and code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        raise
    return decode(answer["loss"]), decode(answer["grad"])


class WarpCTCPeer(Peer):
    """Layout only: the mask's column sums are the frame counts, the targets are compacted as for
    every peer (:func:`~.common.dense_targets`), integer labels are handed over as int32 and integer
    lengths as int64 (the kernel's index types; anything else as given). Any scalar blank, as given
    (``blank`` is a Python int). float32 and float64 (Paddle's CPU kernel has no other type).
    Paddle runs warp-ctc on one CPU thread, no knob. Each call runs in a child process: importing
    Paddle where TensorFlow is loaded kills the process (SIGSEGV; paddlepaddle 3.3.1,
    tensorflow-cpu 2.21.0), and the conformance tests and ``ctcop eval`` load several frameworks."""

    def load(self) -> None:
        kept()

    def check(self, case: Case) -> None:
        super().check(case)
        given = blank(case)
        if not isinstance(given, int):
            shape = list(np.shape(given))
            raise Unsupported(f"{self.name}'s blank is an int, the case's blank_index has shape {shape}")

    def compute(self, case: Case) -> Outcome:
        targets, lengths = dense_targets(case)
        arrays = {"logits": logits(case), "targets": targets, "frames": frame_lengths(case), "lengths": lengths}
        spec, blank_id = time_major(case), blank(case)
        if not unsafe(arrays, spec):
            try:
                return Outcome(*in_child(kept(), arrays, spec, blank_id))
            except Lost:
                kept.cache_clear()
                raise
        with Worker(CHILD) as throwaway:
            return Outcome(*in_child(throwaway, arrays, spec, blank_id))


PEER = WarpCTCPeer(
    name="warpctc",
    description="warp-ctc through paddle.nn.functional.ctc_loss (CPU, its own softmax of the logits), autograd",
    modules=("paddle",),
    dtypes=frozenset({"float32", "float64"}),
    attributes=DEFAULT_ATTRIBUTES,
    sampled=True,
)
