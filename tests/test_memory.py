"""Peak memory of the reference (spec sections 4.5 and 5), measured with tracemalloc.

numpy reports its array buffers to tracemalloc, so the traced peak is the largest amount of array
(and Python object) memory alive at once during the call, inputs excluded (they exist before the
measurement starts) and the result included.
"""

import gc
import math
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ctcop
from ctcop import recursion

MB = 1e6


def case(frames: int, batch: int, length: int, classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`ctcop bench`'s warp-ctc shapes (ctcop.bench.shapes): float32 logits, every frame active, random targets."""
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal(size=(frames, batch, classes), dtype=np.float32)
    mask = np.ones((frames, batch), dtype=np.int32)
    labels = np.full((batch, frames), -1, dtype=np.int64)
    labels[:, :length] = rng.integers(0, classes - 1, size=(batch, length))
    return inputs, mask, labels


def traced_peak(function: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """Peak traced bytes above the level before the call, and the call's result."""
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = function(*args)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak, result


def gradient_bound(frames: int, batch: int, classes: int, states: int) -> float:
    """Spec section 5: bytes besides the inputs and the [T, N, C] result, with
    K = max(ceil(sqrt(T)), floor(CHUNK_ELEMENTS / (N S))) and the segment min(K, T) long:
    8 (N S (ceil(T / K) + 3 min(K, T) + 3) + 6 CHUNK_ELEMENTS)."""
    chunk = recursion.CHUNK_ELEMENTS
    length = max(math.isqrt(max(frames - 1, 0)) + 1, chunk // max(1, batch * states))
    segments = -(-frames // length)
    return 8.0 * (batch * states * (segments + 3 * min(length, frames) + 3) + 6 * chunk)


def test_loss_memory_at_20000_frames_and_10001_states() -> None:
    # The case of issue 10: a 400 KB input. Before the chunked forward pass it peaked at 3.1 GB
    # (a [T, N, S] emission table and a [T, N, S] forward history). Takes about 10 s.
    inputs, mask, labels = case(20000, 1, 5000, 5)
    start = time.perf_counter()
    peak, loss = traced_peak(ctcop.ctc_loss, inputs, mask, labels)
    elapsed = time.perf_counter() - start
    assert np.isfinite(loss).all()
    assert peak < 100 * MB, f"peak {peak / MB:.1f} MB in {elapsed:.1f} s"


def test_loss_memory_does_not_grow_with_frames() -> None:
    # Same states (S = 1001), ten times the frames: the forward pass keeps O(N S + chunk).
    short, _ = traced_peak(ctcop.ctc_loss, *case(2000, 1, 500, 5))
    long, _ = traced_peak(ctcop.ctc_loss, *case(20000, 1, 500, 5))
    assert long < 1.2 * short + 1 * MB, (short / MB, long / MB)
    assert long < 2 * 8 * recursion.CHUNK_ELEMENTS + 1 * MB


@pytest.mark.parametrize(
    ("frames", "batch", "length", "classes"),
    [(4000, 1, 1000, 5), (150, 64, 20, 5000), (150, 64, 40, 28)],
)
def test_gradient_memory_within_the_stated_bound(frames: int, batch: int, length: int, classes: int) -> None:
    inputs, mask, labels = case(frames, batch, length, classes)
    peak, (_, grad) = traced_peak(ctcop.ctc_loss_grad, inputs, mask, labels)
    bound = gradient_bound(frames, batch, classes, 2 * length + 1)
    assert peak - grad.nbytes < bound, (peak / MB, grad.nbytes / MB, bound / MB)


def test_gradient_memory_grows_slower_than_frames() -> None:
    # Checkpoints every K frames: quadrupling T at S = 1001 adds a few checkpoints, not 4x the tables.
    short, _ = traced_peak(ctcop.ctc_loss_grad, *case(2000, 1, 500, 5))
    long, _ = traced_peak(ctcop.ctc_loss_grad, *case(8000, 1, 500, 5))
    assert long < 1.3 * short, (short / MB, long / MB)
