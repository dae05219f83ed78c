"""A framework's CTC call in an exported ONNX model: placeholder nodes expanded in place (spec 11.1, 11.5).

A framework's exporter (PyTorch's, :mod:`ctcop.torch.onnx_graph`; tf2onnx,
:mod:`ctcop.tf.onnx_graph`) writes each CTC call as one placeholder node of a domain of its own,
with the element type of its logits as the integer attribute ``dtype`` (a TensorProto code).
:func:`expand_placeholders` replaces every placeholder by the nodes a front-specific expansion
builds around one ``ai.ctcop.CTCLoss`` node, and adds that node's model-local function
(:func:`ctcop.onnx.writer.with_function`): the model runs in any conforming runtime with no custom
library.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto, helper

from ..errors import InvalidInputError
from ..options import ExportOptions
from . import function
from .graph import GraphBuilder
from .writer import with_function

# Builds, with the builder given, the nodes that compute a placeholder's outputs from its inputs;
# the third argument is the name for the ai.ctcop.CTCLoss node.
Expansion = Callable[[GraphBuilder, onnx.NodeProto, str], None]


def placeholder_nodes(model: onnx.ModelProto, domain: str, op_type: str) -> list[onnx.NodeProto]:
    """The ``domain``.``op_type`` nodes of the main graph; one in a function or a subgraph is an
    error (the expansion writes the main graph only)."""
    for found in model.functions:
        if any(n.domain == domain for n in found.node):
            raise InvalidInputError(
                "model", f"function {found.name} holds an {domain}.{op_type} node: only the main graph may"
            )
    for node in model.graph.node:
        for attribute in node.attribute:
            graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
            if any(n.domain == domain for sub in graphs for n in sub.node):
                raise InvalidInputError("model", f"a subgraph of {node.name!r} holds an {domain}.{op_type} node")
    return [n for n in model.graph.node if n.domain == domain and n.op_type == op_type]


def compute_type(placeholders: list[onnx.NodeProto], call: str) -> str:
    """The function's compute type: float64 when every placeholder's ``dtype`` is float64, float32
    when none is; both in one model is an error (one function serves one; ``call`` names them)."""
    kinds = set()
    for node in placeholders:
        dtype = next(int(helper.get_attribute_value(a)) for a in node.attribute if a.name == "dtype")
        kinds.add("float64" if dtype == TensorProto.DOUBLE else "float32")
    if len(kinds) > 1:
        raise InvalidInputError("model", f"{call} on float64 and on other logits in one model: one function serves one")
    return kinds.pop()


def expand_placeholders(
    model: onnx.ModelProto, domain: str, op_type: str, expansion: Expansion, call: str
) -> onnx.ModelProto:
    """``model`` with every ``domain``.``op_type`` placeholder replaced by what ``expansion``
    builds, the ``domain`` import dropped and the ``ai.ctcop.CTCLoss`` function added; checked
    with ``onnx.checker`` (full_check). Changes ``model`` in place. ``call`` names the framework's
    CTC call in errors; a model without a placeholder is one."""
    placeholders = placeholder_nodes(model, domain, op_type)
    if not placeholders:
        raise InvalidInputError("model", f"holds no {domain}.{op_type} node (no {call} was exported)")
    opset = max((op.version for op in model.opset_import if op.domain in ("", "ai.onnx")), default=0)
    if opset < function.MIN_OPSET:
        raise InvalidInputError("opset", f"{opset}: the ai.ctcop.CTCLoss function needs {function.MIN_OPSET} or later")
    compute = compute_type(placeholders, call)
    taken = {name for node in model.graph.node for name in (*node.input, *node.output, node.name)}
    nodes: list[onnx.NodeProto] = []
    for k, node in enumerate(model.graph.node):
        if node.domain != domain or node.op_type != op_type:
            nodes.append(node)
            continue
        prefix = f"{domain.replace('.', '_')}_{k}/"
        while any(name.startswith(prefix) for name in taken):
            prefix = "_" + prefix
        g = GraphBuilder(prefix)
        expansion(g, node, f"{prefix}ctc_loss")
        nodes.extend(g.nodes)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    imports = [op for op in model.opset_import if op.domain != domain]
    del model.opset_import[:]
    model.opset_import.extend(imports)
    options = ExportOptions.of(
        dtype=compute, mask_dtype="int32", labels_dtype="int64", dims=("T", "N", "C"), attributes=None
    )
    return with_function(model, options, opset)
