"""A user's model file opened for ``ctcop eval`` / ``validate``: its CTCLoss layers and its inputs."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidInputError
from .feeds import ModelInput
from .files import ModelFile, checked_model_file, load_onnx_model
from .find import OPENVINO_TYPES, Layer, onnx_layers, onnx_type, openvino_layers, ov_shape


@dataclass(frozen=True)
class OpenedModel:
    file: ModelFile
    layers: list[Layer]
    inputs: list[ModelInput]


def _ir_attributes(path: str) -> dict[str, dict[str, Any]]:
    """The attributes of every CTCLoss layer as written in the IR's XML: OpenVINO's reader turns
    a value it does not understand (``unique="maybe"``) into a default, so validation reads the text.
    (DOCTYPE and entities were refused before, so the parser expands nothing.)"""
    try:
        layers = ElementTree.parse(path).getroot().iter("layer")
    except ElementTree.ParseError as error:
        raise InvalidInputError("model", f"{path!r} is not well-formed XML: {error}") from None
    found = {}
    for layer in layers:
        data = layer.find("data")
        if layer.get("type") == "CTCLoss" and data is not None:
            found[layer.get("name", "")] = dict(data.attrib)
    return found


def open_model(path: str) -> OpenedModel:
    """The model at ``path`` (IR or ONNX), its CTCLoss layers and its inputs; a model without any
    CTCLoss layer is an :class:`InvalidInputError`."""
    checked = checked_model_file(path)
    if checked.kind == "ir":
        from ..openvino.files import load_ir

        model = load_ir(path)
        layers = [
            replace(layer, attributes=_ir_attributes(path).get(layer.name, layer.attributes))
            for layer in openvino_layers(model)
        ]
        inputs = [
            ModelInput(
                i.get_any_name(),
                ov_shape(i.get_partial_shape()) or (),
                OPENVINO_TYPES.get(i.get_element_type().get_type_name(), "?"),
            )
            for i in model.inputs
        ]
    else:
        onnx_model = load_onnx_model(path)
        layers = onnx_layers(onnx_model)
        initializers = {t.name for t in onnx_model.graph.initializer}
        inputs = [
            ModelInput(
                v.name,
                tuple(d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim),
                onnx_type(v.type.tensor_type.elem_type),
            )
            for v in onnx_model.graph.input
            if v.name not in initializers
        ]
    if not layers:
        raise InvalidInputError("model", f"{path!r} holds no CTCLoss layer (released CTCLoss-4, ctcop1 or ai.ctcop)")
    return OpenedModel(checked, layers, inputs)
