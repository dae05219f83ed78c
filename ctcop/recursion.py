"""The log-space forward-backward core (spec/ctcloss4.md, sections 4.5 and 5).

One lattice serves both decoding rules. State ``s`` of sample ``i`` stands for the extended label
``blank, g1, blank, g2, ..., gL, blank`` (S = 2L + 1 states). A frame moves a path from ``s`` to
``s`` (stay), ``s + 1`` (step) or ``s + 2`` (skip over a blank), and emits the class of the state
it lands on. The two rules differ only in which moves exist:

* ``merge_repeated`` true: staying is allowed everywhere (a repeated symbol merges); skipping into
  label ``g_k`` is allowed when ``g_k != g_{k-1}`` (otherwise a blank must separate them);
* ``merge_repeated`` false: every non-blank frame emits a symbol, so staying on a label state is
  forbidden, and skipping into any label state is allowed.

Paths start in a virtual state before frame 0 that equals state 0 without emission, and end in
state ``2L`` or ``2L - 1`` after the sample's last active frame. Everything is vectorised over the
batch and the states; the Python loops run over time.

Memory (spec sections 4.5 and 5): the forward pass forms the log-softmax emissions a chunk of
frames at a time (:func:`emission_chunk`) and steps through them (:func:`forward_chunk`), keeping
only the current [N, S] forward variables. The gradient stores the forward variables every
``K`` frames (:func:`segment_length`) and, walking the segments backwards, recomputes each one's
forward variables from its checkpoint, runs the backward variables over it and writes its gradient.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .canonical import CanonicalBatch
from .layout import time_major_view

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
NEG_INF = -np.inf
# The most negative finite float64: a logsumexp whose terms are all -inf is centred on it instead.
LOWEST = float(np.finfo(np.float64).min)
# A chunk of frames holds at most about this many float64 elements per [rows, N, max(C, S)] array,
# so no [T, N, C] float64 copy of the logits and no [T, N, S] table of emissions ever exists.
CHUNK_ELEMENTS = 1 << 21


def _first_of_class(classes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``out[i, s]`` = the first state of row i with the class of state s (0 for every blank)."""
    order = np.argsort(classes, axis=1, kind="stable")
    ordered = np.take_along_axis(classes, order, axis=1)
    starts = np.ones(ordered.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    positions = np.broadcast_to(np.arange(classes.shape[1]), classes.shape)
    run_start = np.maximum.accumulate(np.where(starts, positions, 0), axis=1)
    out = np.empty_like(classes)
    np.put_along_axis(out, order, np.take_along_axis(order, run_start, axis=1), axis=1)
    return out


@dataclass(frozen=True)
class Lattice:
    """The extended-label states of every sample of a batch, [N, S] each.

    ``stay_penalty``, ``skip_penalty`` and ``skip_from_penalty`` are 0 where the move exists and
    -inf where it does not: staying on s, skipping into s, and skipping from s into s + 2.
    ``first_of_class`` maps each state to the first state of its row with the same class.
    """

    classes: npt.NDArray[np.int64]
    stay: BoolArray
    skip: BoolArray
    last: npt.NDArray[np.int64]
    stay_penalty: FloatArray
    skip_penalty: FloatArray
    skip_from_penalty: FloatArray
    first_of_class: npt.NDArray[np.int64]

    @classmethod
    def of(cls, batch: CanonicalBatch) -> Lattice:
        n = batch.batch_size
        width = batch.targets.shape[1]
        states = 2 * width + 1
        classes = np.full((n, states), batch.blank, dtype=np.int64)
        classes[:, 1::2] = batch.targets
        is_label = np.zeros((n, states), dtype=bool)
        is_label[:, 1::2] = np.arange(width)[None, :] < batch.target_lengths[:, None]
        previous_label = np.full((n, states), -1, dtype=np.int64)
        previous_label[:, 3::2] = batch.targets[:, :-1]
        if batch.merge_repeated:
            stay = np.ones((n, states), dtype=bool)
            skip = is_label & (classes != previous_label)
        else:
            stay = ~is_label
            skip = is_label.copy()
        skip[:, :2] = False
        skip_from = np.zeros_like(skip)
        skip_from[:, :-2] = skip[:, 2:]
        return cls(
            classes=classes,
            stay=stay,
            skip=skip,
            last=2 * batch.target_lengths,
            stay_penalty=np.where(stay, 0.0, NEG_INF),
            skip_penalty=np.where(skip, 0.0, NEG_INF),
            skip_from_penalty=np.where(skip_from, 0.0, NEG_INF),
            first_of_class=_first_of_class(classes),
        )

    @property
    def states(self) -> int:
        return int(self.classes.shape[1])

    def initial_alpha(self) -> FloatArray:
        """Forward variables before frame 0: the virtual start counts as state 0."""
        alpha = np.full(self.classes.shape, NEG_INF)
        alpha[:, 0] = 0.0
        return alpha

    def final_beta(self) -> FloatArray:
        """Backward variables after the last active frame: 0 on the two accepting states."""
        n = self.classes.shape[0]
        rows = np.arange(n)
        beta = np.full(self.classes.shape, NEG_INF)
        beta[rows, self.last] = 0.0
        beta[rows[self.last > 0], self.last[self.last > 0] - 1] = 0.0
        return beta

    def log_likelihood(self, alpha: FloatArray) -> FloatArray:
        """ln of the summed probability of the paths that end on an accepting state."""
        rows = np.arange(self.classes.shape[0])
        last = alpha[rows, self.last]
        before_last = np.where(self.last > 0, alpha[rows, np.maximum(self.last - 1, 0)], NEG_INF)
        with np.errstate(invalid="ignore"):
            loglik: FloatArray = np.logaddexp(last, before_last)
        return loglik


# -- one frame of the recursion ---------------------------------------------------------------


def _logsumexp3(a: FloatArray, b: FloatArray, c: FloatArray) -> FloatArray:
    """``ln(exp(a) + exp(b) + exp(c))`` elementwise; overwrites its arguments."""
    top = np.maximum(a, b)
    np.maximum(top, c, out=top)
    np.maximum(top, LOWEST, out=top)  # all -inf: every term becomes exp(-inf) = 0, the result -inf
    for term in (a, b, c):
        term -= top
        np.exp(term, out=term)
    a += b
    a += c
    np.log(a, out=a)
    a += top
    return a


def _shift(values: FloatArray, by: int) -> FloatArray:
    """``out[:, s] = values[:, s - by]`` (``by`` may be negative); -inf where undefined."""
    out = np.full_like(values, NEG_INF)
    if by > 0:
        out[:, by:] = values[:, : values.shape[1] - by]
    else:
        out[:, : values.shape[1] + by] = values[:, -by:]
    return out


def forward_step(alpha: FloatArray, log_probs: FloatArray, active: BoolArray, lattice: Lattice) -> FloatArray:
    """Forward variables [N, S] after one frame, from those before it, the frame's emissions [N, S]
    and its active samples [N]; an inactive sample keeps its variables."""
    skip = _shift(alpha, 2)
    skip += lattice.skip_penalty
    step = _logsumexp3(alpha + lattice.stay_penalty, _shift(alpha, 1), skip)
    step += log_probs
    return np.where(active[:, None], step, alpha)


def backward_step(beta: FloatArray, log_probs: FloatArray, active: BoolArray, lattice: Lattice) -> FloatArray:
    """Backward variables [N, S] at frame t from those at frame t + 1 and that frame's emissions
    [N, S] and active samples [N]; a sample whose frame t + 1 is inactive keeps its variables."""
    ahead = beta + log_probs
    skip = _shift(ahead, -2)
    skip += lattice.skip_from_penalty
    step = _logsumexp3(ahead + lattice.stay_penalty, _shift(ahead, -1), skip)
    return np.where(active[:, None], step, beta)


def forward_chunk(
    alpha: FloatArray,
    log_probs: FloatArray,
    active: BoolArray,
    lattice: Lattice,
    history: FloatArray | None = None,
) -> FloatArray:
    """Forward variables after a chunk of frames (emissions [R, N, S], active [R, N]); with
    ``history`` [R, N, S], also the variables after each frame of the chunk."""
    with np.errstate(divide="ignore", invalid="ignore"):
        for row in range(log_probs.shape[0]):
            alpha = forward_step(alpha, log_probs[row], active[row], lattice)
            if history is not None:
                history[row] = alpha
    return alpha


def backward_chunk(
    beta: FloatArray, after: FloatArray, active_after: BoolArray, lattice: Lattice, history: FloatArray
) -> FloatArray:
    """Backward variables of R frames into ``history`` [R, N, S], from ``beta`` at the frame after
    them. ``after[r]`` and ``active_after[r]`` are the emissions and active samples of the frame
    after frame r; when the chunk ends the batch they have R - 1 rows (the last frame has no
    successor and takes ``beta`` as it is). Returns the variables of the chunk's first frame."""
    with np.errstate(divide="ignore", invalid="ignore"):
        for row in range(history.shape[0] - 1, -1, -1):
            if row < after.shape[0]:
                beta = backward_step(beta, after[row], active_after[row], lattice)
            history[row] = beta
    return beta


# -- emissions, a chunk of frames at a time -----------------------------------------------------


def chunk_rows(batch: CanonicalBatch, states: int) -> int:
    """Frames per chunk: chunk_rows * N * max(C, S) stays near CHUNK_ELEMENTS."""
    return max(1, CHUNK_ELEMENTS // max(1, batch.batch_size * max(batch.num_classes, states)))


def _chunks(start: int, stop: int, rows: int) -> Iterator[tuple[int, int]]:
    for first in range(start, stop, rows):
        yield first, min(stop, first + rows)


def _active_frames(batch: CanonicalBatch, start: int, stop: int) -> BoolArray:
    return np.arange(start, stop)[:, None] < batch.lengths[None, :]


def _centred_frames(batch: CanonicalBatch, start: int, stop: int) -> tuple[FloatArray, BoolArray]:
    """Frames ``start:stop`` in float64 minus each frame's maximum logit, [R, N, C], and the
    samples [N] with a non-finite active value. Inactive frames are read as zeros, so they can
    never matter. Subtracting the maximum first keeps the log-softmax exact for logits far from 0."""
    frames = batch.frames(start, stop).astype(np.float64)
    frames[~_active_frames(batch, start, stop)] = 0.0
    nonfinite: BoolArray = np.logical_not(np.isfinite(frames).all(axis=(0, 2)))
    with np.errstate(invalid="ignore"):
        frames -= frames.max(axis=2, keepdims=True)
    return frames, nonfinite


def emission_chunk(batch: CanonicalBatch, lattice: Lattice, start: int, stop: int) -> tuple[FloatArray, BoolArray]:
    """Log-softmax (spec 4.1) of frames ``start:stop`` at every state's class, [R, N, S], and the
    samples [N] with a non-finite active value in those frames: ``(x - max) - ln sum exp(x - max)``.
    The centred frames are exponentiated in place, so a chunk holds one [R, N, C] float64 array."""
    centred, nonfinite = _centred_frames(batch, start, stop)
    rows, n, classes = centred.shape
    flat = (np.arange(n)[:, None] * classes + lattice.classes).ravel()
    log_probs: FloatArray = np.take(centred.reshape(rows, n * classes), flat, axis=1).reshape(rows, n, lattice.states)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        np.exp(centred, out=centred)
        log_probs -= np.log(centred.sum(axis=2, keepdims=True))
    return log_probs, nonfinite


def _emission_table(batch: CanonicalBatch, lattice: Lattice, start: int, stop: int) -> tuple[FloatArray, BoolArray]:
    """Emissions of frames ``start:stop`` as one [stop-start, N, S] table, formed chunk by chunk."""
    table = np.empty((stop - start, *lattice.classes.shape))
    nonfinite = np.zeros(batch.batch_size, dtype=bool)
    for first, last in _chunks(start, stop, chunk_rows(batch, lattice.states)):
        table[first - start : last - start], bad = emission_chunk(batch, lattice, first, last)
        nonfinite |= bad
    return table, nonfinite


def _forward_frames(
    batch: CanonicalBatch, lattice: Lattice, alpha: FloatArray, start: int, stop: int
) -> tuple[FloatArray, BoolArray]:
    """Forward variables after frame ``stop - 1`` from ``alpha`` before frame ``start``, and the
    samples with a non-finite active value in between; memory O(N * S + one chunk)."""
    nonfinite = np.zeros(batch.batch_size, dtype=bool)
    for first, last in _chunks(start, stop, chunk_rows(batch, lattice.states)):
        log_probs, bad = emission_chunk(batch, lattice, first, last)
        nonfinite |= bad
        alpha = forward_chunk(alpha, log_probs, _active_frames(batch, first, last), lattice)
        del log_probs  # before the next chunk's emissions exist
    return alpha, nonfinite


def log_likelihood(batch: CanonicalBatch) -> FloatArray:
    """ln of the summed probability of all aligned paths, per sample (NaN for non-finite input)."""
    lattice = Lattice.of(batch)
    alpha, nonfinite = _forward_frames(batch, lattice, lattice.initial_alpha(), 0, batch.num_frames)
    loglik = lattice.log_likelihood(alpha)
    loglik[nonfinite] = np.nan
    return loglik


# -- whole tables, for worked examples and tests ------------------------------------------------


@dataclass(frozen=True)
class Emissions:
    """Per-state log-probabilities [T, N, S] of a whole batch and its non-finite samples [N]."""

    log_probs: FloatArray
    nonfinite: BoolArray


def emissions(batch: CanonicalBatch, lattice: Lattice) -> Emissions:
    """The whole [T, N, S] emission table (the passes above never form it; for small examples)."""
    return Emissions(*_emission_table(batch, lattice, 0, batch.num_frames))


def forward(batch: CanonicalBatch, lattice: Lattice, emitted: Emissions) -> tuple[FloatArray, FloatArray]:
    """Log-likelihood [N] and the whole table of forward variables [T, N, S] (for small examples:
    :func:`log_likelihood` keeps no history): ln of the summed probability of the paths in state s
    after frame t (a sample's rows stay put after its end)."""
    history = np.empty_like(emitted.log_probs)
    active = _active_frames(batch, 0, batch.num_frames)
    alpha = forward_chunk(lattice.initial_alpha(), emitted.log_probs, active, lattice, history)
    return lattice.log_likelihood(alpha), history


# -- the gradient (spec section 5) --------------------------------------------------------------


def segment_length(batch: CanonicalBatch, states: int) -> int:
    """K, the frames between two stored forward checkpoints: at least ceil(sqrt(T)), and as many
    frames as fit in CHUNK_ELEMENTS per [K, N, S] table (one segment whenever T * N * S does)."""
    root = math.isqrt(max(batch.num_frames - 1, 0)) + 1
    return max(root, CHUNK_ELEMENTS // max(1, batch.batch_size * states))


def _checkpoints(batch: CanonicalBatch, lattice: Lattice, starts: list[int]) -> list[FloatArray]:
    """Forward variables before each segment's first frame (the first is the initial state)."""
    if not starts:
        return []
    saved = [lattice.initial_alpha()]
    for previous, start in itertools.pairwise(starts):
        saved.append(_forward_frames(batch, lattice, saved[-1], previous, start)[0])
    return saved


def _occupancy(alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """Posterior state occupancy [R, N, S] normalised per frame and sample (spec section 5).

    Every aligned path is in exactly one state at an active frame, so the occupancies of a frame sum
    to 1: dividing by their sum instead of by the likelihood avoids forming ln of the likelihood,
    which rounds (it loses ln 2 against 1e16). The sum is sequential over the states (cumsum), so
    padding states of other samples of the batch (exactly 0) cannot change its rounding.
    """
    joint = alpha + beta
    top = joint.max(axis=2, keepdims=True)
    np.maximum(top, LOWEST, out=top)
    joint -= top
    np.exp(joint, out=joint)
    total = np.cumsum(joint, axis=2)[:, :, -1:]
    joint /= total
    return joint


def _subtract_class_sums(chunk: FloatArray, occupancy: FloatArray, lattice: Lattice) -> None:
    """``chunk[r, i, c] -= sum of occupancy[r, i, s] over the states s of class c`` ([R, N, C] and
    [R, N, S]). Each state's occupancy is added, in state order, to the first state of its class
    in its row (``lattice.first_of_class``); those first states then subtract their sums, one
    distinct class each, so no [R, N, C] scatter is formed."""
    rows, n, states = occupancy.shape
    bins = (np.arange(rows)[:, None, None] * n + np.arange(n)[None, :, None]) * states + lattice.first_of_class[None]
    sums = np.bincount(bins.ravel(), occupancy.ravel(), minlength=rows * n * states).reshape(rows, n, states)
    samples, firsts = np.nonzero(lattice.first_of_class == np.arange(states)[None, :])
    chunk[:, samples, lattice.classes[samples, firsts]] -= sums[:, samples, firsts]


def _write_gradient(
    batch: CanonicalBatch,
    lattice: Lattice,
    alpha: FloatArray,
    beta: FloatArray,
    start: int,
    grad: np.ndarray,
    feasible: BoolArray,
) -> None:
    """Softmax minus occupancy for frames ``start:start + len(alpha)``, a chunk of rows at a time,
    0 in inactive frames and for samples with no aligned path."""
    for first, last in _chunks(start, start + alpha.shape[0], chunk_rows(batch, lattice.states)):
        chunk, _ = _centred_frames(batch, first, last)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            np.exp(chunk, out=chunk)
            chunk /= chunk.sum(axis=2, keepdims=True)  # the softmax
            occupancy = _occupancy(alpha[first - start : last - start], beta[first - start : last - start])
        _subtract_class_sums(chunk, occupancy, lattice)
        chunk[~(_active_frames(batch, first, last) & feasible[None, :])] = 0.0
        time_major_view(grad, batch.time_axis, first, last)[...] = chunk


@dataclass
class _Sweep:
    """State of the backward sweep over the segments: the backward variables at the first frame of
    the segment done last, the log-likelihood (known once the last segment is recomputed) and the
    samples seen to hold a non-finite active value."""

    beta: FloatArray
    loglik: FloatArray | None
    nonfinite: BoolArray


def _segment(
    batch: CanonicalBatch, lattice: Lattice, alpha: FloatArray, start: int, stop: int, sweep: _Sweep, grad: np.ndarray
) -> None:
    """Frames ``start:stop`` of the backward sweep: their forward variables from the checkpoint
    ``alpha``, their backward variables from ``sweep.beta`` (the frame after them), their gradient."""
    frames = batch.num_frames
    table, bad = _emission_table(batch, lattice, start, min(frames, stop + 1))
    sweep.nonfinite |= bad
    active = _active_frames(batch, start, min(frames, stop + 1))
    alphas = np.empty((stop - start, *lattice.classes.shape))
    alpha = forward_chunk(alpha, table[: stop - start], active[: stop - start], lattice, alphas)
    if sweep.loglik is None:
        sweep.loglik = lattice.log_likelihood(alpha)
    betas = np.empty_like(alphas)
    sweep.beta = backward_chunk(sweep.beta, table[1:], active[1:], lattice, betas)
    del table
    _write_gradient(batch, lattice, alphas, betas, start, grad, np.isfinite(sweep.loglik))


def log_likelihood_and_grad(batch: CanonicalBatch) -> tuple[FloatArray, np.ndarray]:
    """Log-likelihood [N] and d(loss)/d(logits) in the logits' layout and element type.

    The gradient is softmax minus the posterior state occupancy (spec section 5); it is 0 in
    inactive frames and for samples with no aligned path, and NaN in the active frames of
    samples whose active frames hold a non-finite value. Forward variables are kept every
    :func:`segment_length` frames and recomputed segment by segment during the backward sweep.
    """
    lattice = Lattice.of(batch)
    grad = np.zeros(batch.logits.shape, dtype=batch.logits.dtype)
    length = segment_length(batch, lattice.states)
    starts = list(range(0, batch.num_frames, length))
    checkpoints = _checkpoints(batch, lattice, starts)
    sweep = _Sweep(lattice.final_beta(), None, np.zeros(batch.batch_size, dtype=bool))
    for start, alpha in zip(reversed(starts), reversed(checkpoints), strict=True):
        _segment(batch, lattice, alpha, start, min(batch.num_frames, start + length), sweep, grad)
    loglik = lattice.log_likelihood(lattice.initial_alpha()) if sweep.loglik is None else sweep.loglik
    if sweep.nonfinite.any():
        view = time_major_view(grad, batch.time_axis, 0, batch.num_frames)
        view[_active_frames(batch, 0, batch.num_frames) & sweep.nonfinite[None, :]] = np.nan
    loglik[sweep.nonfinite] = np.nan
    return loglik, grad
