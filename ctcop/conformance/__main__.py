"""Worker entry point of the conformance runner: ``python -m ctcop.conformance RUNTIME START PATTERN``."""

import sys

from .runner import worker

worker(sys.argv[1], int(sys.argv[2]), sys.argv[3])
