"""Reading untrusted IR files and writing models; a Core that knows ctcop's extensions."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from functools import cache
from typing import Any

import openvino

from ..errors import InvalidInputError
from .extensions import openvino_extensions


@cache
def openvino_core() -> openvino.Core:
    """An ``openvino.Core`` with ctcop's extensions added (one per process)."""
    core = openvino.Core()
    for extension in openvino_extensions():
        core.add_extension(extension)
    return core


def save_ir(model: Any, path: str) -> None:
    """Write ``model`` as IR (``path`` .xml plus .bin) with OpenVINO's serializer, weights uncompressed."""
    try:
        openvino.save_model(model, path, compress_to_fp16=False)
    except (OSError, RuntimeError) as error:
        raise InvalidInputError("output", f"cannot write {path!r}: {error}") from None


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for the duration (native libraries write to it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def load_ir(path: str) -> Any:
    """Read an IR (or any OpenVINO-readable) model from an untrusted file, with ctcop's extensions."""
    try:
        with _native_stderr_silenced():  # frontends probing an unknown file log to fd 2 themselves
            return openvino_core().read_model(path)
    except Exception as error:  # OpenVINO raises RuntimeError subclasses for every parse failure
        message = str(error).strip().splitlines()
        raise InvalidInputError("model", f"cannot read {path!r}: {message[-1] if message else error}") from None
