"""Superseded by ``ctcop bench`` (see ``ctcop bench --help``): this runs it with the arguments given."""

import sys

from ctcop.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
