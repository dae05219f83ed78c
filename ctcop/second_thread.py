"""The second thread that shares small batches with the calling thread (:mod:`ctcop.small_batch`).

One per process, started at the first small batch computed with two or more threads (see
:func:`ctcop.recursion.set_num_threads`): a daemon thread that sleeps until a call wakes it, then
waits in the compiled :func:`ctcop.small_batch.serve` for posted halves, spinning, and goes back
to sleep after about a second with none (spinning for about 200 microseconds, then napping
between looks at the control block). A call finds it awake when calls follow each
other closely (a training loop, a benchmark); one that finds it asleep computes alone and wakes it.
One call shares its batch at a time; the others compute alone. Results are the same bits either
way. A forked child starts without it and makes its own.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from . import small_batch


class SecondThread:
    """The thread and its arena (the control block and boxes for halves of up to ``capacity``
    logits)."""

    def __init__(self, capacity: int) -> None:
        self.arena = np.zeros(small_batch.CONTROL_BYTES + capacity * small_batch.ARENA_BYTES, np.uint8)
        self.control = small_batch.control_block(self.arena)
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="ctcop-second", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            small_batch.serve(self.arena, small_batch.SPINS, small_batch.NAPPING_US)


ALONE = np.zeros(0, np.uint8)  # an empty arena: compute alone
_lock = threading.Lock()
_second: SecondThread | None = None


def _after_fork_in_child() -> None:
    global _second, _lock
    _second, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def shared(capacity: int) -> np.ndarray:
    """The arena that the small-batch kernels share with the second thread (started, with boxes
    for halves of up to ``capacity`` logits, at the first call), or :data:`ALONE` where the system
    starts no thread."""
    global _second
    second = _second
    if second is None:
        with _lock:
            if _second is None:
                try:
                    _second = SecondThread(capacity)
                except RuntimeError:  # the system refuses another thread
                    return ALONE
            second = _second
    return second.arena


def wake(arena: np.ndarray, asked: bool) -> None:
    """Wake the second thread of ``arena`` if it sleeps, when ``asked`` (a kernel returned
    :data:`ctcop.small_batch.WAKE`) or when a batch left to the pool said in the control block that
    it WANTED the thread."""
    second = _second
    if second is not None and second.arena is arena and (asked or second.control[small_batch.WANTED]):
        second.wake.set()
