"""The loss kernel over several samples side by side (spec/ctcloss4.md, section 4).

A batch's consecutive samples of the same frame count and target length share their lattice's
shape: up to :data:`LANES` of them are computed together, each in a lane of every work array,
so that the innermost loops run over the lanes, with a fixed trip count and a fixed stride, and
LLVM widens them to the CPU's vector width. The classes' and states' loops of
:mod:`ctcop.core.kernels` run C and S times (11 and 5 at seed 000's shape) and leave most of their
elements to the vectoriser's scalar remainder. A work array of R rows is flat, ``R * LANES``
float64 with lane ``r`` of row ``k`` at ``k * LANES + r``.

Each lane repeats, operation for operation, what :func:`ctcop.core.kernels.frame_normaliser`,
:func:`ctcop.core.kernels.forward_step` and :func:`ctcop.core.kernels.forward_pass` do for one sample (the
same reductions in the same order, the same ``exp`` and ``ln``), so a sample's loss has the same
bits whether it is computed alone or in lanes, whatever its neighbours (``tests/unit/test_lanes.py``).
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .jit import compiled, entry
from .kernels import (
    NEG_INF,
    block_sizes,
    exact_states,
    fill,
    frame_row,
    lattice,
    log_sum3,
    log_terms,
    store_loss,
)
from .logexp import EXACT_BELOW, exp_nonpositive

LANES = 16
# Lanes are used where a frame's loops are short (C up to MOST_CLASSES; above it the classes' loop
# widens alone) and a run of one shape fills enough of a group: a group costs about what
# FEWEST_BASE + (C + S) / LOOP_PER_SAMPLE samples alone do (:func:`fewest_samples`; docs/design.md, "Lanes")
MOST_CLASSES = 64
FEWEST_BASE = 5
LOOP_PER_SAMPLE = 12


def fewest_samples(classes: int, states: int) -> int:
    """The fewest samples of one shape that a group of lanes computes faster than each alone, at
    frames of ``classes`` classes and lattices of ``states`` states."""
    return FEWEST_BASE + (classes + states) // LOOP_PER_SAMPLE


# A group's per-frame rows: rows 0-7 the 8 interleaved partial maxima or sums (work space), then
# the frame's top logit, the ln of its normalising sum, a count or a sum, the lattice variables'
# top, and whether a lane met a logit that is not finite
_TOP, _LOG_SUM, _COUNT, _ALPHA_TOP, _FAILED, _FRAME_ROWS = 8, 9, 10, 11, 12, 13


@compiled
def _lane_max(rows: np.ndarray, n: int, frame: np.ndarray) -> None:
    """Row :data:`_TOP` of ``frame`` = the largest of each lane's ``n`` logits in ``rows``, as
    :func:`ctcop.core.kernels.frame_normaliser` forms it: eight interleaved maxima over whole blocks of
    eight (in rows 0-7 of ``frame``), combined in a fixed order, then the rest in turn."""
    blocks = n - n % 8
    for k in range(8 * LANES):
        frame[k] = NEG_INF
    for c in range(0, blocks, 8):
        base = c * LANES
        for k in range(8 * LANES):
            frame[k] = max(rows[base + k], frame[k])
    for r in range(LANES):
        low = max(max(frame[r], frame[LANES + r]), max(frame[2 * LANES + r], frame[3 * LANES + r]))
        high = max(max(frame[4 * LANES + r], frame[5 * LANES + r]), max(frame[6 * LANES + r], frame[7 * LANES + r]))
        frame[_TOP * LANES + r] = max(low, high)
    for c in range(blocks, n):
        for r in range(LANES):
            frame[_TOP * LANES + r] = max(rows[c * LANES + r], frame[_TOP * LANES + r])


@compiled
def _lane_sum(terms: np.ndarray, n: int, frame: np.ndarray) -> None:
    """Row :data:`_COUNT` of ``frame`` = the sum of each lane's ``n`` terms, formed in
    :func:`ctcop.core.kernels.frame_normaliser`'s order: eight interleaved sums over whole blocks of
    eight (in rows 0-7 of ``frame``), combined pairwise, then the rest in turn."""
    blocks = n - n % 8
    for k in range(8 * LANES):
        frame[k] = 0.0
    for c in range(0, blocks, 8):
        base = c * LANES
        for k in range(8 * LANES):
            frame[k] = frame[k] + terms[base + k]
    total = _COUNT * LANES
    for r in range(LANES):
        low = (frame[r] + frame[LANES + r]) + (frame[2 * LANES + r] + frame[3 * LANES + r])
        high = (frame[4 * LANES + r] + frame[5 * LANES + r]) + (frame[6 * LANES + r] + frame[7 * LANES + r])
        frame[total + r] = low + high
    for c in range(blocks, n):
        for r in range(LANES):
            frame[total + r] += terms[c * LANES + r]


@compiled
def _lane_normaliser(rows: np.ndarray, n: int, work: np.ndarray, frame: np.ndarray) -> None:
    """:func:`ctcop.core.kernels.frame_normaliser` in every lane, over ``rows`` (``n`` rows: a frame's
    logits in float64) with ``work`` (``n`` rows): into rows :data:`_TOP` and :data:`_LOG_SUM` of
    ``frame``; its row :data:`_FAILED` set to 1 in a lane with a logit that is not finite."""
    _lane_max(rows, n, frame)
    top, count, failed = _TOP * LANES, _COUNT * LANES, _FAILED * LANES
    for r in range(LANES):
        frame[count + r] = 0.0  # the terms equal to 1, counted apart: the sum is log1p of the rest
    for c in range(n):
        base = c * LANES
        for r in range(LANES):
            failed_here = not abs(rows[base + r]) < math.inf
            frame[failed + r] = 1.0 if failed_here else frame[failed + r]
            centred = rows[base + r] - frame[top + r]
            frame[count + r] += 1.0 if centred == 0.0 else 0.0
            work[base + r] = exp_nonpositive(centred) if centred < 0.0 else 0.0
    for r in range(LANES):
        frame[_LOG_SUM * LANES + r] = frame[count + r] - 1.0  # kept there while _lane_sum takes the row
    _lane_sum(work, n, frame)
    for r in range(LANES):
        frame[_LOG_SUM * LANES + r] = math.log1p(frame[count + r] + frame[_LOG_SUM * LANES + r])


@compiled
def _lane_centre(alpha: np.ndarray, stop: int, below: np.ndarray, at_top: np.ndarray, frame: np.ndarray) -> None:
    """Each lane's largest forward variable of states ``[0, stop)`` into row :data:`_ALPHA_TOP`
    of ``frame``, and ``exp(alpha - top)`` below it and the states at it (whose term is exactly 1)
    apart, as :func:`ctcop.core.kernels.forward_step` forms them."""
    top = _ALPHA_TOP * LANES
    for r in range(LANES):
        frame[top + r] = NEG_INF
    for s in range(2, stop + 2):
        for r in range(LANES):
            value = alpha[s * LANES + r]
            frame[top + r] = value if value > frame[top + r] else frame[top + r]
    for s in range(stop + 2):
        for r in range(LANES):
            centred = alpha[s * LANES + r] - frame[top + r]
            below[s * LANES + r] = exp_nonpositive(centred) if centred < 0.0 else 0.0
            at_top[s * LANES + r] = 1.0 if centred == 0.0 else 0.0


@compiled
def _lane_forward_step(
    alpha: np.ndarray,
    out: np.ndarray,
    work: np.ndarray,
    emission: np.ndarray,
    stay: np.ndarray,
    skip: np.ndarray,
    stop: int,
    frame: np.ndarray,
) -> None:
    """:func:`ctcop.core.kernels.forward_step` in every lane, states ``[0, stop)``: ``alpha``, ``out``
    and ``skip`` (each lane's skips) S + 2 rows, ``work`` 2 (S + 2) rows, ``emission`` S rows;
    ``stay`` [S] the stays, the same for every lattice of S states."""
    size = alpha.shape[0]
    below, at_top = work[:size], work[size:]
    _lane_centre(alpha, stop, below, at_top, frame)
    top = _ALPHA_TOP * LANES
    small = 0
    for s in range(stop):
        for r in range(LANES):
            k = s * LANES + r
            rest = below[k + 2 * LANES] * stay[s] + below[k + LANES] + below[k] * skip[k]
            units = at_top[k + 2 * LANES] * stay[s] + at_top[k + LANES] + at_top[k] * skip[k]
            small += 1 if rest + units < EXACT_BELOW else 0
            out[k + 2 * LANES] = frame[top + r] + log_terms(rest, units) + emission[k]
    for r in range(LANES):
        if frame[top + r] == NEG_INF:
            for s in range(stop):
                out[(s + 2) * LANES + r] = NEG_INF
        elif small > 0:
            exact_states(alpha, out, (below, at_top, emission), stay, skip, stop, LANES, r)


@compiled
def _lane_lattices(
    targets: np.ndarray,
    target_lengths: np.ndarray,
    first: int,
    count: int,
    settings: tuple[int, bool],
    one: tuple[np.ndarray, np.ndarray],
    classes: np.ndarray,
    skip: np.ndarray,
) -> int:
    """The lattices (:func:`ctcop.core.kernels.lattice`, ``settings`` = (blank, merge_repeated), ``one``
    its two outputs for one sample) of samples ``[first, first + count)``, one per lane, lanes past
    ``count`` the first's: their classes into ``classes`` (S rows of int64) and skips into
    ``skip`` (S + 2 rows); the stays, the same for all, are left in ``one[1][0]``. Returns S."""
    (blank, merge_repeated), (single, moves) = settings, one
    states = 0
    for r in range(LANES):
        i = first + (r if r < count else 0)
        states = lattice(targets[i, : target_lengths[i]], blank, merge_repeated, single, moves)
        for s in range(states):
            classes[s * LANES + r] = single[s]
        for s in range(states + 2):
            skip[s * LANES + r] = moves[1, s]
    return states


@compiled
def _lane_rows(logits: np.ndarray, batch_major: bool, first: int, count: int, t: int, rows: np.ndarray) -> None:
    """Frame ``t`` of samples ``[first, first + count)`` into lanes ``[0, count)`` of ``rows`` (C
    rows), in float64."""
    for r in range(count):
        row = frame_row(logits, batch_major, first + r, t)
        for c in range(row.shape[0]):
            rows[c * LANES + r] = np.float64(row[c])


@compiled
def _lanes_loss(
    logits: np.ndarray,
    batch_major: bool,
    group: tuple[int, int, int],
    classes: np.ndarray,
    stay: np.ndarray,
    space: np.ndarray,
    out: np.ndarray,
) -> None:
    """The losses of ``group`` = (first sample, count, frames): samples of one frame count and
    one lattice size, into ``out`` (:func:`ctcop.core.kernels.store_loss`); ``classes`` (S rows) and
    ``stay`` [S] from :func:`_lane_lattices`; ``space`` (:func:`space_rows` rows) holds the skips
    in its rows ``[0, S + 2)`` and is work space after them."""
    first, count, frames = group
    n, states = logits.shape[2], classes.shape[0] // LANES
    size = (states + 2) * LANES
    skip, alpha, following = space[:size], space[size : 2 * size], space[2 * size : 3 * size]
    work, emission = space[3 * size : 5 * size], space[5 * size : 5 * size + states * LANES]
    rows, terms = space[6 * size : 6 * size + n * LANES], space[6 * size + n * LANES : 6 * size + 2 * n * LANES]
    frame = space[6 * size + 2 * n * LANES :]
    fill(alpha, 0, size, NEG_INF)
    fill(following, 0, size, NEG_INF)
    fill(rows, 0, n * LANES, 0.0)  # lanes past count: any finite logits
    fill(frame, _FAILED * LANES, (_FAILED + 1) * LANES, 0.0)
    fill(alpha, 2 * LANES, 3 * LANES, 0.0)  # the virtual start before frame 0 counts as state 0
    for t in range(frames):
        _lane_rows(logits, batch_major, first, count, t, rows)
        _lane_normaliser(rows, n, terms, frame)
        for s in range(states):
            for r in range(LANES):
                logit = rows[classes[s * LANES + r] * LANES + r]
                emission[s * LANES + r] = (logit - frame[_TOP * LANES + r]) - frame[_LOG_SUM * LANES + r]
        _lane_forward_step(alpha, following, work, emission, stay, skip, min(states, 2 * t + 2), frame)
        alpha, following = following, alpha
    for r in range(count):
        last = alpha[(states + 1) * LANES + r]  # paths ending in state 2L or 2L - 1
        loglik = last if states == 1 else log_sum3(last, alpha[states * LANES + r], NEG_INF)
        store_loss(math.nan if frame[_FAILED * LANES + r] > 0.0 else loglik, out, first + r)


@compiled
def space_rows(states: int, classes: int) -> int:
    """The rows of :func:`_lanes_loss`'s ``space`` for lattices of ``states`` states and frames of
    ``classes`` classes."""
    return 6 * (states + 2) + 2 * classes + _FRAME_ROWS


@compiled
def _run(lengths: np.ndarray, target_lengths: np.ndarray, first: int, last: int) -> int:
    """How many samples from ``first`` on (at most :data:`LANES`) share its frame count and target
    length."""
    count = 1
    while first + count < last and count < LANES:
        if lengths[first + count] != lengths[first] or target_lengths[first + count] != target_lengths[first]:
            break
        count += 1
    return count


@entry
def batch_loss(
    logits: np.ndarray,
    batch_major: bool,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    blank: int,
    merge_repeated: bool,
    fewest: int,
    first: int,
    last: int,
    out: np.ndarray,
) -> None:
    """:func:`ctcop.core.kernels.batch_loss` (the same bits) with lanes: runs of consecutive
    samples of one frame count and target length are cut into groups of :data:`LANES`, and each
    group of at least ``fewest`` samples (:func:`fewest_samples`) is computed in lanes; the other
    samples alone. For frames of at most :data:`MOST_CLASSES` classes."""
    n = logits.shape[2]
    _, width = block_sizes(lengths, target_lengths, first, last)
    classes, moves = np.empty(width, dtype=np.int64), np.empty((2, width))
    lane_classes, space = np.empty(width * LANES, dtype=np.int64), np.empty(space_rows(width - 2, n) * LANES)
    i = first
    while i < last:
        count = _run(lengths, target_lengths, i, last)
        if count >= fewest:
            one = (classes, moves)
            states = _lane_lattices(
                targets, target_lengths, i, count, (blank, merge_repeated), one, lane_classes, space
            )
            group = (i, count, lengths[i])
            _lanes_loss(logits, batch_major, group, lane_classes[: states * LANES], moves[0, :states], space, out)
        else:
            kernels.batch_loss(
                logits, batch_major, lengths, targets, target_lengths, blank, merge_repeated, i, i + count, out
            )
        i += count
