"""Emissions (spec 3.2, 4.1, 4.4): the log-softmax ``(x - max) - ln sum exp(x - max)`` of the frame
each step reads, once per distinct class of the lattice (the blank and the targets: 1 + L of the
2 + S rows) and spread to the rows by a Gather.

By C, one of three ways, all giving the same values: up to FEW_CLASSES, every step's frame by
class, gathered a block at a time by GatherElements in the Loop body; with more, the frame terms
a chunk of frames at a time (no tensor of the logits' size) and a Gather of the targets' logits;
with C = 0, zeros. A frame is non-finite when its log-sum is NaN or its minimum infinite; an
active non-finite frame makes its sample NaN (11.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper

from ..graph import GraphBuilder, Sizes, any_along
from .constants import BOOL, CHUNK, FEW_CLASSES, INT64, UNROLL
from .lattice import Frames
from .rows import if_node, is_inf, subgraph, take


@dataclass(frozen=True)
class Stats:
    """Log-softmax terms of [F, N, C] logits in the compute type: ``centred`` = x - max, and
    [F, N, 1] ``top`` (the max), ``log_sum`` (ln sum exp centred) and ``bottom`` (the min)."""

    centred: str
    top: str
    log_sum: str
    bottom: str


def frame_stats(g: GraphBuilder, logits: str, axis: int = 2) -> Stats:
    """Frame terms (3.2, 4.1, 4.4) of ``logits`` with the classes on ``axis``: log-softmax as
    (x - max) - ln sum exp(x - max)."""
    classes = g.i64([axis])
    top = g.ReduceMax(logits, classes, keepdims=1)
    centred = g.Sub(logits, top)
    log_sum = g.Log(g.ReduceSum(g.Exp(centred), classes, keepdims=1))
    return Stats(centred, top, log_sum, g.ReduceMin(logits, classes, keepdims=1))


def nonfinite_frames(g: GraphBuilder, log_sum: str, bottom: str, compute: int, axis: int = 2) -> str:
    """[F, N] true where a frame is non-finite: its log-sum is not below +inf (NaN, or +inf where
    exp(NaN) is +inf, as in OpenVINO's CPU plugin; a finite frame's is at most ln C) or its minimum
    infinite (the terms of frame_stats for the classes on ``axis``)."""
    # Squeezed first: onnxruntime compares [F, N, 1] with a scalar about 15 times slower than
    # [F, N] (a slow path for a last dimension of 1).
    classes = g.i64([axis])
    below_inf = g.Less(g.Squeeze(log_sum, classes), g.const(np.inf, compute))
    return g.Or(g.Not(below_inf), is_inf(g, g.Squeeze(bottom, classes), compute))


@dataclass(frozen=True)
class EmissionInputs:
    """What the emission stage reads: ``inputs``, its rows [T * N, C], the frames, the active
    mask [T, N], the distinct classes of the lanes' states [1 + L, 2N] and the column of each row
    [2 + S] (see Lattice), the row count [1], the blank (scalar), the sizes and the compute
    type."""

    x: str
    rows: str
    frames: Frames
    active: str
    distinct: str
    spread: str
    count: str
    blank: str
    sizes: Sizes
    compute: int


@dataclass(frozen=True)
class BlockEmissions:
    """Where the Loop body finds each step's emissions [2 + S, 2N]: in block b of ``source``,
    which is [B, UNROLL * (2 + S), 2N] emissions split into the steps, or, with an ``index``
    [UNROLL, 1 + L, 2N] (int32), [B, UNROLL, C, 2N] log-probabilities by class that
    GatherElements reads once per distinct class, each step's rows of them then one Gather of
    its ``spread`` rows (see spread_by_step)."""

    source: str
    index: str | None = None
    spread: tuple[str, ...] | None = None


def spread_by_step(g: GraphBuilder, spread: str, distinct: str) -> tuple[str, ...]:
    """For each step u of a block, the row of every state [2 + S] in the block's emissions by
    distinct class flattened to [UNROLL * (1 + L), 2N]: u * (1 + L) plus the state's column
    (``spread``, see Lattice; ``distinct`` [1 + L, 2N]). One Gather a step reads them: the
    block is not spread to the states and then split, two copies of it."""
    width = g.Shape(distinct, end=1)
    return (spread, *(g.Add(spread, g.Mul(width, g.i64(step))) for step in range(1, UNROLL)))


def waiting_emissions(g: GraphBuilder, classes: str, blank: str, compute: int) -> str:
    """The emissions of a step that reads no frame, for ``classes``: ln 1 for the blank, ln 0 for
    the others. Such a step keeps a lane's start (state 0 stays, state 1 gets ln 0)."""
    return g.Where(g.Equal(classes, blank), g.const(0.0, compute), g.const(-np.inf, compute))


def few_classes(ctx: EmissionInputs) -> tuple[GraphBuilder, str, str, str]:
    """Up to FEW_CLASSES classes (C > 0): the log-softmax of the frame each step reads, [P, C, 2N]
    (a Gather of rows; a waiting step reads an appended row whose log-softmax is ln 1 for the
    blank and ln 0 for the other classes), which the Loop body reads in blocks of UNROLL steps
    with one GatherElements of the ``index`` [UNROLL, 1 + L, 2N] (int32; onnx.reference's
    GatherElements takes at most 32 choices under NumPy 1). Returns the branch, the
    log-probabilities, the index and [N] true for a sample with an active non-finite frame."""
    g = GraphBuilder("few_classes_")
    positions = g.Unsqueeze(g.Range(g.i64(0), ctx.sizes.class_count, g.i64(1)), g.i64([0]))
    # ln 1 and ln 0 in the compute type: OpenVINO computes float64 as float32 and saturates a
    # float64 -inf to float32's lowest value on the way (D5).
    blank_only = g.Where(g.Equal(positions, ctx.blank), g.const(0.0, ctx.compute), g.const(-np.inf, ctx.compute))
    rows = g.Concat(ctx.rows, g.CastLike(blank_only, ctx.x), axis=0)
    waiting_row = g.Mul(ctx.sizes.frame_count, ctx.sizes.batch)
    read = g.Gather(rows, g.Where(ctx.frames.waiting, waiting_row, ctx.frames.rows), axis=0)
    # The classes on axis 1 before the log-softmax: onnxruntime subtracts [P, 1, 2N] from
    # [P, C, 2N] about three times faster than [P, 2N, 1] from [P, 2N, C].
    stats = frame_stats(g, g.Transpose(g.Cast(read, to=ctx.compute), perm=[0, 2, 1]), axis=1)
    by_class = g.Sub(stats.centred, stats.log_sum)
    shape = g.Concat(g.i64([UNROLL]), g.Shape(ctx.distinct), axis=0)
    # int32 indices: onnxruntime's GatherElements takes about two thirds of the time.
    index = g.Expand(g.Unsqueeze(g.Cast(ctx.distinct, to=TensorProto.INT32), g.i64([0])), shape)
    bad = nonfinite_frames(g, stats.log_sum, stats.bottom, ctx.compute, axis=1)
    by_lane = any_along(g, g.And(bad, g.Not(ctx.frames.waiting)), 0)
    nonfinite = any_along(g, g.Reshape(by_lane, g.Concat(g.i64([2]), ctx.sizes.batch, axis=0), allowzero=1), 0)
    return g, by_class, index, nonfinite


def many_classes(ctx: EmissionInputs, chunked: bool) -> tuple[GraphBuilder, list[str]]:
    """More classes: the frame terms of ``inputs`` (with ``chunked``, a chunk at a time, see
    chunked_terms; else of all frames at once); then a Gather of each state's logit from the flat
    ``inputs`` at the frame each step reads, and (x - max) - ln sum exp(x - max) on the gathered
    values only, once per distinct class, spread to the rows. Returns the branch, the emissions
    [P, 2 + S, 2N] and [N] true for a sample with an active non-finite frame."""
    g = GraphBuilder("many_classes_")
    if chunked:
        terms = chunked_terms(g, ctx)
    else:
        stats = frame_stats(g, g.Cast(ctx.x, to=ctx.compute))
        terms = g.Concat(stats.top, stats.log_sum, stats.bottom, axis=2)
    top, log_sum, bottom = (g.fresh(name) for name in ("top", "log_sum", "bottom"))
    g.node("Split", [terms], [top, log_sum, bottom], axis=2, num_outputs=3)
    nonfinite = any_along(g, g.And(nonfinite_frames(g, log_sum, bottom, ctx.compute), ctx.active), 0)
    # The terms of the frame each step reads, as [P, 1, 2N] columns.
    flat_terms = g.Reshape(terms, g.i64([-1, 3]))
    step_terms = [
        g.Unsqueeze(g.Gather(g.Gather(flat_terms, g.i64(k), axis=1), ctx.frames.rows, axis=0), g.i64([1]))
        for k in (0, 1)
    ]
    flat = g.Add(g.Unsqueeze(g.Mul(ctx.frames.rows, ctx.sizes.class_count), g.i64([1])), ctx.distinct)
    gathered = g.Cast(take(g, ctx.rows, flat), to=ctx.compute)
    emissions = g.Sub(g.Sub(gathered, step_terms[0]), step_terms[1])
    waiting = waiting_emissions(g, ctx.distinct, ctx.blank, ctx.compute)
    by_class = g.Where(g.Unsqueeze(ctx.frames.waiting, g.i64([1])), waiting, emissions)
    return g, [g.Gather(by_class, ctx.spread, axis=1), nonfinite]


def chunked_terms(g: GraphBuilder, ctx: EmissionInputs) -> str:
    """The frame terms [T, N, 3] (max, log-sum, min) of ``inputs`` in chunks of about CHUNK values
    (whole frames, at least one) in a Loop, so no tensor of the logits' size is made and each
    chunk stays in cache. Each chunk's terms are written into a carried value of fixed shape
    [T, N, 3] (ScatterND): OpenVINO 2025.4 keeps only the last iteration's part of a carried value
    that grows by Concat (D58)."""
    batch, frames = ctx.sizes.batch, ctx.sizes.frames
    per_frame = g.Mul(ctx.sizes.batch, ctx.sizes.classes)
    chunk = g.Max(g.Div(g.i64([CHUNK]), g.Max(per_frame, g.i64([1]))), g.i64([1]))
    # At least one chunk, empty for T = 0: OpenVINO 2025.4's Loop of no iteration gives its
    # carried value the wrong dims.
    count = g.Squeeze(g.Max(g.Div(g.Add(frames, g.Sub(chunk, g.i64([1]))), chunk), g.i64([1])), g.i64([0]))
    body = GraphBuilder("chunk_")
    start = body.Mul(body.Reshape("c", body.i64([1])), chunk)
    chunk_logits = body.Slice(ctx.x, start, body.Add(start, chunk), body.i64([0]))
    stats = frame_stats(body, body.Cast(chunk_logits, to=ctx.compute))
    # The rows written are the frames the Slice gave, counted from its shape: a body that reads T
    # (min(start + chunk, T)) crashes onnxruntime's constant folding when T is fixed (D59).
    taken = body.Squeeze(body.Shape(chunk_logits, start=0, end=1), body.i64([0]))
    written = body.Unsqueeze(body.Add(body.Range(body.i64(0), taken, body.i64(1)), start), body.i64([1]))
    chunk_terms = body.Concat(stats.top, stats.log_sum, stats.bottom, axis=2)
    body.node("ScatterND", ["acc_in", written, chunk_terms], ["acc_out"])
    body.node("Identity", ["cond_in"], ["cond_out"])
    info = helper.make_tensor_value_info
    loop_body = subgraph(
        body.nodes,
        "frame_terms",
        [info("c", INT64, []), info("cond_in", BOOL, []), info("acc_in", ctx.compute, [None, None, 3])],
        [info("cond_out", BOOL, []), info("acc_out", ctx.compute, [None, None, 3])],
    )
    zero = g.const(0.0, ctx.compute)
    acc0 = g.Expand(zero, g.Concat(frames, batch, g.i64([3]), axis=0))
    terms = g.fresh("terms")
    g.node("Loop", [count, g.const(True, np.bool_), acc0], [terms], body=loop_body)
    return terms


def no_classes(ctx: EmissionInputs) -> tuple[GraphBuilder, list[str]]:
    """C = 0: nothing to read (every sample is NaN, 11.5); zero emissions and no non-finite frame."""
    g = GraphBuilder("no_classes_")
    zero = helper.make_tensor("zero", ctx.compute, [1], [0.0])
    false = helper.make_tensor("false", BOOL, [1], [False])
    padded = g.Reshape(ctx.frames.padded, g.i64([1]))
    return g, [
        g.ConstantOfShape(g.Concat(padded, ctx.count, ctx.frames.lanes, axis=0), value=zero),
        g.ConstantOfShape(ctx.sizes.batch, value=false),
    ]


def emission_ways(g: GraphBuilder, inputs: EmissionInputs) -> tuple[str, str, str, str, str]:
    """The If over how emissions are read: [] true when C <= FEW_CLASSES (and C > 0), then the
    few-classes source and index, the blocked emissions of the other way, and the samples [N]
    with an active non-finite frame."""
    axis0, sizes, compute = g.i64([0]), inputs.sizes, inputs.compute
    # The emission If gives the values of both ways, the unused one empty; the Loops come after it
    # and read only values of this graph: onnxruntime replaces an If whose condition it can fold
    # (fixed dimensions) by its branch and renames that branch's values, but not the names a Loop
    # body nested in the branch reads.
    few, by_class, index, few_nonfinite = few_classes(inputs)
    few_outputs = [
        by_class,
        index,
        few.Expand(few.const(np.zeros((0, 0, 0)), compute), few.i64([0, 0, 0])),
        few_nonfinite,
    ]
    other = GraphBuilder("other_classes_")
    kinds = [(compute, [None, None, None]), (BOOL, [None])]
    is_none = other.Squeeze(other.Equal(sizes.classes, other.i64([0])), other.i64([0]))
    ways = (no_classes(inputs), many_classes(inputs, chunked=True))
    emissions, other_nonfinite = if_node(other, is_none, ways, kinds)
    other_outputs = [
        other.Expand(other.const(np.zeros((0, 0, 0)), compute), other.i64([0, 0, 0])),
        other.Expand(other.const(np.zeros((0, 0, 0), np.int32), np.int32), other.i64([0, 0, 0])),
        emissions,
        other_nonfinite,
    ]
    is_few = g.And(
        g.Squeeze(g.LessOrEqual(sizes.classes, g.i64([FEW_CLASSES])), axis0),
        g.Squeeze(g.Greater(sizes.classes, g.i64([0])), axis0),
    )
    kinds = [
        (compute, [None, None, None]),
        (TensorProto.INT32, [None, None, None]),
        (compute, [None, None, None]),
        (BOOL, [None]),
    ]
    by_class, index, emissions, nonfinite = if_node(g, is_few, ((few, few_outputs), (other, other_outputs)), kinds)
    # Blocked here, not in the If's branches: a Reshape that gives a branch's output copies it.
    # The way not taken gives an empty tensor, blocked with 0 for one of its dims.
    few_flag = g.Cast(g.Unsqueeze(is_few, axis0), to=INT64)
    few_width, other_width = block_widths(g, inputs)
    few_width = g.Mul(few_width, g.Concat(g.i64([1]), few_flag, axis=0))
    other_width = g.Mul(other_width, g.Sub(g.i64([1]), few_flag))
    return (
        is_few,
        in_blocks(g, by_class, few_width, inputs),
        index,
        in_blocks(g, emissions, other_width, inputs),
        nonfinite,
    )


def block_widths(g: GraphBuilder, inputs: EmissionInputs) -> tuple[str, str]:
    """The dims of a block of UNROLL steps between the blocks and the lanes: [UNROLL, C] for the
    few-classes log-probabilities, [UNROLL * (2 + S)] for the other ways' emissions."""
    return g.Concat(g.i64([UNROLL]), inputs.sizes.classes, axis=0), g.Mul(inputs.count, g.i64([UNROLL]))


def in_blocks(g: GraphBuilder, values: str, width: str, inputs: EmissionInputs) -> str:
    """[P, ..., 2N] ``values`` in blocks [B, *width, 2N] of UNROLL steps (``width`` 1-D: the dims
    of a block between the blocks and the lanes)."""
    blocks = g.Reshape(inputs.frames.blocks, g.i64([1]))
    return g.Reshape(values, g.Concat(blocks, width, inputs.frames.lanes, axis=0), allowzero=1)
