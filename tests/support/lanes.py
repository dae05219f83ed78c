"""Batches with every kind of run of the lanes' kernel (:func:`lane_batches`) and the kernel's
losses over a block of their samples (:func:`lane_losses`), for the tests of
:mod:`ctcop.core.lanes`; a child process run with numba's bounds checking imports them too."""

import numpy as np

from ctcop.core import lanes


def lane_batches() -> list[tuple[np.ndarray, ...]]:
    """Arguments of :func:`ctcop.core.lanes.batch_loss` (time-major, blank C - 1, merge_repeated) on
    float64 batches with every kind of run: full groups, a group of 11, leftovers computed alone,
    groups of no frames, of empty targets (S = 1), and a batch of 64 classes."""
    rng = np.random.default_rng(9)
    batches = []
    for classes, shapes in ((6, [(4, 2)] * 27 + [(0, 1)] * 10 + [(3, 0)] * 12 + [(0, 0)] * 9), (64, [(5, 3)] * 20)):
        lengths = np.array([frames for frames, _ in shapes], np.int64)
        target_lengths = np.array([length for _, length in shapes], np.int64)
        targets = rng.integers(0, classes - 1, size=(len(shapes), 3)).astype(np.int64)
        logits = rng.normal(size=(5, len(shapes), classes))
        batches.append((logits, lengths, targets, target_lengths))
    return batches


def lane_losses(first: int, last: int) -> list[np.ndarray]:
    """:func:`ctcop.core.lanes.batch_loss` over samples ``[first, last)`` of each of :func:`lane_batches`."""
    results = []
    for logits, lengths, targets, target_lengths in lane_batches():
        out = np.full(logits.shape[1], -1.0)
        stop = min(last, logits.shape[1])
        fewest = lanes.fewest_samples(logits.shape[2], 2 * targets.shape[1] + 1)
        arguments = (logits, False, lengths, targets, target_lengths, logits.shape[2] - 1, True, fewest)
        lanes.batch_loss(*arguments, first, stop, out)
        results.append(out[first:stop])
    return results
