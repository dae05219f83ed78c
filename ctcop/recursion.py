"""The log-space forward-backward core (spec/ctcloss4.md, section 4).

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
batch and the states; the only Python loop runs over time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .canonical import CanonicalBatch
from .layout import time_major_view

FloatArray = npt.NDArray[np.float64]
NEG_INF = -np.inf
# Frames are converted to float64 in slices of at most this many elements, so no [T, N, C]
# float64 copy of the logits ever exists.
CHUNK_ELEMENTS = 1 << 21


@dataclass(frozen=True)
class Lattice:
    """The extended-label states of every sample of a batch, [N, S] each."""

    classes: npt.NDArray[np.int64]
    stay: npt.NDArray[np.bool_]
    skip: npt.NDArray[np.bool_]
    last: npt.NDArray[np.int64]

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
        return cls(classes=classes, stay=stay, skip=skip, last=2 * batch.target_lengths)


def _logsumexp3(a: FloatArray, b: FloatArray, c: FloatArray) -> FloatArray:
    top = np.maximum(np.maximum(a, b), c)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = safe + np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe))
    return out


def _shift(values: FloatArray, by: int) -> FloatArray:
    """``out[:, s] = values[:, s - by]`` (``by`` may be negative); -inf where undefined."""
    out = np.full_like(values, NEG_INF)
    if by > 0:
        out[:, by:] = values[:, : values.shape[1] - by]
    else:
        out[:, : values.shape[1] + by] = values[:, -by:]
    return out


def _chunk_rows(batch: CanonicalBatch) -> int:
    return max(1, CHUNK_ELEMENTS // max(1, batch.batch_size * batch.num_classes))


def _active_frames(batch: CanonicalBatch, start: int, stop: int) -> npt.NDArray[np.bool_]:
    return np.arange(start, stop)[:, None] < batch.lengths[None, :]


def _float_frames(batch: CanonicalBatch, start: int, stop: int) -> FloatArray:
    """Frames ``start:stop`` in float64, zero in inactive frames so they can never matter."""
    active = _active_frames(batch, start, stop)
    frames = batch.frames(start, stop).astype(np.float64)
    frames[~active] = 0.0
    return frames


@dataclass(frozen=True)
class Emissions:
    """Per-state log-probabilities [T, N, S], the log-softmax terms [T, N] of every frame (its
    maximum logit and ln of the sum of exp(logit - maximum)), and non-finite samples [N]."""

    log_probs: FloatArray
    frame_max: FloatArray
    log_sum: FloatArray
    nonfinite: npt.NDArray[np.bool_]

    def softmax(self, frames: FloatArray, start: int, stop: int) -> FloatArray:
        """Softmax of float64 frames ``start:stop`` (as returned by ``_float_frames``)."""
        centred = frames - self.frame_max[start:stop, :, None]
        with np.errstate(invalid="ignore", over="ignore"):
            out: FloatArray = np.exp(centred - self.log_sum[start:stop, :, None])
        return out


def emissions(batch: CanonicalBatch, lattice: Lattice) -> Emissions:
    """Log-softmax over the C classes (spec section 4.1), gathered at every state's class.

    The log-probability is formed as ``(x - max) - ln(sum exp(x - max))``: subtracting the
    maximum first keeps it exact for logits far from zero (constant shifts, magnitude 1e4).
    """
    frames_total, n = batch.num_frames, batch.batch_size
    states = lattice.classes.shape[1]
    log_probs = np.empty((frames_total, n, states))
    frame_max = np.empty((frames_total, n))
    log_sum = np.empty((frames_total, n))
    nonfinite = np.zeros(n, dtype=bool)
    rows = _chunk_rows(batch)
    for start in range(0, frames_total, rows):
        stop = min(frames_total, start + rows)
        frames = _float_frames(batch, start, stop)
        nonfinite |= (~np.isfinite(frames)).any(axis=(0, 2))
        with np.errstate(invalid="ignore", over="ignore"):
            top = frames.max(axis=2, keepdims=True)
            frames -= top
            logs = np.log(np.exp(frames).sum(axis=2, keepdims=True))
        index = np.broadcast_to(lattice.classes[None], (stop - start, n, states))
        log_probs[start:stop] = np.take_along_axis(frames, index, axis=2) - logs
        frame_max[start:stop] = top[..., 0]
        log_sum[start:stop] = logs[..., 0]
    return Emissions(log_probs, frame_max, log_sum, nonfinite)


def forward(batch: CanonicalBatch, lattice: Lattice, emitted: Emissions) -> tuple[FloatArray, FloatArray]:
    """Log-likelihood [N] of every sample and the forward variables [T, N, S]: ln of the summed
    probability of the paths in state s after frame t (a sample's rows stay put after its end)."""
    n, states = lattice.classes.shape
    no_stay = ~lattice.stay
    no_skip = ~lattice.skip
    alpha = np.full((n, states), NEG_INF)
    alpha[:, 0] = 0.0
    history = np.empty((batch.num_frames, n, states))
    for t in range(batch.num_frames):
        stay = alpha.copy()
        stay[no_stay] = NEG_INF
        skip = _shift(alpha, 2)
        skip[no_skip] = NEG_INF
        step = _logsumexp3(stay, _shift(alpha, 1), skip) + emitted.log_probs[t]
        active = (t < batch.lengths)[:, None]
        alpha = np.where(active, step, alpha)
        history[t] = alpha
    rows = np.arange(n)
    last = alpha[rows, lattice.last]
    before_last = np.where(lattice.last > 0, alpha[rows, np.maximum(lattice.last - 1, 0)], NEG_INF)
    with np.errstate(invalid="ignore"):
        loglik: FloatArray = np.logaddexp(last, before_last)
    return loglik, history


def backward(batch: CanonicalBatch, lattice: Lattice, emitted: Emissions) -> FloatArray:
    """Backward variables [T, N, S]: log-probability of finishing from state s after frame t."""
    n, states = lattice.classes.shape
    no_stay = ~lattice.stay
    no_skip_from = np.ones_like(lattice.skip)
    no_skip_from[:, :-2] = ~lattice.skip[:, 2:]
    rows = np.arange(n)
    beta = np.full((n, states), NEG_INF)
    beta[rows, lattice.last] = 0.0
    beta[rows[lattice.last > 0], lattice.last[lattice.last > 0] - 1] = 0.0
    history = np.empty((batch.num_frames, n, states))
    for t in range(batch.num_frames - 1, -1, -1):
        if t + 1 < batch.num_frames:
            ahead = beta + emitted.log_probs[t + 1]
            stay = ahead.copy()
            stay[no_stay] = NEG_INF
            skip = _shift(ahead, -2)
            skip[no_skip_from] = NEG_INF
            step = _logsumexp3(stay, _shift(ahead, -1), skip)
            beta = np.where((t + 1 < batch.lengths)[:, None], step, beta)
        history[t] = beta
    return history


def log_likelihood(batch: CanonicalBatch) -> FloatArray:
    """ln of the summed probability of all aligned paths, per sample (NaN for non-finite input)."""
    lattice = Lattice.of(batch)
    emitted = emissions(batch, lattice)
    loglik, _ = forward(batch, lattice, emitted)
    loglik[emitted.nonfinite] = np.nan
    return loglik


def log_likelihood_and_grad(batch: CanonicalBatch) -> tuple[FloatArray, np.ndarray]:
    """Log-likelihood [N] and d(loss)/d(logits) in the logits' layout and element type.

    The gradient is softmax minus the posterior state occupancy (spec section 5); it is 0 in
    inactive frames and for samples with no aligned path, and NaN in the active frames of
    samples whose active frames hold a non-finite value.
    """
    lattice = Lattice.of(batch)
    emitted = emissions(batch, lattice)
    loglik, alpha = forward(batch, lattice, emitted)
    beta = backward(batch, lattice, emitted)
    grad = np.zeros(batch.logits.shape, dtype=batch.logits.dtype)
    n = batch.batch_size
    classes = batch.num_classes
    feasible = np.isfinite(loglik)
    rows = _chunk_rows(batch)
    for start in range(0, batch.num_frames, rows):
        stop = min(batch.num_frames, start + rows)
        active = _active_frames(batch, start, stop)
        frames = _float_frames(batch, start, stop)
        softmax = emitted.softmax(frames, start, stop)
        with np.errstate(invalid="ignore", over="ignore"):
            occupancy = np.exp(alpha[start:stop] + beta[start:stop] - loglik[None, :, None])
        occupancy[:, ~feasible] = 0.0
        target = (np.arange(stop - start)[:, None, None] * n + np.arange(n)[None, :, None]) * classes
        target = target + lattice.classes[None]
        summed = np.bincount(target.ravel(), occupancy.ravel(), minlength=(stop - start) * n * classes)
        chunk = softmax - summed.reshape(stop - start, n, classes)
        chunk[~(active & feasible[None, :])] = 0.0
        chunk[active & emitted.nonfinite[None, :]] = np.nan
        time_major_view(grad, batch.time_axis, start, stop)[...] = chunk
    loglik[emitted.nonfinite] = np.nan
    return loglik, grad
