"""Random small cases of the released OpenVINO form for oracle comparisons (seeded, reproducible)."""

from __future__ import annotations

import numpy as np


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
