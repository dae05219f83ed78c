"""The ``ctcop`` command's entry point, light enough to take over SIGINT and SIGTERM before the
command line module and the core (numpy, numba) are imported: a signal during those imports ends
the command with one line on stderr and exit 130 / 143, as it does once a command runs; once the
command has returned, the process ends with its code whatever arrives. (A signal in the first
few milliseconds, while Python itself starts, is Python's to report.)"""

from __future__ import annotations

import signal
import sys
from types import FrameType

from .exit_codes import signalled


class _Stopped(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, _: FrameType | None) -> None:
    for other in (signal.SIGINT, signal.SIGTERM):
        signal.signal(other, signal.SIG_IGN)
    raise _Stopped(signum)


def main() -> int:
    """Import the command line (interruptible), then run it (:func:`ctcop.cli.main`)."""
    previous = {signum: signal.signal(signum, _stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        from .cli import main as run
    except _Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        print(f"ctcop: interrupted by {name} while starting; nothing was done", file=sys.stderr)
        return signalled(stopped.signum)
    for signum, handler in previous.items():
        signal.signal(signum, handler)
    code = run()
    for signum in previous:  # the work is done and the process is ending with its code
        signal.signal(signum, signal.SIG_IGN)
    return code
