"""A process's first call with numba's cache empty, then again with the cache that call filled.

The one test that compiles the kernels into an empty cache: every other test shares the run's warm
one (``NUMBA_CACHE_DIR`` in tests/conftest.py). The first process compiles the one-sample loss and
writes it to the cache; the second loads it from there, compiles nothing, and gives the same bits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import ctcop

PROGRAM = """
import json
import numpy as np
import ctcop
from ctcop.core import kernels
logits = np.random.default_rng(0).standard_normal((30, 2, 28)).astype(np.float32)
labels = np.full((2, 30), -1)
labels[0, :3], labels[1, :2] = [7, 7, 3], [4, 1]
loss = ctcop.ctc_loss(logits, np.ones((30, 2), bool), labels)
stats = kernels.batch_loss.stats
hits, misses = sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
print(json.dumps({"loss": loss.tobytes().hex(), "hits": hits, "misses": misses}))
"""


def first_call(cache: Path) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_first_process_compiles_into_the_cache_and_the_next_loads_it(tmp_path: Path) -> None:
    logits = np.random.default_rng(0).standard_normal((30, 2, 28)).astype(np.float32)
    labels = np.full((2, 30), -1)
    labels[0, :3], labels[1, :2] = [7, 7, 3], [4, 1]
    expected = ctcop.ctc_loss(logits, np.ones((30, 2), bool), labels).tobytes().hex()

    cold = first_call(tmp_path)
    assert (cold["hits"], cold["misses"]) == (0, 1) and cold["loss"] == expected
    assert list(tmp_path.rglob("*.nbi")), "nothing written to the empty cache"
    warm = first_call(tmp_path)
    assert (warm["hits"], warm["misses"]) == (1, 0) and warm["loss"] == expected
