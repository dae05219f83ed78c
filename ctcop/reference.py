"""The exact reference evaluator of CTCLoss-4 in both of its forms (spec/ctcloss4.md).

Every function validates through :mod:`ctcop.canonical`, computes in float64 through
:mod:`ctcop.core.scheduler`, and rounds once to the element type of the logits.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from . import canonical
from .core import scheduler
from .errors import refusing_memory_errors


@refusing_memory_errors("inputs")
def ctc_loss(
    inputs: npt.ArrayLike,
    sequence_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> np.ndarray:
    """CTCLoss-4 in its time-major form (spec section 2): the [N] losses in the dtype of ``inputs``.

    ``inputs`` [T, N, C] logits, ``sequence_mask`` [T, N] of 0/1, ``labels`` [N, T] padded with
    -1; the blank is class C-1. +inf for a target with no aligned path; NaN for a sample whose
    active frames hold a non-finite value. Raises :class:`ctcop.InvalidInputError` on invalid input.
    """
    checked = canonical.time_major_inputs(
        inputs,
        sequence_mask,
        labels,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        merge_repeated=merge_repeated,
    )
    return scheduler.time_major_losses(checked)


@refusing_memory_errors("inputs")
def ctc_loss_or_nan(
    inputs: npt.ArrayLike,
    sequence_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> np.ndarray:
    """What ctcop's exported graphs compute for *any* input of the declared ranks and types (spec 11.5).

    Equal to :func:`ctc_loss` on valid input. Where :func:`ctc_loss` would raise for a rule on the
    values of sample i (a mask column with a value other than 0/1 or a gap, a label other than -1
    and [0, C-2]), ``loss[i]`` is NaN and the other samples are unaffected; shapes that disagree
    or C = 0 make every loss NaN. Ranks and element types still raise
    :class:`ctcop.InvalidInputError`. ``inputs`` [T, N, C], ``sequence_mask`` [T, N], ``labels`` [N, T].
    """
    logits, mask, targets, faults = canonical.time_major_faults(inputs, sequence_mask, labels)
    if faults.all():
        return np.full(faults.shape, np.nan, dtype=logits.dtype)
    loss = ctc_loss(
        logits,
        mask,
        targets,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        merge_repeated=merge_repeated,
    )
    loss[faults] = np.nan
    return loss


@refusing_memory_errors("inputs")
def ctc_loss_grad(
    inputs: npt.ArrayLike,
    sequence_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Loss [N] and gradient [T, N, C] with ``grad[t, i, c] = d loss[i] / d inputs[t, i, c]``.

    The gradient is softmax minus the posterior occupancy of class c at frame t (spec section 5).
    It is 0 in masked frames, 0 for samples whose loss is +inf (no aligned path: the loss is
    +inf for every finite logits, a constant), and NaN in the active frames of a NaN-loss sample.
    """
    checked = canonical.time_major_inputs(
        inputs,
        sequence_mask,
        labels,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        merge_repeated=merge_repeated,
    )
    return scheduler.time_major_losses_and_grad(checked)


@refusing_memory_errors("logits")
def openvino_ctc_loss(
    logits: npt.ArrayLike,
    logit_length: npt.ArrayLike,
    labels: npt.ArrayLike,
    label_length: npt.ArrayLike,
    blank_index: npt.ArrayLike | None = None,
    *,
    preprocess_collapse_repeated: bool = False,
    ctc_merge_repeated: bool = True,
    unique: bool = False,
) -> np.ndarray:
    """The released OpenVINO CTCLoss-4 (spec section 7): [N] losses in the dtype of ``logits``.

    ``logits`` [N, T, C]; ``labels[i, :label_length[i]]`` is the target, then collapsed if
    ``preprocess_collapse_repeated``, then reduced to first occurrences if ``unique``; the blank
    is ``blank_index`` (default C-1). Same recursion as :func:`ctc_loss`.
    """
    batch = canonical.from_openvino(
        logits,
        logit_length,
        labels,
        label_length,
        blank_index,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        ctc_merge_repeated=ctc_merge_repeated,
        unique=unique,
    )
    return scheduler.losses(batch)


@refusing_memory_errors("logits")
def openvino_ctc_loss_or_nan(
    logits: npt.ArrayLike,
    logit_length: npt.ArrayLike,
    labels: npt.ArrayLike,
    label_length: npt.ArrayLike,
    blank_index: npt.ArrayLike | None = None,
    *,
    preprocess_collapse_repeated: bool = False,
    ctc_merge_repeated: bool = True,
    unique: bool = False,
) -> np.ndarray:
    """What ctcop's released lowerings compute for *any* input of the declared ranks and types
    (spec 11.5, released form): :func:`openvino_ctc_loss` on valid input; NaN for each sample
    :func:`ctcop.canonical.openvino_faults` finds faulty (a length outside [0, T], a target
    entry that is not a class other than the blank), the others unaffected; every loss NaN for a
    batch fault (a ``blank_index`` outside [0, C-1], lengths or labels not [N], [N, T], [N], C = 0).
    Ranks and element types still raise :class:`ctcop.InvalidInputError`."""
    attributes = {
        "preprocess_collapse_repeated": preprocess_collapse_repeated,
        "ctc_merge_repeated": ctc_merge_repeated,
        "unique": unique,
    }
    faults = canonical.openvino_faults(logits, logit_length, labels, label_length, blank_index, **attributes)
    values = np.asarray(logits)
    if faults.all():
        return np.full(faults.shape, np.nan, dtype=values.dtype)
    frames, targets = (np.asarray(lengths) for lengths in (logit_length, label_length))
    emptied = [np.where(faults, 0, lengths).astype(lengths.dtype) for lengths in (frames, targets)]
    loss = openvino_ctc_loss(values, emptied[0], labels, emptied[1], blank_index, **attributes)
    loss[faults] = np.nan
    return loss


@refusing_memory_errors("logits")
def openvino_ctc_loss_grad(
    logits: npt.ArrayLike,
    logit_length: npt.ArrayLike,
    labels: npt.ArrayLike,
    label_length: npt.ArrayLike,
    blank_index: npt.ArrayLike | None = None,
    *,
    preprocess_collapse_repeated: bool = False,
    ctc_merge_repeated: bool = True,
    unique: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Loss [N] and gradient [N, T, C] of the released form (spec sections 5 and 7), with
    ``grad[i, t, c] = d loss[i] / d logits[i, t, c]``: the inputs of :func:`openvino_ctc_loss`,
    the conventions of :func:`ctc_loss_grad` (0 in frames ``t >= logit_length[i]`` and for a
    +inf loss, NaN in the active frames of a NaN-loss sample, the element type of ``logits``).
    """
    batch = canonical.from_openvino(
        logits,
        logit_length,
        labels,
        label_length,
        blank_index,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        ctc_merge_repeated=ctc_merge_repeated,
        unique=unique,
    )
    return scheduler.losses_and_grad(batch)
