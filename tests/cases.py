"""Random small CTCLoss-4 cases for oracle comparisons (seeded, reproducible)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Case:
    inputs: np.ndarray
    mask: np.ndarray
    labels: np.ndarray


def random_case(rng: np.random.Generator, max_t: int = 5, max_c: int = 4, max_n: int = 3) -> Case:
    """Logits, a prefix mask (zero-length columns included) and -1-padded labels with pads anywhere.

    Label rows are drawn up to length T, so many targets are infeasible for their frame count;
    some rows are all pads (empty targets).
    """
    t = int(rng.integers(0, max_t + 1))
    c = int(rng.integers(1, max_c + 1))
    n = int(rng.integers(1, max_n + 1))
    scale = float(rng.choice([0.5, 3.0, 20.0]))
    inputs = rng.normal(size=(t, n, c)) * scale
    lengths = rng.integers(0, t + 1, size=n)
    mask = (np.arange(t)[:, None] < lengths[None, :]).astype(np.int32)
    labels = rng.integers(0, max(c - 1, 1), size=(n, t)) if c > 1 else np.full((n, t), -1)
    pads = rng.random(size=(n, t)) < rng.uniform(0.2, 0.9)
    labels = np.where(pads, -1, labels).astype(np.int64)
    return Case(inputs, mask, labels)


def random_openvino_case(
    rng: np.random.Generator, blank_at: str, max_t: int = 5, max_c: int = 4, max_n: int = 3
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(logits [N,T,C], logit_length, labels, label_length, blank) with the blank at
    ``blank_at`` in {"first", "middle", "last"}; labels beyond label_length are junk."""
    t = int(rng.integers(0, max_t + 1))
    c = int(rng.integers(2, max_c + 1))
    n = int(rng.integers(1, max_n + 1))
    blank = {"first": 0, "middle": c // 2, "last": c - 1}[blank_at]
    logits = rng.normal(size=(n, t, c)) * 3.0
    logit_length = rng.integers(0, t + 1, size=n)
    label_length = rng.integers(0, t + 1, size=n)
    others = np.array([k for k in range(c) if k != blank])
    labels = others[rng.integers(0, others.size, size=(n, t))]
    junk = np.arange(t)[None, :] >= label_length[:, None]
    labels = np.where(junk, rng.integers(-5, 50, size=(n, t)), labels)
    return logits, logit_length, labels, label_length, blank
