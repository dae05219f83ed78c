"""Element type names (numpy's, as the schema writes them) to ONNX TensorProto codes and back."""

from __future__ import annotations

import numpy as np
from onnx import helper


def tensor_type(name: str) -> int:
    """The TensorProto code of element type ``name`` ("float32", "int64", "bool", ...)."""
    code: int = helper.np_dtype_to_tensor_dtype(np.dtype(name))
    return code


def type_name(code: int) -> str:
    """The element type name of TensorProto code ``code``; "?" for undefined or unmapped codes."""
    try:
        return str(helper.tensor_dtype_to_np_dtype(code).name)
    except (KeyError, ValueError, TypeError):
        return "?"
