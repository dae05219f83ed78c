"""SIGINT and SIGTERM while a command runs: each raises :class:`Interrupted`, which the command
turns into a report of what finished (``conformance``, ``eval``, ``bench``) and one line on stderr,
exit 128 + the signal's number."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_RECEIVED: list[int] = []  # the signal that interrupted this run, once one has


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``report`` is the partial report written, if any."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.name = signal.Signals(signum).name
        self.report: str | None = None
        self.finished = False  # the command's work was done (the report complete) when it came


def _on_signal(signum: int, _: FrameType | None) -> None:
    # Later signals are ignored: the command is already stopping its workers and writing its report.
    for other in _SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    _RECEIVED.append(signum)
    raise Interrupted(signum)


def interruption(error: BaseException) -> Interrupted | None:
    """The interruption behind ``error``: itself, or the signal received when a library turned the
    exception raised in its callback into its own (OpenVINO wraps it in a RuntimeError, which
    ctcop may have turned into an InvalidInputError); None when there was no signal."""
    if isinstance(error, Interrupted):
        return error
    return Interrupted(_RECEIVED[0]) if _RECEIVED else None


def raise_dropped() -> None:
    """Raise the :class:`Interrupted` of the signal received, if one was: called once a command's
    work has returned, it ends as interrupted when a library dropped the exception the signal
    raised in its callback (an exception raised in a ctypes callback, such as llvmlite's while
    numba compiles, is printed and lost)."""
    if _RECEIVED:
        raise Interrupted(_RECEIVED[0])


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the block (signal handlers live in the main
    thread: elsewhere nothing changes); once one has, both stay ignored after it, since the
    process is ending with that signal's code, even while the interpreter shuts down."""
    _RECEIVED.clear()
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {signum: signal.signal(signum, _on_signal) for signum in _SIGNALS} if in_main_thread else {}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if _RECEIVED else handler)
