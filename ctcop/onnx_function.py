"""CTCLoss-4 as an ONNX model-local function built from standard operators (spec section 11).

The function ``ai.ctcop.CTCLoss`` (version 1) takes the spec's three inputs and two attributes and
computes in log space, in its compute type (float64 for float64 models, float32 otherwise), what
:mod:`ctcop.recursion` computes:

* log-softmax over the C classes as ``(x - max) - ln sum exp(x - max)`` (4.1);
* a frame is non-finite when its log-sum is NaN or its minimum is infinite; an active
  non-finite frame makes its sample NaN (4.4); inactive frames are never read (3.2);
* pads are removed wherever they stand and, if ``preprocess_collapse_repeated``, repeats merged
  (3.3, 3.4), by a stable per-row permutation built with CumSum and ScatterElements;
* the extended-label lattice of section 4.5 with its stay/skip masks derived arithmetically from
  ``merge_repeated``, so one body serves every attribute value; disallowed moves add -inf;
* a Loop over blocks of frames carries the forward variables [2 + S, N] relative to a float64
  per-sample offset, and captures each sample's end states at its last active frame.

The result is cast back to the element type of ``inputs`` with CastLike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .schema import form

DOMAIN = "ai.ctcop"
DOMAIN_VERSION = 1
OP_TYPE = "CTCLoss"
MIN_OPSET = 18
# Frames per Loop iteration: onnxruntime spends most of a short iteration on the Loop itself.
UNROLL = 5
# Up to this many classes the emissions are gathered with GatherElements, which onnxruntime runs
# ten times faster than an element-wise Gather; onnx.reference's GatherElements (np.choose) takes
# at most 32 choices under NumPy 1 and 64 under NumPy 2, so more classes use a flat Gather.
FEW_CLASSES = 32


@dataclass
class _Builder:
    """Appends nodes with fresh output names; constants are emitted as Constant nodes."""

    prefix: str
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    count: int = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{self.prefix}{hint}_{self.count}"

    def op(self, op_type: str, *inputs: str, hint: str = "", **attrs: Any) -> str:
        out = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, value: Any, dtype: Any, hint: str = "c") -> str:
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype))
        return self.op("Constant", hint=hint, value=tensor)

    def flag(self, attribute: str) -> str:
        """A bool scalar holding the function attribute ``attribute``."""
        out = self.fresh(attribute)
        ref = helper.make_attribute_ref("value_int", onnx.AttributeProto.INT)
        ref.ref_attr_name = attribute
        node = helper.make_node("Constant", [], [out])
        node.attribute.append(ref)
        self.nodes.append(node)
        return self.op("Cast", out, to=TensorProto.BOOL)


def _shift_right(b: _Builder, values: str, by: int, fill: str, k: dict[str, str]) -> str:
    """``out[:, s] = values[:, s - by]`` for [N, W] values, ``fill`` where s < by (any width)."""
    padded = b.op("Pad", values, k[f"pad_left_{by}"], fill)
    return b.op("Slice", padded, k["zero_1"], k[f"minus_{by}"], k["one_1"])


def _compact(b: _Builder, values: str, keep: str, fill: str, k: dict[str, str]) -> tuple[str, str]:
    """Stable move of the kept entries of each row to its front; the rest becomes ``fill``.

    Returns the rows trimmed to the longest kept length, and the kept counts [N].
    """
    kept = b.op("Cast", keep, to=TensorProto.INT64)
    counts = b.op("ReduceSum", kept, k["axis1"], keepdims=1)
    before = b.op("Sub", b.op("CumSum", kept, k["one"]), k["one"])
    dropped = b.op("Sub", k["one"], kept)
    after = b.op("Add", counts, b.op("Sub", b.op("CumSum", dropped, k["one"]), k["one"]))
    moved = b.op("ScatterElements", values, b.op("Where", keep, before, after), values, axis=1)
    filled = b.op("Where", b.op("Less", _positions(b, values, k), counts), moved, fill)
    longest = b.op("ReduceMax", b.op("Concat", b.op("Flatten", counts, axis=0), k["zero_1x1"], axis=1))
    trimmed = b.op("Slice", filled, k["zero_1"], b.op("Reshape", longest, k["one_1"]), k["one_1"])
    return trimmed, b.op("Squeeze", counts, k["axis1"])


def _positions(b: _Builder, values: str, k: dict[str, str]) -> str:
    """0, 1, ..., W-1 for [N, W] ``values``."""
    width = b.op("Squeeze", b.op("Shape", values, start=1, end=2), k["axis0"])
    return b.op("Range", k["zero"], width, k["one"])


def _interleave(b: _Builder, values: str, between: str, first: str) -> str:
    """[N, L] -> [N, 2L + 1]: first, v_1, between, v_2, between, ..., v_L, between."""
    column = b.op("Unsqueeze", values, b.const([2], np.int64))
    other = b.op("Expand", between, b.op("Shape", column))
    pairs = b.op("Concat", column, other, axis=2)
    n = b.op("Shape", values, start=0, end=1)
    width = b.op("Mul", b.op("Shape", values, start=1, end=2), b.const([2], np.int64))
    flat = b.op("Reshape", pairs, b.op("Concat", n, width, axis=0), allowzero=1)
    head = b.op("Expand", first, b.op("Concat", n, b.const([1], np.int64), axis=0))
    return b.op("Concat", head, flat, axis=1)


def _logsumexp(b: _Builder, terms: list[str], zero: str, *plus: str) -> str:
    """ln sum_j exp(terms[j]) (+ the ``plus`` terms), exact for all -inf terms (-inf)."""
    top = _finite_or(b, b.op("Max", *terms), zero)
    total = b.op("Sum", *(b.op("Exp", b.op("Sub", term, top)) for term in terms))
    return b.op("Sum", top, b.op("Log", total), *plus)


def _finite_or(b: _Builder, values: str, fallback: str) -> str:
    return b.op("Where", b.op("IsInf", values), fallback, values)


def _loop_body(ctx: dict[str, str], compute: int) -> onnx.GraphProto:
    """UNROLL frames of the forward recursion (spec 4.5) as one Loop iteration.

    Carried values: ``alpha`` [2 + S, N] in the compute type, the forward variables of each
    sample minus its ``offset`` [1, N] (float64); ``captured`` [2, N] (float64), the absolute
    forward variables of states 2L and 2L - 1 at the sample's last active frame. The three move
    terms (stay, step from row r - 1, skip from row r - 2) are separate tensors and every
    operator per frame is elementwise or variadic (onnxruntime's reductions over a short leading
    axis and its float64 Exp cost several times more). After UNROLL frames the maximum over
    each sample's own rows moves from ``alpha`` into ``offset``: the values left in the compute type stay
    small, so float32 rounding is relative to a few frames' log-probabilities, not to the
    whole sum. Frames after a sample's end are computed but never captured. A Loop, not a
    Scan: onnxruntime's Scan fails on a zero-length scan axis (T = 0).
    """
    b = _Builder("step_")
    emissions = b.op("Gather", ctx["emission_blocks"], "t", axis=0)
    ends = b.op("Gather", ctx["end_blocks"], "t", axis=0)
    alpha, captured = "alpha_in", "captured_in"
    for offset in range(UNROLL):
        at = b.const(offset, np.int64)
        terms = [
            b.op("Add", alpha, ctx["stay_penalty"]),
            b.op("Gather", alpha, ctx["step_rows"], axis=0),
            b.op("Add", b.op("Gather", alpha, ctx["skip_rows"], axis=0), ctx["skip_penalty"]),
        ]
        alpha = _logsumexp(b, terms, ctx["zero"], b.op("Gather", emissions, at, axis=0))
        at_end = b.op("Cast", _take(b, alpha, ctx["end_cells"]), to=TensorProto.DOUBLE)
        captured = b.op("Where", b.op("Gather", ends, at, axis=0), b.op("Add", at_end, "offset_in"), captured)
    own = b.op("Where", ctx["own_rows"], alpha, ctx["neg_inf"])
    top = _finite_or(b, b.op("ReduceMax", own, ctx["axis0"], keepdims=1), ctx["zero"])
    b.nodes.append(helper.make_node("Sub", [alpha, top], ["alpha_out"]))
    b.nodes.append(helper.make_node("Add", ["offset_in", b.op("Cast", top, to=TensorProto.DOUBLE)], ["offset_out"]))
    b.nodes.append(helper.make_node("Identity", [captured], ["captured_out"]))
    b.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    double = TensorProto.DOUBLE
    # Carried values are rank 2 with free dimensions: their sizes are those of the Loop's inputs.
    carried = (("alpha", compute), ("offset", double), ("captured", double))
    return helper.make_graph(
        b.nodes,
        "ctc_forward_step",
        [
            helper.make_tensor_value_info("t", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            *(helper.make_tensor_value_info(f"{name}_in", kind, [None, None]) for name, kind in carried),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            *(helper.make_tensor_value_info(f"{name}_out", kind, [None, None]) for name, kind in carried),
        ],
    )


def _take(b: _Builder, data: str, flat_index: str) -> str:
    """``data.ravel()[flat_index]``: Gather on a flat view (see FEW_CLASSES for GatherElements)."""
    return b.op("Gather", b.op("Reshape", data, b.const([-1], np.int64)), flat_index, axis=0)


def _gather_emissions(
    b: _Builder,
    centred: str,
    column_classes: str,
    frame_ids: str,
    sample_ids: str,
    dims: dict[str, str],
    compute: int,
) -> str:
    """``centred[frame_ids[f], n, column_classes[0, r, n]]`` as [F, 2 + S, N].

    An If picks the operator: GatherElements on a [T, C, N] view up to FEW_CLASSES classes, else a
    Gather of entry ((t * N + n) * C + class) of the flat view. Both give the same values.
    ``dims`` holds the 1-element shapes ``frames`` (T), ``states`` (2 + S), ``batch`` (N), ``classes``
    (C) and the scalars ``batch_size`` (N) and ``class_count`` (C).
    """
    few = _Builder("few_classes_")
    by_class = few.op("Transpose", centred, perm=[0, 2, 1])
    index = few.op("Expand", column_classes, few.op("Concat", dims["frames"], dims["states"], dims["batch"], axis=0))
    few_gathered = few.op("Gather", few.op("GatherElements", by_class, index, axis=1), frame_ids, axis=0)
    many = _Builder("many_classes_")
    frame_rows = many.op(
        "Add",
        many.op("Mul", many.op("Unsqueeze", frame_ids, many.const([1, 2], np.int64)), dims["batch_size"]),
        many.op("Unsqueeze", sample_ids, many.const([0, 1], np.int64)),
    )
    many_gathered = _take(
        many, centred, many.op("Add", many.op("Mul", frame_rows, dims["class_count"]), column_classes)
    )
    branches = [
        helper.make_graph(part.nodes, name, [], [helper.make_tensor_value_info(out, compute, ["F", "S2", "N"])])
        for name, part, out in (("few_classes", few, few_gathered), ("many_classes", many, many_gathered))
    ]
    is_few = b.op("LessOrEqual", dims["classes"], b.const([FEW_CLASSES], np.int64))
    gathered = b.fresh("gathered")
    condition = b.op("Squeeze", is_few, b.const([0], np.int64))
    b.nodes.append(helper.make_node("If", [condition], [gathered], then_branch=branches[0], else_branch=branches[1]))
    return gathered


def ctc_loss_function(opset: int = MIN_OPSET, compute: str = "float64") -> onnx.FunctionProto:
    """The model-local function ``ai.ctcop.CTCLoss`` over standard ONNX operators of ``opset``.

    ``compute`` ("float32" or "float64") is the type of the log-softmax and of the recursion
    (the per-sample offsets and the result are float64). The exporters pass float64 for float64
    models only.
    """
    spec = form("time_major")
    x_name, mask_name, labels_name = (p.name for p in spec.inputs)
    b = _Builder("")
    f64 = np.float64
    compute_type = helper.np_dtype_to_tensor_dtype(np.dtype(compute))
    k = {
        "zero": b.const(0, np.int64),
        "one": b.const(1, np.int64),
        "two": b.const(2, np.int64),
        "zero_1": b.const([0], np.int64),
        "two_1": b.const([2], np.int64),
        "one_1": b.const([1], np.int64),
        "zero_1x1": b.const([[0]], np.int64),
        "axis0": b.const([0], np.int64),
        "axis1": b.const([1], np.int64),
        "axis2": b.const([2], np.int64),
        "pad_left_1": b.const([0, 1, 0, 0], np.int64),
        "pad_left_2": b.const([0, 2, 0, 0], np.int64),
        "minus_1": b.const([-1], np.int64),
        "minus_2": b.const([-2], np.int64),
        "zero_f": b.const(0.0, f64),
    }
    collapse = b.flag("preprocess_collapse_repeated")
    merge = b.flag("merge_repeated")

    # Frames (3.2, 4.1, 4.4): active flags, the log-softmax terms, non-finite frames.
    active = b.op("Cast", mask_name, to=TensorProto.BOOL)
    logits = b.op("Cast", x_name, to=helper.np_dtype_to_tensor_dtype(np.dtype(compute)))
    centred = b.op("Sub", logits, b.op("ReduceMax", logits, k["axis2"], keepdims=1))
    log_sum = b.op("Log", b.op("ReduceSum", b.op("Exp", centred), k["axis2"], keepdims=1))
    smallest = b.op("ReduceMin", logits, k["axis2"], keepdims=1)
    nonfinite = b.op("Squeeze", b.op("Or", b.op("IsNaN", log_sum), b.op("IsInf", smallest)), k["axis2"])
    nonfinite_active = b.op("Cast", b.op("And", nonfinite, active), to=TensorProto.INT64)
    nonfinite_count = b.op("ReduceSum", nonfinite_active, k["axis0"], keepdims=0)

    # Targets (3.3, 3.4): remove every pad, then collapse repeats when asked.
    classes = b.op("Shape", x_name, start=2, end=3)
    class_count = b.op("Squeeze", classes, k["axis0"])
    blank = b.op("Sub", class_count, k["one"])
    labels = b.op("Cast", labels_name, to=TensorProto.INT64)
    is_pad = b.op("Equal", labels, b.const(-1, np.int64))
    targets, target_lengths = _compact(b, labels, b.op("Not", is_pad), blank, k)
    in_target = b.op("Less", _positions(b, targets, k), b.op("Unsqueeze", target_lengths, k["axis1"]))
    starts_run = b.op("Not", b.op("Equal", targets, _shift_right(b, targets, 1, b.const(-1, np.int64), k)))
    keep = b.op("And", in_target, b.op("Or", b.op("Not", collapse), starts_run))
    targets, target_lengths = _compact(b, targets, keep, blank, k)

    # Lattice (4.5): classes of the 2L+1 states, label-state flags, allowed stay/skip moves.
    states = _interleave(b, targets, blank, blank)
    real = b.op("Less", _positions(b, targets, k), b.op("Unsqueeze", target_lengths, k["axis1"]))
    false = b.const(False, np.bool_)
    is_label = _interleave(b, real, false, false)
    stay = b.op("Or", merge, b.op("Not", is_label))
    differs = b.op("Not", b.op("Equal", states, _shift_right(b, states, 2, b.const(-1, np.int64), k)))
    skip = b.op("And", is_label, b.op("Or", b.op("Not", merge), differs))

    # The forward variables are padded by two rows that stay ln 0: state s is row 2 + s, and the
    # step and skip moves read rows r - 1 and r - 2 with no bounds test. Pad rows copy the blank's
    # class (a finite emission leaves ln 0 unchanged).
    pair = b.op("Concat", b.op("Shape", states, end=1), k["two_1"], axis=0)
    padded_states = b.op("Concat", b.op("Expand", blank, pair), states, axis=1)
    rows = _positions(b, padded_states, k)
    state_count = b.op("Shape", padded_states, start=1, end=2)
    batch_shape = b.op("Shape", x_name, start=1, end=2)

    # Emissions [T', UNROLL, 2 + S, N] in the compute type, states first like the forward
    # variables. Frames are padded to a multiple of UNROLL by repeating the last one; no sample
    # ends in a padded frame.
    frames = b.op("Shape", x_name, start=0, end=1)
    frame_count, batch = (b.op("Squeeze", b.op("Shape", x_name, start=i, end=i + 1), k["axis0"]) for i in (0, 1))
    unroll = b.const([UNROLL], np.int64)
    blocks = b.op("Div", b.op("Add", frames, b.const([UNROLL - 1], np.int64)), unroll)
    padded_frames = b.op("Range", k["zero"], b.op("Squeeze", b.op("Mul", blocks, unroll), k["axis0"]), k["one"])
    frame_ids = b.op("Min", padded_frames, b.op("Sub", frame_count, k["one"]))
    # 0 .. N-1 shaped like target_lengths (not a Range), so shape inference keeps a fixed N.
    sample_ids = b.op(
        "Sub", b.op("CumSum", b.op("Add", b.op("Mul", target_lengths, k["zero"]), k["one"]), k["zero"]), k["one"]
    )
    column_classes = b.op("Unsqueeze", b.op("Transpose", padded_states, perm=[1, 0]), k["axis0"])
    dims = {
        "frames": frames,
        "states": state_count,
        "batch": batch_shape,
        "classes": classes,
        "batch_size": batch,
        "class_count": class_count,
    }
    gathered = _gather_emissions(b, centred, column_classes, frame_ids, sample_ids, dims, compute_type)
    frame_shape = b.op("Concat", frames, k["one_1"], batch_shape, axis=0)
    frame_log_sum = b.op("Gather", b.op("Reshape", log_sum, frame_shape, allowzero=1), frame_ids, axis=0)
    emissions = b.op("Sub", gathered, frame_log_sum)
    block_shape = b.op("Concat", blocks, unroll, state_count, batch_shape, axis=0)
    emission_blocks = b.op("Reshape", emissions, block_shape, allowzero=1)
    # Each sample's last active frame (3.1: the mask is a prefix of length T_i; none if T_i = 0).
    lengths = b.op("ReduceSum", b.op("Cast", active, to=TensorProto.INT64), k["axis0"], keepdims=1)
    ends = b.op("Equal", b.op("Unsqueeze", b.op("Add", padded_frames, k["one"]), k["axis1"]), lengths)
    end_shape = b.op("Concat", blocks, unroll, k["one_1"], batch_shape, axis=0)
    last_row = b.op("Add", b.op("Mul", target_lengths, k["two"]), k["two"])
    end_rows = b.op(
        "Concat", *(b.op("Unsqueeze", r, k["axis0"]) for r in (last_row, b.op("Sub", last_row, k["one"]))), axis=0
    )

    # The forward Loop (4.5), with ln 0 = -inf. Before any frame only state 0 has probability 1.
    zero_c, neg_inf_c = b.const(0.0, compute), b.const(-np.inf, compute)
    first = b.op("Where", b.op("Equal", rows, k["two"]), zero_c, neg_inf_c)
    alpha0 = b.op("Expand", b.op("Unsqueeze", first, k["axis1"]), b.op("Concat", state_count, batch_shape, axis=0))
    ctx = {
        "emission_blocks": emission_blocks,
        "end_blocks": b.op("Reshape", ends, end_shape, allowzero=1),
        "end_cells": b.op("Add", b.op("Mul", end_rows, batch), b.op("Unsqueeze", sample_ids, k["axis0"])),
        "step_rows": b.op("Max", b.op("Sub", rows, k["one"]), k["zero"]),
        "skip_rows": b.op("Max", b.op("Sub", rows, k["two"]), k["zero"]),
        # Rows of each sample's own lattice: its offset ignores the rows beyond, so a sample's
        # float32 arithmetic does not depend on the other targets of the batch.
        "own_rows": b.op("LessOrEqual", b.op("Unsqueeze", rows, k["axis1"]), b.op("Unsqueeze", last_row, k["axis0"])),
        "zero": zero_c,
        "neg_inf": neg_inf_c,
        "axis0": k["axis0"],
    }
    allowed_pair = b.op("Expand", b.const(True, np.bool_), pair)
    for name, allowed in (("stay_penalty", stay), ("skip_penalty", skip)):
        padded = b.op("Transpose", b.op("Concat", allowed_pair, allowed, axis=1), perm=[1, 0])
        ctx[name] = b.op("Where", padded, zero_c, neg_inf_c)
    offset0 = b.op("Expand", k["zero_f"], b.op("Concat", k["one_1"], batch_shape, axis=0))
    captured0 = b.op("Cast", _take(b, alpha0, ctx["end_cells"]), to=TensorProto.DOUBLE)
    body = _loop_body(ctx, compute_type)
    outputs = [b.fresh("alpha"), b.fresh("offset"), b.fresh("captured")]
    trips = b.op("Squeeze", blocks, k["axis0"])
    loop = helper.make_node("Loop", [trips, b.const(True, np.bool_), alpha0, offset0, captured0], outputs, body=body)
    b.nodes.append(loop)

    # Read-out (4.3, 4.4): ln of the mass on states 2L and 2L-1, then NaN for non-finite samples.
    ends_at = (_take(b, outputs[2], b.op("Add", b.op("Mul", k[row], batch), sample_ids)) for row in ("zero", "one"))
    loss = b.op("Neg", _logsumexp(b, list(ends_at), k["zero_f"]))
    loss = b.op("Where", b.op("Greater", nonfinite_count, k["zero"]), b.const(np.nan, f64), loss)
    b.nodes.append(helper.make_node("CastLike", [loss, x_name], [spec.outputs[0].name]))

    return helper.make_function(
        DOMAIN,
        OP_TYPE,
        [p.name for p in spec.inputs],
        [spec.outputs[0].name],
        b.nodes,
        [helper.make_opsetid("", opset)],
        attribute_protos=[helper.make_attribute(name, int(default)) for name, default in spec.attributes.items()],
        doc_string="CTCLoss-4, time-major form; see spec/ctcloss4.md",
    )
