"""Exporters: CTCLoss-4 into ONNX models (spec section 11) and OpenVINO IR (spec section 12).

``onnx_model`` writes a model holding one ``ai.ctcop.CTCLoss`` node plus the model-local function
that defines it; ``attach_onnx`` appends that node to an existing model whose output carries
[T, N, C] logits. Names of inputs, outputs and attributes come from the op's schema.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper

from . import onnx_function, schema
from .errors import InvalidInputError

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
        defaults = schema.form("time_major").attributes
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
    spec = schema.form("time_major")
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
    spec = schema.form("time_major")
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
    # The model keeps its own default-domain opset when that is newer than the one asked for.
    chosen = replace(chosen, opset=max(chosen.opset, {op.domain: op.version for op in out.opset_import}.get("", 0)))
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


# -- OpenVINO IR (spec section 12) -----------------------------------------------------------

IR_FORMS = ("lowered", "custom")


def _ir_loss(inputs: Any, mask: Any, labels: Any, ir_form: str, options: ExportOptions) -> Any:
    """The loss node of ``ir_form`` over three OpenVINO outputs."""
    from .openvino_custom_op import CTCLossOp
    from .openvino_lowering import lower

    flags = dict(options.attributes)
    if ir_form == "custom":
        return CTCLossOp([inputs, mask, labels], flags)
    return lower(inputs, mask, labels, **flags)


def _ir_form(ir_form: str) -> str:
    if ir_form not in IR_FORMS:
        raise InvalidInputError("form", f"unknown IR form {ir_form!r}; one of {', '.join(IR_FORMS)}")
    return ir_form


def _named(node: Any, name: str) -> Any:
    node.set_friendly_name(name)
    node.output(0).get_tensor().set_names({name})
    return node


def _ir_dim(dim: Dim) -> int:
    return dim if isinstance(dim, int) else -1


def ir_model(form: str = "lowered", **options: Any) -> Any:
    """An ``openvino.Model`` with inputs ``inputs`` [T,N,C], ``sequence_mask`` [T,N], ``labels``
    [N,T] and output ``loss`` [N]. ``form`` "lowered" (default) uses stock OpenVINO operators
    only (native CTCLoss-4 plus adapters and guards, spec 12.1); "custom" is one ``CTCLoss``
    layer of version ``ctcop1`` that needs :func:`ctcop.openvino_extensions` to be read. Options
    as for :func:`onnx_model` (``opset`` is ignored: IR has none).
    """
    import openvino
    import openvino.opset15 as ops

    ir_form = _ir_form(form)
    chosen = ExportOptions.of(**options)
    t, n, c = (_ir_dim(d) for d in chosen.dims)
    spec = schema.form("time_major")
    x_name, mask_name, labels_name = (p.name for p in spec.inputs)
    x = _named(ops.parameter([t, n, c], np.dtype(chosen.dtype)), x_name)
    mask = _named(ops.parameter([t, n], np.dtype(chosen.mask_dtype)), mask_name)
    labels = _named(ops.parameter([n, t], np.dtype(chosen.labels_dtype)), labels_name)
    loss = _named(_ir_loss(x.output(0), mask.output(0), labels.output(0), ir_form, chosen), spec.outputs[0].name)
    return openvino.Model([ops.result(loss)], [x, mask, labels], "ctcop_ctc_loss")


def attach_openvino(model: Any, logits_output: str | int, form: str = "lowered", **options: Any) -> Any:
    """A new ``openvino.Model``: ``model`` plus ``sequence_mask`` and ``labels`` parameters and a
    ``loss`` result computed from its output ``logits_output`` (a tensor name or an index), which
    must carry [T, N, C] float logits. Either IR form; options as for :func:`onnx_model` except
    ``dtype`` and ``dims``, which come from the model."""
    import openvino
    import openvino.opset15 as ops

    ir_form = _ir_form(form)
    if "dtype" in options or "dims" in options:
        raise InvalidInputError("options", "dtype and dims are taken from the model's logits output")
    results = list(model.get_results())
    if isinstance(logits_output, int) and not isinstance(logits_output, bool):
        if not 0 <= logits_output < len(results):
            raise InvalidInputError("logits_output", f"index {logits_output} is outside [0, {len(results) - 1}]")
        chosen_result = results[logits_output]
    else:
        matches = [r for r in results if logits_output in r.output(0).get_names()]
        if not matches:
            raise InvalidInputError("logits_output", f"{logits_output!r} is not an output of the model")
        chosen_result = matches[0]
    chosen_output = chosen_result.input_value(0)  # the node feeding the Result, not the Result
    shape = chosen_output.get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 3:
        raise InvalidInputError("logits_output", f"{logits_output!r} must have rank 3 ([T, N, C]), got {shape}")
    element = chosen_output.get_element_type().get_type_name()
    by_ov_name = {"f16": "float16", "f32": "float32", "f64": "float64"}
    if element not in by_ov_name:
        raise InvalidInputError("logits_output", f"{logits_output!r} must be float16/float32/float64, got {element}")
    dims = tuple(d.get_length() if d.is_static else s for d, s in zip(shape, "TNC", strict=True))
    chosen = ExportOptions.of(dtype=by_ov_name[element], dims=dims, **options)  # type: ignore[arg-type]
    spec = schema.form("time_major")
    _, mask_name, labels_name = (p.name for p in spec.inputs)
    loss_name = spec.outputs[0].name
    taken = {name for o in [*model.inputs, *model.outputs] for name in o.get_names()}
    for name in (mask_name, labels_name, loss_name):
        if name in taken:
            raise InvalidInputError("model", f"already has a value named {name!r}")
    t, n, _ = (_ir_dim(d) for d in chosen.dims)
    mask = _named(ops.parameter([t, n], np.dtype(chosen.mask_dtype)), mask_name)
    labels = _named(ops.parameter([n, t], np.dtype(chosen.labels_dtype)), labels_name)
    loss = _named(_ir_loss(chosen_output, mask.output(0), labels.output(0), ir_form, chosen), loss_name)
    return openvino.Model(
        [*results, ops.result(loss)], [*model.get_parameters(), mask, labels], model.get_friendly_name()
    )


def save_ir(model: Any, path: str) -> None:
    """Write ``model`` as IR (``path`` .xml plus .bin) with OpenVINO's serializer, weights uncompressed."""
    import openvino

    try:
        openvino.save_model(model, path, compress_to_fp16=False)
    except (OSError, RuntimeError) as error:
        raise InvalidInputError("output", f"cannot write {path!r}: {error}") from None


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Point file descriptor 2 at /dev/null for the duration (native libraries write to it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def load_ir(path: str) -> Any:
    """Read an IR (or any OpenVINO-readable) model from an untrusted file, with ctcop's extensions."""
    from .runtimes import openvino_core

    try:
        with _native_stderr_silenced():  # frontends probing an unknown file log to fd 2 themselves
            return openvino_core().read_model(path)
    except Exception as error:  # OpenVINO raises RuntimeError subclasses for every parse failure
        message = str(error).strip().splitlines()
        raise InvalidInputError("model", f"cannot read {path!r}: {message[-1] if message else error}") from None
