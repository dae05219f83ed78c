"""The forward recursion (spec 4.5): blocks of UNROLL steps, each step a fixed run of elementwise
operators and Gathers over the forward variables [2 + S, 2N], carried relative to a float64
per-lane offset that takes each block's maximum.

Where T is known only when the graph runs, a Loop runs the blocks and carries only the rows some
lane can have reached by a block's end (:func:`row_limits`); the static form (fixed dims, spec
11.2) runs the same body as a Scan over every row. An If on ``merge_repeated`` picks the body
with or without the stay penalty, unless the graph is built for one value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import helper

from ..graph import GraphBuilder
from .constants import BOOL, DOUBLE, INT64, UNROLL
from .emissions import BlockEmissions
from .lattice import Frames, Lattice
from .rows import finite_or, if_node, largest, subgraph


@dataclass(frozen=True)
class LoopInputs:
    """Outer-scope values the Loop body reads: the rows that step and skip moves read; the
    penalties [2 + S, 2N] of the stay and skip moves and of the rows outside each lane's own
    lattice (0 or -inf); the lowest finite value and 0 in the compute type; and for a Loop
    ``row_limits`` [B + 1, 1], the rows it carries before its first block and after each (see
    row_limits; None: every row, as a Scan, which has no block number, computes them)."""

    step_rows: str
    skip_rows: str
    stay_penalty: str
    skip_penalty: str
    own_penalty: str
    lowest: str
    zero: str
    row_limits: str | None


def loop_inputs(
    g: GraphBuilder, lattice: Lattice, frames: Frames, merge: str | bool, compute: int, limited: bool
) -> tuple[LoopInputs, Start]:
    """The forward Loop's constant inputs and its start: before any step only each lane's state 0
    (its ``first_row``) has probability 1. ``limited``: the recursion is a Loop, whose blocks
    compute the rows of row_limits."""
    axis0, rows = g.i64([0]), lattice.rows
    column = g.Unsqueeze(rows, g.i64([1]))
    first_row, last_row = (g.Unsqueeze(row, axis0) for row in (lattice.first_row, lattice.last_row))
    zero, neg_inf = g.const(0.0, compute), g.const(-np.inf, compute)
    alpha0 = g.Where(g.Equal(column, first_row), zero, neg_inf)
    ctx = LoopInputs(
        step_rows=g.Max(g.Sub(rows, g.i64(1)), g.i64(0)),
        skip_rows=g.Max(g.Sub(rows, g.i64(2)), g.i64(0)),
        stay_penalty=lattice.stay_penalty,
        skip_penalty=lattice.skip_penalty,
        # Rows of each lane's own lattice: its offset ignores the rows outside, so a lane's
        # float32 arithmetic does not depend on the other targets of the batch.
        own_penalty=g.Where(g.And(g.GreaterOrEqual(column, first_row), g.LessOrEqual(column, last_row)), zero, neg_inf),
        lowest=g.const(np.finfo(helper.tensor_dtype_to_np_dtype(compute)).min, compute),
        zero=zero,
        row_limits=row_limits(g, first_row, lattice.count, frames.blocks) if limited else None,
    )
    if ctx.row_limits is not None:  # a Loop starts from the rows up to the highest first row
        alpha0 = first_rows(g, alpha0, g.Gather(ctx.row_limits, g.i64(0), axis=0))
    start = Start(frames.blocks, alpha0, g.Expand(g.f64(0.0), g.Concat(g.i64([1]), frames.lanes, axis=0)), merge)
    return ctx, start


def forward_step(
    g: GraphBuilder, ctx: LoopInputs, scale: str, mass: str | None, emission: str, stay_penalty: bool
) -> tuple[str, str]:
    """One step of the forward recursion (spec 4.5) in the (scale, mass) form of
    :func:`loop_body`: the new scale and mass of every state from those before the step (``mass``
    None: all 1).

    The three move terms of the scales (stay, step, skip) are separate tensors (the stay term
    needs no penalty when merge_repeated holds); the new scale is their maximum, floored at the
    lowest finite value, plus the emission; the new mass is the sum of the three sources' masses
    weighted by exp(term - maximum). A state that a move reaches from a state of nonzero mass has
    a mass of at least 1 (the largest term's weight is 1) and below 3**UNROLL; one that no move
    reaches has mass 0, so ``scale + ln(mass)`` is ln 0 (the exponents need no floor: a zero or
    subnormal Exp is exact). Every operator is elementwise, variadic or a Gather (a Where or a
    reduction over a short leading axis costs several elementwise operators).
    """
    terms = [
        g.Add(scale, ctx.stay_penalty) if stay_penalty else scale,
        g.Gather(scale, ctx.step_rows, axis=0),
        g.Add(g.Gather(scale, ctx.skip_rows, axis=0), ctx.skip_penalty),
    ]
    # Floored at the lowest finite value: no NaN (ln 0 - ln 0) where no move reaches a state.
    top = g.Max(*terms, ctx.lowest)
    weights = [g.Exp(g.Sub(term, top)) for term in terms]
    if mass is not None:
        masses = [mass, g.Gather(mass, ctx.step_rows, axis=0), g.Gather(mass, ctx.skip_rows, axis=0)]
        weights = [g.Mul(weight, part) for weight, part in zip(weights, masses, strict=True)]
    return g.Add(top, emission), g.Sum(*weights)


def first_rows(g: GraphBuilder, values: str, rows: str) -> str:
    """The first ``rows`` ([1]) rows of ``values``."""
    return g.Slice(values, g.i64([0]), rows, g.i64([0]))


def grown_rows(g: GraphBuilder, values: str, rows: str, grown: str, compute: int) -> str:
    """``values`` of ``rows`` ([1]) rows (compute type) with rows of ln 0 appended up to
    ``grown`` ([1], at least ``rows``)."""
    below = g.Mul(g.Sub(grown, rows), g.i64([0, 0, 1, 0]))  # pads [0, 0, added, 0]
    return g.Pad(values, below, g.const(-np.inf, compute))


def row_limits(g: GraphBuilder, first_row: str, count: str, blocks: str) -> str:
    """[B + 1, 1]: the rows that the Loop carries before its first block and after each, min(2 + S,
    r + 1 + 2 UNROLL b) after b blocks, with r the highest of the lanes' ``first_row`` [1, 2N]
    and ``count`` [1] = 2 + S. Before any step a lane's only state of nonzero probability is its
    first row, the pad rows before it stay ln 0, and a step moves a path at most two rows on:
    after k >= 1 steps every row beyond first_row + 2k - 1 is ln 0 in every lane. One row is to
    spare, which also keeps the scalar tail of onnxruntime's float32 Log (D17; 4 wide as
    measured: the last 2N * rows mod 4 values, at most 2) in a row that no lane has reached, so
    the rows computed hold the bits of the full rows. (With targets of one length r = 2: the
    first three blocks of warp-ctc's L = 40 compute 23, 43 and 63 of the 83 rows.)"""
    ends = g.Mul(g.Range(g.i64(0), g.Add(blocks, g.i64(1)), g.i64(1)), g.i64(2 * UNROLL))
    return g.Unsqueeze(g.Min(g.Add(ends, g.Add(largest(g, first_row), g.i64([1]))), count), g.i64([1]))


def block_rows(
    g: GraphBuilder, ctx: LoopInputs, stay_penalty: bool, compute: int
) -> tuple[LoopInputs, str, Callable[[str], str]]:
    """The rows a Loop's block b computes, those that a lane can have reached by its end (see
    row_limits; every row where ``ctx`` has no limits): ``ctx`` with the moves' rows and the
    penalties cut to them, the carried variables grown to them with ln 0, and a function that
    cuts a tensor of 2 + S rows to them. The Loop carries only those rows, so the body's input
    shapes differ from block to block where its tensors' sizes do, and onnxruntime's memory
    pattern, kept per input shape, fits each."""
    if ctx.row_limits is None:
        return ctx, "alpha_in", lambda values: values
    limit = g.Gather(ctx.row_limits, g.Add("b", g.i64(1)), axis=0)
    scale = grown_rows(g, "alpha_in", g.Gather(ctx.row_limits, "b", axis=0), limit, compute)

    def head(values: str) -> str:
        return first_rows(g, values, limit)

    cut = replace(
        ctx,
        step_rows=head(ctx.step_rows),
        skip_rows=head(ctx.skip_rows),
        stay_penalty=head(ctx.stay_penalty) if stay_penalty else ctx.stay_penalty,
        skip_penalty=head(ctx.skip_penalty),
        own_penalty=head(ctx.own_penalty),
    )
    return cut, scale, head


def block_emissions(g: GraphBuilder, source: BlockEmissions, scan: bool, head: Callable[[str], str]) -> list[str]:
    """Each step's emissions of the block (see BlockEmissions: the Scan's input ``block``, or
    block ``b`` of the source), in the rows ``head`` keeps."""
    block = "block" if scan else g.Gather(source.source, "b", axis=0)
    if source.index is not None:
        assert source.spread is not None
        by_class = g.Flatten(g.GatherElements(block, source.index, axis=1), axis=2)
        return [g.Gather(by_class, head(rows), axis=0) for rows in source.spread]
    emissions = [g.fresh("emission") for _ in range(UNROLL)]
    g.node("Split", [block], emissions, axis=0, num_outputs=UNROLL)
    return [head(emission) for emission in emissions]


def loop_body(
    prefix: str, ctx: LoopInputs, source: BlockEmissions, compute: int, stay_penalty: bool, scan: bool
) -> onnx.GraphProto:
    """UNROLL steps of the forward recursion (spec 4.5) as one Loop iteration, or with ``scan``
    one Scan iteration (the block of ``source`` is then the Scan's input, not a Gather); its
    values' names begin with ``prefix``.

    Carried values: ``alpha`` [2 + S, 2N] (a Loop: the rows of row_limits) in the compute type,
    the forward variables of each lane minus its ``offset`` [1, 2N] (float64). Within the block a
    forward variable is a pair, ``scale + ln(mass)`` (see forward_step), so the block takes one
    Log, at its end (a runtime's float32 Log costs several elementwise operators). At the block's
    end the maximum of ``scale + ln(mass)`` over each lane's own rows moves into ``offset``: the
    values left in the compute type stay small, so float32 rounding is relative to a few frames'
    log-probabilities, not to the whole sum. A Loop, not a Scan, where T is known only when the
    graph runs: onnxruntime's Scan fails on a zero-length scan axis (T = 0).
    """
    g = GraphBuilder(f"{prefix}step_")  # names unique across the bodies (ONNX's data propagation)
    assert not (scan and ctx.row_limits is not None), "a Scan has no block number"
    ctx, scale, head = block_rows(g, ctx, stay_penalty, compute)
    emissions = block_emissions(g, source, scan, head)
    # The masses are 1 (absent) before the block's first step.
    mass = None
    for step in range(UNROLL):
        scale, mass = forward_step(g, ctx, scale, mass, emissions[step], stay_penalty)
    alpha = g.Add(scale, g.Log(mass)) if mass is not None else scale
    own_top = finite_or(g, g.ReduceMax(g.Add(alpha, ctx.own_penalty), g.i64([0]), keepdims=1), ctx.zero, compute)
    g.node("Sub", [alpha, own_top], ["alpha_out"])
    g.node("Add", ["offset_in", g.Cast(own_top, to=DOUBLE)], ["offset_out"])
    return body_graph(g, compute, scan, by_class=source.index is not None)


def body_graph(g: GraphBuilder, compute: int, scan: bool, by_class: bool) -> onnx.GraphProto:
    """The graph of a Loop's or (``scan``) a Scan's body from the nodes of ``g``: carried
    ``alpha`` and ``offset``, and the Loop's block number and condition or the Scan's block
    (rank 3 for emissions by class, ``by_class``; else 2)."""
    info = helper.make_tensor_value_info
    # Carried values are rank 2 with free dimensions: their sizes are those of the Loop's inputs.
    carried = (("alpha", compute), ("offset", DOUBLE))
    inputs = [info(f"{name}_in", kind, [None, None]) for name, kind in carried]
    outputs = [info(f"{name}_out", kind, [None, None]) for name, kind in carried]
    if scan:
        rank = 3 if by_class else 2
        return subgraph(g.nodes, "ctc_forward_step", [*inputs, info("block", compute, [None] * rank)], outputs)
    g.node("Identity", ["cond_in"], ["cond_out"])
    return subgraph(
        g.nodes,
        "ctc_forward_step",
        [info("b", INT64, []), info("cond_in", BOOL, []), *inputs],
        [info("cond_out", BOOL, []), *outputs],
    )


@dataclass(frozen=True)
class Start:
    """The Loop's count, its carried values before the first step and the merge flag: the
    attribute's value, or the value the graph is built for (the inlined form)."""

    blocks: str
    alpha: str
    offset: str
    merge: str | bool


def forward_loops(
    g: GraphBuilder, ctx: LoopInputs, start: Start, source: BlockEmissions, compute: int, scan: bool
) -> list[str]:
    """The forward Loop over ``source``, or with ``scan`` a Scan over its blocks: an If on
    merge_repeated picks a body with or without the stay penalty, or the body is chosen here
    when the graph is built for one merge_repeated. Returns ``alpha`` (compute type; [2 + S, 2N],
    or a Loop's first rows, see row_limits) and ``offset`` [1, 2N] (float64)."""
    branches = []
    for stay_penalty in (False, True) if isinstance(start.merge, str) else (not start.merge,):
        part = GraphBuilder(f"{g.prefix}{'stay_penalty' if stay_penalty else 'free_stays'}_")
        body = loop_body(part.prefix, ctx, source, compute, stay_penalty, scan)
        alpha, offset = (part.fresh(name) for name in ("alpha", "offset"))
        if scan:
            part.node("Scan", [start.alpha, start.offset, source.source], [alpha, offset], body=body, num_scan_inputs=1)
        else:
            inputs = [start.blocks, part.const(True, np.bool_), start.alpha, start.offset]
            part.node("Loop", inputs, [alpha, offset], body=body)
        outputs = [alpha, offset]
        branches.append((part, outputs))
    if isinstance(start.merge, bool):
        g.nodes.extend(branches[0][0].nodes)
        return branches[0][1]
    return if_node(g, start.merge, (branches[0], branches[1]), [(compute, [None, None]), (DOUBLE, [1, None])])
