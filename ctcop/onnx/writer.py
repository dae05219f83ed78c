"""The ONNX writer: a model holding one ``ai.ctcop.CTCLoss`` node and its function (spec 11.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx
from onnx import helper

from ..attributes import Attributes
from ..errors import InvalidInputError
from ..options import Dim, Dims, ExportOptions
from ..schema import form
from . import function
from .graph import FixedDims
from .inline import inlined
from .types import tensor_type

ONNX_IR_VERSION = 10


def checked_opset(opset: Any) -> int:
    """``opset`` when the function body can be written in it (MIN_OPSET up to onnx's newest)."""
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not function.MIN_OPSET <= opset <= newest:
        raise InvalidInputError("opset", f"{opset!r} is outside [{function.MIN_OPSET}, {newest}]")
    return opset


def value_info(name: str, dtype: str, dims: list[Dim]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, tensor_type(dtype), dims)


def ctc_node(
    inputs: Sequence[str], output: str, attributes: Attributes, name: str = "ctcop_ctc_loss"
) -> onnx.NodeProto:
    """An ``ai.ctcop.CTCLoss`` node over ``inputs`` (logits, sequence_mask, labels) with the
    time-major form's ``attributes`` as ints (spec 11.1)."""
    node = helper.make_node(function.OP_TYPE, list(inputs), [output], name=name, domain=function.DOMAIN)
    node.attribute.extend(helper.make_attribute(key, int(value)) for key, value in attributes.items())
    return node


def loss_node(logits: str, options: ExportOptions) -> onnx.NodeProto:
    """The ``ai.ctcop.CTCLoss`` node over ``logits`` and the spec's mask and labels inputs."""
    spec = form("time_major")
    _, mask, labels = spec.input_names
    return ctc_node([logits, mask, labels], spec.output_name, options.attributes)


def mask_and_labels(options: ExportOptions) -> list[onnx.ValueInfoProto]:
    """The ``sequence_mask`` [T, N] and ``labels`` [N, T] graph inputs."""
    _, mask, labels = form("time_major").input_names
    t, n, _ = options.dims
    return [value_info(mask, options.mask_dtype, [t, n]), value_info(labels, options.labels_dtype, [n, t])]


def static_dims(options: ExportOptions, static: bool, inline: bool) -> FixedDims | None:
    """The fixed (T, N, C) of the static form (spec 11.2) when ``static`` is asked for, else None;
    refuses ``static`` without ``inline`` or without three fixed dims."""
    if not static:
        return None
    if not inline:
        raise InvalidInputError("static", "needs inline (the static form is function-free)")
    t, n, c = options.dims
    if not (isinstance(t, int) and isinstance(n, int) and isinstance(c, int)):
        raise InvalidInputError("static", f"needs fixed dims T, N, C, got {options.dims!r}")
    return t, n, c


def with_function(
    model: onnx.ModelProto, options: ExportOptions, opset: int, fixed: FixedDims | None = None, inline: bool = False
) -> onnx.ModelProto:
    """``model`` importing the default domain at ``opset`` and ai.ctcop, carrying the function
    (for ``fixed`` dims, see :func:`ctcop.onnx.function.ctc_loss_function`). ``inline``: the
    function is to be inlined, so it is built for the attributes of the node it replaces and, with
    a fixed C, for that C (spec 11.2)."""
    others = [op for op in model.opset_import if op.domain not in ("", function.DOMAIN)]
    del model.opset_import[:]
    model.opset_import.extend(
        [helper.make_opsetid("", opset), helper.make_opsetid(function.DOMAIN, function.DOMAIN_VERSION), *others]
    )
    compute = "float64" if options.dtype == "float64" else "float32"
    classes = options.dims[2] if inline and isinstance(options.dims[2], int) else None
    merge = options.attributes["merge_repeated"] if inline else None
    model.functions.append(function.ctc_loss_function(opset, compute, fixed, classes, merge))
    model.ir_version = ONNX_IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def onnx_model(
    *,
    dtype: str = "float32",
    mask_dtype: str = "int32",
    labels_dtype: str = "int64",
    dims: Dims = ("T", "N", "C"),
    attributes: Mapping[str, Any] | None = None,
    opset: int = function.MIN_OPSET,
    inline: bool = False,
    static: bool = False,
) -> onnx.ModelProto:
    """A model with inputs ``inputs`` [T,N,C], ``sequence_mask`` [T,N], ``labels`` [N,T], one
    ``ai.ctcop.CTCLoss`` node and output ``loss`` [N]. ``dtype`` is the logits' and the loss's
    element type (float16/float32/float64); each of ``dims`` is an int or a symbolic name;
    ``attributes`` are the spec's two booleans (defaults from the schema); ``opset`` >= 18.
    ``inline``: the node replaced by its function's body, standard operators only
    (:func:`ctcop.onnx.inline.inlined`). ``static`` (with ``inline`` and int ``dims``): the
    static form (spec 11.2), every shape fixed and the recursion a Scan, for runtimes without
    ONNX ``Loop`` such as tract.
    """
    options = ExportOptions.of(
        dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, dims=dims, attributes=attributes
    )
    chosen_opset = checked_opset(opset)
    fixed = static_dims(options, static, inline)
    spec = form("time_major")
    x = spec.input_names[0]
    t, n, c = options.dims
    graph = helper.make_graph(
        [loss_node(x, options)],
        "ctcop_ctc_loss",
        [value_info(x, options.dtype, [t, n, c]), *mask_and_labels(options)],
        [value_info(spec.output_name, options.dtype, [n])],
    )
    model = with_function(helper.make_model(graph, producer_name="ctcop"), options, chosen_opset, fixed, inline)
    return inlined(model) if inline else model
