"""``python -m ctcop.conformance ARGS`` is ``ctcop conformance ARGS``."""

import sys

from ..cli import main

sys.exit(main(["conformance", *sys.argv[1:]]))
