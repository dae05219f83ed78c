"""Time CTCLoss-4 runtimes at seed 001's shapes (T = 150; L = 40, C = 28 and L = 20, C = 5000).

Prints, per shape, the median wall time of one batch through each runtime adapter of
``ctcop.conformance.runtimes`` (models are built and compiled before timing; inputs are float32; every target
is non-empty and feasible, since OpenVINO's native kernel crashes on empty targets).
Run: python benchmarks/runtime_speed.py [--batch 64] [--repeat 7] [--runtimes a,b,...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from reference_speed import case  # same shapes and data as the reference benchmark

from ctcop.conformance import runtimes
from ctcop.conformance.runtimes import RUNTIMES

runtimes.ONNXRUNTIME_THREADS = 0  # onnxruntime's default threading, as users run it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--runtimes", default="reference,onnxruntime,openvino-onnx,openvino")
    args = parser.parse_args()
    names = args.runtimes.split(",")
    print(f"T=150, N={args.batch}, float32, median of {args.repeat} runs, milliseconds")
    print(f"{'L':>4} {'C':>6} " + " ".join(f"{name:>14}" for name in names))
    for length, classes in ((40, 28), (20, 5000)):
        inputs, mask, labels = case(150, args.batch, length, classes)
        cells = []
        for name in names:
            runtime = RUNTIMES[name]
            runtime(inputs, mask, labels)  # build, compile, warm up
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                runtime(inputs, mask, labels)
                times.append(time.perf_counter() - start)
            cells.append(f"{statistics.median(times) * 1e3:>14.2f}")
        print(f"{length:>4} {classes:>6} " + " ".join(cells))


if __name__ == "__main__":
    main()
