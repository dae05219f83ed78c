"""Graph building as calls on values: ``g.Add(a, b)`` appends an Add node and returns its output.

A small stand-in for onnxscript's ``op.X(...)`` style without the dependency. Values are names;
constants are Constant nodes made once per value (``g.i64([0])``, ``g.f64(0.0)``,
``g.const(0.0, compute)``). Beside the builder, what every graph of the ONNX wing reads from its
inputs (spec 11.5): the sizes of the logits (:class:`Sizes`), inputs cut and padded to the sizes
the logits give (:func:`fitted`) and per-sample flags (:func:`any_along`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
        """A Constant holding ``value`` as ``dtype``, a numpy dtype or a TensorProto code (one
        node per distinct value)."""
        if isinstance(dtype, int):
            dtype = helper.tensor_dtype_to_np_dtype(dtype)
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constants:
            out = self.fresh("c")
            self.node("Constant", [], [out], value=numpy_helper.from_array(array))
            self._constants[key] = out
        return self._constants[key]

    def i64(self, value: Any) -> str:
        return self.const(value, np.int64)

    def f64(self, value: Any) -> str:
        return self.const(value, np.float64)

    def int64(self, values: str) -> str:
        """``values`` computed from the inputs' values cast to int64, as CastLike to an int64
        constant: tract reads ``Cast(to=INT64)`` as a cast to its symbolic-dimension type, which
        its CumSum and Pad do not take. (Not for values computed from shapes alone: with fixed
        dims onnxruntime folds those, and warns where it cannot fold a CastLike.)"""
        return self.CastLike(values, self.i64(0))

    def attribute(self, name: str) -> str:
        """A bool scalar holding the int attribute ``name`` of the enclosing function."""
        out = self.fresh(name)
        ref = helper.make_attribute_ref("value_int", onnx.AttributeProto.INT)
        ref.ref_attr_name = name
        node = helper.make_node("Constant", [], [out])
        node.attribute.append(ref)
        self.nodes.append(node)
        return self.Cast(out, to=TensorProto.BOOL)


# T, N and C of a graph built for exactly these dims (the static form, spec 11.2).
FixedDims = tuple[int, int, int]


@dataclass(frozen=True)
class Sizes:
    """T, N and C of rank-3 logits: ``frames``, ``batch`` and ``classes`` as 1-element int64
    tensors (for Concat, Slice, Expand and broadcasting), T and C also as int64 scalars
    (``frame_count``, ``class_count``; for Range and scalar arithmetic)."""

    frames: str
    batch: str
    classes: str
    frame_count: str
    class_count: str

    @classmethod
    def of(cls, g: GraphBuilder, logits: str, layout: str = "TNC") -> Sizes:
        """The sizes of ``logits``, whose axes ``layout`` names ("TNC" time-major, "NTC" the
        released form's batch-major)."""
        dims = {axis: g.Shape(logits, start=k, end=k + 1) for k, axis in enumerate(layout)}
        frame_count, class_count = (g.Squeeze(dims[axis], g.i64([0])) for axis in "TC")
        return cls(dims["T"], dims["N"], dims["C"], frame_count, class_count)

    @classmethod
    def fixed(cls, g: GraphBuilder, dims: FixedDims) -> Sizes:
        """T, N and C known when the graph is built: constants, so that every shape computed from
        them is one too (the static form, spec 11.2)."""
        t, n, c = dims
        return cls(g.i64([t]), g.i64([n]), g.i64([c]), g.i64(t), g.i64(c))


def live(nodes: Sequence[onnx.NodeProto], outputs: Sequence[str]) -> list[onnx.NodeProto]:
    """The ``nodes`` that ``outputs`` depend on, in their order; a node reads its inputs and every
    name its subgraphs read."""
    needed, kept = set(outputs), []
    for node in reversed(nodes):
        if needed & set(node.output):
            kept.append(node)
            needed |= _read_by(node)
    return kept[::-1]


def _read_by(node: onnx.NodeProto) -> set[str]:
    names = set(node.input)
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            names |= {name for inner in attribute.g.node for name in _read_by(inner)}
    return names


def fitted(g: GraphBuilder, values: str, shape: str, fill: str, rank: int, to: int | None = None) -> str:
    """Rank-``rank`` ``values`` cut to ``shape`` [rank] and padded at the end with the scalar
    ``fill`` (spec 11.5: an input whose dims disagree with the logits' is read at the logits'
    sizes). With ``to`` (a TensorProto code), the cut values are cast to it before the padding,
    so that ``fill`` has type ``to``; otherwise ``fill`` has the values' type. The Slice comes
    before anything else that reads ``values`` (but their Shape): its output has no inferred
    shape, so onnxruntime plans no buffer from declared dimensions that the actual ones may
    contradict (11.4). The pads come from the Shape of ``values``, not of the cut: where the
    cut is float64, onnxruntime's OpenVINO execution provider leaves the Slice and that Shape to
    the CPU provider, and a pads computation that read the cut would join ``shape`` to a fused
    node on both sides of the Slice, a cycle that fails the session."""
    zeros = g.i64([0] * rank)
    cut = g.Slice(values, zeros, shape, g.i64(list(range(rank))))
    pads = g.Concat(zeros, g.Sub(shape, g.Min(shape, g.Shape(values))), axis=0)
    return g.Pad(cut if to is None else g.Cast(cut, to=to), pads, fill)


def any_along(g: GraphBuilder, flags: str, axis: int) -> str:
    """True where bool ``flags`` holds anywhere along ``axis`` (a sum: defined for length 0; in
    int32, exact for every axis of at most ``ctcop.options.MAX_DIM`` elements)."""
    counts = g.ReduceSum(g.Cast(flags, to=TensorProto.INT32), g.i64([axis]), keepdims=0)
    return g.Greater(counts, g.const(0, np.int32))
