"""Reading untrusted ONNX files and writing models; failures are :class:`InvalidInputError`."""

from __future__ import annotations

import onnx

from ..errors import InvalidInputError


def load_onnx(path: str) -> onnx.ModelProto:
    """Read an ONNX model from an untrusted file; any failure is an :class:`InvalidInputError`."""
    try:
        return onnx.load(path)
    except Exception as error:  # OSError, protobuf's DecodeError, ...: all mean "not a readable model"
        raise InvalidInputError("model", f"cannot read {path!r} as ONNX: {type(error).__name__}: {error}") from None


def save_onnx(model: onnx.ModelProto, path: str) -> None:
    """Write ``model``; an unwritable path is an :class:`InvalidInputError`."""
    try:
        onnx.save(model, path)
    except OSError as error:
        raise InvalidInputError("output", f"cannot write {path!r}: {error.strerror}") from None
