"""Untrusted model and input files: every refusal is one :class:`InvalidInputError`.

Limits (documented in the README): a model file of at most ``MAX_FILE_BYTES``; XML with a DOCTYPE
or an entity declaration is refused before OpenVINO parses it; ONNX external data must stay inside
the model's folder; npz files are read without pickle, and no array (from the npz, or drawn at
random from the model's shapes) may hold more than ``MAX_TENSOR_BYTES``.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..options import MAX_FILE_BYTES, MAX_TENSOR_BYTES, checked_input_file

__all__ = ["MAX_FILE_BYTES", "MAX_TENSOR_BYTES", "ModelFile", "checked_model_file", "load_inputs", "load_onnx_model"]
_XML_SCAN_BYTES = 1 << 20


@dataclass(frozen=True)
class ModelFile:
    """A model file that passed the checks: ``kind`` "ir" (``.xml`` with its ``.bin``) or "onnx".
    For IR, ``ctc_attributes`` holds each CTCLoss layer's attributes as the XML writes them:
    OpenVINO's reader turns a value it does not understand (``unique="maybe"``) into a default,
    so validation reads the text."""

    path: str
    kind: str
    ctc_attributes: dict[str, dict[str, str]] = field(default_factory=dict)


def checked_model_file(path: str) -> ModelFile:
    """``path`` as an IR or ONNX model file, or an :class:`InvalidInputError` saying why not."""
    checked_input_file(path, "model")
    if path.endswith(".xml"):
        weights = path[:-4] + ".bin"
        if not os.path.exists(weights):
            raise InvalidInputError("model", f"{path!r} has no weights file {os.path.basename(weights)!r} beside it")
        checked_input_file(weights, "model")
        with open(path, "rb") as file:
            head = file.read(_XML_SCAN_BYTES)
        if b"<!DOCTYPE" in head.upper() or b"<!ENTITY" in head.upper():
            raise InvalidInputError("model", f"{path!r}: XML with a DOCTYPE or entity declaration is refused")
        return ModelFile(path, "ir", _read_ir_layers(path, os.path.getsize(weights)))
    if path.endswith(".onnx"):
        return ModelFile(path, "onnx")
    raise InvalidInputError("model", f"{path!r}: expected an IR .xml (with its .bin) or an .onnx file")


def _read_ir_layers(path: str, weights_size: int) -> dict[str, dict[str, str]]:
    """The attributes of each CTCLoss layer, by layer name, after checking that every Const
    layer's declared ``offset``/``size`` lies inside the ``.bin`` and within the tensor limit,
    before OpenVINO maps anything (the XML holds no DOCTYPE, so the parser expands nothing)."""
    try:
        layers = ElementTree.parse(path).getroot().iter("layer")
    except ElementTree.ParseError as error:
        raise InvalidInputError("model", f"{path!r} is not well-formed XML: {error}") from None
    ctc_attributes = {}
    for layer in layers:
        data = layer.find("data")
        if layer.get("type") == "CTCLoss" and data is not None:
            ctc_attributes[layer.get("name", "")] = dict(data.attrib)
        if layer.get("type") != "Const" or data is None or "size" not in data.attrib:
            continue
        try:
            offset, size = int(data.get("offset", "0")), int(data.get("size", "0"))
        except ValueError:
            raise InvalidInputError("model", f"Const {layer.get('name')!r}: offset/size are not integers") from None
        if size > MAX_TENSOR_BYTES or offset < 0 or size < 0 or offset + size > weights_size:
            raise InvalidInputError(
                "model",
                f"Const {layer.get('name')!r} declares {size} bytes at offset {offset}: outside the "
                f"{weights_size}-byte .bin or over the {MAX_TENSOR_BYTES}-byte limit",
            )
    return ctc_attributes


def load_onnx_model(path: str) -> Any:
    """An ONNX model from an untrusted file, external data checked before it is read."""
    from ..onnx.files import load_onnx

    return load_onnx(path)


def load_inputs(path: str) -> dict[str, np.ndarray]:
    """The arrays of an npz file (no pickle), each within the tensor limit."""
    checked_input_file(path, "inputs")
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise InvalidInputError("inputs", f"{path!r} is not an npz archive")
        with archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        if isinstance(error, InvalidInputError):
            raise
        raise InvalidInputError("inputs", f"cannot read {path!r} as npz: {str(error).splitlines()[0]}") from None
    for name, array in arrays.items():
        if array.nbytes > MAX_TENSOR_BYTES:
            raise InvalidInputError("inputs", f"{name!r} holds {array.nbytes} bytes, over {MAX_TENSOR_BYTES}")
    return arrays
