"""Exporters: CTCLoss-4 into ONNX models (spec section 11) and OpenVINO IR (spec section 12).

``onnx_model`` writes a model holding one ``ai.ctcop.CTCLoss`` node plus the model-local function
that defines it; ``attach_onnx`` appends that node to an existing model whose output carries
[T, N, C] logits. Names of inputs, outputs and attributes come from the op's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from . import onnx_function
from .errors import InvalidInputError
from .schema import form

FLOAT_TYPES = {
    "float16": onnx.TensorProto.FLOAT16,
    "float32": onnx.TensorProto.FLOAT,
    "float64": onnx.TensorProto.DOUBLE,
}
INDEX_TYPES = {
    name: helper.np_dtype_to_tensor_dtype(np.dtype(name))
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
}
MASK_TYPES = {"bool": onnx.TensorProto.BOOL, **INDEX_TYPES}
ONNX_IR_VERSION = 10
Dim = int | str | None


@dataclass(frozen=True)
class ExportOptions:
    """Validated exporter options (element types, dimensions, attributes, opset)."""

    dtype: str = "float32"
    mask_dtype: str = "int32"
    labels_dtype: str = "int64"
    dims: tuple[Dim, Dim, Dim] = ("T", "N", "C")
    attributes: tuple[tuple[str, bool], ...] = ()
    opset: int = onnx_function.MIN_OPSET

    @classmethod
    def of(
        cls,
        *,
        dtype: str = "float32",
        mask_dtype: str = "int32",
        labels_dtype: str = "int64",
        dims: tuple[Dim, Dim, Dim] = ("T", "N", "C"),
        attributes: Mapping[str, Any] | None = None,
        opset: int = onnx_function.MIN_OPSET,
    ) -> ExportOptions:
        for name, value, allowed in (
            ("dtype", dtype, FLOAT_TYPES),
            ("mask_dtype", mask_dtype, MASK_TYPES),
            ("labels_dtype", labels_dtype, INDEX_TYPES),
        ):
            if value not in allowed:
                raise InvalidInputError(name, f"unknown element type {value!r}; one of {', '.join(allowed)}")
        if len(dims) != 3:
            raise InvalidInputError("dims", f"must give T, N, C, got {dims!r}")
        for symbol, dim in zip("TNC", dims, strict=True):
            if isinstance(dim, bool) or not (dim is None or isinstance(dim, (int, str))):
                raise InvalidInputError("dims", f"{symbol} must be an int, a name or None, got {dim!r}")
            if isinstance(dim, int) and dim < 0:
                raise InvalidInputError("dims", f"{symbol} = {dim} is negative")
        if isinstance(dims[2], int) and dims[2] == 0:
            raise InvalidInputError("dims", "C = 0: C must be at least 1 (the blank class)")
        defaults = form("time_major").attributes
        chosen = dict(defaults)
        for name, value in (attributes or {}).items():
            if name not in defaults:
                raise InvalidInputError("attributes", f"unknown attribute {name!r}; known: {', '.join(defaults)}")
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidInputError(name, f"attribute must be a boolean, got {value!r}")
            chosen[name] = bool(value)
        newest = onnx.defs.onnx_opset_version()
        if isinstance(opset, bool) or not isinstance(opset, int) or not onnx_function.MIN_OPSET <= opset <= newest:
            raise InvalidInputError("opset", f"{opset!r} is outside [{onnx_function.MIN_OPSET}, {newest}]")
        return cls(dtype, mask_dtype, labels_dtype, dims, tuple(chosen.items()), opset)


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


def _value_info(name: str, elem_type: int, dims: list[Dim]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, dims)


def _loss_node(logits: str, mask: str, labels: str, loss: str, options: ExportOptions) -> onnx.NodeProto:
    node = helper.make_node(
        onnx_function.OP_TYPE,
        [logits, mask, labels],
        [loss],
        name="ctcop_ctc_loss",
        domain=onnx_function.DOMAIN,
    )
    node.attribute.extend(helper.make_attribute(name, int(value)) for name, value in options.attributes)
    return node


def _with_function(model: onnx.ModelProto, options: ExportOptions) -> onnx.ModelProto:
    del model.opset_import[:]
    model.opset_import.extend(
        [
            helper.make_opsetid("", options.opset),
            helper.make_opsetid(onnx_function.DOMAIN, onnx_function.DOMAIN_VERSION),
        ]
    )
    compute = "float64" if options.dtype == "float64" else "float32"
    model.functions.append(onnx_function.ctc_loss_function(options.opset, compute))
    model.ir_version = ONNX_IR_VERSION
    return model


def onnx_model(**options: Any) -> onnx.ModelProto:
    """A model with inputs ``inputs`` [T,N,C], ``sequence_mask`` [T,N], ``labels`` [N,T], one
    ``ai.ctcop.CTCLoss`` node and output ``loss`` [N]. Keyword options: ``dtype``
    (float16/float32/float64), ``mask_dtype``, ``labels_dtype``, ``dims`` (each of T, N, C an int
    or a symbolic name), ``attributes`` (the spec's two booleans), ``opset`` (>= 18).
    """
    chosen = ExportOptions.of(**options)
    spec = form("time_major")
    x, mask, labels = (p.name for p in spec.inputs)
    loss = spec.outputs[0].name
    t, n, c = chosen.dims
    graph = helper.make_graph(
        [_loss_node(x, mask, labels, loss, chosen)],
        "ctcop_ctc_loss",
        [
            _value_info(x, FLOAT_TYPES[chosen.dtype], [t, n, c]),
            _value_info(mask, MASK_TYPES[chosen.mask_dtype], [t, n]),
            _value_info(labels, INDEX_TYPES[chosen.labels_dtype], [n, t]),
        ],
        [_value_info(loss, FLOAT_TYPES[chosen.dtype], [n])],
    )
    model = _with_function(helper.make_model(graph, producer_name="ctcop"), chosen)
    onnx.checker.check_model(model, full_check=True)
    return model


def attach_onnx(model: onnx.ModelProto, logits_output: str, **options: Any) -> onnx.ModelProto:
    """``model`` with ``sequence_mask`` and ``labels`` inputs and a ``loss`` output added, the loss
    computed from the model's output ``logits_output`` ([T, N, C], float). The logits output is
    kept. ``options`` as for :func:`onnx_model` (``dtype`` and ``dims`` come from the model)."""
    if "dtype" in options or "dims" in options:
        raise InvalidInputError("options", "dtype and dims are taken from the model's logits output")
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {v.name: v for v in [*inferred.graph.output, *inferred.graph.value_info, *inferred.graph.input]}
    if logits_output not in [o.name for o in model.graph.output]:
        raise InvalidInputError("logits_output", f"{logits_output!r} is not an output of the model")
    tensor_type = known[logits_output].type.tensor_type
    dims: list[Dim] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim]
    if not tensor_type.HasField("shape") or len(dims) != 3:
        raise InvalidInputError(
            "logits_output", f"{logits_output!r} must have rank 3 ([T, N, C]), got rank {len(dims)}"
        )
    by_type = {code: name for name, code in FLOAT_TYPES.items()}
    if tensor_type.elem_type not in by_type:
        raise InvalidInputError("logits_output", f"{logits_output!r} must be float16/float32/float64")
    t, n, c = (dim if dim is not None else symbol for dim, symbol in zip(dims, ("T", "N", "C"), strict=True))
    chosen = ExportOptions.of(dtype=by_type[tensor_type.elem_type], dims=(t, n, c), **options)
    spec = form("time_major")
    _, mask, labels = (p.name for p in spec.inputs)
    loss = spec.outputs[0].name
    taken = {v.name for v in [*model.graph.input, *model.graph.output]} | {
        o for nd in model.graph.node for o in nd.output
    }
    for name in (mask, labels, loss):
        if name in taken:
            raise InvalidInputError("model", f"already has a value named {name!r}")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if any(f.domain == onnx_function.DOMAIN and f.name == onnx_function.OP_TYPE for f in out.functions):
        raise InvalidInputError("model", "already holds an ai.ctcop.CTCLoss function")
    current = {op.domain: op.version for op in out.opset_import}
    opset = max(chosen.opset, current.get("", 0))
    chosen = ExportOptions.of(
        dtype=chosen.dtype,
        dims=chosen.dims,
        mask_dtype=chosen.mask_dtype,
        labels_dtype=chosen.labels_dtype,
        attributes=dict(chosen.attributes),
        opset=opset,
    )
    out.graph.input.extend(
        [
            _value_info(mask, MASK_TYPES[chosen.mask_dtype], [t, n]),
            _value_info(labels, INDEX_TYPES[chosen.labels_dtype], [n, t]),
        ]
    )
    out.graph.node.append(_loss_node(logits_output, mask, labels, loss, chosen))
    out.graph.output.append(_value_info(loss, FLOAT_TYPES[chosen.dtype], [n]))
    others = [op for op in out.opset_import if op.domain not in ("", onnx_function.DOMAIN)]
    out = _with_function(out, chosen)
    out.opset_import.extend(others)
    onnx.checker.check_model(out, full_check=True)
    return out
