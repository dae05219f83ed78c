"""The IR writer: the op as an ``openvino.Model``, lowered or as the custom layer (spec 12.1.1, 12.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import openvino
import openvino.opset15 as ops

from .. import schema
from ..errors import InvalidInputError
from ..options import Dim, Dims, ExportOptions
from .custom_op import CTCLossOp
from .lowering import lower, narrowed_faults, runtime_nan

IR_FORMS = ("lowered", "custom")


def checked_form(ir_form: str) -> str:
    if ir_form not in IR_FORMS:
        raise InvalidInputError("form", f"unknown IR form {ir_form!r}; one of {', '.join(IR_FORMS)}")
    return ir_form


def named(node: Any, name: str) -> Any:
    """``node`` with friendly name and output tensor name ``name``."""
    node.set_friendly_name(name)
    node.output(0).get_tensor().set_names({name})
    return node


def ir_dim(dim: Dim) -> int:
    return dim if isinstance(dim, int) else -1


def mask_and_labels(options: ExportOptions) -> tuple[Any, Any]:
    """The ``sequence_mask`` [T, N] and ``labels`` [N, T] parameters."""
    _, mask, labels = schema.form("time_major").input_names
    t, n, _ = (ir_dim(d) for d in options.dims)
    return (
        named(ops.parameter([t, n], np.dtype(options.mask_dtype)), mask),
        named(ops.parameter([n, t], np.dtype(options.labels_dtype)), labels),
    )


def loss_node(inputs: Any, mask: Any, labels: Any, ir_form: str, options: ExportOptions) -> Any:
    """The loss of ``ir_form`` over three OpenVINO outputs, named as the schema's output. The
    custom layer is followed by a guard of stock operators when mask or labels have a type the CPU
    plugin narrows to int32 (spec 12.2 D6): a sample with a value outside int32's range, which the
    layer would see wrapped (2**32 as 0), gets NaN, as ``ctc_loss_or_nan`` gives it."""
    if ir_form == "custom":
        node = CTCLossOp([inputs, mask.output(0), labels.output(0)], options.attributes)
        wide = narrowed_faults(inputs, mask.output(0), labels.output(0))
        if wide is not None:
            node = ops.select(wide, runtime_nan(node.output(0)), node)
    else:
        node = lower(inputs, mask.output(0), labels.output(0), **options.attributes)
    return named(node, schema.form("time_major").output_name)


def ir_model(
    *,
    form: str = "lowered",
    dtype: str = "float32",
    mask_dtype: str = "int32",
    labels_dtype: str = "int64",
    dims: Dims = ("T", "N", "C"),
    attributes: Mapping[str, Any] | None = None,
) -> openvino.Model:
    """An ``openvino.Model`` with inputs ``inputs`` [T,N,C], ``sequence_mask`` [T,N], ``labels``
    [N,T] and output ``loss`` [N]. ``form`` "lowered" (default) uses stock OpenVINO operators
    only (native CTCLoss-4 plus adapters and guards, spec 12.1); "custom" is one ``CTCLoss``
    layer of version ``ctcop1`` that needs :func:`ctcop.openvino_extensions` to be read. Other
    options as for :func:`ctcop.onnx.onnx_model` (symbolic dims become dynamic). Either form is a
    total function (spec 11.5): NaN for a sample whose mask column or label row breaks a rule,
    every loss NaN where dynamic dims let mask or labels disagree with the logits' shape or C = 0.
    """
    ir_form = checked_form(form)
    options = ExportOptions.of(
        dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, dims=dims, attributes=attributes
    )
    t, n, c = (ir_dim(d) for d in options.dims)
    x = named(ops.parameter([t, n, c], np.dtype(options.dtype)), schema.form("time_major").input_names[0])
    mask, labels = mask_and_labels(options)
    loss = loss_node(x.output(0), mask, labels, ir_form, options)
    return openvino.Model([ops.result(loss)], [x, mask, labels], "ctcop_ctc_loss")
