"""The op attached to an existing ``openvino.Model`` whose output carries [T, N, C] logits (spec 12.1.1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openvino
import openvino.opset15 as ops

from ..errors import InvalidInputError
from ..options import ExportOptions, attached_names, chosen_output
from .types import type_name
from .writer import checked_form, loss_node, mask_and_labels


def _logits_result(model: openvino.Model, logits_output: str | int) -> Any:
    """The Result ``logits_output`` names or indexes (:func:`ctcop.options.chosen_output`)."""
    results = list(model.get_results())
    return results[chosen_output([r.output(0).get_names() for r in results], logits_output)]


def attach_openvino(
    model: openvino.Model,
    logits_output: str | int,
    *,
    form: str = "lowered",
    mask_dtype: str = "int32",
    labels_dtype: str = "int64",
    attributes: Mapping[str, Any] | None = None,
) -> openvino.Model:
    """A new ``openvino.Model``: ``model`` plus ``sequence_mask`` and ``labels`` parameters and a
    ``loss`` result computed from its output ``logits_output`` (a tensor name or an index), which
    must carry [T, N, C] float logits (they give the loss's element type and dims). Either IR
    form; other options as for :func:`ctcop.openvino.ir_model`."""
    ir_form = checked_form(form)
    logits = _logits_result(model, logits_output).input_value(0)  # the node feeding the Result
    shape = logits.get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 3:
        raise InvalidInputError("logits_output", f"{logits_output!r} must have rank 3 ([T, N, C]), got {shape}")
    element = type_name(logits.get_element_type())
    if element not in ("float16", "float32", "float64"):
        raise InvalidInputError("logits_output", f"{logits_output!r} must be float16/float32/float64, got {element}")
    t, n, c = (d.get_length() if d.is_static else s for d, s in zip(shape, "TNC", strict=True))
    options = ExportOptions.of(
        dtype=element,
        mask_dtype=mask_dtype,
        labels_dtype=labels_dtype,
        dims=(t, n, c),
        attributes=attributes,
    )
    attached_names({name for o in [*model.inputs, *model.outputs] for name in o.get_names()})
    mask, labels = mask_and_labels(options)
    loss = loss_node(logits, mask, labels, ir_form, options)
    return openvino.Model(
        [*model.get_results(), ops.result(loss)], [*model.get_parameters(), mask, labels], model.get_friendly_name()
    )
