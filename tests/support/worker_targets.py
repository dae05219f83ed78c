"""What the crash-isolated workers of tests/system/test_isolated.py run (``support.worker_targets:NAME``):
an echo, a refusal, an end by a signal or an exit code, a grandchild started and no answer,
SIGINT sent to itself, and what a worker sees of its process group, path and environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def echo(request: Any) -> Any:
    return request


def refuse(request: Any) -> None:
    raise ValueError(f"no {request}\nsecond line")


def end_by(request: dict[str, Any]) -> None:
    if "signal" in request:
        os.kill(os.getpid(), getattr(signal, request["signal"]))
    os._exit(request["code"])


def start_then_hang(request: Any) -> None:
    """Start a grandchild, say its pid in a file, and never answer."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    Path(request).write_text(str(sleeper.pid))
    time.sleep(3600)


def interrupt_self(request: Any) -> str:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.2)
    return "still here"


def describe(request: Any) -> dict[str, Any]:
    print(request, flush=True)
    return {"pid": os.getpid(), "group": os.getpgid(0), "path": sys.path}


def environment(request: Any) -> dict[str, Any]:
    return {"variable": os.environ.get(request), "path": sys.path, "group": os.getpgid(0), "pid": os.getpid()}
