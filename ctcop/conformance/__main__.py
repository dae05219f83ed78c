"""Worker entry point of the conformance runner: ``python -m ctcop.conformance RUNTIME START PATTERN``.

SIGINT is ignored from here on (a Ctrl-C reaches the whole process group; the parent stops its
workers itself and writes the report)."""

import signal
import sys

signal.signal(signal.SIGINT, signal.SIG_IGN)

from .runner import worker  # noqa: E402

worker(sys.argv[1], int(sys.argv[2]), sys.argv[3])
