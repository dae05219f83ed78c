"""A user's model file opened for ``ctcop eval`` / ``validate``: its CTCLoss layers and its inputs."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import InvalidInputError
from .feeds import ModelInput
from .files import ModelFile, checked_model_file, load_ir_model, load_onnx_model
from .find import (
    Layer,
    onnx_dims,
    onnx_layers,
    onnx_nested_layers,
    onnx_type_name,
    openvino_layers,
    ov_shape,
    ov_type_name,
)


@dataclass(frozen=True)
class OpenedModel:
    file: ModelFile
    layers: list[Layer]
    inputs: list[ModelInput]
    nested_layers: int = 0


def open_model(path: str, kernels: bool = False) -> OpenedModel:
    """The model at ``path`` (IR or ONNX), the CTCLoss layers of its main graph and its inputs
    (ctcop's lowerings as the layers they compute; with ``kernels`` also the native kernels
    inside them); a model without any is an :class:`InvalidInputError`, which counts those inside
    bodies (If, Loop, TensorIterator), not evaluated (spec 13)."""
    checked = checked_model_file(path)
    if checked.kind == "ir":
        model = load_ir_model(path)
        layers = [
            replace(layer, attributes=checked.ctc_attributes.get(layer.ir_id, layer.attributes))
            for layer in openvino_layers(model, kernels)
        ]
        inputs = [
            ModelInput(
                i.get_any_name(),
                ov_shape(i.get_partial_shape()),  # None: a dynamic rank
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
    nested = checked.nested_layers if checked.kind == "ir" else onnx_nested_layers(onnx_model)
    if not layers:
        inside = f"; {nested} inside If/Loop/TensorIterator bodies, which ctcop does not evaluate" if nested else ""
        raise InvalidInputError(
            "model",
            f"{path!r} holds no CTCLoss layer (released CTCLoss-4, ctcop1 or ai.ctcop) in its main graph{inside}",
        )
    return OpenedModel(checked, layers, inputs, nested)
