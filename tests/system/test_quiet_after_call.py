"""Once a call has returned, nothing of ctcop's runs: no thread computes, spins or naps.

A fresh interpreter (so that no other library's threads are there) makes 100 small calls and one
large call on two threads, then measures its own CPU time and its threads' states."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROGRAM = r"""
import json, os, time
import numpy as np
import ctcop

ctcop.set_num_threads(2)
rng = np.random.default_rng(0)
def batch(frames, samples, classes):
    logits = rng.normal(size=(frames, samples, classes))
    labels = np.full((samples, frames), -1)
    labels[:, :2] = 1
    return logits, np.ones((frames, samples), int), labels
small, large = batch(5, 16, 11), batch(50, 64, 28)
for _ in range(100):
    ctcop.ctc_loss(*small)
    ctcop.ctc_loss_grad(*small)
ctcop.ctc_loss_grad(*large)  # the pool's threads
time.sleep(0.05)

cpu = time.process_time  # this process's CPU time, every thread's, to the nanosecond
def states():
    found = {}
    for task in os.listdir("/proc/self/task"):
        if int(task) == os.getpid():
            continue
        with open(f"/proc/self/task/{task}/stat") as stat:
            text = stat.read()
        found[task] = text[text.rindex(")") + 2]
    return found
before, seen = cpu(), states()
time.sleep(0.5)
print(json.dumps({"cpu": cpu() - before, "states": seen}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the threads' states from /proc")
def test_no_thread_runs_and_no_cpu_is_used_after_a_call() -> None:
    """50 ms after the last call: every thread but the main one sleeps (state S), and the next
    half second costs the process no more than the main thread's wake-up from its sleep."""
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=600, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(state == "S" for state in seen["states"].values()), seen
    assert seen["cpu"] <= 0.002, seen
