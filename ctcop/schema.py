"""The machine-readable schema of CTCLoss-4 (package data ``ctcop/data/ctcloss4.schema.json``).

Validation, the attribute type, the tolerance rule and the exporters read input names, ranks,
element types, attribute defaults, tolerances and the encodings of the op in ONNX and OpenVINO IR
from here instead of restating them (spec/ctcloss4.md, section "Schema"). Core module: imports
the standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

SCHEMA_FILE = "ctcloss4.schema.json"


@dataclass(frozen=True)
class PortSpec:
    """One input or output of a form of the op."""

    name: str
    dims: tuple[str, ...]
    types: tuple[str, ...]
    optional: bool = False

    @property
    def rank(self) -> int:
        return len(self.dims)


@dataclass(frozen=True)
class FormSpec:
    """One form of the op: the spec's time-major form or the released OpenVINO form."""

    name: str
    inputs: tuple[PortSpec, ...]
    outputs: tuple[PortSpec, ...]
    attributes: dict[str, bool]

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(port.name for port in self.inputs)

    @property
    def output_name(self) -> str:
        return self.outputs[0].name


@cache
def raw_schema() -> dict[str, Any]:
    """The schema document as parsed JSON."""
    text = resources.files("ctcop").joinpath("data", SCHEMA_FILE).read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@cache
def form(name: str) -> FormSpec:
    """The schema of form ``name`` ("time_major" or "openvino")."""
    doc = raw_schema()
    constraints = doc["type_constraints"]
    spec = doc["forms"][name]

    def port(p: dict[str, Any]) -> PortSpec:
        return PortSpec(p["name"], tuple(p["dims"]), tuple(constraints[p["type"]]), p.get("optional", False))

    return FormSpec(
        name=name,
        inputs=tuple(port(p) for p in spec["inputs"]),
        outputs=tuple(port(p) for p in spec["outputs"]),
        attributes={a["name"]: bool(a["default"]) for a in spec["attributes"]},
    )


def type_constraint(name: str) -> tuple[str, ...]:
    """The element types of type constraint ``name`` ("T_F", "T_IND" or "T_MASK")."""
    return tuple(raw_schema()["type_constraints"][name])


def encoding(name: str) -> dict[str, Any]:
    """How the op is written in ``name`` ("onnx": domain, version, op type, minimum opset;
    "openvino_custom": the IR layer's type and version)."""
    out: dict[str, Any] = raw_schema()["encodings"][name]
    return out
