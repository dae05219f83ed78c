"""Brute force: CTCLoss-4 by enumerating every path, the spec read literally (spec sections 3, 4, 5, 7).

Independent of ctcop's recursion and validation: for each sample it lists all ``C ** T_i`` paths,
decodes each one as section 4.2 says (merge runs if ``merge_repeated``, then drop blanks), keeps
those equal to the target and sums their probabilities, products of per-frame softmax values
(section 4.1). The gradient is the literal derivative of ``-ln sum_S p(S)``: softmax minus the
share of the aligned paths' probability that goes through class c at frame t (section 5).

Exponential in T by design. The corpus generator verifies every case whose samples all have at
most :data:`PATH_LIMIT` paths; the tests compare the reference with it on small random cases.
Inputs are taken as given (no validation): pass valid ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

# "Small enough" for the corpus: every sample has at most this many paths (C ** T_i).
PATH_LIMIT = 200_000
# No enumeration beyond this many paths per sample (memory: paths x frames integers).
HARD_LIMIT = 4_000_000

FloatArray = npt.NDArray[np.float64]


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


def _log_softmax(row: np.ndarray) -> list[float]:
    """Spec 4.1 for one frame: ``ln(exp(x_c) / sum_k exp(x_k))`` over exactly the C classes, as
    ``(x_c - max) - ln sum_k exp(x_k - max)`` (no cancellation for logits of magnitude 1e5)."""
    values = [float(v) for v in row]
    top = max(values)
    shifted = [v - top for v in values]
    norm = math.log(math.fsum(math.exp(v) for v in shifted))
    return [v - norm for v in shifted]


def decode_path(path: Sequence[int], blank: int, merge_repeated: bool) -> tuple[int, ...]:
    """Spec 4.2: merge repeats in the path (if merge_repeated), then drop blanks."""
    out = []
    previous = None
    for symbol in path:
        if not (merge_repeated and symbol == previous) and symbol != blank:
            out.append(int(symbol))
        previous = symbol
    return tuple(out)


def collapse(target: Sequence[int]) -> list[int]:
    """Spec 3.4: each run of equal adjacent labels becomes one label."""
    return [int(v) for k, v in enumerate(target) if k == 0 or v != target[k - 1]]


def first_occurrences(target: Sequence[int]) -> list[int]:
    """Spec 7.3 ``unique``: the first occurrence of each class, in order."""
    return [int(v) for k, v in enumerate(target) if v not in target[:k]]


def path_count(classes: int, frames: Sequence[int]) -> int:
    """Paths enumerated for samples with these frame counts: the sum of ``classes ** T_i``."""
    return sum(classes ** int(t) for t in frames)


def small_enough(classes: int, frames: Sequence[int]) -> bool:
    """Whether every sample has at most :data:`PATH_LIMIT` paths."""
    return all(classes ** int(t) <= PATH_LIMIT for t in frames)


def all_paths(classes: int, frames: int) -> npt.NDArray[np.int64]:
    """Every path over ``frames`` frames, [classes ** frames, frames], in lexicographic order."""
    count = classes**frames
    if count > HARD_LIMIT:
        raise ValueError(f"{count} paths: too many to enumerate (limit {HARD_LIMIT})")
    index = np.arange(count, dtype=np.int64)[:, None]
    weights = classes ** np.arange(frames - 1, -1, -1, dtype=np.int64)[None, :]
    paths: npt.NDArray[np.int64] = (index // weights) % classes
    return paths


def aligned(paths: npt.NDArray[np.int64], target: Sequence[int], blank: int, merge_repeated: bool) -> np.ndarray:
    """[paths]: whether each path decodes to ``target`` (:func:`decode_path`, one row at a time in
    effect: a frame emits its symbol when it is not blank and, if merging, differs from the one
    before; the emitted symbols, in order, must be exactly the target)."""
    emit = paths != blank
    if merge_repeated:
        emit[:, 1:] &= paths[:, 1:] != paths[:, :-1]
    length = len(target)
    ok: np.ndarray = emit.sum(axis=1) == length
    if length:
        position = np.clip(np.cumsum(emit, axis=1) - 1, 0, length - 1)
        ok &= np.all(~emit | (paths == np.asarray(target, dtype=np.int64)[position]), axis=1)
    return ok


def path_sum(frames: np.ndarray, target: Sequence[int], blank: int, merge_repeated: bool) -> tuple[float, FloatArray]:
    """Loss and gradient [T_i, C] of one sample's active ``frames`` [T_i, C].

    Spec 4.4: a non-finite active value gives NaN (gradient NaN); no aligned path gives +inf
    (gradient 0). Path probabilities are summed as logs (per-frame log-softmax with ``fsum``), so
    logits of magnitude 1e4 neither overflow nor underflow.
    """
    values = np.asarray(frames, dtype=np.float64)
    count, classes = values.shape
    if not np.isfinite(values).all():
        return math.nan, np.full(values.shape, np.nan)
    log_probs = np.array([_log_softmax(row) for row in values]).reshape(count, classes)
    paths = all_paths(classes, count)
    chosen = paths[aligned(paths, target, blank, merge_repeated)]
    if not len(chosen):
        return math.inf, np.zeros(values.shape)
    terms = log_probs[np.arange(count)[None, :], chosen].sum(axis=1)
    total = _logsumexp(terms.tolist())
    share = np.exp(terms - total)
    occupancy = np.array([np.bincount(chosen[:, t], weights=share, minlength=classes) for t in range(count)])
    grad: FloatArray = np.exp(log_probs) - occupancy.reshape(count, classes)
    return 0.0 - total, grad


def path_sum_loss(frames: np.ndarray, target: Sequence[int], blank: int, merge_repeated: bool) -> float:
    """-ln of the probability of every path of ``frames`` [T_i, C] that decodes to ``target``."""
    return path_sum(frames, target, blank, merge_repeated)[0]


def time_major_targets(labels: np.ndarray, preprocess_collapse_repeated: bool) -> list[list[int]]:
    """Spec 3.3 and 3.4: every -1 removed wherever it stands, then collapsed if asked."""
    targets = []
    for row in labels:
        target = [int(v) for v in row if int(v) != -1]
        targets.append(collapse(target) if preprocess_collapse_repeated else target)
    return targets


def openvino_targets(
    labels: np.ndarray, label_length: np.ndarray, preprocess_collapse_repeated: bool, unique: bool
) -> list[list[int]]:
    """Spec 7.3: the prefix of ``label_length[i]`` entries, collapsed if asked, then first occurrences."""
    targets = []
    for row, length in zip(labels, label_length, strict=True):
        target = [int(v) for v in row[: int(length)]]
        if preprocess_collapse_repeated:
            target = collapse(target)
        targets.append(first_occurrences(target) if unique else target)
    return targets


def time_major_loss_grad(
    inputs: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> tuple[FloatArray, FloatArray]:
    """The time-major form (spec section 2) by enumeration: losses [N] and gradient [T, N, C]."""
    values = np.asarray(inputs).astype(np.float64)
    blank = values.shape[2] - 1
    losses = np.zeros(values.shape[1])
    grad = np.zeros(values.shape)
    for i, target in enumerate(time_major_targets(np.asarray(labels), preprocess_collapse_repeated)):
        length = int(np.asarray(mask)[:, i].astype(np.int64).sum())
        losses[i], grad[:length, i] = path_sum(values[:length, i], target, blank, merge_repeated)
    return losses, grad


def time_major_loss(
    inputs: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> FloatArray:
    """The spec's time-major CTCLoss-4 by enumeration: losses [N] in float64."""
    return time_major_loss_grad(inputs, mask, labels, preprocess_collapse_repeated, merge_repeated)[0]


def openvino_loss_grad(
    logits: np.ndarray,
    logit_length: np.ndarray,
    labels: np.ndarray,
    label_length: np.ndarray,
    blank: int,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
    unique: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """The released OpenVINO form (spec section 7) by enumeration: losses [N] and gradient [N, T, C]."""
    values = np.asarray(logits).astype(np.float64)
    targets = openvino_targets(np.asarray(labels), np.asarray(label_length), preprocess_collapse_repeated, unique)
    losses = np.zeros(values.shape[0])
    grad = np.zeros(values.shape)
    for i, target in enumerate(targets):
        length = int(np.asarray(logit_length)[i])
        losses[i], grad[i, :length] = path_sum(values[i, :length], target, blank, merge_repeated)
    return losses, grad


def openvino_loss(
    logits: np.ndarray,
    logit_length: np.ndarray,
    labels: np.ndarray,
    label_length: np.ndarray,
    blank: int,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
    unique: bool = False,
) -> FloatArray:
    """The released OpenVINO form by enumeration: prefix, collapse, unique, then the path sum."""
    return openvino_loss_grad(
        logits, logit_length, labels, label_length, blank, preprocess_collapse_repeated, merge_repeated, unique
    )[0]
