"""A user's model file opened for ``ctcop eval`` / ``validate``: its CTCLoss layers and its inputs."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InvalidInputError
from .feeds import ModelInput
from .files import ModelFile, checked_model_file, load_onnx_model
from .find import Layer, onnx_dims, onnx_layers, onnx_type_name, openvino_layers, ov_shape, ov_type_name


@dataclass(frozen=True)
class OpenedModel:
    file: ModelFile
    layers: list[Layer]
    inputs: list[ModelInput]


def open_model(path: str) -> OpenedModel:
    """The model at ``path`` (IR or ONNX), its CTCLoss layers and its inputs; a model without any
    CTCLoss layer is an :class:`InvalidInputError`."""
    checked = checked_model_file(path)
    if checked.kind == "ir":
        from ..openvino.files import load_ir

        model = load_ir(path)
        layers = [
            replace(layer, attributes=checked.ctc_attributes.get(layer.name, layer.attributes))
            for layer in openvino_layers(model)
        ]
        inputs = [
            ModelInput(
                i.get_any_name(),
                ov_shape(i.get_partial_shape()) or (),
                ov_type_name(i.get_element_type()),
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
                onnx_dims(v.type.tensor_type.shape, v.name),
                onnx_type_name(v.type.tensor_type.elem_type),
            )
            for v in onnx_model.graph.input
            if v.name not in initializers
        ]
    if not layers:
        raise InvalidInputError("model", f"{path!r} holds no CTCLoss layer (released CTCLoss-4, ctcop1 or ai.ctcop)")
    return OpenedModel(checked, layers, inputs)
