"""Peak memory of an implementation's call, relative to the bytes of its float32 logits.

Method: a fresh child process (``python -m ctcop.bench.memory``) draws the inputs, calls the
implementation once on one sample of the same [T, C] (so that JIT compilation and one-time
set-up are not counted), prepares it for the inputs (model built, inputs laid out, as for
timing) and collects garbage; its resident set size then is the baseline. Linux's peak resident
size (``VmHWM`` of ``/proc/self/status``) is reset to the current one (``5`` written to
``/proc/self/clear_refs``), the call runs, and the peak minus the baseline is the first call's
memory; the peak is reset again and two more calls run: their peak minus the same baseline is
what later calls hold (allocator pools and arenas kept from the first call included). Resident
memory counts what native code touches, which tracemalloc cannot see; pages reserved but never
touched do not count. Linux only (elsewhere :func:`measure` answers why not). The result of the
call (the [N] losses, or the [T, N, C] gradient of ``ctcop-grad``) is part of its memory.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from .shapes import Shape

STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"
TIMEOUT_S = 600
METHOD = (
    "peak RSS (VmHWM, reset by /proc/self/clear_refs) above the RSS before the call, "
    "in a fresh child process, after a call on one sample"
)


@dataclass(frozen=True)
class Memory:
    """What ``implementation`` held at ``shape`` and ``batch``, as multiples of the logits' bytes."""

    implementation: str
    shape: Shape
    batch: int
    first: float | None = None
    later: float | None = None
    error: str | None = None


def _status_kb(field: str) -> int:
    with open(STATUS, encoding="ascii") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"no {field} in {STATUS}")


def _reset_peak() -> None:
    with open(CLEAR_REFS, "w", encoding="ascii") as file:
        file.write("5")


def _peak_above(baseline_kb: int, calls: int, call: Any) -> int:
    _reset_peak()
    for _ in range(calls):
        call()
    return 1024 * (_status_kb("VmHWM") - baseline_kb)


def child(request: dict[str, Any]) -> dict[str, Any]:
    """In the child process: prepare, then measure the first call and two later ones (bytes)."""
    from . import implementations, threads
    from .shapes import draw

    threads.before_imports(request["threads"])
    shape = Shape(request["shape"], request["frames"], request["length"], request["classes"], (request["batch"],))
    inputs = draw(shape, request["batch"])
    implementation = implementations.IMPLEMENTATIONS[request["implementation"]]
    implementation.prepare(draw(shape, 1), request["threads"]).call()  # JIT compilation and set-up
    prepared = implementation.prepare(inputs, request["threads"])
    gc.collect()
    baseline = _status_kb("VmRSS")
    first = _peak_above(baseline, 1, prepared.call)
    later = _peak_above(baseline, 2, prepared.call)
    return {"first": first, "later": later, "logits_bytes": inputs.logits.nbytes}


def available() -> str | None:
    """None when peak resident memory can be measured here, else why not."""
    if not sys.platform.startswith("linux") or not os.path.exists(CLEAR_REFS):
        return f"needs Linux's {CLEAR_REFS}"
    return None


def measure(implementation: str, shape: Shape, batch: int, threads: int) -> Memory:
    """Run :func:`child` in a fresh process and read its answer."""
    why = available()
    if why is not None:
        return Memory(implementation, shape, batch, error=why)
    request = {
        "implementation": implementation,
        "shape": shape.name,
        "frames": shape.frames,
        "length": shape.length,
        "classes": shape.classes,
        "batch": batch,
        "threads": threads,
    }
    command = [sys.executable, "-m", "ctcop.bench.memory", json.dumps(request)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        answer = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as error:
        return Memory(implementation, shape, batch, error=f"{type(error).__name__}: {error}")
    if answer is None:
        lines = done.stderr.strip().splitlines()
        return Memory(implementation, shape, batch, error=lines[-1] if lines else f"exit {done.returncode}")
    size = answer["logits_bytes"]
    return Memory(implementation, shape, batch, answer["first"] / size, answer["later"] / size)


if __name__ == "__main__":  # pragma: no cover (run by measure, in a child process)
    print(json.dumps(child(json.loads(sys.argv[1]))))
