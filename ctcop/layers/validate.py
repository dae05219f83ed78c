"""Static checks of a CTCLoss layer against the spec and the schema: ranks, consistent dims,
element types, attribute names and values, and constant inputs checked by value (spec 3, 6, 7);
an attribute an IR leaves out is read as OpenVINO's reader reads it (spec 13)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import canonical
from ..attributes import written_flag
from ..errors import InvalidInputError
from ..files import MAX_TENSOR_BYTES
from ..schema import PortSpec, form
from .find import Layer, Port

# What OpenVINO's IR reader (2026.4.1, checked by reading IR files without each attribute) makes
# of an attribute of the released CTCLoss-4 that the XML leaves out: false for each of the three,
# whatever the operator's default (spec 13). ctcop's custom IR layer and ONNX node keep the
# schema's defaults.
ABSENT_IN_FILE: dict[str, dict[str, bool]] = {
    "released": {"preprocess_collapse_repeated": False, "ctc_merge_repeated": False, "unique": False},
}


@dataclass(frozen=True)
class Finding:
    """One finding: ``level`` "error" (the layer breaks the spec), "warning" (the runtime reads
    the file otherwise than the spec's defaults would suggest) or "note"."""

    level: str
    layer: str
    message: str

    def line(self) -> str:
        return f"{self.level}: {self.layer}: {self.message}"


def _port_findings(port: Port, spec: PortSpec, dims: dict[str, int]) -> list[str]:
    problems = [str(problem) for problem in canonical.port_problems(port.shape, port.dtype, spec, dims)]
    static = [d for d in port.shape or () if d is not None]
    if port.shape is not None and len(static) == len(port.shape) and port.dtype in spec.types:
        nbytes = math.prod(static) * (2 if port.dtype == "bfloat16" else np.dtype(port.dtype).itemsize)
        if nbytes > MAX_TENSOR_BYTES:
            problems.append(
                f"{spec.name}: declared {nbytes / 2**30:.3g} GiB, over the {MAX_TENSOR_BYTES >> 30} GiB "
                "ctcop evaluates (spec 13)"
            )
    return problems


def _written_flag(value: Any, name: str) -> bool | None:
    """The attribute as the boolean its file writes, or None where it writes none."""
    try:
        return written_flag(value, name)
    except InvalidInputError:
        return None


def _attribute_findings(layer: Layer) -> list[str]:
    defaults = form(layer.spec_form).attributes
    problems = [f"unknown attribute {name!r}" for name in layer.attributes if name not in defaults]
    for name, value in layer.attributes.items():
        if name in defaults and _written_flag(value, name) is None:
            problems.append(f"attribute {name} = {value!r} is not a boolean")
    return problems


def _constant_findings(layer: Layer, dims: dict[str, int]) -> list[InvalidInputError]:
    """Rules 7.1 and 3.3 on the inputs the file holds as constants, where T and C are known."""
    frames, classes = dims.get("T"), dims.get("C")
    problems: list[InvalidInputError] = []
    for port in layer.ports:
        values = port.constant
        if values is None or values.dtype.kind not in "iu":
            continue
        if port.name == "blank_index" and values.ndim == 0 and classes is not None:
            problems += canonical.blank_problems(values, classes)
        if port.name in ("logit_length", "label_length") and values.ndim == 1 and frames is not None:
            problems += canonical.length_problems(values, port.name, frames)
        if port.name == "labels" and layer.spec_form == "time_major" and values.ndim == 2 and classes is not None:
            problems += canonical.time_major_label_problems(values, classes)
    return problems


def validate_layer(layer: Layer) -> list[Finding]:
    """Every finding of ``layer``: errors where it breaks the spec, notes where defaults apply."""
    spec = form(layer.spec_form)
    required = [p for p in spec.inputs if not p.optional]
    errors: list[str] = []
    if not len(required) <= len(layer.ports) <= len(spec.inputs):
        errors.append(f"{len(layer.ports)} inputs; the {layer.form} form takes {len(required)} to {len(spec.inputs)}")
    dims: dict[str, int] = {}
    for port, port_spec in zip(layer.ports, spec.inputs, strict=False):
        errors += _port_findings(port, port_spec, dims)
    errors += [str(problem) for problem in canonical.classes_problems(spec, dims)]
    if layer.output_dtype != "?" and layer.ports and layer.output_dtype != layer.ports[0].dtype:
        errors.append(f"output element type {layer.output_dtype} differs from the logits' {layer.ports[0].dtype}")
    errors += _attribute_findings(layer) + [str(problem) for problem in _constant_findings(layer, dims)]
    absent = defaults_of(layer)
    notes, warnings = [], []
    for name, value in spec.attributes.items():
        if name in layer.attributes:
            continue
        if absent[name] == value:
            notes.append(f"attribute {name} absent: default {value}")
        else:
            warnings.append(
                f"attribute {name} absent: OpenVINO reads {str(absent[name]).lower()}, not the operator's "
                f"default {str(value).lower()} (write it explicitly)"
            )
    return [
        *(Finding("error", layer.name, m) for m in errors),
        *(Finding("warning", layer.name, m) for m in warnings),
        *(Finding("note", layer.name, m) for m in notes),
    ]


def defaults_of(layer: Layer) -> dict[str, bool]:
    """The value the runtime gives each attribute ``layer``'s file leaves out (spec 13)."""
    return {**form(layer.spec_form).attributes, **ABSENT_IN_FILE.get(layer.form, {})}


def attributes_of(layer: Layer) -> dict[str, bool]:
    """The layer's attributes as booleans, an absent one as the runtime reads it (valid layers only)."""
    chosen = defaults_of(layer)
    for name, value in layer.attributes.items():
        written = _written_flag(value, name)
        if name in chosen and written is not None:
            chosen[name] = written
    return chosen
