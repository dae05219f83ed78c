"""OpenVINO element type names (``Type.get_type_name()``) to numpy's names, as the schema writes them."""

from __future__ import annotations

from typing import Any

ELEMENT_TYPES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "boolean": "bool",
    **{f"i{b}": f"int{b}" for b in (8, 16, 32, 64)}, **{f"u{b}": f"uint{b}" for b in (8, 16, 32, 64)},
}  # fmt: skip


def type_name(element_type: Any) -> str:
    """The numpy name of an ``openvino.Type``; "?" for types without one (dynamic, string, ...)."""
    return ELEMENT_TYPES.get(element_type.get_type_name(), "?")
