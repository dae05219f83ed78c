"""The exit codes of the ``ctcop`` command, in one table (the README's "Errors and interruptions").

Core module, standard library only: the light entry point (:mod:`ctcop.console`) uses it before
anything else is imported.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURES = 1  # the command ran and found failures: a runtime, a layer or an implementation disagrees
    USAGE = 2  # invalid usage or input, refused before any work; a file system refusal after it
    INTERNAL = 3  # a bug of ctcop
    SIGNALLED = 128  # plus the signal's number: 130 SIGINT, 143 SIGTERM, 141 SIGPIPE (a closed stdout)


def signalled(signum: int) -> int:
    """The exit code of a command ended by signal ``signum``."""
    return ExitCode.SIGNALLED + signum
