"""The CPUs this process may run on, and the most threads a ctcop pool or session takes. Core
module: imports the standard library only."""

from __future__ import annotations

import os

# The largest thread count accepted (a larger one is InvalidInputError): far above any CPU count
# ctcop can use, far below what exhausts a process's threads.
MAX_THREADS = 1024


def usable_cpus() -> int:
    """The CPUs this process may run on: its CPU affinity where the system has one, else every
    CPU; at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1
