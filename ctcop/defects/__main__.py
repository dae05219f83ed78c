"""``python -m ctcop.defects FILE...``: rewrite the defect blocks of the files in place."""

import sys

from . import main

sys.exit(main(sys.argv[1:]))
