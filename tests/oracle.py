"""Brute-force oracles: the spec read literally, by enumerating every path.

Exponential in T by design; only for small cases. Independent of ctcop's code.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


def _log_softmax(row: np.ndarray) -> list[float]:
    values = [float(v) for v in row]
    norm = _logsumexp(values)
    return [v - norm for v in values]


def decode_path(path: tuple[int, ...], blank: int, merge_repeated: bool) -> tuple[int, ...]:
    """Spec 2.2: merge repeats in the path (if merge_repeated), then drop blanks."""
    out = []
    previous = None
    for symbol in path:
        if not (merge_repeated and symbol == previous) and symbol != blank:
            out.append(symbol)
        previous = symbol
    return tuple(out)


def collapse(target: list[int]) -> list[int]:
    return [v for k, v in enumerate(target) if k == 0 or v != target[k - 1]]


def path_sum_loss(frames: np.ndarray, target: tuple[int, ...], blank: int, merge_repeated: bool) -> float:
    """-ln sum over all paths of frames [T_i, C] that decode to ``target``.

    Path probabilities are products of softmax values, summed as logs (log-sum-exp with fsum) so
    that logits of magnitude 1e4 do not underflow.
    """
    log_probs = [_log_softmax(row) for row in frames]
    classes = frames.shape[1]
    terms = [
        math.fsum(log_probs[t][c] for t, c in enumerate(path))
        for path in itertools.product(range(classes), repeat=len(log_probs))
        if decode_path(path, blank, merge_repeated) == target
    ]
    return -_logsumexp(terms) if terms else math.inf


def time_major_loss(
    inputs: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
) -> np.ndarray:
    """The spec's time-major CTCLoss-4 by enumeration."""
    blank = inputs.shape[2] - 1
    out = []
    for i in range(inputs.shape[1]):
        length = int(mask[:, i].sum())
        target = [int(v) for v in labels[i] if v != -1]
        if preprocess_collapse_repeated:
            target = collapse(target)
        out.append(path_sum_loss(inputs[:length, i], tuple(target), blank, merge_repeated))
    return np.array(out)


def openvino_loss(
    logits: np.ndarray,
    logit_length: np.ndarray,
    labels: np.ndarray,
    label_length: np.ndarray,
    blank: int,
    preprocess_collapse_repeated: bool = False,
    merge_repeated: bool = True,
    unique: bool = False,
) -> np.ndarray:
    """The released OpenVINO form by enumeration: prefix, collapse, unique, then the path sum."""
    out = []
    for i in range(logits.shape[0]):
        target = [int(v) for v in labels[i, : int(label_length[i])]]
        if preprocess_collapse_repeated:
            target = collapse(target)
        if unique:
            target = [v for k, v in enumerate(target) if v not in target[:k]]
        frames = logits[i, : int(logit_length[i])]
        out.append(path_sum_loss(frames, tuple(target), blank, merge_repeated))
    return np.array(out)
