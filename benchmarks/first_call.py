"""Time a process's first ctcop call, with numba's cache empty and with it filled.

Each row runs in a fresh interpreter, timed from its first statement to the call's return: what a
user waits for from the start of a script (imports, compilation or the cache's load, the call). The
empty cache is a new ``NUMBA_CACHE_DIR``; the filled one is the same directory again, after the
cold row of the same call has filled it.

    python benchmarks/first_call.py [--repeat K]    # the median of K fresh processes per row
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

# (row, call, T, N, C): a small batch (the one-sample loss), a batch of one shape that the loss
# computes in lanes, and the gradient
ROWS = (
    ("ctc_loss, small batch", "ctc_loss", 30, 2, 28),
    ("ctc_loss, batch in lanes", "ctc_loss", 5, 16, 11),
    ("ctc_loss_grad, small batch", "ctc_loss_grad", 30, 2, 28),
)

CHILD = """
import time
start = time.perf_counter()
import numpy as np
import ctcop
T, N, C = {T}, {N}, {C}
logits = np.random.default_rng(0).standard_normal((T, N, C)).astype(np.float32)
labels = np.full((N, T), -1)
labels[:, : T // 3] = 1
ctcop.{call}(logits, np.ones((T, N), bool), labels)
print(time.perf_counter() - start)
"""


def _seconds(call: str, shape: tuple[int, int, int], cache: str) -> float:
    """Seconds from a fresh interpreter's first statement to the return of its first ``call``."""
    steps, batch, classes = shape
    code = CHILD.format(T=steps, N=batch, C=classes, call=call)
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per row (default 3)")
    repeat = parser.parse_args().repeat
    print(
        f"{'first call':<28} {'T, N, C':>11} {'cache empty':>12} {'cache filled':>13}   (seconds, median of {repeat})"
    )
    for row, call, *shape in ROWS:
        cold, warm = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as cache:
                cold.append(_seconds(call, (shape[0], shape[1], shape[2]), cache))
                warm.append(_seconds(call, (shape[0], shape[1], shape[2]), cache))
        dims = ", ".join(map(str, shape))
        print(f"{row:<28} {dims:>11} {statistics.median(cold):12.2f} {statistics.median(warm):13.2f}")


if __name__ == "__main__":
    main()
