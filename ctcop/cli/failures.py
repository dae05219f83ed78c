"""How a command that did not return ends: one line on stderr and its exit code
(:class:`ctcop.exit_codes.ExitCode`)."""

from __future__ import annotations

import os
import signal
import sys

from ..errors import InvalidInputError
from ..exit_codes import ExitCode, signalled
from ..text import described
from .output import one_line
from .signals import interruption


def failure(error: BaseException) -> int:
    """One line on stderr for ``error`` and the exit code; an interruption comes first, whatever
    a library turned it into."""
    interrupted = interruption(error)
    if interrupted is not None:
        kind = "report" if interrupted.finished else "partial report"
        where = f"{kind} in {interrupted.report}" if interrupted.report else "no report written"
        print(f"ctcop: interrupted by {interrupted.name}; {where}", file=sys.stderr)
        return signalled(interrupted.signum)
    if isinstance(error, BrokenPipeError):  # stdout closed early (``ctcop ... | head -1``): as SIGPIPE would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return signalled(signal.SIGPIPE)
    if isinstance(error, SystemExit):  # --help, --version and usage errors (already printed)
        return error.code if isinstance(error.code, int) else (ExitCode.OK if error.code is None else ExitCode.USAGE)
    if isinstance(error, InvalidInputError):
        print(f"ctcop: invalid input: {one_line(str(error))}", file=sys.stderr)
        return ExitCode.USAGE
    if isinstance(error, OSError):  # the file system refused something after the checks (disk full, ...)
        print(f"ctcop: {one_line(str(error)) or type(error).__name__}", file=sys.stderr)
        return ExitCode.USAGE
    if isinstance(error, Exception):  # a bug of ctcop: still one line
        print(f"ctcop: internal error: {described(error)}", file=sys.stderr)
        return ExitCode.INTERNAL
    raise error
