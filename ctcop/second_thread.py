"""The second thread that shares small batches with the calling thread (:mod:`ctcop.small_batch`).

One per process, made at the first batch of two or more samples computed on two or more threads
(see :func:`ctcop.recursion.set_num_threads`), and started by the first call that could have
shared its batch with it: that call loads the thread's compiled wait, :func:`ctcop.small_batch.serve`,
itself (so that the thread, which would need the GIL for it, does not slow the calls that follow),
then starts it. The thread sleeps until a call wakes it, then waits in ``serve`` for posted
batches, spinning (about 0.3 milliseconds on this project's machine), then napping between looks
at the control block (at most a millisecond each, where the C library has ``usleep``: not on
Windows), and goes back to sleep after about a second with none. A call finds it awake when
calls follow each other within that second (a training loop, a benchmark), and shares its batch
in chunks with it (a thread that comes late from a nap takes fewer); one that finds it asleep
computes alone (or, above the pool's threshold, on the pool) and wakes it. One call shares its
batch at a time; the others compute alone. Results are the same bits either way.
A forked child starts without it and makes its own.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from . import small_batch


class SecondThread:
    """The thread (started by :meth:`wake`) and its arena (the control block and boxes for batches
    of up to ``capacity`` logits)."""

    def __init__(self, capacity: int) -> None:
        self.arena = np.zeros(small_batch.CONTROL_BYTES + capacity * small_batch.ARENA_BYTES, np.uint8)
        self.control = small_batch.control_block(self.arena)
        self.sleeping = threading.Event()
        self.thread: threading.Thread | None = None

    def _serve(self) -> None:
        while True:
            self.sleeping.wait()
            self.sleeping.clear()
            small_batch.serve(self.arena, small_batch.SPINS, small_batch.NAPPING_US)

    def wake(self) -> bool:
        """Wake the thread, started first (or again, had it ended) if need be: whether it runs.
        It does not where the system refuses another thread or its wait cannot be compiled."""
        if self.thread is None or not self.thread.is_alive():
            try:
                small_batch.serve(np.zeros(small_batch.CONTROL_BYTES, np.uint8), 0, 0)  # loaded here, not there
                self.thread = threading.Thread(target=self._serve, name="ctcop-second", daemon=True)
                self.thread.start()
            except Exception:  # the thread is an optimisation: without it every call computes alone
                self.thread = None
                return False
        self.sleeping.set()
        return True


ALONE = np.zeros(0, np.uint8)  # an empty arena: compute alone
_lock = threading.Lock()
_second: SecondThread | None = None
_refused = False  # the system refused to start the thread: every call computes alone


def _after_fork_in_child() -> None:
    global _second, _lock, _refused
    _second, _lock, _refused = None, threading.Lock(), False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def shared(capacity: int) -> np.ndarray:
    """The arena that the small-batch kernels share with the second thread (made, with boxes for
    batches of up to ``capacity`` logits, at the first call), or :data:`ALONE` where the system
    starts no thread."""
    global _second
    second = _second
    if second is None:
        with _lock:
            if _second is None and not _refused:
                _second = SecondThread(capacity)
            if _second is None:
                return ALONE
            second = _second
    return second.arena


def wake(arena: np.ndarray, asked: bool) -> None:
    """Wake the second thread of ``arena`` (starting it the first time), when ``asked`` (a kernel
    returned :data:`ctcop.small_batch.WAKE`) or when a batch left to the pool said in the control
    block that it WANTED the thread."""
    global _second, _refused
    second = _second
    if second is None or second.arena is not arena or not (asked or second.control[small_batch.WANTED]):
        return
    with _lock:
        if not second.wake() and _second is second:
            _second, _refused = None, True
