"""The loss (spec 4.3, 4.4, 11.5), and the builder of the whole function.

The two lanes of a sample are joined over the moves between their frames, in the compute type on
the values relative to the lanes' offsets, which are added to the logarithm in float64; the loss
is -ln of the sum, +0.0 for a zero, NaN for non-finite and faulty samples, cast back to the
element type of ``inputs``. :func:`ctc_loss_function` runs the stages in order: checks, targets,
lanes, lattice, emissions, the recursion, the join and the read-out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from ...schema import form
from ..graph import FixedDims, GraphBuilder, Sizes, live
from ..types import tensor_type
from .constants import DOMAIN, DOUBLE, FEW_CLASSES, MIN_OPSET, OP_TYPE
from .emissions import (
    BlockEmissions,
    EmissionInputs,
    block_widths,
    emission_ways,
    few_classes,
    in_blocks,
    many_classes,
    no_classes,
    spread_by_step,
)
from .lattice import (
    Checked,
    Frames,
    Lattice,
    checked_inputs,
    collapsed_targets,
    lane_steps,
    lanes_lattice,
    sample_ids_of,
)
from .recursion import LoopInputs, Start, forward_loops, grown_rows, loop_inputs
from .rows import if_node, logsumexp_rows


def forward(
    g: GraphBuilder,
    x: str,
    checked: Checked,
    lattice: Lattice,
    frames: Frames,
    sample_ids: str,
    sizes: Sizes,
    merge: str | bool,
    compute: int,
    known: tuple[int | None, int | None],
) -> tuple[str, str]:
    """Emissions (4.1, 4.5), the forward Loop over the lanes (4.5) and their join, with ln 0 =
    -inf. Returns ln of each sample's probability [N] (float64) and [N] true for a sample with an
    active non-finite frame. Before any step only each lane's state 0 has probability 1; the
    steps are those of lane_steps, and no step reads a masked frame.

    How emissions are read depends on C (every way gives the same values): up to FEW_CLASSES
    the Loop body gathers each block's emissions (few_classes); with more they are gathered
    before the Loop (many_classes); with C = 0 they are zeros (no_classes). ``known``: T and C
    where the graph is built for them (see chosen_recursion), else None."""
    known_frames, known_classes = known
    # A Loop runs the blocks unless T is known (a Scan, or no step at all; chosen_recursion).
    ctx, start = loop_inputs(g, lattice, frames, merge, compute, limited=known_frames is None)
    # [T * N, C] as [-1, C]: OpenVINO 2025.4 reads a 0 in a Reshape's shape as "keep that dim"
    # when the input has no elements, even with allowzero; where C = 0, [0, 1], which nothing
    # reads (no_classes).
    x_rows = g.Reshape(x, g.Concat(g.i64([-1]), g.Max(sizes.classes, g.i64([1])), axis=0))
    distinct = g.Transpose(lattice.distinct, perm=[1, 0])
    blank = g.Sub(sizes.class_count, g.i64(1))
    inputs = EmissionInputs(
        x, x_rows, frames, checked.active, distinct, lattice.spread, lattice.count, blank, sizes, compute
    )
    if known_classes is None:
        alpha, offset, nonfinite = recursion(g, inputs, ctx, start)
    else:
        alpha, offset, nonfinite = chosen_recursion(g, inputs, ctx, start, known_frames, known_classes)
    if ctx.row_limits is not None:  # the Loop's rows, and ln 0 in those that no lane has reached
        alpha = grown_rows(g, alpha, g.Gather(ctx.row_limits, frames.blocks, axis=0), lattice.count, compute)
    own = g.Add(alpha, ctx.own_penalty)
    return joined_lanes(g, own, offset, lattice, sizes.batch, sample_ids, compute), nonfinite


def recursion(g: GraphBuilder, inputs: EmissionInputs, ctx: LoopInputs, start: Start) -> tuple[str, str, str]:
    """Dims known only when the graph runs: an If on C picks how emissions are read, and a Loop
    runs the blocks (T may be 0). Returns ``alpha``, ``offset`` and the non-finite samples [N]."""
    is_few, by_class, index, blocked, nonfinite = emission_ways(g, inputs)
    loop_branches = []
    spread = spread_by_step(g, inputs.spread, inputs.distinct)
    ways = (("few", BlockEmissions(by_class, index, spread)), ("many", BlockEmissions(blocked)))
    for way, way_source in ways:
        part = GraphBuilder(f"{way}_classes_loop_")
        loop_branches.append((part, forward_loops(part, ctx, start, way_source, inputs.compute, scan=False)))
    loop_kinds: list[tuple[Any, list[Any]]] = [(inputs.compute, [None, None]), (DOUBLE, [1, None])]
    alpha, offset = if_node(g, is_few, (loop_branches[0], loop_branches[1]), loop_kinds)
    return alpha, offset, nonfinite


def chosen_recursion(
    g: GraphBuilder, inputs: EmissionInputs, ctx: LoopInputs, start: Start, frames: int | None, classes: int
) -> tuple[str, str, str]:
    """C known when the graph is built (the inlined form for a fixed C, and the static form,
    spec 11.2): the way of reading emissions is chosen by C here, with no If (onnxoptimizer's
    elimination of an If whose condition is constant, which onnxsim runs, leaves a graph out of
    topological order). With T known too (the static form) the frame terms of the many-classes
    way are computed for all frames at once and a Scan runs the blocks (every shape is then
    fixed, and tract, which has no Loop, runs it); with T = 0 there is no step (onnxruntime's
    Scan fails on a zero-length scan axis): every sample keeps its start. Otherwise a Loop runs
    them, as in recursion. Returns as recursion."""
    if frames == 0:
        return start.alpha, start.offset, g.Expand(g.const(False, np.bool_), inputs.sizes.batch)
    if 0 < classes <= FEW_CLASSES:
        part, by_class, index, nonfinite = few_classes(inputs)
        g.nodes.extend(part.nodes)
        blocked = in_blocks(g, by_class, block_widths(g, inputs)[0], inputs)
        source = BlockEmissions(blocked, index, spread_by_step(g, inputs.spread, inputs.distinct))
    else:
        way = no_classes(inputs) if classes == 0 else many_classes(inputs, chunked=frames is None)
        part, (emissions, nonfinite) = way
        g.nodes.extend(part.nodes)
        source = BlockEmissions(in_blocks(g, emissions, block_widths(g, inputs)[1], inputs))
    alpha, offset = forward_loops(g, ctx, start, source, inputs.compute, scan=frames is not None)
    return alpha, offset, nonfinite


def joined_lanes(
    g: GraphBuilder, lanes: str, offset: str, lattice: Lattice, batch: str, sample_ids: str, compute: int
) -> str:
    """ln of each sample's probability [N] (float64, -inf for none) from its lanes' forward
    variables after the last step, ``lanes`` [2 + S, 2N] (compute type, ln 0 outside each lane's
    own lattice) plus ``offset`` [1, 2N] (float64): the first lane's F over the states and the
    second lane's G over the reversed states are joined over the moves between the last frame of
    the first half and the first frame of the second, P = sum_s F(s) (stay(s) G(s) + G(s + 1) +
    skip(s + 2) G(s + 2)). State s of a sample is row r = 2 + s of its first lane and state
    2L_n - s of its second, which (see lattice_of) is row 2 + 2L - s = 2L + 4 - r for every
    sample: G is the second lanes' rows in reverse order. A half without frames holds its start
    (the first: state 0, "before frame 0"; the second: state 2L, "after the last frame"), whose
    moves into the other half are those of the lattice's start and end. The sum runs in the
    compute type on the lanes' values, whose maximum is 0 (the offsets hold the rest); the two
    offsets are added to its logarithm in float64."""
    axis1 = g.i64([1])
    halves = ((g.i64([0]), batch), (batch, g.Mul(batch, g.i64([2]))))
    first, second = (g.Slice(lanes, start, end, axis1) for start, end in halves)
    stay, skip = (g.Slice(penalty, *halves[0], axis1) for penalty in (lattice.stay_penalty, lattice.skip_penalty))
    top = g.Sub(g.Squeeze(lattice.count, g.i64([0])), g.i64(1))
    # Rows past the lattices read row 0 or 1 (ln 0); rows 0 and 1 of F are ln 0 whatever they read.
    mirrored = [
        g.Gather(second, g.Min(g.Max(g.Sub(g.Add(top, g.i64(2 - shift)), lattice.rows), g.i64(0)), top), axis=0)
        for shift in (0, 1, 2)
    ]
    skip_into = g.Gather(skip, g.Min(g.Add(lattice.rows, g.i64(2)), top), axis=0)
    terms = [g.Sum(first, stay, mirrored[0]), g.Add(first, mirrored[1]), g.Sum(first, skip_into, mirrored[2])]
    joined = g.Cast(logsumexp_rows(g, g.Concat(*terms, axis=0), compute), to=DOUBLE)
    offsets = g.Squeeze(g.Add(*(g.Slice(offset, start, end, axis1) for start, end in halves)), g.i64([0]))
    # Read through ``sample_ids``, whose shape inference keeps N, so the loss's shape is [N].
    return g.Gather(g.Add(joined, offsets), sample_ids, axis=0)


def read_out(g: GraphBuilder, log_mass: str, nan_samples: str) -> str:
    """Read-out (4.3, 4.4, 11.5): -ln of each sample's probability, NaN for ``nan_samples`` [N].
    The loss is 0 - ln(mass), not Neg: a zero loss (T = 0, C = 1) is then +0.0, never -0.0
    (onnxruntime's optimizer drops an ``x + 0``, so adding +0.0 after Neg would not do)."""
    return g.Where(nan_samples, g.f64(np.nan), g.Sub(g.f64(0.0), log_mass))


def ctc_loss_function(
    opset: int = MIN_OPSET,
    compute: str = "float64",
    fixed: FixedDims | None = None,
    classes: int | None = None,
    merge_repeated: bool | None = None,
) -> onnx.FunctionProto:
    """The model-local function ``ai.ctcop.CTCLoss`` over standard ONNX operators of ``opset``.

    ``compute`` ("float32" or "float64") is the type of the log-softmax and of the recursion
    (the per-sample offsets and the result are float64). The exporters pass float64 for float64
    models only. ``fixed`` (T, N, C): a body for inputs of exactly these dims, every shape in it
    a constant and the recursion a Scan (the static form, spec 11.2); None: any dims. ``classes``
    (C, without ``fixed``): a body for inputs of C classes only, which reads emissions the one
    way C asks for (the inlined form of a model with a fixed C, spec 11.2); None: any C.
    ``merge_repeated``: a body for nodes with that attribute value only, whose recursion has the
    one body that value asks for (the inlined form, spec 11.2); None: any value.
    """
    spec = form("time_major")
    x, mask, labels = spec.input_names
    g = GraphBuilder()
    compute_type = tensor_type(compute)
    sizes = Sizes.of(g, x) if fixed is None else Sizes.fixed(g, fixed)
    blank = g.Sub(sizes.class_count, g.i64(1))
    checked = checked_inputs(g, mask, labels, sizes)
    collapse = g.attribute("preprocess_collapse_repeated")
    targets, lengths = collapsed_targets(g, checked.labels, blank, collapse, trim=fixed is None)
    merge = g.attribute("merge_repeated")
    sample_ids = sample_ids_of(g, x)
    lattice = lanes_lattice(g, targets, lengths, blank, merge, compute_type)
    frames = lane_steps(g, checked.active, sizes, sample_ids)
    known = (None, classes) if fixed is None else (fixed[0], fixed[2])
    chosen = merge if merge_repeated is None else merge_repeated
    log_mass, nonfinite = forward(g, x, checked, lattice, frames, sample_ids, sizes, chosen, compute_type, known)
    nan_samples = g.Or(checked.faults, nonfinite)
    g.node("CastLike", [read_out(g, log_mass, nan_samples), x], [spec.output_name])
    nodes = live(g.nodes, [spec.output_name])
    return helper.make_function(
        DOMAIN,
        OP_TYPE,
        list(spec.input_names),
        [spec.output_name],
        # Without steps (fixed T = 0) the recursion's inputs are built and left unread.
        nodes,
        [helper.make_opsetid("", opset)],
        attribute_protos=[helper.make_attribute(name, int(default)) for name, default in spec.attributes.items()],
        doc_string="CTCLoss-4, time-major form; see spec/ctcloss4.md",
        value_info=loop_outputs(nodes),
    )


def loop_outputs(nodes: list[onnx.NodeProto]) -> list[onnx.ValueInfoProto]:
    """The types of the carried outputs of the Loops among ``nodes``: their bodies' (rank 2 or 3,
    free dims). ONNX's shape inference gives a Loop's carried outputs no shape, and OpenVINO's
    CPU plugin takes no input of unknown rank: without these, a subgraph that onnxruntime's
    OpenVINO execution provider cuts after a Loop would not compile."""
    types = []
    for node in nodes:
        if node.op_type == "Loop":
            (body,) = (attribute.g for attribute in node.attribute if attribute.name == "body")
            carried = body.output[1 : len(node.input) - 1]
            types += [helper.make_value_info(name, out.type) for name, out in zip(node.output, carried, strict=False)]
    return types
