"""Untrusted model and input files: every refusal is one :class:`InvalidInputError` (spec 13).

Limits (documented in docs/errors.md): a model file of at most ``MAX_FILE_BYTES``; XML with a DOCTYPE
or an entity declaration is refused, in whatever encoding it declares, before anything is expanded,
and OpenVINO reads the XML as ctcop parsed it, CTCLoss layers told apart by IR layer id; constants
must be type ``Const`` and lie inside the ``.bin``; ONNX files as :mod:`ctcop.onnx.files` checks
them; npz files are read without pickle, each member an ``.npy`` whose declared size is checked
before anything is read, and no array (from the npz, or drawn at random from the model's shapes)
may hold more than ``MAX_TENSOR_BYTES``.
"""

from __future__ import annotations

import math
import os
import tempfile
import xml.etree.ElementTree as ElementTree
import zipfile
from dataclasses import dataclass, field
from typing import Any
from xml.parsers import expat

import numpy as np

from ..errors import InvalidInputError
from ..files import MAX_FILE_BYTES, MAX_TENSOR_BYTES, checked_input_file
from ..text import first_line

__all__ = [
    "IR_LAYER_ID",
    "MAX_FILE_BYTES",
    "MAX_TENSOR_BYTES",
    "ModelFile",
    "checked_model_file",
    "load_inputs",
    "load_ir_model",
    "load_onnx_model",
]


# The rt_info key under which :func:`load_ir_model` records each CTCLoss node's IR layer id.
IR_LAYER_ID = "ctcop_ir_layer_id"
_RENAMED = "ctcop-ir-layer-"


@dataclass(frozen=True)
class ModelFile:
    """A model file that passed the checks: ``kind`` "ir" (``.xml`` with its ``.bin``) or "onnx".
    For IR, ``ctc_attributes`` holds each CTCLoss layer's attributes as the XML writes them, by IR
    layer id: OpenVINO's reader turns a value it does not understand (``unique="maybe"``) into a
    default, so validation reads the text, and two layers may share a name (spec 13);
    ``nested_layers`` counts the CTCLoss layers inside bodies (If, Loop, TensorIterator), which
    ctcop does not evaluate."""

    path: str
    kind: str
    ctc_attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    nested_layers: int = 0


def checked_model_file(path: str) -> ModelFile:
    """``path`` as an IR or ONNX model file, or an :class:`InvalidInputError` saying why not."""
    checked_input_file(path, "model")
    if path.endswith(".xml"):
        weights = _checked_weights(path)
        root = _ir_tree(path)
        attributes = _read_ir_layers(path, root, os.path.getsize(weights))
        nested = sum(layer.get("type") == "CTCLoss" for layer in root.iter("layer")) - len(_ctc_layers(root))
        return ModelFile(path, "ir", attributes, nested)
    if path.endswith(".onnx"):
        return ModelFile(path, "onnx")
    raise InvalidInputError("model", f"{path!r}: expected an IR .xml (with its .bin) or an .onnx file")


def _checked_weights(path: str) -> str:
    weights = path[:-4] + ".bin"
    if not os.path.exists(weights):
        raise InvalidInputError("model", f"{path!r} has no weights file {os.path.basename(weights)!r} beside it")
    checked_input_file(weights, "model")
    return weights


# Deeper XML than an IR needs (its layers nest a few levels per If/Loop body): Python's own
# recursive serialisation of the tree would fail on it.
MAX_XML_DEPTH = 256


def _refuse_declarations(*_: Any) -> None:
    raise _Declaration("XML with a DOCTYPE or entity declaration is refused")


class _Declaration(Exception):
    """A DOCTYPE or entity declaration, or nesting beyond :data:`MAX_XML_DEPTH`, met while scanning."""


class _Depth:
    """Counts the open elements of the scan and refuses more than :data:`MAX_XML_DEPTH`."""

    def __init__(self) -> None:
        self.open = 0

    def start(self, *_: Any) -> None:
        self.open += 1
        if self.open > MAX_XML_DEPTH:
            raise _Declaration(f"XML nested deeper than {MAX_XML_DEPTH} elements is refused")

    def end(self, *_: Any) -> None:
        self.open -= 1


def _ir_tree(path: str) -> ElementTree.Element:
    """The XML of the IR at ``path``, parsed after a first pass has refused any DOCTYPE or entity
    declaration and nesting deeper than :data:`MAX_XML_DEPTH`. That pass is expat's own, so it
    decodes the file as its BOM or encoding declaration says (a UTF-16 file hides no ``<!DOCTYPE``
    from it), and it expands nothing."""
    scanner, depth = expat.ParserCreate(), _Depth()
    scanner.StartDoctypeDeclHandler = _refuse_declarations
    scanner.EntityDeclHandler = _refuse_declarations
    scanner.StartElementHandler, scanner.EndElementHandler = depth.start, depth.end
    try:
        with open(path, "rb") as file:
            scanner.ParseFile(file)
        return ElementTree.parse(path).getroot()
    except _Declaration as refusal:
        raise InvalidInputError("model", f"{path!r}: {refusal}") from None
    except (expat.ExpatError, ElementTree.ParseError, ValueError, LookupError) as error:
        reason = first_line(error)
        raise InvalidInputError("model", f"{path!r} is not well-formed XML: {reason}") from None


def _ctc_layers(root: ElementTree.Element) -> list[ElementTree.Element]:
    """The CTCLoss layers of the IR's main graph."""
    return [layer for layer in root.findall("./layers/layer") if layer.get("type") == "CTCLoss"]


def _read_ir_layers(path: str, root: ElementTree.Element, weights_size: int) -> dict[str, dict[str, str]]:
    """The attributes of each CTCLoss layer, by IR layer id, after checking that every Const
    layer's declared ``offset``/``size`` lies inside the ``.bin`` and within the tensor limit,
    before OpenVINO maps anything (the XML holds no DOCTYPE, so the parser expanded nothing).
    OpenVINO also takes a constant typed "Constant" (in any case) and builds it from its declared
    shape without reading the .bin: such a layer, in any graph or body, is refused."""
    ctc_attributes = {}
    for layer in _ctc_layers(root):
        data = layer.find("data")
        ctc_attributes[layer.get("id", "")] = {} if data is None else dict(data.attrib)
    for layer in root.iter("layer"):
        data = layer.find("data")
        kind = layer.get("type", "")
        if kind != "Const" and kind.lower() in ("const", "constant"):
            raise InvalidInputError(
                "model",
                f"layer {layer.get('name')!r} is a constant of type {kind!r}: OpenVINO builds it from its "
                f"declared shape without reading the .bin (its values undefined); constants must be type 'Const'",
            )
        if kind != "Const" or data is None or "size" not in data.attrib:
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


def load_ir_model(path: str) -> Any:
    """The IR at ``path`` as OpenVINO reads it, each CTCLoss node of its main graph carrying its IR
    layer id in its rt_info under :data:`IR_LAYER_ID` (layer names need not be unique). OpenVINO
    reads the XML as ctcop parsed and checked it, written out again with each CTCLoss layer
    renamed after its id; the names are restored on the nodes afterwards."""
    from ..openvino.files import read_model_file

    checked_input_file(path, "model")
    weights = _checked_weights(path)
    root = _ir_tree(path)
    names = {}
    for layer in _ctc_layers(root):
        names[layer.get("id", "")] = layer.get("name", "")
        layer.set("name", _RENAMED + layer.get("id", ""))
    with tempfile.TemporaryDirectory(prefix="ctcop-ir-") as folder:
        copy = os.path.join(folder, "model.xml")
        ElementTree.ElementTree(root).write(copy, encoding="utf-8", xml_declaration=True)
        model = read_model_file(copy, weights, shown=path)
    for node in model.get_ops():
        name = node.get_friendly_name()
        if node.get_type_name() == "CTCLoss" and name.startswith(_RENAMED) and name[len(_RENAMED) :] in names:
            layer_id = name[len(_RENAMED) :]
            node.set_friendly_name(names[layer_id])
            node.get_rt_info()[IR_LAYER_ID] = layer_id
    return model


def load_onnx_model(path: str) -> Any:
    """An ONNX model from an untrusted file, external data checked before it is read."""
    from ..onnx.files import load_onnx

    return load_onnx(path)


# Room for an .npy member's header beside its data (numpy writes headers of a few hundred bytes).
_NPY_HEADER_BYTES = 1 << 16


def _declared_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> int:
    """The bytes an npz member's array would take, from its .npy header alone (nothing of the
    data is read); a member that is not a plain .npy array is an :class:`InvalidInputError`."""
    name = info.filename[:-4] if info.filename.endswith(".npy") else ""
    if not name:
        raise InvalidInputError("inputs", f"{path!r}: member {info.filename!r} is not an .npy array")
    if info.file_size > MAX_TENSOR_BYTES + _NPY_HEADER_BYTES:
        raise InvalidInputError(
            "inputs", f"{path!r}: {name!r} expands to {info.file_size} bytes, over {MAX_TENSOR_BYTES}"
        )
    try:
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in read_header:
                raise ValueError(f"format version {version}")
            shape, _, dtype = read_header[version](member)
    except Exception as error:  # numpy's header parser and zipfile raise many kinds: all say "not .npy"
        reason = first_line(error)
        raise InvalidInputError("inputs", f"{path!r}: {name!r}: not an .npy array ({reason})") from None
    if dtype.hasobject:
        raise InvalidInputError("inputs", f"{path!r}: {name!r}: object arrays are refused (no pickle)")
    declared = math.prod(int(d) for d in shape) * dtype.itemsize  # Python ints: no overflow
    if declared > MAX_TENSOR_BYTES:
        raise InvalidInputError("inputs", f"{path!r}: {name!r} declares {declared} bytes, over {MAX_TENSOR_BYTES}")
    return declared


def load_inputs(path: str) -> dict[str, np.ndarray]:
    """The arrays of an npz file (no pickle), each and all together within the tensor limit, in
    native byte order: every member's size, as its zip entry and its .npy header declare it, is
    checked before any array is read."""
    checked_input_file(path, "inputs")
    try:
        with zipfile.ZipFile(path) as archive:
            total = sum(_declared_bytes(archive, info, path) for info in archive.infolist())
        if total > MAX_TENSOR_BYTES:
            raise InvalidInputError(
                "inputs", f"{path!r}: its arrays declare {total} bytes together, over {MAX_TENSOR_BYTES}"
            )
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise InvalidInputError("inputs", f"{path!r} is not an npz archive")
        with archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as error:  # zipfile, zlib and numpy raise many kinds for a damaged archive
        if isinstance(error, InvalidInputError):
            raise
        reason = first_line(error)
        raise InvalidInputError("inputs", f"cannot read {path!r} as npz: {reason}") from None
    for name, array in arrays.items():
        if array.nbytes > MAX_TENSOR_BYTES:
            raise InvalidInputError("inputs", f"{name!r} holds {array.nbytes} bytes, over {MAX_TENSOR_BYTES}")
    # The values, in this machine's byte order: a runtime reads an array's bytes, the reference its values.
    return {
        name: array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))
        for name, array in arrays.items()
    }
