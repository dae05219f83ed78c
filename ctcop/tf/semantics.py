"""TensorFlow's ``CTCLoss`` op expressed with CTCLoss-4 (spec section 15): the rules, in numpy.

``tf.compat.v1.nn.ctc_loss`` (and ``tf.nn.ctc_loss`` with SparseTensor labels) runs the op
``CTCLoss(inputs [max_time, batch, C], labels_indices [K, 2], labels_values [K],
sequence_length [batch])``: logits are time-major and unnormalised (the op applies the softmax,
as CTCLoss-4 does), the blank is C-1, and labels come as a SparseTensor whose dense shape the op
never reads. The labels of sample b are the values of the entries whose index starts with b, in
order; the column index only orders them (gaps and columns beyond max_time are accepted). Where
TensorFlow raises, ctcop gives NaN (spec 11.5): the sample alone where the fault names one, the
batch otherwise (:func:`reference_loss` lists the cases). One departure, on purpose: an empty
target gets the all-blank loss (4.4), what ``tf.nn.ctc_loss`` returns for ``label_length`` 0 with
dense labels and what the kernel's refusal stands in for. :func:`reference_loss` is this mapping
on top of :func:`ctcop.ctc_loss_or_nan`; :mod:`ctcop.tf.openvino_frontend` builds the same steps
from OpenVINO operators. Imports numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..reference import ctc_loss_or_nan

# The op's name in a TensorFlow graph, and its attributes with their defaults.
OPERATION = "CTCLoss"
ATTRIBUTES = {
    "preprocess_collapse_repeated": False,
    "ctc_merge_repeated": True,
    "ignore_longer_outputs_than_inputs": False,
}
# A column index at or beyond this is refused (NaN): the CPU plugin reads int64 indices as int32 (D6).
WIDE = 2**31


@dataclass(frozen=True)
class TfCtcCall:
    """The attributes of one ``CTCLoss`` op."""

    preprocess_collapse_repeated: bool = False
    ctc_merge_repeated: bool = True
    ignore_longer_outputs_than_inputs: bool = False


def _entry_faults(indices: np.ndarray, values: np.ndarray, batch: int, classes: int) -> tuple[np.ndarray, bool]:
    """Per-sample faults [N] of the entries (a negative or too wide column, an entry not after the
    one before it in its row, a label outside [0, C-2]) and the batch fault (a row index outside
    [0, N), rows out of order)."""
    rows, columns = indices[:, 0], indices[:, 1]
    if ((rows < 0) | (rows >= batch)).any() or (np.diff(rows) < 0).any():
        return np.zeros(batch, bool), True
    same_row = np.concatenate([[False], rows[1:] == rows[:-1]])
    not_after = same_row & (columns <= np.concatenate([[-1], columns[:-1]]))
    bad = (columns < 0) | (columns >= WIDE) | not_after | (values < 0) | (values >= classes - 1)
    faults = np.zeros(batch, bool)
    faults[rows[bad]] = True
    return faults, False


def dense_labels(indices: np.ndarray, values: np.ndarray, batch: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """The labels [N, T] of well-ordered entries, -1 padded (entry k of row b at position k minus
    the row's first entry; positions beyond T dropped), and each row's label count [N]."""
    rows = indices[:, 0].astype(np.int64)
    counts = np.bincount(rows, minlength=batch)[:batch]
    positions = np.arange(len(rows)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[rows]
    labels = np.full((batch, frames), -1, np.int64)
    kept = positions < frames
    labels[rows[kept], positions[kept]] = values[kept]
    return labels, counts


def reference_loss(
    inputs: npt.ArrayLike,
    labels_indices: npt.ArrayLike,
    labels_values: npt.ArrayLike,
    sequence_length: npt.ArrayLike,
    call: TfCtcCall = TfCtcCall(),
) -> np.ndarray:
    """What the converted ``CTCLoss`` op computes [N] (spec 15): TensorFlow's loss on the input
    it accepts (the exact value, with the all-blank loss for an empty target), NaN where it
    raises.

    TensorFlow's CPU kernel raises for the whole batch for an empty target ("Labels length is
    zero"), an index row outside [0, batch), a negative column, indices out of lexicographic order
    or repeated, a negative label, a ``sequence_length`` outside [0, max_time], a target with more
    labels than its frames (counted before ``preprocess_collapse_repeated``) unless
    ``ignore_longer_outputs_than_inputs`` (then its loss and gradient are 0), ``max_time`` or
    ``batch`` 0, and operands of unequal lengths. A label >= C-1 gives it the same meaningless
    number whatever its value (here NaN, rule 3.3); a target that fits by count but not with the
    blanks its repeats need is +inf (as 4.4). It computes the softmax in the logits' type and
    underflows (logits 200 apart give +inf, a loss near 0 -0.0); here the value is exact (4.1)."""
    x = np.asarray(inputs)
    frames, batch, classes = x.shape
    indices = np.asarray(labels_indices, np.int64).reshape(-1, 2)
    values = np.asarray(labels_values, np.int64).reshape(-1)
    lengths = np.asarray(sequence_length, np.int64).reshape(-1)
    if frames == 0 or len(values) != len(indices) or len(lengths) != batch:
        return np.full(batch, np.nan, x.dtype)
    faults, batch_fault = _entry_faults(indices, values, batch, classes)
    if batch_fault:
        return np.full(batch, np.nan, x.dtype)
    faults |= (lengths < 0) | (lengths > frames)
    labels, counts = dense_labels(indices, values, batch, frames)
    labels[faults] = -1
    mask = np.arange(frames)[:, None] < np.where(faults, 0, lengths)[None, :]
    loss = ctc_loss_or_nan(
        x,
        mask.astype(np.int64),
        labels,
        preprocess_collapse_repeated=call.preprocess_collapse_repeated,
        merge_repeated=call.ctc_merge_repeated,
    )
    too_long = counts > lengths
    loss[too_long] = 0.0 if call.ignore_longer_outputs_than_inputs else np.nan
    loss[faults] = np.nan
    return loss
