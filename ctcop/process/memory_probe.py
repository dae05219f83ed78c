"""Peak resident memory of a call, measured in a fresh worker process.

Resident memory counts what native code touches (numba's runtime, onnxruntime's arena, a
framework's allocator), which tracemalloc cannot see; pages reserved but never touched do not
count. Linux keeps a process's peak resident size (``VmHWM`` in ``/proc/self/status``) and resets
it to the current resident size when ``5`` is written to ``/proc/self/clear_refs``. :func:`peak`,
called in the worker, resets it, makes the calls and reads it back above a baseline; :func:`measure`
runs a function that does so in a fresh worker (:mod:`ctcop.process.workers`), so that nothing an
earlier measurement allocated is counted, and answers what it returned. Where the kernel keeps no
resettable peak, :func:`available` says why and nothing is measured. Core module: standard library
only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from .workers import call

STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"
TIMEOUT_S = 600.0


def available() -> str | None:
    """None when the peak resident memory can be reset and read here, else why not."""
    if not sys.platform.startswith("linux") or not os.path.exists(CLEAR_REFS):
        return f"needs Linux's {CLEAR_REFS} to reset the peak resident memory"
    return None


def _status_bytes(field: str) -> int:
    with open(STATUS, encoding="ascii") as file:
        for line in file:
            if line.startswith(field + ":"):
                return 1024 * int(line.split()[1])
    raise OSError(f"no {field} in {STATUS}")


def resident() -> int:
    """This process's resident memory now (``VmRSS``), in bytes."""
    return _status_bytes("VmRSS")


def peak(run: Callable[[], object], times: int = 1, above: int | None = None) -> int:
    """In a worker: the peak resident bytes while ``run`` is called ``times`` times, above
    ``above`` (the resident memory just before the calls when None)."""
    baseline = resident() if above is None else above
    with open(CLEAR_REFS, "w", encoding="ascii") as file:
        file.write("5")
    for _ in range(times):
        run()
    return _status_bytes("VmHWM") - baseline


def measure(target: str, request: Any, timeout_s: float = TIMEOUT_S, env: Mapping[str, str] | None = None) -> Any:
    """``target(request)`` (``package.module:function``; it measures with :func:`peak`) in a fresh
    worker, with the environment ``env`` (this one's by default): its answer.
    :class:`ctcop.process.workers.Failed` when it raised, :class:`ctcop.process.workers.Lost` when the worker
    died or gave no answer within ``timeout_s``."""
    return call(target, request, timeout_s, env=env)
