"""``ctcop``'s command line called in-process, seen as a shell sees it: the exit code and what it
printed on stdout and stderr (a real process is for the tests of the entry point and signals)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from ctcop import cli


@dataclass(frozen=True)
class Ran:
    """One command's exit code and output, named as :class:`subprocess.CompletedProcess` names them."""

    returncode: int
    stdout: str
    stderr: str


def ctcop_cli(*args: str | os.PathLike[str]) -> Ran:
    """``ctcop ARGS`` through :func:`ctcop.cli.main` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(arg) for arg in args])
    return Ran(code, out.getvalue(), err.getvalue())


def ctcop_process(
    *args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python -m ctcop ARGS`` as a process of its own: the entry point as a user's shell runs it.
    ``timeout`` only guards against a hang."""
    command = [sys.executable, "-m", "ctcop", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def assert_refused(result: Ran, message: str) -> None:
    """Exit 2 and exactly one line on stderr, starting ``ctcop: `` and containing ``message``, no traceback."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.endswith("\n"), result.stderr
    assert result.stderr.startswith("ctcop: "), result.stderr
    assert message in result.stderr, result.stderr


def in_process(capsys: Any, *args: str | os.PathLike[str]) -> tuple[int, str, str]:
    """``ctcop ARGS`` through :func:`ctcop.cli.main` in this process, read through pytest's
    ``capsys``: exit code, stdout, stderr."""
    code = cli.main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_invalid_input(result: tuple[int, str, str], message: str) -> None:
    """Exit 2 and exactly one line on stderr, ``ctcop: invalid input: ...`` with ``message``."""
    code, out, err = result
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith("ctcop: invalid input: "), err
    assert message in err, err
