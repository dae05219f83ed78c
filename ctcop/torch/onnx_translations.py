"""What torch.export's ONNX exporter (``torch.onnx.export(..., dynamo=True)``) is given for the
operators a ``ctc_loss`` model needs beyond its own library (spec 14.4).

* ``ctcop::ctc_loss`` (:mod:`ctcop.torch.custom_op`) becomes one placeholder node
  ``ai.ctcop.torch.CTCLoss`` (:mod:`ctcop.torch.onnx_graph`), which
  :func:`ctcop.torch.finish_onnx` expands;
* ``aten.masked_select``, which onnxscript's library lacks and Hugging Face's CTC loss
  (``transformers.loss.loss_ctc.ForCTCLoss``) uses to concatenate the targets, becomes
  NonZero -> Transpose -> GatherND.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
import torch

from . import onnx_graph
from .semantics import ArgumentFacts, checked_call


def _placeholder_schema() -> onnx.defs.OpSchema:
    """An OpSchema for the placeholder, given to onnxscript's Op (nothing is registered)."""
    schema = onnx.defs.OpSchema
    inputs = [schema.FormalParameter(name, f"T{k}") for k, name in enumerate(onnx_graph.INPUTS)]
    types = ["tensor(float16)", "tensor(float)", "tensor(double)"]
    integers = [f"tensor({t})" for t in ("int8", "int16", "int32", "int64", "uint8", "bool", "float", "double")]
    constraints = [("T0", types, ""), *((f"T{k}", integers, "") for k in (1, 2, 3))]
    names = ("blank", "reduction", "zero_infinity", "batched", "concatenated", "dtype")
    return schema(
        onnx_graph.OP_TYPE,
        onnx_graph.DOMAIN,
        1,
        inputs=inputs,
        outputs=[schema.FormalParameter("loss", "T0")],
        type_constraints=constraints,
        attributes=[schema.Attribute(name, schema.AttrType.INT, "") for name in names],
    )


def ctc_loss_translation(
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int,
    reduction: int,
    zero_infinity: bool,
) -> Any:
    """``ctcop::ctc_loss``: one placeholder node (its static arguments checked, spec 14.2)."""
    import onnxscript

    def rank(value: Any) -> int | None:
        return None if value.shape is None else len(value.shape)

    def type_name(value: Any) -> str:
        return str(value.dtype.numpy().name) if value.dtype is not None else "?"

    tensors = (log_probs, targets, input_lengths, target_lengths)
    ranks = tuple(rank(v) for v in tensors)
    classes = log_probs.shape[-1] if ranks[0] in (2, 3) else None
    types = (type_name(input_lengths), type_name(target_lengths))
    facts = ArgumentFacts(ranks, type_name(log_probs), types, classes if isinstance(classes, int) else None)
    call = checked_call(blank, reduction, zero_infinity, facts)
    attributes = onnx_graph.placeholder_attributes(call.attributes(), facts.log_prob_type)
    placeholder = onnxscript.values.Op(
        onnxscript.values.Opset(onnx_graph.DOMAIN, 1), onnx_graph.OP_TYPE, _placeholder_schema()
    )
    return placeholder(*tensors, **attributes)


def masked_select_translation(values: Any, mask: Any) -> Any:
    """``aten.masked_select``: the entries of ``values`` where ``mask`` (broadcast together) is
    true, in row-major order, 1-D: GatherND at the Transpose of NonZero."""
    from onnxscript import opset18 as op

    broadcast = op.Where(mask, values, values)
    indices = op.Transpose(op.NonZero(op.Expand(mask, op.Shape(broadcast))), perm=[1, 0])
    return op.GatherND(broadcast, indices, batch_dims=0)


def translation_table() -> dict[Callable[..., Any], Callable[..., Any]]:
    """``custom_translation_table`` for ``torch.onnx.export(..., dynamo=True)`` of a model that
    calls ``ctcop::ctc_loss`` (:func:`ctcop.torch.ctc_loss`, :class:`ctcop.torch.CTCLoss`, or
    PyTorch's under :class:`~ctcop.torch.redirect_ctc_loss`); then :func:`ctcop.torch.finish_onnx`
    the result."""
    return {
        torch.ops.ctcop.ctc_loss.default: ctc_loss_translation,
        torch.ops.aten.masked_select.default: masked_select_translation,
    }
