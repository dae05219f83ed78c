"""TensorFlow: ``tf.nn.ctc_loss`` (v2, dense labels, :class:`TensorFlowPeer`) and
``tf.compat.v1.nn.ctc_loss`` (the kernel CTCLoss-4 was modelled on, :class:`TensorFlowV1Peer`), on
the CPU, eager, gradients by ``tf.GradientTape`` of the sum of the losses with respect to the
case's logits (both APIs take batch-major logits through a flag, so the gradient comes back in the
case's layout).

Each is called as a user calls it: an error the framework raises for a case is recorded as the
framework's, not skipped. Unsupported: by v2 ``preprocess_collapse_repeated``,
``merge_repeated=false`` and ``unique``; by v1 ``unique`` and a blank other than C-1.
"""

from __future__ import annotations

import contextlib
import os
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ...process.frameworks import framework
from ..protocol import Outcome, Unsupported
from .common import DEFAULT_ATTRIBUTES, THREADS, Peer, blank, dense_targets, frame_lengths, logits

if TYPE_CHECKING:
    from ..case import Case

HALF_AND_FULL = frozenset({"float16", "bfloat16", "float32", "float64"})


@cache
def tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    module = framework("tensorflow")
    with contextlib.suppress(RuntimeError):  # the runtime was started before this peer: keep its setting
        module.config.threading.set_intra_op_parallelism_threads(THREADS)
    return module


def int32(array: np.ndarray) -> np.ndarray:
    """Integer arrays as int32 (the kernel's index type); anything else as given."""
    return array.astype(np.int32) if array.dtype.kind in "iu" else array


def differentiate(function: Any, x: np.ndarray) -> Outcome:
    """``function(logits)`` -> [N] losses, and d sum / d logits."""
    t = tf()
    leaf = t.constant(x)
    with t.GradientTape() as tape:
        tape.watch(leaf)
        loss = function(leaf)
        total = t.reduce_sum(loss)
    grad = tape.gradient(total, leaf)
    return Outcome(loss.numpy(), None if grad is None else grad.numpy())


class TensorFlowPeer(Peer):
    """v2: ``tf.nn.ctc_loss(labels [N, S] dense, logits, label_length, logit_length,
    logits_time_major, blank_index)``; any blank. Its dense path is TensorFlow code (not the
    kernel): float16 and bfloat16 logits are computed in float32 and the loss rounded back. float64
    logits are passed as given although that path raises for them (float32 constants meet float64
    tensors): a user meets that error, so it is recorded as the framework's, not skipped.
    Unsupported: ``preprocess_collapse_repeated``, ``merge_repeated=false``, ``unique`` (the v2
    ``unique`` argument is a speed-up, not OpenVINO's attribute)."""

    def load(self) -> None:
        tf()

    def compute(self, case: Case) -> Outcome:
        targets, target_lengths = dense_targets(case)

        def loss(x: Any) -> Any:
            return tf().nn.ctc_loss(
                labels=tf().constant(targets),
                logits=x,
                label_length=tf().constant(target_lengths),
                logit_length=tf().constant(frame_lengths(case)),
                logits_time_major=case.form == "spec",
                blank_index=blank(case),
            )

        return differentiate(loss, logits(case))


def sparse_targets(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices [K, 2] int64, values [K], dense shape [2]) of the targets: dense -> sparse."""
    targets, lengths = dense_targets(case)
    rows, width = targets.shape
    lengths = np.asarray(lengths)
    if lengths.shape != (rows,) or lengths.dtype.kind not in "iu":
        raise Unsupported(f"no sparse form for target lengths {lengths.dtype.name}{list(lengths.shape)}, {rows} rows")
    outside = lengths[(lengths < 0) | (lengths > width)]
    if outside.size:
        raise Unsupported(f"no sparse form for a target length {int(outside[0])} outside [0, {width}]")
    i, j = np.nonzero(np.arange(width)[None, :] < lengths[:, None])
    return np.stack([i, j], axis=1).astype(np.int64), int32(targets[i, j]), np.array([rows, width], np.int64)


class TensorFlowV1Peer(Peer):
    """v1: ``tf.compat.v1.nn.ctc_loss(labels SparseTensor, inputs, sequence_length int32,
    preprocess_collapse_repeated, ctc_merge_repeated, ignore_longer_outputs_than_inputs=False,
    time_major)``: the C++ ``CTCLoss`` kernel, float32 and float64 (float16 and bfloat16 through
    float32). ``ignore_longer_outputs_than_inputs`` stays at its default, False: a target too long
    for its frames raises for the whole batch instead of quietly giving loss 0 (with True), which
    is how a user meets it. Blank is C-1 only (a released case with another ``blank_index`` is
    Unsupported), no ``unique``; a ``label_length`` outside [0, S] has no sparse form (Unsupported)."""

    def load(self) -> None:
        tf()

    def check(self, case: Case) -> None:
        super().check(case)
        given = blank(case)
        if not isinstance(given, int) or given != logits(case).shape[-1] - 1:
            raise Unsupported(f"{self.name} has the blank at C-1 only, the case's is {given}")

    def compute(self, case: Case) -> Outcome:
        indices, values, shape = sparse_targets(case)
        attributes = dict(case.attributes)

        def loss(x: Any) -> Any:
            return tf().compat.v1.nn.ctc_loss(
                labels=tf().SparseTensor(indices, values, shape),
                inputs=x,
                sequence_length=tf().constant(int32(np.asarray(frame_lengths(case)))),
                preprocess_collapse_repeated=attributes["preprocess_collapse_repeated"],
                ctc_merge_repeated=attributes.get("merge_repeated", attributes.get("ctc_merge_repeated")),
                ignore_longer_outputs_than_inputs=False,
                time_major=case.form == "spec",
            )

        return differentiate(loss, logits(case))


PEER_V2 = TensorFlowPeer(
    name="tensorflow",
    description="tf.nn.ctc_loss (v2: dense labels, label_length, blank_index), CPU, GradientTape",
    modules=("tensorflow",),
    dtypes=HALF_AND_FULL,
    attributes=DEFAULT_ATTRIBUTES,
    sampled=True,
)

PEER_V1 = TensorFlowV1Peer(
    name="tensorflow-v1",
    description="tf.compat.v1.nn.ctc_loss (sparse labels, the CTCLoss kernel, blank C-1), CPU, GradientTape",
    modules=("tensorflow",),
    dtypes=HALF_AND_FULL,
    attributes=(("unique", False),),
    sampled=True,
)
