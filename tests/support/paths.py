"""Where the checkout's parts are, for tests in any tier folder."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/: on a child Python's PYTHONPATH, `support` imports
ROOT = TESTS.parent  # the checkout: README.md, docs/, ctcop/
SUPPORT = TESTS / "support"
