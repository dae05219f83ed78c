"""A small time-major batch in one compiled call (spec/ctcloss4.md, sections 3 and 4).

:func:`losses` and :func:`losses_and_grad` run the rule scan of :mod:`ctcop.rule_scan` (rules 3.1
and 3.3: the frame counts and the processed targets), then, where the batch's work is below the
limit the caller gives, the batch kernels of :mod:`ctcop.kernels` on every sample: a small batch
costs one call from Python. A faulty batch, or one whose work reaches the limit, is left to the
caller, for :mod:`ctcop.canonical` to scan again and name the fault or :mod:`ctcop.recursion` to
hand its samples to the pool (the scan is O(N T), a small part of a batch too large for one call).
"""

from __future__ import annotations

import numpy as np

from .kernels import batch_grad, store_loss, work_units
from .lanes import batch_loss
from .logexp import compiled, entry
from .rule_scan import time_major_scan

COMPUTED = -1  # what the entries return when the results are written


@compiled
def _scanned(
    mask: np.ndarray, labels: np.ndarray, classes: int, collapse: bool, work_limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """The rule scan's frame counts [N], processed targets [N, T] and their lengths [N], the
    longest target, and whether the batch is computed here: no fault, and one sample or
    :func:`ctcop.kernels.work_units` below ``work_limit``."""
    frames, samples = mask.shape
    lengths, targets = np.empty(samples, np.int64), np.empty((samples, frames), np.int64)
    target_lengths, fault = np.empty(samples, np.int64), np.empty(3, np.int64)
    longest = time_major_scan(mask, labels, classes, collapse, lengths, targets, target_lengths, fault)
    here = fault[0] == 0 and (samples <= 1 or work_units(samples, frames, classes, longest) < work_limit)
    return lengths, targets, target_lengths, longest, here


@compiled
def _store_losses(loglik: np.ndarray, out: np.ndarray, first: int) -> None:
    """``out[first + i] = -loglik[i]`` in ``out``'s element type, +0.0 where a rounding error
    would put it below 0 (spec 4.3); NaN stays NaN."""
    for i in range(loglik.shape[0]):
        store_loss(loglik[i], out, first + i)


@compiled
def _compute(
    logits: np.ndarray,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    settings: tuple[bool, int, bool],
    first: int,
    last: int,
    loglik: np.ndarray,
    out: np.ndarray,
    grad: np.ndarray,
) -> None:
    """Samples ``[first, last)`` of a [T, N, C] batch (blank C - 1); ``settings`` = (merge_repeated,
    segment_elements, gradient): the losses into ``out``, or with the gradient the
    log-likelihoods into ``loglik`` and the gradient into ``grad`` (zero on entry)."""
    merge_repeated, segment_elements, gradient = settings
    blank = logits.shape[2] - 1
    if gradient:
        arguments = (merge_repeated, segment_elements, first, last, loglik, grad)
        batch_grad(logits, False, lengths, targets, target_lengths, blank, *arguments)
    else:
        batch_loss(logits, False, lengths, targets, target_lengths, blank, merge_repeated, first, last, out)


@entry
def losses(
    logits: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    collapse: bool,
    merge_repeated: bool,
    work_limit: int,
    out: np.ndarray,
) -> int:
    """``logits`` [T, N, C], ``mask`` [T, N] and ``labels`` [N, T] (int64) scanned as
    :func:`ctcop.rule_scan.time_major_scan` does; then, for a batch below ``work_limit``, the
    losses into ``out`` (of the logits' element type) as :func:`ctcop.lanes.batch_loss` writes
    them. Returns COMPUTED, or the longest target when the batch is left to the caller (a fault, or
    too much work), who scans it again (:func:`ctcop.canonical.time_major_batch`)."""
    classes = logits.shape[2]
    lengths, targets, target_lengths, longest, here = _scanned(mask, labels, classes, collapse, work_limit)
    if not here:
        return longest
    settings = (merge_repeated, 0, False)
    _compute(
        logits,
        lengths,
        targets,
        target_lengths,
        settings,
        0,
        mask.shape[1],
        np.empty(0),
        out,
        np.empty((0, 0, 0), logits.dtype),
    )
    return COMPUTED


@entry
def losses_and_grad(
    logits: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    collapse: bool,
    merge_repeated: bool,
    work_limit: int,
    segment_elements: int,
    out: np.ndarray,
    grad: np.ndarray,
) -> int:
    """As :func:`losses`, and the gradient into ``grad`` (zero on entry) as
    :func:`ctcop.kernels.batch_grad` writes it; the losses from its log-likelihoods, as
    :func:`ctcop.lanes.batch_loss` writes them."""
    classes = logits.shape[2]
    lengths, targets, target_lengths, longest, here = _scanned(mask, labels, classes, collapse, work_limit)
    if not here:
        return longest
    loglik = np.empty(mask.shape[1])
    settings = (merge_repeated, segment_elements, True)
    _compute(logits, lengths, targets, target_lengths, settings, 0, mask.shape[1], loglik, out, grad)
    _store_losses(loglik, out, 0)
    return COMPUTED
