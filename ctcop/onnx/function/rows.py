"""Small graph helpers the stages share: positions, shifts and stable compaction of [N, W] rows,
interleaving, IsInf and IsNaN in the forms every runtime reads, a flat Gather, subgraphs (named
for onnxruntime's OpenVINO execution provider, see SUBGRAPH), an If over two branches and a
log-sum-exp over rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..graph import GraphBuilder
from .constants import SUBGRAPH


def positions_of(g: GraphBuilder, values: str) -> str:
    """0, 1, ..., W-1 for [N, W] ``values``."""
    width = g.Squeeze(g.Shape(values, start=1, end=2), g.i64([0]))
    return g.Range(g.i64(0), width, g.i64(1))


def shift_right(g: GraphBuilder, values: str, by: int, fill: str) -> str:
    """``out[:, s] = values[:, s - by]`` for [N, W] values, ``fill`` where s < by (any width)."""
    padded = g.Pad(values, g.i64([0, by, 0, 0]), fill)
    return g.Slice(padded, g.i64([0]), g.i64([-by]), g.i64([1]))


def compact(g: GraphBuilder, values: str, keep: str, fill: str, trim: bool) -> tuple[str, str]:
    """Stable move of the kept entries of each row to its front; the rest becomes ``fill``.

    Returns the rows, trimmed to the longest kept length when ``trim`` holds (a width known only
    when the graph runs) and at their own width otherwise, and the kept counts [N].
    """
    one, axis1 = g.i64(1), g.i64([1])
    kept = g.int64(keep)
    if trim:
        # Nothing moves past a row's last kept entry: the rows are first cut to the longest such
        # prefix (the targets' pads usually trail them, and the permutation below costs several
        # operators over the whole width).
        ends = g.Mul(kept, g.Add(positions_of(g, values), one))
        end = largest(g, ends)
        values, keep, kept = (g.Slice(part, g.i64([0]), end, axis1) for part in (values, keep, kept))
    counts = g.ReduceSum(kept, axis1, keepdims=1)
    before = g.Sub(g.CumSum(kept, one), one)
    after = g.Add(counts, g.Sub(g.CumSum(g.Sub(one, kept), one), one))
    moved = g.ScatterElements(values, g.Where(keep, before, after), values, axis=1)
    filled = g.Where(g.Less(positions_of(g, values), counts), moved, fill)
    if not trim:
        return filled, g.Squeeze(counts, axis1)
    trimmed = g.Slice(filled, g.i64([0]), largest(g, counts), axis1)
    return trimmed, g.Squeeze(counts, axis1)


def largest(g: GraphBuilder, values: str) -> str:
    """The largest of the int64 ``values`` [N, W] and 0, as [1] (0 for no values). No axis it
    reduces is empty (a reduction over none is undefined in OpenVINO's ReduceMax): a 0 is padded
    on before each. (A Pad, not a Concat: OpenVINO 2025.4 turns a ReduceMax of a Concat into an
    elementwise Maximum of its inputs.)"""
    zero = g.i64(0)
    by_row = g.ReduceMax(g.Pad(values, g.i64([0, 0, 0, 1]), zero), g.i64([1]), keepdims=0)
    return g.ReduceMax(g.Pad(by_row, g.i64([0, 1]), zero), g.i64([0]), keepdims=1)


def interleave(g: GraphBuilder, values: str, between: str, first: str) -> str:
    """[N, L] -> [N, 2L + 1]: first, v_1, between, v_2, between, ..., v_L, between."""
    column = g.Unsqueeze(values, g.i64([2]))
    pairs = g.Concat(column, g.Expand(between, g.Shape(column)), axis=2)
    n = g.Shape(values, start=0, end=1)
    width = g.Mul(g.Shape(values, start=1, end=2), g.i64([2]))
    flat = g.Reshape(pairs, g.Concat(n, width, axis=0), allowzero=1)
    head = g.Expand(first, g.Concat(n, g.i64([1]), axis=0))
    return g.Concat(head, flat, axis=1)


def is_inf(g: GraphBuilder, values: str, kind: int) -> str:
    """IsInf of ``values`` of element type ``kind``, as |x| = inf: tract types IsInf and IsNaN of
    float64 values as float64, not bool."""
    return g.Equal(g.Abs(values), g.const(np.inf, kind))


def finite_or(g: GraphBuilder, values: str, fallback: str, kind: int) -> str:
    return g.Where(is_inf(g, values, kind), fallback, values)


def take(g: GraphBuilder, data: str, flat_index: str) -> str:
    """``data.ravel()[flat_index]``: Gather on a flat view (see FEW_CLASSES for GatherElements)."""
    return g.Gather(g.Reshape(data, g.i64([-1])), flat_index, axis=0)


def subgraph(
    nodes: Sequence[onnx.NodeProto],
    what: str,
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
) -> onnx.GraphProto:
    """An If branch or a Loop or Scan body: named SUBGRAPH, ``what`` it is its doc_string."""
    return helper.make_graph(list(nodes), SUBGRAPH, list(inputs), list(outputs), doc_string=what)


def if_node(
    g: GraphBuilder,
    condition: str,
    branches: tuple[tuple[GraphBuilder, list[str]], ...],
    outputs: Sequence[tuple[Any, Sequence[Any]]],
) -> list[str]:
    """An If over two (builder, outputs) branches, each giving tensors of the element types and
    shapes in ``outputs``."""
    then_branch, else_branch = (
        subgraph(
            part.nodes,
            part.prefix.rstrip("_"),
            [],
            [helper.make_tensor_value_info(out, kind, dims) for out, (kind, dims) in zip(names, outputs, strict=True)],
        )
        for part, names in branches
    )
    chosen = [g.fresh("chosen") for _ in outputs]
    g.node("If", [condition], chosen, then_branch=then_branch, else_branch=else_branch)
    return chosen


def logsumexp_rows(g: GraphBuilder, values: str, kind: int) -> str:
    """ln sum exp over the rows of [R, N] ``values`` of element type ``kind`` (-inf for a column
    of ln 0)."""
    axis0 = g.i64([0])
    top = finite_or(g, g.ReduceMax(values, axis0, keepdims=1), g.const(0.0, kind), kind)
    total = g.ReduceSum(g.Exp(g.Sub(values, top)), axis0, keepdims=0)
    return g.Add(g.Squeeze(top, axis0), g.Log(total))
