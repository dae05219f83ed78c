"""What the test modules share: oracles, models, runtimes and the command line called in-process.

pytest puts ``tests/`` on ``sys.path`` (its rootdir-relative import of the test modules, which are
not a package), so a test imports these as ``support.NAME``; no test module imports another.
"""
