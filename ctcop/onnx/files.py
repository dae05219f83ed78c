"""Reading untrusted ONNX files and writing models; failures are :class:`InvalidInputError`.

Limits: the model file is a regular file of at most ``MAX_FILE_BYTES``; external data must be
regular files inside the model's folder; no initializer may declare more than ``MAX_TENSOR_BYTES``.
"""

from __future__ import annotations

import math
import os

import onnx
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from ..errors import InvalidInputError
from ..options import MAX_TENSOR_BYTES, atomic_output, checked_input_file


def check_external_data(model: onnx.ModelProto, path: str) -> None:
    """Refuse ONNX external data whose location leaves the model's folder or is not a regular file."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for tensor in model.graph.initializer:
        if not uses_external_data(tensor):
            continue
        location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
        target = os.path.realpath(os.path.join(folder, location))
        if os.path.isabs(location) or os.path.commonpath([folder, target]) != folder:
            raise InvalidInputError(
                "model", f"initializer {tensor.name!r}: external data {location!r} is outside {folder}"
            )
        checked_input_file(target, "model")


def _check_initializer_sizes(model: onnx.ModelProto) -> None:
    for tensor in model.graph.initializer:
        try:
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except (KeyError, ValueError, TypeError):
            itemsize = 8
        declared = math.prod(int(d) for d in tensor.dims) * itemsize
        if declared > MAX_TENSOR_BYTES:
            raise InvalidInputError(
                "model",
                f"initializer {tensor.name!r} declares {declared} bytes, over the {MAX_TENSOR_BYTES}-byte limit",
            )


DEFAULT_DOMAINS = ("", "ai.onnx")


def known_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain opset (None when it imports none); one newer than the installed
    onnx knows is an :class:`InvalidInputError` (no reader can know what its nodes mean, and
    OpenVINO's reader takes time in proportion to the declared number)."""
    versions = [op.version for op in model.opset_import if op.domain in DEFAULT_DOMAINS]
    own = max(versions) if versions else None
    newest = onnx.defs.onnx_opset_version()
    if own is not None and own > newest:
        raise InvalidInputError(
            "model", f"default-domain opset {own} is newer than onnx {onnx.__version__} knows (at most {newest})"
        )
    return own


def load_onnx(path: str) -> onnx.ModelProto:
    """Read an ONNX model from an untrusted file, checking the file and its external data before
    reading them; any failure is an :class:`InvalidInputError`."""
    checked_input_file(path, "model")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as error:  # OSError, protobuf's DecodeError, ...: all mean "not a readable model"
        raise InvalidInputError("model", f"cannot read {path!r} as ONNX: {type(error).__name__}") from None
    known_opset(model)
    check_external_data(model, path)
    _check_initializer_sizes(model)
    try:
        load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InvalidInputError("model", f"{path!r}: cannot read its external data: {reason}") from None
    return model


def save_onnx(model: onnx.ModelProto, path: str) -> None:
    """Write ``model`` atomically (a temporary file in the same folder, then a rename); an
    unwritable path is an :class:`InvalidInputError`."""
    try:
        with atomic_output(path) as temporary:
            onnx.save(model, temporary)
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error).splitlines()[0]
        raise InvalidInputError("output", f"cannot write {path!r}: {reason}") from None
