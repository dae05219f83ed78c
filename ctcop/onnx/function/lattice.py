"""The function's setup (spec 3.1, 3.3, 3.4, 4.5): the inputs checked, the targets, the lanes and
their lattice, and the frame each lane reads at each step.

* checks (3.1, 3.3, 11.5): ``sequence_mask`` and ``labels`` cut and padded to [T, N] and [N, T]
  and read as float64; per-sample and batch-wide faults; a faulty sample becomes a valid empty
  one before anything indexes with it, so nothing out of range is ever read;
* targets (3.3, 3.4): pads removed and repeats merged by a stable per-row permutation;
* lanes: each sample is two halves side by side, lane n its first ceil(T_n / 2) frames forwards
  and lane N + n the rest backwards against the reversed target, so the recursion takes half the
  steps over twice the columns (fewer, wider operators cost a runtime less);
* lattice (4.5): the extended-label states of every lane, with stay and skip penalties derived
  arithmetically from ``merge_repeated``, so one body serves every attribute value;
* steps (3.1): P = UNROLL * ceil(ceil(T / 2) / UNROLL); a lane reads its frames at its last steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import GraphBuilder, Sizes, any_along, fitted
from .constants import DOUBLE, UNROLL
from .rows import compact, interleave, positions_of, shift_right


@dataclass(frozen=True)
class Checked:
    """``sequence_mask`` and ``labels`` as the rest of the function may read them (spec 11.5):
    ``active`` [T, N] (bool, a prefix in every column), ``labels`` [N, T] (int64, -1 or a class
    in [0, C-2]) and ``faults`` [N] (bool; the samples whose loss is NaN). A faulty sample's
    column is all 0 and its row all -1 (a valid empty sample), as in ``ctc_loss_or_nan``."""

    active: str
    labels: str
    faults: str


def checked_inputs(g: GraphBuilder, mask_name: str, labels_name: str, sizes: Sizes) -> Checked:
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
    return Checked(active, g.int64(kept), faults)


def collapsed_targets(g: GraphBuilder, labels: str, blank: str, collapse: str, trim: bool) -> tuple[str, str]:
    """Targets (3.3, 3.4) [N, L] and their lengths [N] from the checked int64 ``labels``: every
    pad removed, then repeats collapsed when ``collapse`` holds. L is the longest target when
    ``trim`` holds, else T (see compact)."""
    targets, lengths = compact(g, labels, g.Not(g.Equal(labels, g.i64(-1))), blank, trim)
    in_target = g.Less(positions_of(g, targets), g.Unsqueeze(lengths, g.i64([1])))
    starts_run = g.Not(g.Equal(targets, shift_right(g, targets, 1, g.i64(-1))))
    keep = g.And(in_target, g.Or(g.Not(collapse), starts_run))
    return compact(g, targets, keep, blank, trim)


def reversed_targets(g: GraphBuilder, targets: str) -> str:
    """[N, L] ``targets`` with the L positions in reverse order: a sample's target read backwards,
    after L - L_n pads (its second lane's target, see lattice_of)."""
    positions = positions_of(g, targets)
    # L - 1 - position, not a Range from L - 1 with step -1, whose Gather onnxruntime's optimizer
    # turns into an empty tensor (D51).
    last = g.Sub(g.Shape(targets, start=1, end=2), g.i64([1]))
    return g.Gather(targets, g.Sub(last, positions), axis=1)


@dataclass(frozen=True)
class Lattice:
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


def lattice_of(
    g: GraphBuilder, targets: str, starts: str, lengths: str, blank: str, merge: str, compute: int
) -> Lattice:
    """Lattice (4.5): classes of the 2L+1 states, label-state flags, allowed stay/skip moves."""
    states = interleave(g, targets, blank, blank)
    positions = positions_of(g, targets)
    begin = g.Unsqueeze(starts, g.i64([1]))
    real = g.And(g.GreaterOrEqual(positions, begin), g.Less(positions, g.Add(begin, g.Unsqueeze(lengths, g.i64([1])))))
    false = g.const(False, np.bool_)
    is_label = interleave(g, real, false, false)
    stay = g.Or(merge, g.Not(is_label))
    differs = g.Not(g.Equal(states, shift_right(g, states, 2, g.i64(-1))))
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
    return Lattice(distinct, spread, rows, count, stay_penalty, skip_penalty, first_row, last_row)


def sample_ids_of(g: GraphBuilder, x: str) -> str:
    """0 .. N-1 from a sum over no frame of ``inputs`` (not a Range), so shape inference keeps N;
    its ones a Where, not a cast (see GraphBuilder.int64)."""
    no_frame = g.ReduceSum(g.Slice(x, g.i64([0]), g.i64([0]), g.i64([0])), g.i64([0, 2]), keepdims=0)
    ones = g.Where(g.Equal(no_frame, no_frame), g.i64(1), g.i64(0))
    return g.Sub(g.CumSum(ones, g.i64(0)), g.i64(1))


def lanes_lattice(g: GraphBuilder, targets: str, lengths: str, blank: str, merge: str, compute: int) -> Lattice:
    """The lattice of the 2N lanes (see lattice_of): the samples' first halves over their
    ``targets`` [N, L] of ``lengths`` [N], then their second halves over the reversed targets."""
    both_targets = g.Concat(targets, reversed_targets(g, targets), axis=0)
    width = g.Shape(targets, start=1, end=2)
    starts = g.Concat(g.Mul(lengths, g.i64(0)), g.Sub(width, lengths), axis=0)
    both_lengths = g.Concat(lengths, lengths, axis=0)
    return lattice_of(g, both_targets, starts, both_lengths, blank, merge, compute)


@dataclass(frozen=True)
class Frames:
    """The steps of the recursion over the 2N lanes (see lane_steps), ``padded`` = B * UNROLL of them
    (B = ``blocks``, scalar): ``rows`` [P, 2N] is the row of ``inputs`` viewed as [T * N, C] that
    step p of a lane reads (always one of its own sample's frames), ``waiting`` [P, 2N] true where
    the step reads none (see waiting_emissions), ``lanes`` [1] = 2N."""

    rows: str
    waiting: str
    lanes: str
    blocks: str
    padded: str


def lane_steps(g: GraphBuilder, active: str, sizes: Sizes, sample_ids: str) -> Frames:
    """Steps (3.1) of the two halves of every sample: the mask is a prefix of length T_n in every
    column (checked). With H = ceil(T / 2) and P = UNROLL * ceil(H / UNROLL) steps, lane n (the
    first half of sample n) reads frames 0 .. F_n - 1 (F_n = ceil(T_n / 2)) at the last F_n steps
    and lane N + n (the second half, backwards) frames T_n - 1 down to F_n at the last T_n - F_n
    steps: every frame of a sample is read once, and each lane reads its last frame at the last
    step. Before its first frame a lane waits (see waiting_emissions). Its steps, and so the
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
    return Frames(rows, waiting, g.Mul(sizes.batch, g.i64([2])), blocks, padded)
