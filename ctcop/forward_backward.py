"""CTCLoss-4 as a plain numpy forward-backward: spec/ctcloss4.md section 4 and the gradient of section 5.

Written to be read beside the spec, not to be fast: one sample at a time, every frame a few numpy
operations over the S = 2L + 1 states of the lattice (4.5), all in float64 log space. The rules on
the inputs (sections 3 and 7) are not restated here: the batch functions take each sample's frame
count and processed target from :mod:`ctcop.canonical`, as ``ctcop.ctc_loss`` does. The compiled
kernels are held to this form by ``tests/unit/test_forward_backward.py``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from . import canonical

FloatArray = npt.NDArray[np.float64]
NEG_INF = -np.inf


def log_softmax(logits: FloatArray) -> FloatArray:
    """Spec 4.1 per frame: ``ln p = (x - max) - ln sum exp(x - max)``. [T, C] -> [T, C]."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p: FloatArray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return log_p


def lattice(target: npt.NDArray[np.int64], blank: int, merge_repeated: bool) -> tuple[np.ndarray, ...]:
    """The extended label of spec 4.5 and its moves: ``classes`` [S] (blank, g_1, blank, ..., g_L,
    blank), ``stay`` [S] and ``skip`` [S], whether staying on s and skipping into s (from s - 2)
    exist (the table of 4.5: without merging a label state has no stay and every label a skip)."""
    states = 2 * len(target) + 1
    classes = np.full(states, blank, dtype=np.int64)
    classes[1::2] = target
    is_label = np.arange(states) % 2 == 1
    stay = ~is_label | merge_repeated
    skip = np.zeros(states, dtype=bool)
    skip[3::2] = (target[1:] != target[:-1]) | (not merge_repeated)
    return classes, stay, skip


def _shifted(values: FloatArray, k: int) -> FloatArray:
    """``values`` moved k places to higher states (k < 0: to lower), -inf where nothing moves in."""
    out = np.full_like(values, NEG_INF)
    if k > 0:
        out[k:] = values[:-k]
    else:
        out[:k] = values[-k:]
    return out


def forward(emission: FloatArray, stay: np.ndarray, skip: np.ndarray) -> FloatArray:
    """``alpha`` [T + 1, S]: row 0 the virtual start (state 0), row t + 1 the forward variables after
    frame t, ``alpha_t(s) = e_t(s) + logsumexp(stay, step, skip predecessors)``. ``emission`` [T, S]."""
    frames, states = emission.shape
    alpha = np.full((frames + 1, states), NEG_INF)
    alpha[0, 0] = 0.0
    for t in range(frames):
        prev = alpha[t]
        stayed = np.where(stay, prev, NEG_INF)
        skipped = np.where(skip, _shifted(prev, 2), NEG_INF)
        alpha[t + 1] = emission[t] + np.logaddexp(np.logaddexp(stayed, _shifted(prev, 1)), skipped)
    return alpha


def backward(emission: FloatArray, stay: np.ndarray, skip: np.ndarray) -> FloatArray:
    """``beta`` [T, S]: the log-probability of completing from state s after frame t, frame t not
    counted (spec 5); after the last frame 0 on the two final states 2L and 2L - 1."""
    frames, states = emission.shape
    beta = np.full((frames, states), NEG_INF)
    if frames:
        beta[-1, max(0, states - 2) :] = 0.0
    for t in range(frames - 2, -1, -1):
        ahead = beta[t + 1] + emission[t + 1]  # completing from s' after frame t + 1, with that frame
        stayed = np.where(stay, ahead, NEG_INF)
        skipped = _shifted(np.where(skip, ahead, NEG_INF), -2)
        beta[t] = np.logaddexp(np.logaddexp(stayed, _shifted(ahead, -1)), skipped)
    return beta


def sample_loss_and_grad(
    logits: FloatArray, target: npt.NDArray[np.int64], blank: int, merge_repeated: bool
) -> tuple[float, FloatArray]:
    """One sample's loss (spec 4.3, 4.4) and its gradient (spec 5).

    Args:
      logits: [T_i, C] float64, the sample's active frames only.
      target: [L] int, the processed target (pads removed, collapse/unique applied).
      blank: the blank class.
      merge_repeated: whether a path's runs of equal symbols merge when it decodes (spec 4.2).

    Returns:
      ``(loss, grad)``, grad [T_i, C]: NaN and NaN everywhere for a non-finite logit; +inf and 0
      where no path is aligned; otherwise ``-ln sum_S p(S)`` (+0.0 at the least) and
      ``softmax - occupancy``.
    """
    if not np.isfinite(logits).all():
        return np.nan, np.full(logits.shape, np.nan)
    log_p = log_softmax(logits)  # [T, C]
    classes, stay, skip = lattice(np.asarray(target, dtype=np.int64), blank, merge_repeated)
    emission = log_p[:, classes]  # [T, S]: e_t(s)
    alpha = forward(emission, stay, skip)  # [T + 1, S]
    log_likelihood = np.logaddexp.reduce(alpha[-1, max(0, len(classes) - 2) :])
    if log_likelihood == NEG_INF:
        return np.inf, np.zeros(logits.shape)
    return max(0.0, 0.0 - float(log_likelihood)), gradient(log_p, classes, alpha, backward(emission, stay, skip))


def gradient(log_p: FloatArray, classes: np.ndarray, alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """Spec 5: ``softmax - occupancy`` [T, C] of a sample with an aligned path, from ``log_p`` [T, C],
    the lattice's ``classes`` [S], ``alpha`` [T + 1, S] and ``beta`` [T, S]."""
    joint = alpha[1:] + beta  # [T, S]: ln of the aligned probability through s after frame t
    weight = np.exp(joint - joint.max(axis=1, keepdims=True))
    gamma = weight / weight.sum(axis=1, keepdims=True)  # normalised per frame, never by the likelihood
    one_hot = classes[:, None] == np.arange(log_p.shape[1])  # [S, C]: class(s) = c
    occupancy = gamma @ one_hot  # [T, C]: the sum of gamma_t(s) over the states s of class c
    grad: FloatArray = np.exp(log_p) - occupancy
    return grad


def batch_loss_and_grad(batch: canonical.CanonicalBatch) -> tuple[FloatArray, FloatArray]:
    """Losses [N] and gradient (the layout of ``batch.logits``: [T, N, C] or [N, T, C]) of a
    validated batch, both float64; 0 in inactive frames."""
    logits = np.moveaxis(np.asarray(batch.logits).astype(np.float64), batch.time_axis, 0)  # [T, N, C]
    losses = np.zeros(batch.batch_size)
    grad = np.zeros(logits.shape)
    for i in range(batch.batch_size):
        frames, target = batch.lengths[i], batch.targets[i, : batch.target_lengths[i]]
        losses[i], grad[:frames, i] = sample_loss_and_grad(
            logits[:frames, i], target, batch.blank, batch.merge_repeated
        )
    return losses, np.moveaxis(grad, 0, batch.time_axis)


def ctc_loss_and_grad(
    inputs: npt.ArrayLike,
    sequence_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> tuple[FloatArray, FloatArray]:
    """The spec's time-major form (section 2): losses [N] and gradient [T, N, C], float64.

    Args:
      inputs: [T, N, C] logits; the blank is class C-1.
      sequence_mask: [T, N] of 0/1, a prefix of 1s per sample.
      labels: [N, T] targets padded with -1.
      preprocess_collapse_repeated, merge_repeated: the attributes of section 2.

    Returns:
      ``(losses, grad)`` as :func:`ctcop.ctc_loss_grad` defines them, in float64.
    """
    batch = canonical.from_time_major(
        inputs,
        sequence_mask,
        labels,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        merge_repeated=merge_repeated,
    )
    return batch_loss_and_grad(batch)
