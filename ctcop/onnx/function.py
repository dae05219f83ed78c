"""CTCLoss-4 as an ONNX model-local function built from standard operators (spec section 11).

The function ``ai.ctcop.CTCLoss`` (version 1) takes the spec's three inputs and two attributes and
computes in log space, in its compute type (float64 for float64 models, float32 otherwise), what
:mod:`ctcop.core.scheduler` computes. It is a total function (spec 11.5): it returns a loss for every
input of its declared ranks and element types. Its stages, one function each:

* checks (3.1, 3.3, 11.5): ``sequence_mask`` and ``labels`` cut and padded to [T, N] and [N, T]
  and read as float64 (exact for every value that matters); per-sample faults (a mask value
  other than 0/1, a 1 after a 0, a label other than -1 and [0, C-2]) and a batch-wide fault
  (shapes that disagree, C = 0); a faulty sample's column and row become a valid empty one
  before anything indexes with them, so nothing out of range is ever read;
* targets (3.3, 3.4): pads removed wherever they stand and, if ``preprocess_collapse_repeated``,
  repeats merged, by a stable per-row permutation built with CumSum and ScatterElements;
* lanes: each sample is computed as two halves side by side, lane n its first ceil(T_n / 2)
  frames forwards and lane N + n the rest backwards against the reversed target (the lattice
  read from its end is the lattice of the reversed target), so the recursion takes half the
  steps over twice the columns (onnxruntime's cost per operator is about 0.5 µs plus 0.14 ns a
  value: fewer, wider operators cost less);
* lattice (4.5): the extended-label states of every lane with stay/skip masks derived
  arithmetically from ``merge_repeated``, so one body serves every attribute value; disallowed
  moves add -inf;
* steps (3.1): P = UNROLL * ceil(ceil(T / 2) / UNROLL) steps; each lane reads its frames at its
  last steps and before them waits (emissions ln 1 for the blank's states, ln 0 for the others,
  which keeps its start), so no step reads a masked frame and a lane's arithmetic does not
  depend on T;
* emissions (3.2, 4.1, 4.4): the log-softmax ``(x - max) - ln sum exp(x - max)`` of the frames
  read, read once per distinct class of the lattice (the blank and the targets: 1 + L of the
  2 + S rows) and spread to the rows by a Gather; up to FEW_CLASSES classes of every step's
  frame, gathered per block by GatherElements in the Loop body; with more, the frame terms a
  cache-sized chunk of frames at a time (no tensor of the logits' size) and a Gather of the
  targets' logits; a frame is non-finite when its log-sum is NaN or its minimum is infinite, and
  an active non-finite frame makes its sample NaN;
* the Loop: blocks of UNROLL steps carry the forward variables [2 + S, 2N] relative to a float64
  per-lane offset, only the rows some lane can have reached by the block's end; per step a fixed
  run of elementwise operators and Gathers; with fixed dims (the static form, ``fixed``) a Scan
  with the same body over every row, every shape a constant;
* join and read-out (4.3, 4.4, 11.5): the two lanes of a sample joined over the moves between
  their frames (in the compute type on the values relative to the lanes' offsets, which are
  added to the logarithm in float64), -ln of the sum, +0.0 for a zero, NaN for non-finite and
  faulty samples, cast back to the element type of ``inputs`` with CastLike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..schema import encoding, form
from .graph import FixedDims, GraphBuilder, Sizes, any_along, fitted, live
from .types import tensor_type

DOMAIN: str = encoding("onnx")["domain"]
DOMAIN_VERSION: int = encoding("onnx")["domain_version"]
OP_TYPE: str = encoding("onnx")["op_type"]
MIN_OPSET: int = encoding("onnx")["min_opset"]
# Steps per Loop iteration: the offset update and the Loop's own work come once per block.
UNROLL = 10
# Up to this many classes the emissions are gathered with GatherElements, which onnxruntime runs
# ten times faster than an element-wise Gather; onnx.reference's GatherElements (np.choose) takes
# at most 32 choices under NumPy 1 and 64 under NumPy 2, so more classes use a flat Gather.
FEW_CLASSES = 32
# With more classes the frame terms are computed a chunk of whole frames at a time: about this many
# values (1 MiB of float32), so a chunk and its temporaries stay in a core's cache.
CHUNK = 1 << 18
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


def _compact(g: GraphBuilder, values: str, keep: str, fill: str, trim: bool) -> tuple[str, str]:
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
        ends = g.Mul(kept, g.Add(_positions(g, values), one))
        end = _largest(g, ends)
        values, keep, kept = (g.Slice(part, g.i64([0]), end, axis1) for part in (values, keep, kept))
    counts = g.ReduceSum(kept, axis1, keepdims=1)
    before = g.Sub(g.CumSum(kept, one), one)
    after = g.Add(counts, g.Sub(g.CumSum(g.Sub(one, kept), one), one))
    moved = g.ScatterElements(values, g.Where(keep, before, after), values, axis=1)
    filled = g.Where(g.Less(_positions(g, values), counts), moved, fill)
    if not trim:
        return filled, g.Squeeze(counts, axis1)
    trimmed = g.Slice(filled, g.i64([0]), _largest(g, counts), axis1)
    return trimmed, g.Squeeze(counts, axis1)


def _largest(g: GraphBuilder, values: str) -> str:
    """The largest of the int64 ``values`` [N, W] and 0, as [1] (0 for no values). No axis it
    reduces is empty (a reduction over none is undefined in OpenVINO's ReduceMax)."""
    by_row = g.ReduceMax(g.Pad(values, g.i64([0, 0, 0, 1]), g.i64(0)), g.i64([1]), keepdims=0)
    return g.ReduceMax(g.Concat(by_row, g.i64([0]), axis=0), g.i64([0]), keepdims=1)


def _interleave(g: GraphBuilder, values: str, between: str, first: str) -> str:
    """[N, L] -> [N, 2L + 1]: first, v_1, between, v_2, between, ..., v_L, between."""
    column = g.Unsqueeze(values, g.i64([2]))
    pairs = g.Concat(column, g.Expand(between, g.Shape(column)), axis=2)
    n = g.Shape(values, start=0, end=1)
    width = g.Mul(g.Shape(values, start=1, end=2), g.i64([2]))
    flat = g.Reshape(pairs, g.Concat(n, width, axis=0), allowzero=1)
    head = g.Expand(first, g.Concat(n, g.i64([1]), axis=0))
    return g.Concat(head, flat, axis=1)


def _is_inf(g: GraphBuilder, values: str, kind: int) -> str:
    """IsInf of ``values`` of element type ``kind``, as |x| = inf: tract types IsInf and IsNaN of
    float64 values as float64, not bool."""
    return g.Equal(g.Abs(values), g.const(np.inf, kind))


def _is_nan(g: GraphBuilder, values: str) -> str:
    """IsNaN as x != x (see _is_inf)."""
    return g.Not(g.Equal(values, values))


def _finite_or(g: GraphBuilder, values: str, fallback: str, kind: int) -> str:
    return g.Where(_is_inf(g, values, kind), fallback, values)


def _take(g: GraphBuilder, data: str, flat_index: str) -> str:
    """``data.ravel()[flat_index]``: Gather on a flat view (see FEW_CLASSES for GatherElements)."""
    return g.Gather(g.Reshape(data, g.i64([-1])), flat_index, axis=0)


# -- stages ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Checked:
    """``sequence_mask`` and ``labels`` as the rest of the function may read them (spec 11.5):
    ``active`` [T, N] (bool, a prefix in every column), ``labels`` [N, T] (int64, -1 or a class
    in [0, C-2]) and ``faults`` [N] (bool; the samples whose loss is NaN). A faulty sample's
    column is all 0 and its row all -1 (a valid empty sample), as in ``ctc_loss_or_nan``."""

    active: str
    labels: str
    faults: str


def _checks(g: GraphBuilder, mask_name: str, labels_name: str, sizes: Sizes) -> _Checked:
    """Checks (3.1, 3.3, 11.5). Values are compared as float64: every integer that casts to 0,
    1, -1 or into [0, C-2] is that value, and no cast wraps (uint64 2**64 - 1 is not -1)."""
    axis0, axis1 = g.i64([0]), g.i64([1])
    mask = fitted(g, mask_name, g.Concat(sizes.frames, sizes.batch, axis=0), g.f64(0.0), 2, to=DOUBLE)
    labels = fitted(g, labels_name, g.Concat(sizes.batch, sizes.frames, axis=0), g.f64(-1.0), 2, to=DOUBLE)
    one, zero = g.Equal(mask, g.f64(1.0)), g.Equal(mask, g.f64(0.0))
    after_gap = g.And(one, g.Greater(g.CumSum(g.int64(g.Not(one)), g.i64(0)), g.i64(0)))
    mask_faults = any_along(g, g.Or(g.Not(g.Or(one, zero)), after_gap), 0)
    last_class = g.Cast(g.Sub(sizes.class_count, g.i64(2)), to=DOUBLE)
    label_ok = g.And(g.GreaterOrEqual(labels, g.f64(0.0)), g.LessOrEqual(labels, last_class))
    label_faults = any_along(g, g.Not(g.Or(label_ok, g.Equal(labels, g.f64(-1.0)))), 1)
    actual = g.Concat(g.Shape(mask_name), g.Shape(labels_name), axis=0)
    declared = g.Concat(sizes.frames, sizes.batch, sizes.batch, sizes.frames, axis=0)
    batch_fault = g.Or(any_along(g, g.Not(g.Equal(actual, declared)), 0), g.Equal(sizes.class_count, g.i64(0)))
    faults = g.Or(g.Or(mask_faults, label_faults), batch_fault)
    active = g.And(one, g.Not(g.Unsqueeze(faults, axis0)))
    kept = g.Where(g.And(label_ok, g.Not(g.Unsqueeze(faults, axis1))), labels, g.f64(-1.0))
    return _Checked(active, g.int64(kept), faults)


@dataclass(frozen=True)
class _Frames:
    """The steps of the recursion over the 2N lanes (see _frames), ``padded`` = B * UNROLL of them
    (B = ``blocks``, scalar): ``rows`` [P, 2N] is the row of ``inputs`` viewed as [T * N, C] that
    step p of a lane reads (always one of its own sample's frames), ``waiting`` [P, 2N] true where
    the step reads none (see _waiting_emissions), ``lanes`` [1] = 2N."""

    rows: str
    waiting: str
    lanes: str
    blocks: str
    padded: str


def _frames(g: GraphBuilder, active: str, sizes: Sizes, sample_ids: str) -> _Frames:
    """Steps (3.1) of the two halves of every sample: the mask is a prefix of length T_n in every
    column (checked). With H = ceil(T / 2) and P = UNROLL * ceil(H / UNROLL) steps, lane n (the
    first half of sample n) reads frames 0 .. F_n - 1 (F_n = ceil(T_n / 2)) at the last F_n steps
    and lane N + n (the second half, backwards) frames T_n - 1 down to F_n at the last T_n - F_n
    steps: every frame of a sample is read once, and each lane reads its last frame at the last
    step. Before its first frame a lane waits (see _waiting_emissions). Its steps, and so the
    block boundaries of the Loop (every UNROLL steps from its last), sit where its own frames
    put them, whatever T is: a sample's arithmetic is the same alone, with its frames cut to
    T_n, or beside longer samples."""
    one = g.i64(1)
    half = g.Div(g.Add(sizes.frame_count, one), g.i64(2))
    blocks = g.Div(g.Add(half, g.i64(UNROLL - 1)), g.i64(UNROLL))
    padded = g.Mul(blocks, g.i64(UNROLL))
    steps = g.Unsqueeze(g.Range(g.i64(0), padded, one), g.i64([1]))
    counts = g.ReduceSum(g.int64(active), g.i64([0]), keepdims=0)
    first = g.Div(g.Add(counts, one), g.i64(2))
    # The step at which each lane reads its first frame, [2N].
    starts = g.Sub(padded, g.Concat(first, g.Sub(counts, first), axis=0))
    # k = the lane's frames read before step p: frame k (first lanes) or T_n - 1 - k (second).
    read = g.Sub(steps, starts)
    origins = g.Concat(g.Mul(counts, g.i64(0)), g.Sub(counts, one), axis=0)
    # |origin - k| is the frame for k >= 0; a waiting step (k < 0) reads a frame cut into range.
    frame = g.Min(g.Abs(g.Sub(origins, read)), g.Max(g.Sub(sizes.frame_count, one), g.i64(0)))
    rows = g.Add(g.Mul(frame, sizes.batch), g.Concat(sample_ids, sample_ids, axis=0))
    waiting = g.Less(read, g.i64(0))
    return _Frames(rows, waiting, g.Mul(sizes.batch, g.i64([2])), blocks, padded)


def _targets(g: GraphBuilder, labels: str, blank: str, collapse: str, trim: bool) -> tuple[str, str]:
    """Targets (3.3, 3.4) [N, L] and their lengths [N] from the checked int64 ``labels``: every
    pad removed, then repeats collapsed when ``collapse`` holds. L is the longest target when
    ``trim`` holds, else T (see _compact)."""
    targets, lengths = _compact(g, labels, g.Not(g.Equal(labels, g.i64(-1))), blank, trim)
    in_target = g.Less(_positions(g, targets), g.Unsqueeze(lengths, g.i64([1])))
    starts_run = g.Not(g.Equal(targets, _shift_right(g, targets, 1, g.i64(-1))))
    keep = g.And(in_target, g.Or(g.Not(collapse), starts_run))
    return _compact(g, targets, keep, blank, trim)


def _reversed(g: GraphBuilder, targets: str) -> str:
    """[N, L] ``targets`` with the L positions in reverse order: a sample's target read backwards,
    after L - L_n pads (its second lane's target, see _lattice)."""
    positions = _positions(g, targets)
    # L - 1 - position, not a Range from L - 1 with step -1, whose Gather onnxruntime's optimizer
    # turns into an empty tensor (D51).
    last = g.Sub(g.Shape(targets, start=1, end=2), g.i64([1]))
    return g.Gather(targets, g.Sub(last, positions), axis=1)


@dataclass(frozen=True)
class _Lattice:
    """The states of every lane as rows: row 2 + 2 * ``starts`` + s is state s of the lane's own
    lattice, whose target occupies positions ``starts`` .. ``starts`` + L_n - 1 of its row of
    targets (0 for a first lane, L - L_n for a second lane, whose target is reversed); the rows
    before it are pads that stay ln 0 (rows 0 and 1 always), so the step and skip moves read rows
    r - 1 and r - 2 with no bounds test. ``distinct`` [2N, 1 + L] holds the blank's class then
    the targets', and ``spread`` [2 + S] the column of ``distinct`` that holds each row's class
    (emissions are read once per distinct class and spread to the rows; a pad row reads a finite
    emission, which leaves ln 0 unchanged); ``rows`` [2 + S], ``count`` [1] = 2 + S, the
    penalties [2 + S, 2N] (0 or -inf) of the stay and skip moves, and each lane's ``first_row``
    and ``last_row`` [2N] (its states 0 and 2L_n)."""

    distinct: str
    spread: str
    rows: str
    count: str
    stay_penalty: str
    skip_penalty: str
    first_row: str
    last_row: str


def _lattice(
    g: GraphBuilder, targets: str, starts: str, lengths: str, blank: str, merge: str, compute: int
) -> _Lattice:
    """Lattice (4.5): classes of the 2L+1 states, label-state flags, allowed stay/skip moves."""
    states = _interleave(g, targets, blank, blank)
    positions = _positions(g, targets)
    begin = g.Unsqueeze(starts, g.i64([1]))
    real = g.And(g.GreaterOrEqual(positions, begin), g.Less(positions, g.Add(begin, g.Unsqueeze(lengths, g.i64([1])))))
    false = g.const(False, np.bool_)
    is_label = _interleave(g, real, false, false)
    stay = g.Or(merge, g.Not(is_label))
    differs = g.Not(g.Equal(states, _shift_right(g, states, 2, g.i64(-1))))
    skip = g.And(is_label, g.Or(g.Not(merge), differs))
    pair = g.Concat(g.Shape(states, end=1), g.i64([2]), axis=0)
    allowed_pair = g.Expand(g.const(True, np.bool_), pair)
    zero, neg_inf = g.const(0.0, compute), g.const(-np.inf, compute)
    stay_penalty, skip_penalty = (
        g.Where(g.Transpose(g.Concat(allowed_pair, allowed, axis=1), perm=[1, 0]), zero, neg_inf)
        for allowed in (stay, skip)
    )
    first_row = g.Add(g.Mul(starts, g.i64(2)), g.i64(2))
    last_row = g.Add(first_row, g.Mul(lengths, g.i64(2)))
    count = g.Add(g.Shape(states, start=1, end=2), g.i64([2]))
    distinct = g.Concat(g.Expand(blank, g.Concat(g.Shape(states, end=1), g.i64([1]), axis=0)), targets, axis=1)
    # Row 2j + 1 (label state 2j - 1) reads column j of ``distinct``; pads and blank states column 0.
    rows = g.Range(g.i64(0), g.Squeeze(count, g.i64([0])), g.i64(1))
    spread = g.Mul(g.Div(g.Sub(rows, g.i64(1)), g.i64(2)), g.Mod(rows, g.i64(2)))
    return _Lattice(distinct, spread, rows, count, stay_penalty, skip_penalty, first_row, last_row)


def _if(
    g: GraphBuilder,
    condition: str,
    branches: tuple[tuple[GraphBuilder, list[str]], ...],
    outputs: Sequence[tuple[Any, Sequence[Any]]],
) -> list[str]:
    """An If over two (builder, outputs) branches, each giving tensors of the element types and
    shapes in ``outputs``."""
    then_branch, else_branch = (
        helper.make_graph(
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


@dataclass(frozen=True)
class _Stats:
    """Log-softmax terms of [F, N, C] logits in the compute type: ``centred`` = x - max, and
    [F, N, 1] ``top`` (the max), ``log_sum`` (ln sum exp centred) and ``bottom`` (the min)."""

    centred: str
    top: str
    log_sum: str
    bottom: str


def _stats(g: GraphBuilder, logits: str, axis: int = 2) -> _Stats:
    """Frame terms (3.2, 4.1, 4.4) of ``logits`` with the classes on ``axis``: log-softmax as
    (x - max) - ln sum exp(x - max)."""
    classes = g.i64([axis])
    top = g.ReduceMax(logits, classes, keepdims=1)
    centred = g.Sub(logits, top)
    log_sum = g.Log(g.ReduceSum(g.Exp(centred), classes, keepdims=1))
    return _Stats(centred, top, log_sum, g.ReduceMin(logits, classes, keepdims=1))


def _nonfinite(g: GraphBuilder, log_sum: str, bottom: str, compute: int, axis: int = 2) -> str:
    """[F, N] true where a frame is non-finite: its log-sum is NaN or its minimum infinite (the
    terms of _stats for the classes on ``axis``)."""
    # Squeezed first: onnxruntime compares [F, N, 1] with a scalar about 15 times slower than
    # [F, N] (a slow path for a last dimension of 1).
    classes = g.i64([axis])
    return g.Or(_is_nan(g, g.Squeeze(log_sum, classes)), _is_inf(g, g.Squeeze(bottom, classes), compute))


@dataclass(frozen=True)
class _EmissionInputs:
    """What the emission stage reads: ``inputs``, its rows [T * N, C], the frames, the active
    mask [T, N], the distinct classes of the lanes' states [1 + L, 2N] and the column of each row
    [2 + S] (see _Lattice), the row count [1], the blank (scalar), the sizes and the compute
    type."""

    x: str
    rows: str
    frames: _Frames
    active: str
    distinct: str
    spread: str
    count: str
    blank: str
    sizes: Sizes
    compute: int


@dataclass(frozen=True)
class _BlockEmissions:
    """Where the Loop body finds each step's emissions [2 + S, 2N]: in block b of ``source``,
    which is [B, UNROLL * (2 + S), 2N] emissions split into the steps, or, with an ``index``
    [UNROLL, 1 + L, 2N] (int32), [B, UNROLL, C, 2N] log-probabilities by class that
    GatherElements reads once per distinct class, each step's rows of them then one Gather of
    its ``spread`` rows (see _spread_by_step)."""

    source: str
    index: str | None = None
    spread: tuple[str, ...] | None = None


def _spread_by_step(g: GraphBuilder, spread: str, distinct: str) -> tuple[str, ...]:
    """For each step u of a block, the row of every state [2 + S] in the block's emissions by
    distinct class flattened to [UNROLL * (1 + L), 2N]: u * (1 + L) plus the state's column
    (``spread``, see _Lattice; ``distinct`` [1 + L, 2N]). One Gather a step reads them: the
    block is not spread to the states and then split, two copies of it."""
    width = g.Shape(distinct, end=1)
    return (spread, *(g.Add(spread, g.Mul(width, g.i64(step))) for step in range(1, UNROLL)))


def _waiting_emissions(g: GraphBuilder, classes: str, blank: str, compute: int) -> str:
    """The emissions of a step that reads no frame, for ``classes``: ln 1 for the blank, ln 0 for
    the others. Such a step keeps a lane's start (state 0 stays, state 1 gets ln 0)."""
    return g.Where(g.Equal(classes, blank), g.const(0.0, compute), g.const(-np.inf, compute))


def _few_classes(ctx: _EmissionInputs) -> tuple[GraphBuilder, str, str, str]:
    """Up to FEW_CLASSES classes (C > 0): the log-softmax of the frame each step reads, [P, C, 2N]
    (a Gather of rows; a waiting step reads an appended row whose log-softmax is ln 1 for the
    blank and ln 0 for the other classes), which the Loop body reads in blocks of UNROLL steps
    with one GatherElements of the ``index`` [UNROLL, 1 + L, 2N] (int32; onnx.reference's
    GatherElements takes at most 32 choices under NumPy 1). Returns the branch, the
    log-probabilities, the index and [N] true for a sample with an active non-finite frame."""
    g = GraphBuilder("few_classes_")
    positions = g.Unsqueeze(g.Range(g.i64(0), ctx.sizes.class_count, g.i64(1)), g.i64([0]))
    blank_only = g.Where(g.Equal(positions, ctx.blank), g.f64(0.0), g.f64(-np.inf))
    rows = g.Concat(ctx.rows, g.CastLike(blank_only, ctx.x), axis=0)
    waiting_row = g.Mul(ctx.sizes.frame_count, ctx.sizes.batch)
    read = g.Gather(rows, g.Where(ctx.frames.waiting, waiting_row, ctx.frames.rows), axis=0)
    # The classes on axis 1 before the log-softmax: onnxruntime subtracts [P, 1, 2N] from
    # [P, C, 2N] about three times faster than [P, 2N, 1] from [P, 2N, C].
    stats = _stats(g, g.Transpose(g.Cast(read, to=ctx.compute), perm=[0, 2, 1]), axis=1)
    by_class = g.Sub(stats.centred, stats.log_sum)
    shape = g.Concat(g.i64([UNROLL]), g.Shape(ctx.distinct), axis=0)
    # int32 indices: onnxruntime's GatherElements takes about two thirds of the time.
    index = g.Expand(g.Unsqueeze(g.Cast(ctx.distinct, to=TensorProto.INT32), g.i64([0])), shape)
    bad = _nonfinite(g, stats.log_sum, stats.bottom, ctx.compute, axis=1)
    by_lane = any_along(g, g.And(bad, g.Not(ctx.frames.waiting)), 0)
    nonfinite = any_along(g, g.Reshape(by_lane, g.Concat(g.i64([2]), ctx.sizes.batch, axis=0), allowzero=1), 0)
    return g, by_class, index, nonfinite


def _many_classes(ctx: _EmissionInputs, chunked: bool) -> tuple[GraphBuilder, list[str]]:
    """More classes: the frame terms of ``inputs`` (with ``chunked``, a chunk at a time, see
    _chunked_terms; else of all frames at once); then a Gather of each state's logit from the flat
    ``inputs`` at the frame each step reads, and (x - max) - ln sum exp(x - max) on the gathered
    values only, once per distinct class, spread to the rows. Returns the branch, the emissions
    [P, 2 + S, 2N] and [N] true for a sample with an active non-finite frame."""
    g = GraphBuilder("many_classes_")
    if chunked:
        terms = _chunked_terms(g, ctx)
    else:
        stats = _stats(g, g.Cast(ctx.x, to=ctx.compute))
        terms = g.Concat(stats.top, stats.log_sum, stats.bottom, axis=2)
    top, log_sum, bottom = (g.fresh(name) for name in ("top", "log_sum", "bottom"))
    g.node("Split", [terms], [top, log_sum, bottom], axis=2, num_outputs=3)
    nonfinite = any_along(g, g.And(_nonfinite(g, log_sum, bottom, ctx.compute), ctx.active), 0)
    # The terms of the frame each step reads, as [P, 1, 2N] columns.
    flat_terms = g.Reshape(terms, g.i64([-1, 3]))
    step_terms = [
        g.Unsqueeze(g.Gather(g.Gather(flat_terms, g.i64(k), axis=1), ctx.frames.rows, axis=0), g.i64([1]))
        for k in (0, 1)
    ]
    flat = g.Add(g.Unsqueeze(g.Mul(ctx.frames.rows, ctx.sizes.class_count), g.i64([1])), ctx.distinct)
    gathered = g.Cast(_take(g, ctx.rows, flat), to=ctx.compute)
    emissions = g.Sub(g.Sub(gathered, step_terms[0]), step_terms[1])
    waiting = _waiting_emissions(g, ctx.distinct, ctx.blank, ctx.compute)
    by_class = g.Where(g.Unsqueeze(ctx.frames.waiting, g.i64([1])), waiting, emissions)
    return g, [g.Gather(by_class, ctx.spread, axis=1), nonfinite]


def _chunked_terms(g: GraphBuilder, ctx: _EmissionInputs) -> str:
    """The frame terms [T, N, 3] (max, log-sum, min) of ``inputs`` in chunks of about CHUNK values
    (whole frames, at least one) in a Loop, so no tensor of the logits' size is made and each
    chunk stays in cache."""
    batch, frames = ctx.sizes.batch, ctx.sizes.frames
    per_frame = g.Mul(ctx.sizes.batch, ctx.sizes.classes)
    chunk = g.Max(g.Div(g.i64([CHUNK]), g.Max(per_frame, g.i64([1]))), g.i64([1]))
    count = g.Squeeze(g.Div(g.Add(frames, g.Sub(chunk, g.i64([1]))), chunk), g.i64([0]))
    body = GraphBuilder("chunk_")
    start = body.Mul(body.Reshape("c", body.i64([1])), chunk)
    stats = _stats(body, body.Cast(body.Slice(ctx.x, start, body.Add(start, chunk), body.i64([0])), to=ctx.compute))
    body.node("Concat", ["acc_in", body.Concat(stats.top, stats.log_sum, stats.bottom, axis=2)], ["acc_out"], axis=0)
    body.node("Identity", ["cond_in"], ["cond_out"])
    info = helper.make_tensor_value_info
    loop_body = helper.make_graph(
        body.nodes,
        "frame_terms",
        [info("c", INT64, []), info("cond_in", BOOL, []), info("acc_in", ctx.compute, [None, None, 3])],
        [info("cond_out", BOOL, []), info("acc_out", ctx.compute, [None, None, 3])],
    )
    zero = g.const(0.0, ctx.compute)
    acc0 = g.Expand(zero, g.Concat(g.i64([0]), batch, g.i64([3]), axis=0))
    terms = g.fresh("terms")
    g.node("Loop", [count, g.const(True, np.bool_), acc0], [terms], body=loop_body)
    return terms


def _no_classes(ctx: _EmissionInputs) -> tuple[GraphBuilder, list[str]]:
    """C = 0: nothing to read (every sample is NaN, 11.5); zero emissions and no non-finite frame."""
    g = GraphBuilder("no_classes_")
    zero = helper.make_tensor("zero", ctx.compute, [1], [0.0])
    false = helper.make_tensor("false", BOOL, [1], [False])
    padded = g.Reshape(ctx.frames.padded, g.i64([1]))
    return g, [
        g.ConstantOfShape(g.Concat(padded, ctx.count, ctx.frames.lanes, axis=0), value=zero),
        g.ConstantOfShape(ctx.sizes.batch, value=false),
    ]


@dataclass(frozen=True)
class _LoopInputs:
    """Outer-scope values the Loop body reads: the rows that step and skip moves read; the
    penalties [2 + S, 2N] of the stay and skip moves and of the rows outside each lane's own
    lattice (0 or -inf); the lowest finite value and 0 in the compute type; and for a Loop
    ``row_limits`` [B + 1, 1], the rows it carries before its first block and after each (see
    _row_limits; None: every row, as a Scan, which has no block number, computes them)."""

    step_rows: str
    skip_rows: str
    stay_penalty: str
    skip_penalty: str
    own_penalty: str
    lowest: str
    zero: str
    row_limits: str | None


def _step(
    g: GraphBuilder, ctx: _LoopInputs, scale: str, mass: str | None, emission: str, stay_penalty: bool
) -> tuple[str, str]:
    """One step of the forward recursion in the (scale, mass) form of :func:`_loop_body`: the new
    scale and mass of every state from those before the step (``mass`` None: all 1)."""
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


def _head(g: GraphBuilder, values: str, rows: str) -> str:
    """The first ``rows`` ([1]) rows of ``values``."""
    return g.Slice(values, g.i64([0]), rows, g.i64([0]))


def _grown(g: GraphBuilder, values: str, rows: str, grown: str, compute: int) -> str:
    """``values`` of ``rows`` ([1]) rows (compute type) with rows of ln 0 appended up to
    ``grown`` ([1], at least ``rows``)."""
    below = g.Mul(g.Sub(grown, rows), g.i64([0, 0, 1, 0]))  # pads [0, 0, added, 0]
    return g.Pad(values, below, g.const(-np.inf, compute))


def _row_limits(g: GraphBuilder, first_row: str, count: str, blocks: str) -> str:
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
    return g.Unsqueeze(g.Min(g.Add(ends, g.Add(_largest(g, first_row), g.i64([1]))), count), g.i64([1]))


def _block_rows(
    g: GraphBuilder, ctx: _LoopInputs, stay_penalty: bool, compute: int
) -> tuple[_LoopInputs, str, Callable[[str], str]]:
    """The rows a Loop's block b computes, those that a lane can have reached by its end (see
    _row_limits; every row where ``ctx`` has no limits): ``ctx`` with the moves' rows and the
    penalties cut to them, the carried variables grown to them with ln 0, and a function that
    cuts a tensor of 2 + S rows to them. The Loop carries only those rows, so the body's input
    shapes differ from block to block where its tensors' sizes do, and onnxruntime's memory
    pattern, kept per input shape, fits each."""
    if ctx.row_limits is None:
        return ctx, "alpha_in", lambda values: values
    limit = g.Gather(ctx.row_limits, g.Add("b", g.i64(1)), axis=0)
    scale = _grown(g, "alpha_in", g.Gather(ctx.row_limits, "b", axis=0), limit, compute)

    def head(values: str) -> str:
        return _head(g, values, limit)

    cut = replace(
        ctx,
        step_rows=head(ctx.step_rows),
        skip_rows=head(ctx.skip_rows),
        stay_penalty=head(ctx.stay_penalty) if stay_penalty else ctx.stay_penalty,
        skip_penalty=head(ctx.skip_penalty),
        own_penalty=head(ctx.own_penalty),
    )
    return cut, scale, head


def _block_emissions(g: GraphBuilder, source: _BlockEmissions, scan: bool, head: Callable[[str], str]) -> list[str]:
    """Each step's emissions of the block (see _BlockEmissions: the Scan's input ``block``, or
    block ``b`` of the source), in the rows ``head`` keeps."""
    block = "block" if scan else g.Gather(source.source, "b", axis=0)
    if source.index is not None:
        assert source.spread is not None
        by_class = g.Flatten(g.GatherElements(block, source.index, axis=1), axis=2)
        return [g.Gather(by_class, head(rows), axis=0) for rows in source.spread]
    emissions = [g.fresh("emission") for _ in range(UNROLL)]
    g.node("Split", [block], emissions, axis=0, num_outputs=UNROLL)
    return [head(emission) for emission in emissions]


def _loop_body(
    prefix: str, ctx: _LoopInputs, source: _BlockEmissions, compute: int, stay_penalty: bool, scan: bool
) -> onnx.GraphProto:
    """UNROLL steps of the forward recursion (spec 4.5) as one Loop iteration, or with ``scan``
    one Scan iteration (the block of ``source`` is then the Scan's input, not a Gather); its
    values' names begin with ``prefix``.

    Carried values: ``alpha`` [2 + S, 2N] (a Loop: the rows of _row_limits) in the compute type,
    the forward variables of each lane minus its ``offset`` [1, 2N] (float64). Within the block a
    forward variable is a pair, ``scale + ln(mass)``, so the block takes one Log, at its end
    (onnxruntime's float32 Log costs about seven elementwise operators). Per step the three move
    terms of the scales are separate tensors (the stay term needs no penalty when merge_repeated
    holds); the new scale is their maximum, floored at the lowest finite value (one variadic Max:
    no NaN in the subtractions where every term is ln 0), plus the emission; the new mass is the
    sum of the masses of the three sources weighted by exp(term - maximum). A state that a move
    reaches from a state of nonzero mass has a mass of at least 1 (the largest term's weight is 1)
    and below 3**UNROLL; one that no move reaches has mass 0 (its scale is the floor plus the
    emission, or ln 0), so ``scale + ln(mass)`` is ln 0 (the exponents are not floored: onnxruntime
    1.32's Exp costs no more for a zero or subnormal result, 0.70 µs at [83, 64] for exponents near
    -1, 0.71 near -90, 0.85 for -inf). At the block's end the maximum of ``scale + ln(mass)`` over
    each lane's own rows moves into ``offset``: the values left in the compute type stay small, so
    float32 rounding is relative to a few frames' log-probabilities, not to the whole sum. Every
    operator is elementwise, variadic or a Gather (onnxruntime's Where and its reductions over a
    short leading axis cost several times more). A Loop, not a Scan, where T is known only when the
    graph runs: onnxruntime's Scan fails on a zero-length scan axis (T = 0).
    """
    g = GraphBuilder(f"{prefix}step_")  # names unique across the bodies (ONNX's data propagation)
    assert not (scan and ctx.row_limits is not None), "a Scan has no block number"
    ctx, scale, head = _block_rows(g, ctx, stay_penalty, compute)
    emissions = _block_emissions(g, source, scan, head)
    # The masses are 1 (absent) before the block's first step.
    mass = None
    for step in range(UNROLL):
        scale, mass = _step(g, ctx, scale, mass, emissions[step], stay_penalty)
    alpha = g.Add(scale, g.Log(mass)) if mass is not None else scale
    own_top = _finite_or(g, g.ReduceMax(g.Add(alpha, ctx.own_penalty), g.i64([0]), keepdims=1), ctx.zero, compute)
    g.node("Sub", [alpha, own_top], ["alpha_out"])
    g.node("Add", ["offset_in", g.Cast(own_top, to=DOUBLE)], ["offset_out"])
    info = helper.make_tensor_value_info
    # Carried values are rank 2 with free dimensions: their sizes are those of the Loop's inputs.
    carried = (("alpha", compute), ("offset", DOUBLE))
    inputs = [info(f"{name}_in", kind, [None, None]) for name, kind in carried]
    outputs = [info(f"{name}_out", kind, [None, None]) for name, kind in carried]
    if scan:
        rank = 3 if source.index is not None else 2
        return helper.make_graph(g.nodes, "ctc_forward_step", [*inputs, info("block", compute, [None] * rank)], outputs)
    g.node("Identity", ["cond_in"], ["cond_out"])
    return helper.make_graph(
        g.nodes,
        "ctc_forward_step",
        [info("b", INT64, []), info("cond_in", BOOL, []), *inputs],
        [info("cond_out", BOOL, []), *outputs],
    )


@dataclass(frozen=True)
class _Start:
    """The Loop's count, its carried values before the first step and the merge flag: the
    attribute's value, or the value the graph is built for (the inlined form)."""

    blocks: str
    alpha: str
    offset: str
    merge: str | bool


def _loops(
    g: GraphBuilder, ctx: _LoopInputs, start: _Start, source: _BlockEmissions, compute: int, scan: bool
) -> list[str]:
    """The forward Loop over ``source``, or with ``scan`` a Scan over its blocks: an If on
    merge_repeated picks a body with or without the stay penalty, or the body is chosen here
    when the graph is built for one merge_repeated. Returns ``alpha`` (compute type; [2 + S, 2N],
    or a Loop's first rows, see _row_limits) and ``offset`` [1, 2N] (float64)."""
    branches = []
    for stay_penalty in (False, True) if isinstance(start.merge, str) else (not start.merge,):
        part = GraphBuilder(f"{g.prefix}{'stay_penalty' if stay_penalty else 'free_stays'}_")
        body = _loop_body(part.prefix, ctx, source, compute, stay_penalty, scan)
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
    return _if(g, start.merge, (branches[0], branches[1]), [(compute, [None, None]), (DOUBLE, [1, None])])


def _forward(
    g: GraphBuilder,
    x: str,
    checked: _Checked,
    lattice: _Lattice,
    frames: _Frames,
    sample_ids: str,
    sizes: Sizes,
    merge: str | bool,
    compute: int,
    known: tuple[int | None, int | None],
) -> tuple[str, str]:
    """Emissions (4.1, 4.5), the forward Loop over the lanes (4.5) and their join, with ln 0 =
    -inf. Returns ln of each sample's probability [N] (float64) and [N] true for a sample with an
    active non-finite frame. Before any step only each lane's state 0 has probability 1; the
    steps are those of _frames, and no step reads a masked frame.

    How emissions are read depends on C (every way gives the same values): up to FEW_CLASSES
    the Loop body gathers each block's emissions (_few_classes); with more they are gathered
    before the Loop (_many_classes); with C = 0 they are zeros (_no_classes). ``known``: T and C
    where the graph is built for them (see _chosen_recursion), else None."""
    known_frames, known_classes = known
    # A Loop runs the blocks unless T is known (a Scan, or no step at all; _chosen_recursion).
    ctx, start = _loop_inputs(g, lattice, frames, merge, compute, limited=known_frames is None)
    x_rows = g.Reshape(x, g.Concat(g.Mul(sizes.frames, sizes.batch), sizes.classes, axis=0), allowzero=1)
    distinct = g.Transpose(lattice.distinct, perm=[1, 0])
    blank = g.Sub(sizes.class_count, g.i64(1))
    inputs = _EmissionInputs(
        x, x_rows, frames, checked.active, distinct, lattice.spread, lattice.count, blank, sizes, compute
    )
    if known_classes is None:
        alpha, offset, nonfinite = _recursion(g, inputs, ctx, start)
    else:
        alpha, offset, nonfinite = _chosen_recursion(g, inputs, ctx, start, known_frames, known_classes)
    if ctx.row_limits is not None:  # the Loop's rows, and ln 0 in those that no lane has reached
        alpha = _grown(g, alpha, g.Gather(ctx.row_limits, frames.blocks, axis=0), lattice.count, compute)
    own = g.Add(alpha, ctx.own_penalty)
    return _joined(g, own, offset, lattice, sizes.batch, sample_ids, compute), nonfinite


def _joined(
    g: GraphBuilder, lanes: str, offset: str, lattice: _Lattice, batch: str, sample_ids: str, compute: int
) -> str:
    """ln of each sample's probability [N] (float64, -inf for none) from its lanes' forward
    variables after the last step, ``lanes`` [2 + S, 2N] (compute type, ln 0 outside each lane's
    own lattice) plus ``offset`` [1, 2N] (float64): the first lane's F over the states and the
    second lane's G over the reversed states are joined over the moves between the last frame of
    the first half and the first frame of the second, P = sum_s F(s) (stay(s) G(s) + G(s + 1) +
    skip(s + 2) G(s + 2)). State s of a sample is row r = 2 + s of its first lane and state
    2L_n - s of its second, which (see _lattice) is row 2 + 2L - s = 2L + 4 - r for every
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
    joined = g.Cast(_logsumexp_rows(g, g.Concat(*terms, axis=0), compute), to=DOUBLE)
    offsets = g.Squeeze(g.Add(*(g.Slice(offset, start, end, axis1) for start, end in halves)), g.i64([0]))
    # Read through ``sample_ids``, whose shape inference keeps N, so the loss's shape is [N].
    return g.Gather(g.Add(joined, offsets), sample_ids, axis=0)


def _logsumexp_rows(g: GraphBuilder, values: str, kind: int) -> str:
    """ln sum exp over the rows of [R, N] ``values`` of element type ``kind`` (-inf for a column
    of ln 0)."""
    axis0 = g.i64([0])
    top = _finite_or(g, g.ReduceMax(values, axis0, keepdims=1), g.const(0.0, kind), kind)
    total = g.ReduceSum(g.Exp(g.Sub(values, top)), axis0, keepdims=0)
    return g.Add(g.Squeeze(top, axis0), g.Log(total))


def _recursion(g: GraphBuilder, inputs: _EmissionInputs, ctx: _LoopInputs, start: _Start) -> tuple[str, str, str]:
    """Dims known only when the graph runs: an If on C picks how emissions are read, and a Loop
    runs the blocks (T may be 0). Returns ``alpha``, ``offset`` and the non-finite samples [N]."""
    is_few, by_class, index, blocked, nonfinite = _emission_ways(g, inputs)
    loop_branches = []
    spread = _spread_by_step(g, inputs.spread, inputs.distinct)
    ways = (("few", _BlockEmissions(by_class, index, spread)), ("many", _BlockEmissions(blocked)))
    for way, way_source in ways:
        part = GraphBuilder(f"{way}_classes_loop_")
        loop_branches.append((part, _loops(part, ctx, start, way_source, inputs.compute, scan=False)))
    loop_kinds: list[tuple[Any, list[Any]]] = [(inputs.compute, [None, None]), (DOUBLE, [1, None])]
    alpha, offset = _if(g, is_few, (loop_branches[0], loop_branches[1]), loop_kinds)
    return alpha, offset, nonfinite


def _chosen_recursion(
    g: GraphBuilder, inputs: _EmissionInputs, ctx: _LoopInputs, start: _Start, frames: int | None, classes: int
) -> tuple[str, str, str]:
    """C known when the graph is built (the inlined form for a fixed C, and the static form,
    spec 11.2): the way of reading emissions is chosen by C here, with no If (onnxoptimizer's
    elimination of an If whose condition is constant, which onnxsim runs, leaves a graph out of
    topological order). With T known too (the static form) the frame terms of the many-classes
    way are computed for all frames at once and a Scan runs the blocks (every shape is then
    fixed, and tract, which has no Loop, runs it); with T = 0 there is no step (onnxruntime's
    Scan fails on a zero-length scan axis): every sample keeps its start. Otherwise a Loop runs
    them, as in _recursion. Returns as _recursion."""
    if frames == 0:
        return start.alpha, start.offset, g.Expand(g.const(False, np.bool_), inputs.sizes.batch)
    if 0 < classes <= FEW_CLASSES:
        part, by_class, index, nonfinite = _few_classes(inputs)
        g.nodes.extend(part.nodes)
        blocked = _in_blocks(g, by_class, _block_widths(g, inputs)[0], inputs)
        source = _BlockEmissions(blocked, index, _spread_by_step(g, inputs.spread, inputs.distinct))
    else:
        way = _no_classes(inputs) if classes == 0 else _many_classes(inputs, chunked=frames is None)
        part, (emissions, nonfinite) = way
        g.nodes.extend(part.nodes)
        source = _BlockEmissions(_in_blocks(g, emissions, _block_widths(g, inputs)[1], inputs))
    alpha, offset = _loops(g, ctx, start, source, inputs.compute, scan=frames is not None)
    return alpha, offset, nonfinite


def _loop_inputs(
    g: GraphBuilder, lattice: _Lattice, frames: _Frames, merge: str | bool, compute: int, limited: bool
) -> tuple[_LoopInputs, _Start]:
    """The forward Loop's constant inputs and its start: before any step only each lane's state 0
    (its ``first_row``) has probability 1. ``limited``: the recursion is a Loop, whose blocks
    compute the rows of _row_limits."""
    axis0, rows = g.i64([0]), lattice.rows
    column = g.Unsqueeze(rows, g.i64([1]))
    first_row, last_row = (g.Unsqueeze(row, axis0) for row in (lattice.first_row, lattice.last_row))
    zero, neg_inf = g.const(0.0, compute), g.const(-np.inf, compute)
    alpha0 = g.Where(g.Equal(column, first_row), zero, neg_inf)
    ctx = _LoopInputs(
        step_rows=g.Max(g.Sub(rows, g.i64(1)), g.i64(0)),
        skip_rows=g.Max(g.Sub(rows, g.i64(2)), g.i64(0)),
        stay_penalty=lattice.stay_penalty,
        skip_penalty=lattice.skip_penalty,
        # Rows of each lane's own lattice: its offset ignores the rows outside, so a lane's
        # float32 arithmetic does not depend on the other targets of the batch.
        own_penalty=g.Where(g.And(g.GreaterOrEqual(column, first_row), g.LessOrEqual(column, last_row)), zero, neg_inf),
        lowest=g.const(np.finfo(helper.tensor_dtype_to_np_dtype(compute)).min, compute),
        zero=zero,
        row_limits=_row_limits(g, first_row, lattice.count, frames.blocks) if limited else None,
    )
    if ctx.row_limits is not None:  # a Loop starts from the rows up to the highest first row
        alpha0 = _head(g, alpha0, g.Gather(ctx.row_limits, g.i64(0), axis=0))
    start = _Start(frames.blocks, alpha0, g.Expand(g.f64(0.0), g.Concat(g.i64([1]), frames.lanes, axis=0)), merge)
    return ctx, start


def _emission_ways(g: GraphBuilder, inputs: _EmissionInputs) -> tuple[str, str, str, str, str]:
    """The If over how emissions are read: [] true when C <= FEW_CLASSES (and C > 0), then the
    few-classes source and index, the blocked emissions of the other way, and the samples [N]
    with an active non-finite frame."""
    axis0, sizes, compute = g.i64([0]), inputs.sizes, inputs.compute
    # The emission If gives the values of both ways, the unused one empty; the Loops come after it
    # and read only values of this graph: onnxruntime replaces an If whose condition it can fold
    # (fixed dimensions) by its branch and renames that branch's values, but not the names a Loop
    # body nested in the branch reads.
    few, by_class, index, few_nonfinite = _few_classes(inputs)
    few_outputs = [
        by_class,
        index,
        few.Expand(few.const(np.zeros((0, 0, 0)), compute), few.i64([0, 0, 0])),
        few_nonfinite,
    ]
    other = GraphBuilder("other_classes_")
    kinds = [(compute, [None, None, None]), (BOOL, [None])]
    is_none = other.Squeeze(other.Equal(sizes.classes, other.i64([0])), other.i64([0]))
    emissions, other_nonfinite = _if(other, is_none, (_no_classes(inputs), _many_classes(inputs, chunked=True)), kinds)
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
    by_class, index, emissions, nonfinite = _if(g, is_few, ((few, few_outputs), (other, other_outputs)), kinds)
    # Blocked here, not in the If's branches: a Reshape that gives a branch's output copies it.
    # The way not taken gives an empty tensor, blocked with 0 for one of its dims.
    few_flag = g.Cast(g.Unsqueeze(is_few, axis0), to=INT64)
    few_width, other_width = _block_widths(g, inputs)
    few_width = g.Mul(few_width, g.Concat(g.i64([1]), few_flag, axis=0))
    other_width = g.Mul(other_width, g.Sub(g.i64([1]), few_flag))
    return (
        is_few,
        _in_blocks(g, by_class, few_width, inputs),
        index,
        _in_blocks(g, emissions, other_width, inputs),
        nonfinite,
    )


def _block_widths(g: GraphBuilder, inputs: _EmissionInputs) -> tuple[str, str]:
    """The dims of a block of UNROLL steps between the blocks and the lanes: [UNROLL, C] for the
    few-classes log-probabilities, [UNROLL * (2 + S)] for the other ways' emissions."""
    return g.Concat(g.i64([UNROLL]), inputs.sizes.classes, axis=0), g.Mul(inputs.count, g.i64([UNROLL]))


def _in_blocks(g: GraphBuilder, values: str, width: str, inputs: _EmissionInputs) -> str:
    """[P, ..., 2N] ``values`` in blocks [B, *width, 2N] of UNROLL steps (``width`` 1-D: the dims
    of a block between the blocks and the lanes)."""
    blocks = g.Reshape(inputs.frames.blocks, g.i64([1]))
    return g.Reshape(values, g.Concat(blocks, width, inputs.frames.lanes, axis=0), allowzero=1)


def _read_out(g: GraphBuilder, log_mass: str, nan_samples: str) -> str:
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
    checked = _checks(g, mask, labels, sizes)
    collapse = g.attribute("preprocess_collapse_repeated")
    targets, lengths = _targets(g, checked.labels, blank, collapse, trim=fixed is None)
    merge = g.attribute("merge_repeated")
    # 0 .. N-1 from a sum over no frame of ``inputs`` (not a Range), so shape inference keeps N;
    # its ones a Where, not a cast (see GraphBuilder.int64).
    no_frame = g.ReduceSum(g.Slice(x, g.i64([0]), g.i64([0]), g.i64([0])), g.i64([0, 2]), keepdims=0)
    ones = g.Where(g.Equal(no_frame, no_frame), g.i64(1), g.i64(0))
    sample_ids = g.Sub(g.CumSum(ones, g.i64(0)), g.i64(1))
    # The lanes: the samples' first halves, then their second halves with reversed targets.
    both_targets = g.Concat(targets, _reversed(g, targets), axis=0)
    width = g.Shape(targets, start=1, end=2)
    starts = g.Concat(g.Mul(lengths, g.i64(0)), g.Sub(width, lengths), axis=0)
    both_lengths = g.Concat(lengths, lengths, axis=0)
    lattice = _lattice(g, both_targets, starts, both_lengths, blank, merge, compute_type)
    frames = _frames(g, checked.active, sizes, sample_ids)
    known = (None, classes) if fixed is None else (fixed[0], fixed[2])
    chosen = merge if merge_repeated is None else merge_repeated
    log_mass, nonfinite = _forward(g, x, checked, lattice, frames, sample_ids, sizes, chosen, compute_type, known)
    nan_samples = g.Or(checked.faults, nonfinite)
    g.node("CastLike", [_read_out(g, log_mass, nan_samples), x], [spec.output_name])
    return helper.make_function(
        DOMAIN,
        OP_TYPE,
        list(spec.input_names),
        [spec.output_name],
        # Without steps (fixed T = 0) the recursion's inputs are built and left unread.
        live(g.nodes, [spec.output_name]),
        [helper.make_opsetid("", opset)],
        attribute_protos=[helper.make_attribute(name, int(default)) for name, default in spec.attributes.items()],
        doc_string="CTCLoss-4, time-major form; see spec/ctcloss4.md",
    )
