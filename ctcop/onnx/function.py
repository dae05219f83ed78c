"""CTCLoss-4 as an ONNX model-local function built from standard operators (spec section 11).

The function ``ai.ctcop.CTCLoss`` (version 1) takes the spec's three inputs and two attributes and
computes in log space, in its compute type (float64 for float64 models, float32 otherwise), what
:mod:`ctcop.recursion` computes. It is a total function (spec 11.5): it returns a loss for every
input of its declared ranks and element types. Its stages, one function each:

* checks (3.1, 3.3, 11.5): ``sequence_mask`` and ``labels`` cut and padded to [T, N] and [N, T]
  and read as float64 (exact for every value that matters); per-sample faults (a mask value
  other than 0/1, a 1 after a 0, a label other than -1 and [0, C-2]) and a batch-wide fault
  (shapes that disagree, C = 0); a faulty sample's column and row become a valid empty one
  before anything indexes with them, so nothing out of range is ever read;
* frames (3.2, 4.1, 4.4): log-softmax over the C classes as ``(x - max) - ln sum exp(x - max)``;
  a frame is non-finite when its log-sum is NaN or its minimum is infinite, and an active
  non-finite frame makes its sample NaN; inactive frames are never read;
* targets (3.3, 3.4): pads removed wherever they stand and, if ``preprocess_collapse_repeated``,
  repeats merged, by a stable per-row permutation built with CumSum and ScatterElements;
* lattice (4.5): the extended-label states with stay/skip masks derived arithmetically from
  ``merge_repeated``, so one body serves every attribute value; disallowed moves add -inf;
* emissions: each state's log-probability per frame, in blocks of UNROLL frames;
* the Loop: blocks of frames carry the forward variables [2 + S, N] relative to a float64
  per-sample offset, and capture each sample's end states at its last active frame;
* read-out (4.3, 4.4, 11.5): ln of the end states' mass, +0.0 for a zero, NaN for non-finite and
  faulty samples, cast back to the element type of ``inputs`` with CastLike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..schema import encoding, form
from .graph import GraphBuilder

DOMAIN: str = encoding("onnx")["domain"]
DOMAIN_VERSION: int = encoding("onnx")["domain_version"]
OP_TYPE: str = encoding("onnx")["op_type"]
MIN_OPSET: int = encoding("onnx")["min_opset"]
# Frames per Loop iteration: onnxruntime spends most of a short iteration on the Loop itself.
UNROLL = 5
# Up to this many classes the emissions are gathered with GatherElements, which onnxruntime runs
# ten times faster than an element-wise Gather; onnx.reference's GatherElements (np.choose) takes
# at most 32 choices under NumPy 1 and 64 under NumPy 2, so more classes use a flat Gather.
FEW_CLASSES = 32
BOOL, INT64, DOUBLE = TensorProto.BOOL, TensorProto.INT64, TensorProto.DOUBLE


# -- small helpers on [N, W] rows --------------------------------------------------------------


def _positions(g: GraphBuilder, values: str) -> str:
    """0, 1, ..., W-1 for [N, W] ``values``."""
    width = g.Squeeze(g.Shape(values, start=1, end=2), g.i64([0]))
    return g.Range(g.i64(0), width, g.i64(1))


def _shift_right(g: GraphBuilder, values: str, by: int, fill: str) -> str:
    """``out[:, s] = values[:, s - by]`` for [N, W] values, ``fill`` where s < by (any width)."""
    padded = g.Pad(values, g.i64([0, by, 0, 0]), fill)
    return g.Slice(padded, g.i64([0]), g.i64([-by]), g.i64([1]))


def _compact(g: GraphBuilder, values: str, keep: str, fill: str) -> tuple[str, str]:
    """Stable move of the kept entries of each row to its front; the rest becomes ``fill``.

    Returns the rows trimmed to the longest kept length, and the kept counts [N].
    """
    one, axis1 = g.i64(1), g.i64([1])
    kept = g.Cast(keep, to=INT64)
    counts = g.ReduceSum(kept, axis1, keepdims=1)
    before = g.Sub(g.CumSum(kept, one), one)
    after = g.Add(counts, g.Sub(g.CumSum(g.Sub(one, kept), one), one))
    moved = g.ScatterElements(values, g.Where(keep, before, after), values, axis=1)
    filled = g.Where(g.Less(_positions(g, values), counts), moved, fill)
    longest = g.ReduceMax(g.Concat(g.Flatten(counts, axis=0), g.i64([[0]]), axis=1))
    trimmed = g.Slice(filled, g.i64([0]), g.Reshape(longest, g.i64([1])), axis1)
    return trimmed, g.Squeeze(counts, axis1)


def _interleave(g: GraphBuilder, values: str, between: str, first: str) -> str:
    """[N, L] -> [N, 2L + 1]: first, v_1, between, v_2, between, ..., v_L, between."""
    column = g.Unsqueeze(values, g.i64([2]))
    pairs = g.Concat(column, g.Expand(between, g.Shape(column)), axis=2)
    n = g.Shape(values, start=0, end=1)
    width = g.Mul(g.Shape(values, start=1, end=2), g.i64([2]))
    flat = g.Reshape(pairs, g.Concat(n, width, axis=0), allowzero=1)
    head = g.Expand(first, g.Concat(n, g.i64([1]), axis=0))
    return g.Concat(head, flat, axis=1)


def _finite_or(g: GraphBuilder, values: str, fallback: str) -> str:
    return g.Where(g.IsInf(values), fallback, values)


def _logsumexp(g: GraphBuilder, terms: list[str], zero: str, *plus: str) -> str:
    """ln sum_j exp(terms[j]) (+ the ``plus`` terms), exact for all -inf terms (-inf)."""
    top = _finite_or(g, g.Max(*terms), zero)
    total = g.Sum(*(g.Exp(g.Sub(term, top)) for term in terms))
    return g.Sum(top, g.Log(total), *plus)


def _take(g: GraphBuilder, data: str, flat_index: str) -> str:
    """``data.ravel()[flat_index]``: Gather on a flat view (see FEW_CLASSES for GatherElements)."""
    return g.Gather(g.Reshape(data, g.i64([-1])), flat_index, axis=0)


# -- stages ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Shapes:
    """Sizes of ``inputs`` [T, N, C]: 1-element shapes and scalars."""

    frames: str
    batch: str
    classes: str
    frame_count: str
    batch_size: str
    class_count: str

    @classmethod
    def of(cls, g: GraphBuilder, x: str) -> _Shapes:
        frames, batch, classes = (g.Shape(x, start=i, end=i + 1) for i in range(3))
        frame_count, batch_size, class_count = (g.Squeeze(d, g.i64([0])) for d in (frames, batch, classes))
        return cls(frames, batch, classes, frame_count, batch_size, class_count)


@dataclass(frozen=True)
class _Checked:
    """``sequence_mask`` and ``labels`` as the rest of the function may read them (spec 11.5):
    ``active`` [T, N] (bool, a prefix in every column), ``labels`` [N, T] (int64, -1 or a class
    in [0, C-2]) and ``faults`` [N] (bool; the samples whose loss is NaN). A faulty sample's
    column is all 0 and its row all -1 (a valid empty sample), as in ``ctc_loss_or_nan``."""

    active: str
    labels: str
    faults: str


def _fitted(g: GraphBuilder, values: str, shape: str, fill: float) -> str:
    """[A, B] ``values`` of any integer type cut and padded with ``fill`` to ``shape`` [2], as
    float64. The Slice comes first: it gives onnxruntime an output of no inferred shape, so no
    buffer is planned from the declared dimensions that the actual ones may contradict."""
    cut = g.Slice(values, g.i64([0, 0]), shape, g.i64([0, 1]))
    pads = g.Concat(g.i64([0, 0]), g.Sub(shape, g.Shape(cut)), axis=0)
    return g.Pad(g.Cast(cut, to=DOUBLE), pads, g.const(fill, np.float64))


def _any(g: GraphBuilder, flags: str, axis: int) -> str:
    """[N] true where ``flags`` holds anywhere along ``axis`` (a sum: defined for length 0)."""
    return g.Greater(g.ReduceSum(g.Cast(flags, to=INT64), g.i64([axis]), keepdims=0), g.i64(0))


def _checks(g: GraphBuilder, mask_name: str, labels_name: str, shapes: _Shapes) -> _Checked:
    """Checks (3.1, 3.3, 11.5). Values are compared as float64: every integer that casts to 0,
    1, -1 or into [0, C-2] is that value, and no cast wraps (uint64 2**64 - 1 is not -1)."""
    axis0, axis1 = g.i64([0]), g.i64([1])
    mask = _fitted(g, mask_name, g.Concat(shapes.frames, shapes.batch, axis=0), 0.0)
    labels = _fitted(g, labels_name, g.Concat(shapes.batch, shapes.frames, axis=0), -1.0)
    one, zero = g.Equal(mask, g.const(1.0, np.float64)), g.Equal(mask, g.const(0.0, np.float64))
    after_gap = g.And(one, g.Greater(g.CumSum(g.Cast(g.Not(one), to=INT64), g.i64(0)), g.i64(0)))
    mask_faults = _any(g, g.Or(g.Not(g.Or(one, zero)), after_gap), 0)
    last_class = g.Cast(g.Sub(shapes.class_count, g.i64(2)), to=DOUBLE)
    label_ok = g.And(g.GreaterOrEqual(labels, g.const(0.0, np.float64)), g.LessOrEqual(labels, last_class))
    label_faults = _any(g, g.Not(g.Or(label_ok, g.Equal(labels, g.const(-1.0, np.float64)))), 1)
    actual = g.Concat(g.Shape(mask_name), g.Shape(labels_name), axis=0)
    declared = g.Concat(shapes.frames, shapes.batch, shapes.batch, shapes.frames, axis=0)
    batch_fault = g.Or(_any(g, g.Not(g.Equal(actual, declared)), 0), g.Equal(shapes.class_count, g.i64(0)))
    faults = g.Or(g.Or(mask_faults, label_faults), batch_fault)
    active = g.And(one, g.Not(g.Unsqueeze(faults, axis0)))
    kept = g.Where(g.And(label_ok, g.Not(g.Unsqueeze(faults, axis1))), labels, g.const(-1.0, np.float64))
    return _Checked(active, g.Cast(kept, to=INT64), faults)


@dataclass(frozen=True)
class _Frames:
    """Per-frame terms: ``active`` [T, N], ``centred`` = x - max [T, N, C] and ``log_sum`` [T, N, 1]
    in the compute type, and the count of active non-finite frames per sample [N]."""

    active: str
    centred: str
    log_sum: str
    nonfinite_count: str


def _frames(g: GraphBuilder, x: str, active: str, compute_type: int) -> _Frames:
    """Frames (3.2, 4.1, 4.4): the log-softmax terms, non-finite active frames ([T, N] ``active``
    from the checks). With C = 0 the reductions give -inf, 0 and +inf: defined, and NaN'd later."""
    axis2 = g.i64([2])
    logits = g.Cast(x, to=compute_type)
    centred = g.Sub(logits, g.ReduceMax(logits, axis2, keepdims=1))
    log_sum = g.Log(g.ReduceSum(g.Exp(centred), axis2, keepdims=1))
    smallest = g.ReduceMin(logits, axis2, keepdims=1)
    nonfinite = g.Squeeze(g.Or(g.IsNaN(log_sum), g.IsInf(smallest)), axis2)
    nonfinite_count = g.ReduceSum(g.Cast(g.And(nonfinite, active), to=INT64), g.i64([0]), keepdims=0)
    return _Frames(active, centred, log_sum, nonfinite_count)


def _targets(g: GraphBuilder, labels: str, blank: str, collapse: str) -> tuple[str, str]:
    """Targets (3.3, 3.4) [N, L] and their lengths [N] from the checked int64 ``labels``: every
    pad removed, then repeats collapsed when ``collapse`` holds."""
    targets, lengths = _compact(g, labels, g.Not(g.Equal(labels, g.i64(-1))), blank)
    in_target = g.Less(_positions(g, targets), g.Unsqueeze(lengths, g.i64([1])))
    starts_run = g.Not(g.Equal(targets, _shift_right(g, targets, 1, g.i64(-1))))
    keep = g.And(in_target, g.Or(g.Not(collapse), starts_run))
    return _compact(g, targets, keep, blank)


@dataclass(frozen=True)
class _Lattice:
    """The states as rows: row 2 + s is state s; rows 0 and 1 are pads that stay ln 0, so the
    step and skip moves read rows r - 1 and r - 2 with no bounds test. ``classes`` [N, 2 + S]
    (pad rows copy the blank's class: a finite emission leaves ln 0 unchanged), ``rows``
    [2 + S], ``count`` [1] = 2 + S, the penalties [2 + S, N] (0 or -inf) of the stay and skip
    moves, and each sample's ``last_row`` [N] = 2L + 2 (state 2L)."""

    classes: str
    rows: str
    count: str
    stay_penalty: str
    skip_penalty: str
    last_row: str


def _lattice(g: GraphBuilder, targets: str, lengths: str, blank: str, merge: str, compute: str) -> _Lattice:
    """Lattice (4.5): classes of the 2L+1 states, label-state flags, allowed stay/skip moves."""
    states = _interleave(g, targets, blank, blank)
    real = g.Less(_positions(g, targets), g.Unsqueeze(lengths, g.i64([1])))
    false = g.const(False, np.bool_)
    is_label = _interleave(g, real, false, false)
    stay = g.Or(merge, g.Not(is_label))
    differs = g.Not(g.Equal(states, _shift_right(g, states, 2, g.i64(-1))))
    skip = g.And(is_label, g.Or(g.Not(merge), differs))
    pair = g.Concat(g.Shape(states, end=1), g.i64([2]), axis=0)
    classes = g.Concat(g.Expand(blank, pair), states, axis=1)
    allowed_pair = g.Expand(g.const(True, np.bool_), pair)
    zero, neg_inf = g.const(0.0, compute), g.const(-np.inf, compute)
    stay_penalty, skip_penalty = (
        g.Where(g.Transpose(g.Concat(allowed_pair, allowed, axis=1), perm=[1, 0]), zero, neg_inf)
        for allowed in (stay, skip)
    )
    last_row = g.Add(g.Mul(lengths, g.i64(2)), g.i64(2))
    count = g.Shape(classes, start=1, end=2)
    return _Lattice(classes, _positions(g, classes), count, stay_penalty, skip_penalty, last_row)


def _if(
    g: GraphBuilder, condition: str, branches: tuple[tuple[GraphBuilder, str], ...], kind: int, dims: list[Any]
) -> str:
    """An If over two (builder, output) branches, each giving a tensor of element type ``kind``
    and shape ``dims``."""
    then_branch, else_branch = (
        helper.make_graph(part.nodes, part.prefix.rstrip("_"), [], [helper.make_tensor_value_info(out, kind, dims)])
        for part, out in branches
    )
    chosen = g.fresh("chosen")
    g.node("If", [condition], [chosen], then_branch=then_branch, else_branch=else_branch)
    return chosen


def _gather_emissions(
    g: GraphBuilder, centred: str, lattice: _Lattice, frame_ids: str, sample_ids: str, shapes: _Shapes, compute: int
) -> str:
    """``centred[frame_ids[f], n, lattice.classes[n, r]]`` as [F, 2 + S, N].

    An If picks the operator: GatherElements on a [T, C, N] view up to FEW_CLASSES classes, else a
    Gather of entry ((t * N + n) * C + class) of the flat view. Both give the same values. With
    C = 0 there is nothing to gather (every sample is NaN, 11.5): an outer If gives zeros.
    """
    column_classes = g.Unsqueeze(g.Transpose(lattice.classes, perm=[1, 0]), g.i64([0]))
    few = GraphBuilder("few_classes_")
    index = few.Expand(column_classes, few.Concat(shapes.frames, lattice.count, shapes.batch, axis=0))
    by_class = few.Transpose(centred, perm=[0, 2, 1])
    few_gathered = few.Gather(few.GatherElements(by_class, index, axis=1), frame_ids, axis=0)
    many = GraphBuilder("many_classes_")
    frame_rows = many.Add(
        many.Mul(many.Unsqueeze(frame_ids, many.i64([1, 2])), shapes.batch_size),
        many.Unsqueeze(sample_ids, many.i64([0, 1])),
    )
    many_gathered = _take(many, centred, many.Add(many.Mul(frame_rows, shapes.class_count), column_classes))
    some = GraphBuilder("some_classes_")
    is_few = some.Squeeze(some.LessOrEqual(shapes.classes, some.i64([FEW_CLASSES])), some.i64([0]))
    some_gathered = _if(some, is_few, ((few, few_gathered), (many, many_gathered)), compute, ["F", "S2", "N"])
    none = GraphBuilder("no_classes_")
    zero = helper.make_tensor("zero", compute, [1], [0.0])
    none_shape = none.Concat(none.Shape(frame_ids), lattice.count, shapes.batch, axis=0)
    none_gathered = none.ConstantOfShape(none_shape, value=zero)
    is_none = g.Squeeze(g.Equal(shapes.classes, g.i64([0])), g.i64([0]))
    return _if(g, is_none, ((none, none_gathered), (some, some_gathered)), compute, ["F", "S2", "N"])


@dataclass(frozen=True)
class _Blocks:
    """The recursion's inputs in blocks of UNROLL frames: ``emissions`` [B, UNROLL, 2 + S, N] in
    the compute type, ``ends`` [B, UNROLL, 1, N] (true at each sample's last active frame),
    the block count (scalar) and the sample indices 0 .. N-1 [N]."""

    emissions: str
    ends: str
    count: str
    sample_ids: str


def _blocks(
    g: GraphBuilder, frames: _Frames, lattice: _Lattice, lengths: str, shapes: _Shapes, compute: int
) -> _Blocks:
    """Emissions, states first like the forward variables. Frames are padded to a multiple of
    UNROLL by repeating the last one; no sample ends in a padded frame."""
    unroll = g.i64([UNROLL])
    blocks = g.Div(g.Add(shapes.frames, g.i64([UNROLL - 1])), unroll)
    padded_frames = g.Range(g.i64(0), g.Squeeze(g.Mul(blocks, unroll), g.i64([0])), g.i64(1))
    frame_ids = g.Min(padded_frames, g.Sub(shapes.frame_count, g.i64(1)))
    # 0 .. N-1 shaped like the target lengths (not a Range), so shape inference keeps a fixed N.
    sample_ids = g.Sub(g.CumSum(g.Add(g.Mul(lengths, g.i64(0)), g.i64(1)), g.i64(0)), g.i64(1))
    gathered = _gather_emissions(g, frames.centred, lattice, frame_ids, sample_ids, shapes, compute)
    frame_shape = g.Concat(shapes.frames, g.i64([1]), shapes.batch, axis=0)
    frame_log_sum = g.Gather(g.Reshape(frames.log_sum, frame_shape, allowzero=1), frame_ids, axis=0)
    block_shape = g.Concat(blocks, unroll, lattice.count, shapes.batch, axis=0)
    emissions = g.Reshape(g.Sub(gathered, frame_log_sum), block_shape, allowzero=1)
    # Each sample's last active frame (3.1: the mask is a prefix of length T_i; none if T_i = 0).
    frame_counts = g.ReduceSum(g.Cast(frames.active, to=INT64), g.i64([0]), keepdims=1)
    ends = g.Equal(g.Unsqueeze(g.Add(padded_frames, g.i64(1)), g.i64([1])), frame_counts)
    end_shape = g.Concat(blocks, unroll, g.i64([1]), shapes.batch, axis=0)
    ends = g.Reshape(ends, end_shape, allowzero=1)
    return _Blocks(emissions, ends, g.Squeeze(blocks, g.i64([0])), sample_ids)


@dataclass(frozen=True)
class _LoopInputs:
    """Outer-scope values the Loop body reads: the blocks, the flat indices [2, N] of each
    sample's end states in the forward variables, the rows that step and skip moves read, each
    sample's own rows [2 + S, N], the two penalties, and 0 and -inf in the compute type."""

    blocks: _Blocks
    end_cells: str
    step_rows: str
    skip_rows: str
    own_rows: str
    stay_penalty: str
    skip_penalty: str
    zero: str
    neg_inf: str


def _loop_body(ctx: _LoopInputs, compute: int) -> onnx.GraphProto:
    """UNROLL frames of the forward recursion (spec 4.5) as one Loop iteration.

    Carried values: ``alpha`` [2 + S, N] in the compute type, the forward variables of each
    sample minus its ``offset`` [1, N] (float64); ``captured`` [2, N] (float64), the absolute
    forward variables of states 2L and 2L - 1 at the sample's last active frame. The three move
    terms (stay, step from row r - 1, skip from row r - 2) are separate tensors and every
    operator per frame is elementwise or variadic (onnxruntime's reductions over a short leading
    axis and its float64 Exp cost several times more). After UNROLL frames the maximum over
    each sample's own rows moves from ``alpha`` into ``offset``: the values left in the compute
    type stay small, so float32 rounding is relative to a few frames' log-probabilities, not to
    the whole sum. Frames after a sample's end are computed but never captured. A Loop, not a
    Scan: onnxruntime's Scan fails on a zero-length scan axis (T = 0).
    """
    g = GraphBuilder("step_")
    emissions = g.Gather(ctx.blocks.emissions, "t", axis=0)
    ends = g.Gather(ctx.blocks.ends, "t", axis=0)
    alpha, captured = "alpha_in", "captured_in"
    for frame in range(UNROLL):
        at = g.i64(frame)
        terms = [
            g.Add(alpha, ctx.stay_penalty),
            g.Gather(alpha, ctx.step_rows, axis=0),
            g.Add(g.Gather(alpha, ctx.skip_rows, axis=0), ctx.skip_penalty),
        ]
        alpha = _logsumexp(g, terms, ctx.zero, g.Gather(emissions, at, axis=0))
        at_end = g.Cast(_take(g, alpha, ctx.end_cells), to=DOUBLE)
        captured = g.Where(g.Gather(ends, at, axis=0), g.Add(at_end, "offset_in"), captured)
    own = g.Where(ctx.own_rows, alpha, ctx.neg_inf)
    top = _finite_or(g, g.ReduceMax(own, g.i64([0]), keepdims=1), ctx.zero)
    g.node("Sub", [alpha, top], ["alpha_out"])
    g.node("Add", ["offset_in", g.Cast(top, to=DOUBLE)], ["offset_out"])
    g.node("Identity", [captured], ["captured_out"])
    g.node("Identity", ["cond_in"], ["cond_out"])
    # Carried values are rank 2 with free dimensions: their sizes are those of the Loop's inputs.
    carried = (("alpha", compute), ("offset", DOUBLE), ("captured", DOUBLE))
    return helper.make_graph(
        g.nodes,
        "ctc_forward_step",
        [
            helper.make_tensor_value_info("t", INT64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            *(helper.make_tensor_value_info(f"{name}_in", kind, [None, None]) for name, kind in carried),
        ],
        [
            helper.make_tensor_value_info("cond_out", BOOL, []),
            *(helper.make_tensor_value_info(f"{name}_out", kind, [None, None]) for name, kind in carried),
        ],
    )


def _forward(g: GraphBuilder, lattice: _Lattice, blocks: _Blocks, shapes: _Shapes, compute: str) -> str:
    """The forward Loop (4.5), with ln 0 = -inf; returns ``captured`` [2, N] (float64), the
    forward variables of states 2L and 2L - 1 after each sample's last active frame. Before any
    frame only state 0 (row 2) has probability 1."""
    axis0, axis1, rows = g.i64([0]), g.i64([1]), lattice.rows
    zero, neg_inf = g.const(0.0, compute), g.const(-np.inf, compute)
    first = g.Where(g.Equal(rows, g.i64(2)), zero, neg_inf)
    alpha0 = g.Expand(g.Unsqueeze(first, axis1), g.Concat(lattice.count, shapes.batch, axis=0))
    end_rows = g.Concat(*(g.Unsqueeze(r, axis0) for r in (lattice.last_row, g.Sub(lattice.last_row, g.i64(1)))), axis=0)
    ctx = _LoopInputs(
        blocks=blocks,
        end_cells=g.Add(g.Mul(end_rows, shapes.batch_size), g.Unsqueeze(blocks.sample_ids, axis0)),
        step_rows=g.Max(g.Sub(rows, g.i64(1)), g.i64(0)),
        skip_rows=g.Max(g.Sub(rows, g.i64(2)), g.i64(0)),
        # Rows of each sample's own lattice: its offset ignores the rows beyond, so a sample's
        # float32 arithmetic does not depend on the other targets of the batch.
        own_rows=g.LessOrEqual(g.Unsqueeze(rows, axis1), g.Unsqueeze(lattice.last_row, axis0)),
        stay_penalty=lattice.stay_penalty,
        skip_penalty=lattice.skip_penalty,
        zero=zero,
        neg_inf=neg_inf,
    )
    offset0 = g.Expand(g.const(0.0, np.float64), g.Concat(g.i64([1]), shapes.batch, axis=0))
    captured0 = g.Cast(_take(g, alpha0, ctx.end_cells), to=DOUBLE)
    body = _loop_body(ctx, helper.np_dtype_to_tensor_dtype(np.dtype(compute)))
    outputs = [g.fresh("alpha"), g.fresh("offset"), g.fresh("captured")]
    g.node("Loop", [blocks.count, g.const(True, np.bool_), alpha0, offset0, captured0], outputs, body=body)
    return outputs[2]


def _read_out(g: GraphBuilder, captured: str, blocks: _Blocks, shapes: _Shapes, nan_samples: str) -> str:
    """Read-out (4.3, 4.4, 11.5): -ln of the mass on states 2L and 2L-1, NaN for ``nan_samples``
    [N]. The loss is 0 - ln(mass), not Neg: a zero loss (T = 0, C = 1) is then +0.0, never -0.0
    (onnxruntime's optimizer drops an ``x + 0``, so adding +0.0 after Neg would not do)."""
    zero = g.const(0.0, np.float64)
    ends_at = [_take(g, captured, g.Add(g.Mul(g.i64(row), shapes.batch_size), blocks.sample_ids)) for row in (0, 1)]
    loss = g.Sub(zero, _logsumexp(g, ends_at, zero))
    return g.Where(nan_samples, g.const(np.nan, np.float64), loss)


def ctc_loss_function(opset: int = MIN_OPSET, compute: str = "float64") -> onnx.FunctionProto:
    """The model-local function ``ai.ctcop.CTCLoss`` over standard ONNX operators of ``opset``.

    ``compute`` ("float32" or "float64") is the type of the log-softmax and of the recursion
    (the per-sample offsets and the result are float64). The exporters pass float64 for float64
    models only.
    """
    spec = form("time_major")
    x, mask, labels = spec.input_names
    g = GraphBuilder()
    compute_type = helper.np_dtype_to_tensor_dtype(np.dtype(compute))
    shapes = _Shapes.of(g, x)
    blank = g.Sub(shapes.class_count, g.i64(1))
    checked = _checks(g, mask, labels, shapes)
    frames = _frames(g, x, checked.active, compute_type)
    targets, lengths = _targets(g, checked.labels, blank, g.attribute("preprocess_collapse_repeated"))
    lattice = _lattice(g, targets, lengths, blank, g.attribute("merge_repeated"), compute)
    blocks = _blocks(g, frames, lattice, lengths, shapes, compute_type)
    captured = _forward(g, lattice, blocks, shapes, compute)
    nan_samples = g.Or(checked.faults, g.Greater(frames.nonfinite_count, g.i64(0)))
    g.node("CastLike", [_read_out(g, captured, blocks, shapes, nan_samples), x], [spec.output_name])
    return helper.make_function(
        DOMAIN,
        OP_TYPE,
        list(spec.input_names),
        [spec.output_name],
        g.nodes,
        [helper.make_opsetid("", opset)],
        attribute_protos=[helper.make_attribute(name, int(default)) for name, default in spec.attributes.items()],
        doc_string="CTCLoss-4, time-major form; see spec/ctcloss4.md",
    )
