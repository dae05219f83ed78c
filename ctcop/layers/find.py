"""Finding the CTCLoss layers of a model: OpenVINO's released CTCLoss-4 (spec 7), ctcop's custom
IR layer (spec 12.3) and ctcop's ONNX node (spec 11.1), each described the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..canonical import Dim as Dim  # feeds.py reads it from here
from ..errors import InvalidInputError
from ..schema import encoding, form
from .files import IR_LAYER_ID

# Each form of layer (:class:`Layer`) and the schema form whose op it computes: OpenVINO's released
# CTCLoss-4, ctcop's guarded lowering of it, ctcop's time-major lowering, custom IR layer and ONNX node.
FORMS = {
    "released": "openvino",
    "guarded": "openvino",
    "lowered": "time_major",
    "ctcop-ir": "time_major",
    "ctcop-onnx": "time_major",
}
STAGE_FORMS = {"openvino": "guarded", "time_major": "lowered"}  # a lowering's layer form by its schema form


@dataclass(frozen=True)
class Port:
    """One input of a layer: the schema's port name, what feeds it, and what is known statically."""

    name: str
    value: str
    shape: tuple[Dim, ...] | None
    dtype: str
    producer: str
    constant: np.ndarray | None = None


@dataclass(frozen=True)
class Layer:
    """A CTCLoss layer: ``form`` one of :data:`FORMS`; ``index`` its place
    among the model's layers (the worker refers to it by that); ``ir_id`` its IR layer id where
    the model was read by :func:`ctcop.layers.files.load_ir_model`, else "" (spec 13)."""

    index: int
    name: str
    form: str
    ports: tuple[Port, ...]
    attributes: dict[str, Any]
    output_dtype: str
    output: str = field(default="")
    ir_id: str = ""

    @property
    def spec_form(self) -> str:
        return FORMS[self.form]

    def port(self, name: str) -> Port | None:
        return next((p for p in self.ports if p.name == name), None)


def ov_shape(partial: Any) -> tuple[Dim, ...] | None:
    if partial.rank.is_dynamic:
        return None
    return tuple(d.get_length() if d.is_static else None for d in partial)


def ov_type_name(element_type: Any) -> str:
    from ..openvino.types import type_name

    return type_name(element_type)


def onnx_dims(shape: Any, value: str) -> tuple[Dim, ...]:
    """An ONNX TensorShapeProto's dimensions (None where symbolic); a negative size is a bad file."""
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in shape.dim)
    for axis, size in enumerate(dims):
        if size is not None and size < 0:
            raise InvalidInputError("model", f"{value!r}: dimension {axis} is declared {size} (negative)")
    return dims


def onnx_type_name(code: int) -> str:
    from ..onnx.types import type_name

    return type_name(code)


@dataclass(frozen=True)
class Endpoints:
    """Where one layer of an ``openvino.Model`` reads and writes: ``form`` as in :class:`Layer`,
    ``inputs`` the values it reads (port order), ``output`` its loss, ``node`` the CTCLoss node
    for a native or custom layer (None for a ctcop lowering)."""

    name: str
    form: str
    attributes: dict[str, Any]
    inputs: tuple[Any, ...]
    output: Any
    node: Any = None


def openvino_endpoints(model: Any, kernels: bool = False) -> list[Endpoints]:
    """The layers of an ``openvino.Model``'s main graph in topological order: each ctcop lowering
    read back as the layer it computes (:mod:`ctcop.openvino.stage`; form "guarded" for the
    released form, "lowered" for the time-major one), each released CTCLoss-4 and custom layer
    as it is; the native kernels inside ctcop's lowerings only with ``kernels``."""
    from ..openvino.stage import KERNEL, kernel_ids, stages

    found = stages(model)
    inner = set() if kernels else kernel_ids(found)
    shown = {kernel.get_instance_id(): f"{stage.name}/{KERNEL}" for stage in found for kernel in stage.kernels}
    versions = ("opset4", encoding("openvino_custom")["version"])
    by_output = {  # a stage's loss is a node of the model, so the walk below meets every stage
        stage.output.get_node().get_instance_id(): Endpoints(
            stage.name, STAGE_FORMS[stage.form], stage.attributes, stage.inputs, stage.output
        )
        for stage in found
    }
    layers: list[Endpoints] = []
    for node in model.get_ordered_ops():
        identity = node.get_instance_id()
        if identity in by_output:
            layers.append(by_output.pop(identity))
        native = node.get_type_name() == "CTCLoss" and node.get_type_info().version_id in versions
        if native and identity not in inner:
            layer_form = "released" if node.get_type_info().version_id == "opset4" else "ctcop-ir"
            inputs = tuple(node.input_values())
            name = shown.get(identity, node.get_friendly_name())
            layers.append(Endpoints(name, layer_form, {}, inputs, node.output(0), node))
    return layers


def openvino_layers(model: Any, kernels: bool = False) -> list[Layer]:
    """The layers of an ``openvino.Model`` (:func:`openvino_endpoints`) described as :class:`Layer`."""
    layers: list[Layer] = []
    for found in openvino_endpoints(model, kernels):
        names = form(FORMS[found.form]).input_names
        ports = []
        for position, source in enumerate(found.inputs):
            producer = source.get_node()
            is_constant = producer.get_type_name() == "Constant"
            ports.append(
                Port(
                    names[position] if position < len(names) else f"input{position}",
                    source.get_any_name()
                    if source.get_names()
                    else f"{producer.get_friendly_name()}:{source.get_index()}",
                    ov_shape(source.get_partial_shape()),
                    ov_type_name(source.get_element_type()),
                    f"{producer.get_type_name()} {producer.get_friendly_name()}",
                    np.array(producer.get_data()) if is_constant else None,
                )
            )
        output_type = ov_type_name(found.output.get_element_type())
        if found.node is not None:
            attributes = dict(found.node.get_attributes())
            rt_info = found.node.get_rt_info()
            ir_id = rt_info[IR_LAYER_ID].astype(str) if IR_LAYER_ID in rt_info else ""
        else:
            attributes, ir_id = dict(found.attributes), ""
        layers.append(Layer(len(layers), found.name, found.form, tuple(ports), attributes, output_type, "", ir_id))
    return layers


def onnx_nested_layers(model: Any) -> int:
    """How many ``ai.ctcop.CTCLoss`` nodes lie inside subgraphs (If, Loop, Scan bodies) of an ONNX
    model's main graph, which ctcop does not evaluate."""
    onnx_encoding = encoding("onnx")

    def count(graph: Any) -> int:
        found = 0
        for node in graph.node:
            for attribute in node.attribute:
                for body in [*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs]:
                    found += sum(
                        n.domain == onnx_encoding["domain"] and n.op_type == onnx_encoding["op_type"] for n in body.node
                    )
                    found += count(body)
        return found

    return count(model.graph)


def onnx_layers(model: Any) -> list[Layer]:
    """The ``ai.ctcop.CTCLoss`` nodes of an ONNX model's main graph."""
    import onnx
    from onnx import numpy_helper

    from ..onnx.files import inferred_shapes

    onnx_encoding = encoding("onnx")
    # A negative declared size is refused before onnx's shape inference sees it: on ctcop's own
    # function body that inference aborts the process (a C++ assertion in std::clamp).
    for declared in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if declared.type.HasField("tensor_type") and declared.type.tensor_type.HasField("shape"):
            onnx_dims(declared.type.tensor_type.shape, declared.name)
    inferred = inferred_shapes(model)
    known = {v.name: v.type.tensor_type for v in [*inferred.graph.input, *inferred.graph.value_info]}
    known.update({v.name: v.type.tensor_type for v in inferred.graph.output})
    initializers = {t.name: t for t in model.graph.initializer}
    producers = {out: node for node in model.graph.node for out in node.output}
    graph_inputs = {v.name for v in model.graph.input}
    names = form("time_major").input_names
    layers: list[Layer] = []
    for position_in_graph, node in enumerate(model.graph.node):
        if node.domain != onnx_encoding["domain"] or node.op_type != onnx_encoding["op_type"]:
            continue
        ports = []
        for position, value in enumerate(node.input):
            tensor = known.get(value)
            shape = None
            if tensor is not None and tensor.HasField("shape"):
                shape = onnx_dims(tensor.shape, value)
            dtype = onnx_type_name(tensor.elem_type) if tensor is not None else "?"
            constant, producer = None, f"input {value}"
            if value in initializers and value not in graph_inputs:
                # shape inference declares no value for an initializer: it is its own declaration
                initializer = initializers[value]
                constant, producer = numpy_helper.to_array(initializer), "initializer"
                shape, dtype = tuple(int(d) for d in initializer.dims), onnx_type_name(initializer.data_type)
            elif value in producers:
                source = producers[value]
                producer = f"{source.op_type} {source.name or source.output[0]}"
                if source.op_type == "Constant" and source.attribute and source.attribute[0].name == "value":
                    constant = numpy_helper.to_array(source.attribute[0].t)
            port_name = names[position] if position < len(names) else f"input{position}"
            ports.append(Port(port_name, value, shape, dtype, producer, constant))
        attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        out = known.get(node.output[0])
        output_type = onnx_type_name(out.elem_type) if out is not None else "?"
        name = node.name or f"{node.op_type}_{position_in_graph}"
        layers.append(Layer(len(layers), name, "ctcop-onnx", tuple(ports), attributes, output_type, node.output[0]))
    return layers
