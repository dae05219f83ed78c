"""Peak memory of the reference (spec sections 4.5 and 5), measured as resident memory.

The compiled kernels allocate through numba's runtime, which tracemalloc does not see, so each
measurement runs in a fresh worker process (:mod:`ctcop.process.memory_probe`): it builds the inputs,
warms the kernels up on a tiny batch, resets the kernel's peak-RSS mark, makes the call and
reports the high-water mark above the resident size before the call. That counts everything the
call touches: its result, the per-sample work of every thread, and any copy of the logits.
"""

import math
import os
from typing import Any

import numpy as np
import pytest

import ctcop
from ctcop.core import scheduler
from ctcop.process import memory_probe

MB = 1e6
THREADS = 2

pytestmark = [
    pytest.mark.skipif(memory_probe.available() is not None, reason=str(memory_probe.available())),
]


def child(request: dict[str, Any]) -> dict[str, int]:
    """In a fresh worker: the peak of one call above the resident size before it, in bytes."""
    frames, batch, length, classes = (request[name] for name in ("frames", "batch", "length", "classes"))
    rng = np.random.default_rng(0)
    inputs = rng.standard_normal(size=(frames, batch, classes), dtype=np.float32)
    mask = np.ones((frames, batch), dtype=np.int32)
    labels = np.full((batch, frames), -1, dtype=np.int64)
    labels[:, :length] = rng.integers(0, classes - 1, size=(batch, length))
    call = getattr(ctcop, request["function"])
    call(inputs, mask, labels)  # compile or load the kernels this very call runs first
    results: list[Any] = []
    peak = memory_probe.peak(lambda: results.append(call(inputs, mask, labels)))
    grad_bytes = results[0][1].nbytes if isinstance(results[0], tuple) else 0
    return {"peak": peak, "grad_bytes": grad_bytes, "logits_bytes": inputs.nbytes}


def peak(function: str, frames: int, batch: int, length: int, classes: int) -> dict[str, int]:
    """Peak resident bytes above the level before one call, in a fresh worker on THREADS threads."""
    request = {"function": function, "frames": frames, "batch": batch, "length": length, "classes": classes}
    environment = {**os.environ, "CTCOP_NUM_THREADS": str(THREADS)}
    measured: dict[str, int] = memory_probe.measure(f"{__name__}:child", request, env=environment)
    return measured


def gradient_bound(frames: int, classes: int, states: int) -> float:
    """Spec section 5, per running sample: checkpoints and one segment of forward variables,
    (S + 2) (ceil(T / K) + ceil(T / ceil(T / K))) float64 with K = max(ceil(sqrt(T)),
    SEGMENT_ELEMENTS / (S + 2)), and O(S + C + T) work besides; THREADS samples run at once."""
    padded = states + 2
    length = min(frames, max(math.isqrt(max(frames - 1, 0)) + 1, scheduler.SEGMENT_ELEMENTS // padded))
    count = -(-frames // length)
    per_sample = 8.0 * (padded * (count + -(-frames // count)) + 8 * padded + 2 * classes + 2 * frames)
    return THREADS * per_sample


def test_loss_memory_at_20000_frames_and_10001_states() -> None:
    # A 400 KB input: a [T, N, S] emission table and a [T, N, S] forward history would take
    # 3.1 GB; the chunked forward pass keeps one frame of S states.
    measured = peak("ctc_loss", 20000, 1, 5000, 5)
    assert measured["peak"] < 8 * MB, measured


def test_loss_memory_does_not_grow_with_frames() -> None:
    # Same states (S = 1001), ten times the frames: the forward pass keeps O(S + C + T) per sample.
    short = peak("ctc_loss", 2000, 1, 500, 5)["peak"]
    long = peak("ctc_loss", 20000, 1, 500, 5)["peak"]
    assert long < short + 2 * MB, (short / MB, long / MB)


@pytest.mark.parametrize(
    ("frames", "batch", "length", "classes"),
    [
        (4000, 1, 1000, 5),
        (20000, 1, 5000, 5),
        (150, 64, 20, 5000),
        (150, 64, 40, 28),
    ],
)
def test_gradient_memory_within_the_stated_bound(frames: int, batch: int, length: int, classes: int) -> None:
    measured = peak("ctc_loss_grad", frames, batch, length, classes)
    bound = gradient_bound(frames, classes, 2 * length + 1)
    # 4 MB for the allocator's own rounding and the interpreter around the call
    assert measured["peak"] - measured["grad_bytes"] < bound + 4 * MB, (measured, bound / MB)


def test_gradient_memory_grows_slower_than_frames() -> None:
    # Checkpoints every K frames: quadrupling T at S = 1001 adds a few checkpoints, not 4x the tables.
    short = peak("ctc_loss_grad", 2000, 1, 500, 5)
    long = peak("ctc_loss_grad", 8000, 1, 500, 5)
    assert long["peak"] - long["grad_bytes"] < 1.3 * (short["peak"] - short["grad_bytes"]) + 2 * MB, (short, long)
