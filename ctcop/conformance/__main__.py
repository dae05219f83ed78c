"""``python -m ctcop.conformance ARGS`` is ``ctcop conformance ARGS`` (the runner forks its
workers from the running process; there is no separate worker entry point any more)."""

import sys

from ..cli import main

sys.exit(main(["conformance", *sys.argv[1:]]))
