"""Graph building as calls on values: ``g.Add(a, b)`` appends an Add node and returns its output.

A small stand-in for onnxscript's ``op.X(...)`` style without the dependency. Values are names;
constants are Constant nodes made once per value (``g.i64([0])``, ``g.const(0.0, np.float64)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class GraphBuilder:
    """Nodes of one graph or function body, with fresh output names under ``prefix``."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self._count = 0
        self._constants: dict[tuple[str, tuple[int, ...], bytes], str] = {}

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{self.prefix}{hint}_{self._count}"

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: Any) -> None:
        """Append a node with explicit output names (graph outputs, multi-output operators)."""
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), **attributes))

    def call(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        """Append ``op_type`` over ``inputs``; returns the name of its one output."""
        out = self.fresh(op_type.lower())
        self.node(op_type, inputs, [out], **attributes)
        return out

    def __getattr__(self, op_type: str) -> Callable[..., str]:
        if not op_type[:1].isupper():
            raise AttributeError(op_type)
        return partial(self.call, op_type)

    def const(self, value: Any, dtype: Any) -> str:
        """A Constant holding ``value`` as ``dtype`` (one node per distinct value)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constants:
            out = self.fresh("c")
            self.node("Constant", [], [out], value=numpy_helper.from_array(array))
            self._constants[key] = out
        return self._constants[key]

    def i64(self, value: Any) -> str:
        return self.const(value, np.int64)

    def attribute(self, name: str) -> str:
        """A bool scalar holding the int attribute ``name`` of the enclosing function."""
        out = self.fresh(name)
        ref = helper.make_attribute_ref("value_int", onnx.AttributeProto.INT)
        ref.ref_attr_name = name
        node = helper.make_node("Constant", [], [out])
        node.attribute.append(ref)
        self.nodes.append(node)
        return self.Cast(out, to=TensorProto.BOOL)
