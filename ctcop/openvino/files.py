"""Reading untrusted IR files and writing models; a Core that knows ctcop's extensions."""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Any

import openvino

from ..errors import InvalidInputError
from ..files import atomic_output, checked_input_file
from ..process.native_stderr import native_stderr_silenced
from .extensions import openvino_extensions

# Lines of an OpenVINO exception that say where, not what: "Exception from src/...:84:",
# "Check 'bin_file' failed at src/...:124:", "FrontEnd API failed with GeneralFailure:".
_WHERE = re.compile(r"^(Exception from |Check '.*' failed at )|:$")


def error_line(error: BaseException) -> str:
    """An OpenVINO exception's message in one line: the lines that say what went wrong, joined
    (its messages span several lines: where it was raised, which check failed, then the reason,
    sometimes in two steps such as "Converting input model" and the actual fault)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    meaningful = [line for line in lines if not _WHERE.search(line)]
    text = "; ".join(meaningful or lines[:1]) or type(error).__name__
    return text if len(text) <= 400 else text[:399] + "\u2026"


VIRTUAL_DEVICES = ("AUTO", "HETERO", "MULTI", "BATCH")


def checked_device(device: str) -> str:
    """``device`` when OpenVINO has it here: one of ``available_devices`` (``GPU.1`` or ``GPU``),
    or a virtual device (``AUTO``, ``HETERO:GPU,CPU``, ``BATCH:GPU(4)``) over such devices."""
    available = list(openvino_core().available_devices)
    known = set(available) | {name.split(".")[0] for name in available}
    head, colon, rest = device.partition(":")
    parts = [part.split("(")[0] for part in rest.split(",")] if colon else []
    if head in VIRTUAL_DEVICES and all(part in known for part in parts):
        return device
    if not colon and head in known:
        return device
    raise InvalidInputError("device", f"{device!r} is not an OpenVINO device here; have {', '.join(available)}")


@cache
def openvino_core() -> openvino.Core:
    """An ``openvino.Core`` with ctcop's extensions added (one per process)."""
    core = openvino.Core()
    for extension in openvino_extensions():
        core.add_extension(extension)
    return core


def save_ir(model: Any, path: str) -> None:
    """Write ``model`` as IR (``path`` .xml plus .bin) with OpenVINO's serializer, weights
    uncompressed, atomically (temporary files in the same folder, renamed .bin first)."""
    if not path.endswith(".xml"):  # OpenVINO's own check, before any temporary file exists
        raise InvalidInputError("output", f"cannot write {path!r}: an IR's path must end in .xml")
    try:
        with atomic_output(path, ".xml", (".bin",)) as temporary:
            openvino.save_model(model, temporary, compress_to_fp16=False)
    except (OSError, RuntimeError) as error:
        raise InvalidInputError("output", f"cannot write {path!r}: {error_line(error)}") from None


def read_model_file(path: str, weights: str | None = None, shown: str | None = None) -> Any:
    """``openvino_core().read_model(path, weights)`` with native logging silenced; a failure is an
    :class:`InvalidInputError` naming the file ``shown`` (default ``path``). No checks of the files."""
    try:
        with native_stderr_silenced():  # frontends probing an unknown file log to fd 2 themselves
            core = openvino_core()
            return core.read_model(path) if weights is None else core.read_model(path, weights)
    except Exception as error:  # OpenVINO raises RuntimeError subclasses for every parse failure
        raise InvalidInputError("model", f"cannot read {shown or path!r}: {error_line(error)}") from None


def load_ir(path: str) -> Any:
    """Read an IR (or any OpenVINO-readable) model from an untrusted file, with ctcop's extensions.
    The file, and an IR's ``.bin`` when there is one, must be regular files within the size limit."""
    checked_input_file(path, "model")
    weights = path[:-4] + ".bin" if path.endswith(".xml") else ""
    if weights and os.path.lexists(weights):
        checked_input_file(weights, "model")
    return read_model_file(path)
