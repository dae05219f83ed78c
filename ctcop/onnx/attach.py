"""The op attached to an existing ONNX model whose output carries [T, N, C] logits (spec 11.1).

The model's default-domain opset must be one the installed onnx knows; an older one is converted
by onnx's version converter to the opset the function body is written in (a model that cannot be
converted is refused), since relabelling the opset would change what its nodes mean.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx
from onnx import version_converter

from ..errors import InvalidInputError
from ..options import Dim, ExportOptions, attached_names, chosen_output
from ..text import described
from . import function
from .files import inferred_shapes, known_opset
from .inline import inlined
from .types import type_name
from .writer import checked_opset, loss_node, mask_and_labels, static_dims, value_info, with_function


def _output_name(model: onnx.ModelProto, logits_output: str | int) -> str:
    """The name of the output ``logits_output`` names or indexes (:func:`ctcop.options.chosen_output`)."""
    names = [str(o.name) for o in model.graph.output]
    return names[chosen_output([{name} for name in names], logits_output)]


def _logits_type(model: onnx.ModelProto, logits_output: str) -> tuple[str, tuple[Dim, Dim, Dim]]:
    """Element type and [T, N, C] of the output ``logits_output`` (symbols where unknown)."""
    inferred = inferred_shapes(model)
    known = {v.name: v for v in [*inferred.graph.output, *inferred.graph.value_info, *inferred.graph.input]}
    tensor_type = known[logits_output].type.tensor_type
    dims: list[Dim] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor_type.shape.dim]
    if not tensor_type.HasField("shape") or len(dims) != 3:
        raise InvalidInputError(
            "logits_output", f"{logits_output!r} must have rank 3 ([T, N, C]), got rank {len(dims)}"
        )
    dtype = type_name(tensor_type.elem_type)
    t, n, c = (dim if dim is not None else symbol for dim, symbol in zip(dims, "TNC", strict=True))
    return dtype, (t, n, c)


def converted_model(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``model`` checked and, when its default-domain opset is older than ``opset``, converted to
    ``opset``; a future opset, an invalid model or a failed conversion is an :class:`InvalidInputError`."""
    own = known_opset(model)
    try:
        onnx.checker.check_model(model)
    except Exception as error:  # ValidationError: the model breaks the ONNX standard as it stands
        raise InvalidInputError("model", f"not a valid ONNX model: {described(error)}") from None
    if own is None or own >= opset:
        return model
    try:
        out = version_converter.convert_version(model, opset)
        onnx.checker.check_model(out, full_check=True)
    except Exception as error:  # the converter raises RuntimeError, the checker ValidationError
        raise InvalidInputError(
            "model", f"default-domain opset {own} cannot be converted to opset {opset}: {described(error)}"
        ) from None
    return out


def attach_onnx(
    model: onnx.ModelProto,
    logits_output: str | int,
    *,
    mask_dtype: str = "int32",
    labels_dtype: str = "int64",
    attributes: Mapping[str, Any] | None = None,
    opset: int = function.MIN_OPSET,
    inline: bool = False,
    static: bool = False,
) -> onnx.ModelProto:
    """``model`` with ``sequence_mask`` and ``labels`` inputs and a ``loss`` output added, the loss
    computed from the model's output ``logits_output`` (a name or an index; [T, N, C],
    float16/32/64, which gives the loss's element type and dims). The logits output is kept. Other
    options as for :func:`ctcop.onnx.onnx_model`; the model keeps its own default-domain opset
    when newer, and is converted to ``opset`` when older. ``inline``: the loss node replaced by
    its function's body (:func:`ctcop.onnx.inline.inlined`); ``static`` (with ``inline``, for
    logits of fixed dims): the static form (spec 11.2)."""
    target = checked_opset(opset)
    model = converted_model(model, target)
    logits_name = _output_name(model, logits_output)
    dtype, dims = _logits_type(model, logits_name)
    if dtype not in ("float16", "float32", "float64"):
        raise InvalidInputError("logits_output", f"{logits_name!r} must be float16/float32/float64")
    options = ExportOptions.of(
        dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, dims=dims, attributes=attributes
    )
    fixed = static_dims(options, static, inline)
    taken = {v.name for v in [*model.graph.input, *model.graph.output]}
    taken |= {o for node in model.graph.node for o in node.output}
    loss = attached_names(taken)[2]
    if any(f.domain == function.DOMAIN and f.name == function.OP_TYPE for f in model.functions):
        raise InvalidInputError("model", "already holds an ai.ctcop.CTCLoss function")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.input.extend(mask_and_labels(options))
    out.graph.node.append(loss_node(logits_name, options))
    out.graph.output.append(value_info(loss, options.dtype, [options.dims[1]]))
    try:
        attached = with_function(out, options, max(target, known_opset(model) or 0), fixed, inline)
    except onnx.checker.ValidationError as error:
        reason = described(error)
        raise InvalidInputError("model", f"with the loss attached it fails onnx.checker: {reason}") from None
    return inlined(attached) if inline else attached
