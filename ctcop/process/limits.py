"""How much memory this process may use: the machine's, its container's and ``ulimit -v``'s limits
(read by :func:`ctcop.canonical.check_size` before a large input's working copies are made)."""

from __future__ import annotations

import os
from functools import cache

try:
    import resource
except ImportError:  # not on Unix: no ulimit
    resource = None  # type: ignore[assignment]


@cache  # constant for the life of the process
def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def _address_space_left() -> int | None:
    """What ``RLIMIT_AS`` (``ulimit -v``) leaves this process beyond its current size."""
    if resource is None:
        return None
    try:
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm", encoding="ascii") as statm:
            size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        return max(0, limit - size)
    except (OSError, ValueError, IndexError):
        return None


@cache  # read once per process: a limit set later is met by refusing_memory_errors
def _cgroup_limit() -> int | None:
    """The memory limit of this process's control group (cgroup v2 ``memory.max``), if any."""
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as limit:
            text = limit.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


@cache  # both are read once per process
def _fixed_budget() -> int | None:
    """The least of this machine's physical memory and the container's limit (None where the
    system says neither)."""
    known = [size for size in (_physical_memory(), _cgroup_limit()) if size is not None]
    return min(known) if known else None


def memory_budget() -> int | None:
    """The bytes of working memory the inputs of one call may need: the least of this machine's
    physical memory, the container's limit and what ``ulimit -v`` leaves (None where the system
    says none of them)."""
    known = [size for size in (_fixed_budget(), _address_space_left()) if size is not None]
    return min(known) if known else None
