"""Element type names (numpy's, as the schema writes them) to ONNX TensorProto codes and back."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper


def tensor_type(name: str) -> int:
    """The TensorProto code of element type ``name`` ("float32", "int64", "bool", ...)."""
    code: int = helper.np_dtype_to_tensor_dtype(np.dtype(name))
    return code


def numpy_type(code: int) -> np.dtype[Any] | None:
    """The numpy element type of TensorProto code ``code``; None for undefined or unmapped codes."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(code))
    except (KeyError, ValueError, TypeError):
        return None


def type_name(code: int) -> str:
    """The element type name of TensorProto code ``code``; "?" for undefined or unmapped codes."""
    dtype = numpy_type(code)
    return "?" if dtype is None else str(dtype.name)
