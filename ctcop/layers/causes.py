"""Why a layer failed in ``ctcop eval``: the registered defect (spec 10.1) its inputs and verdict
point to, and what evaluating it again at its declared precision showed (spec 13)."""

from __future__ import annotations

import numpy as np

from ..attributes import Attributes
from ..defects import predicates
from ..schema import form
from .find import Layer
from .result import LayerResult
from .validate import attributes_of

# The conformance runtime that runs each form of layer on OpenVINO: the released layer is
# OpenVINO's own kernel, ctcop's lowerings its IR, ctcop's IR layer the custom op, ctcop's ONNX
# node the extension's lowering.
ON_OPENVINO = {
    "released": "openvino",
    "guarded": "openvino-ir",
    "lowered": "openvino-ir",
    "ctcop-ir": "openvino-custom",
    "ctcop-onnx": "openvino-onnx",
}


def likely_cause(layer: Layer, inputs: list[np.ndarray], verdict: str, runtime: str) -> str:
    """The registered defects (spec 10.1) that explain ``verdict`` ("crash", "error" or
    "disagree") of ``runtime`` ("openvino" or "onnxruntime") on the layer's ``inputs``, each with
    its evidence (:func:`ctcop.defects.predicates.explain`), or ""."""
    if not inputs or verdict not in ("crash", "error", "disagree"):
        return ""
    attributes = Attributes.of(attributes_of(layer), form_name=layer.spec_form)
    named = dict(zip(form(layer.spec_form).input_names, inputs, strict=False))
    x = predicates.read(named, attributes, layer.ports[0].dtype)
    failure = predicates.Failure("fail" if verdict == "disagree" else verdict)
    on = ON_OPENVINO[layer.form] if runtime == "openvino" else runtime
    return "; ".join(cause.text() for cause in predicates.explain(x, failure, on))


def precision_cause(compiled: str, declared_type: str, again: LayerResult) -> str:
    """What evaluating a layer again at its declared precision showed (spec 13), for a layer that
    disagreed when OpenVINO ran it in ``compiled`` (bf16 or f16) while its logits declare
    ``declared_type`` (float32 or float64); ``again`` is the result at the declared precision."""
    from ..openvino.precision import short_type_name

    declared = short_type_name(declared_type)
    if again.compiled_precision not in (None, declared):
        declared = f"{declared} (compiled {again.compiled_precision})"
    error = "" if again.max_rel_err is None else f" (max rel err {again.max_rel_err:.1e})"
    if again.verdict == "agree":
        return (
            f"runtime ran in {compiled}: agrees at the declared {declared}{error}; "
            f"the difference is {compiled}'s rounding of the model before the layer"
        )
    if again.verdict == "disagree":
        return f"runtime ran in {compiled} and still disagrees at the declared {declared}{error}"
    return f"runtime ran in {compiled}; at the declared {declared} the verdict is {again.verdict}"
