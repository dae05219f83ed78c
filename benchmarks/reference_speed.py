"""Time the reference evaluator at seed 001's (warp-ctc) benchmark shapes and print a table.

T = 150 frames; (L = 40, C = 28) and (L = 20, C = 5000); batch sizes 1..128; float32 logits.
Run: python benchmarks/reference_speed.py [--grad] [--repeat K]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import ctcop


def case(frames: int, batch: int, length: int, classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(frames, batch, classes)).astype(np.float32)
    mask = np.ones((frames, batch), dtype=np.int32)
    labels = np.full((batch, frames), -1, dtype=np.int64)
    labels[:, :length] = rng.integers(0, classes - 1, size=(batch, length))
    return inputs, mask, labels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--grad", action="store_true", help="time ctc_loss_grad instead of ctc_loss")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    function = ctcop.ctc_loss_grad if args.grad else ctcop.ctc_loss
    print(f"{function.__name__}, T=150, best of {args.repeat}")
    print(f"{'L':>4} {'C':>6} {'N':>5} {'ms':>10} {'ms/sample':>10}")
    for length, classes in ((40, 28), (20, 5000)):
        for batch in (1, 16, 32, 64, 128):
            inputs, mask, labels = case(150, batch, length, classes)
            best = min(_timed(function, inputs, mask, labels) for _ in range(args.repeat))
            print(f"{length:>4} {classes:>6} {batch:>5} {best * 1e3:>10.2f} {best * 1e3 / batch:>10.3f}")


def _timed(function: Callable[..., Any], inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray) -> float:
    start = time.perf_counter()
    function(inputs, mask, labels)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
