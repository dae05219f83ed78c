"""The op attached to an existing ONNX model whose output carries [T, N, C] logits (spec 11.1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import onnx

from ..errors import InvalidInputError
from ..options import Dim, ExportOptions, attached_names
from . import function
from .types import type_name
from .writer import checked_opset, loss_node, mask_and_labels, value_info, with_function


def _logits_type(model: onnx.ModelProto, logits_output: str) -> tuple[str, tuple[Dim, Dim, Dim]]:
    """Element type and [T, N, C] of the output ``logits_output`` (symbols where unknown)."""
    if logits_output not in [o.name for o in model.graph.output]:
        raise InvalidInputError("logits_output", f"{logits_output!r} is not an output of the model")
    inferred = onnx.shape_inference.infer_shapes(model)
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


def attach_onnx(
    model: onnx.ModelProto,
    logits_output: str,
    *,
    mask_dtype: str = "int32",
    labels_dtype: str = "int64",
    attributes: Mapping[str, Any] | None = None,
    opset: int = function.MIN_OPSET,
) -> onnx.ModelProto:
    """``model`` with ``sequence_mask`` and ``labels`` inputs and a ``loss`` output added, the loss
    computed from the model's output ``logits_output`` ([T, N, C], float16/32/64, which gives the
    loss's element type and dims). The logits output is kept. Other options as for
    :func:`ctcop.onnx.onnx_model`; the model keeps its own default-domain opset when newer."""
    dtype, dims = _logits_type(model, logits_output)
    if dtype not in ("float16", "float32", "float64"):
        raise InvalidInputError("logits_output", f"{logits_output!r} must be float16/float32/float64")
    options = ExportOptions.of(
        dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, dims=dims, attributes=attributes
    )
    taken = {v.name for v in [*model.graph.input, *model.graph.output]}
    taken |= {o for node in model.graph.node for o in node.output}
    loss = attached_names(taken)[2]
    if any(f.domain == function.DOMAIN and f.name == function.OP_TYPE for f in model.functions):
        raise InvalidInputError("model", "already holds an ai.ctcop.CTCLoss function")
    own_opset = {op.domain: op.version for op in model.opset_import}.get("", 0)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.input.extend(mask_and_labels(options))
    out.graph.node.append(loss_node(logits_output, options))
    out.graph.output.append(value_info(loss, options.dtype, [options.dims[1]]))
    return with_function(out, options, max(checked_opset(opset), own_opset))
