"""Why a layer failed in ``ctcop eval``: the registered defect (spec 10.1) its inputs and verdict
point to, and what evaluating it again at its declared precision showed (spec 13)."""

from __future__ import annotations

import numpy as np

from ..defects import defect
from .find import Layer
from .result import LayerResult


def _named(defect_id: str, evidence: str) -> str:
    """``D1 (spec 4.4): <title> — <evidence>``, the registry's words for a defect (spec 10.1)."""
    return f"{defect(defect_id).label} — {evidence}"


def likely_cause(layer: Layer, inputs: list[np.ndarray], verdict: str, runtime: str) -> str:
    """The registered defect (spec 10.1) that explains ``verdict``, with its evidence, or ""."""
    if runtime != "openvino" or not inputs:
        return ""
    logits = np.asarray(inputs[0], dtype=np.float64)
    if layer.form == "released":
        lengths, target_lengths = np.asarray(inputs[1]), np.asarray(inputs[3])
        if verdict == "crash" and (target_lengths == 0).any():
            i = int(np.argmax(target_lengths == 0))
            return _named("D1", f"sample {i} has an empty target (label_length 0)")
        if verdict == "error" and (target_lengths > lengths).any():
            i = int(np.argmax(target_lengths > lengths))
            return _named("D2", f"sample {i} has label_length {target_lengths[i]} > logit_length {lengths[i]}")
        if verdict == "disagree" and lengths.size and not lengths.any():
            return _named("D8", "no sample has a frame (every logit_length is 0)")
        evidence = defect("D3").evidence
        if verdict == "disagree" and logits.size:
            top, low = logits.max(), logits.max(axis=2).min()
            if top >= evidence["logit_at_least"] or low <= evidence["frame_max_at_most"]:
                return _named("D3", f"largest logit {top:.6g}, smallest frame maximum {low:.6g}")
    if verdict == "disagree" and layer.ports[0].dtype == "float64":
        return f"{_named('D4', 'float64 logits')}; {defect('D5').label}"
    return ""


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
