"""Native libraries' own writes to standard error, silenced where they are noise.

TensorFlow logs to file descriptor 2 from native code while it starts, whatever
``TF_CPP_MIN_LOG_LEVEL`` says, and OpenVINO's frontends log there while they probe a file they do
not read: Python's ``sys.stderr`` does not see either, so only the descriptor can be redirected.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 on /dev/null for the duration (the library's exceptions still raise)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
