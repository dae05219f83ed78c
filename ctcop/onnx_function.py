"""CTCLoss-4 as an ONNX model-local function built from standard operators (spec section 11).

The function ``ai.ctcop.CTCLoss`` (version 1) takes the spec's three inputs and two attributes and
computes, in float64 and log space, exactly what :mod:`ctcop.recursion` computes:

* log-softmax over the C classes as ``(x - max) - ln sum exp(x - max)`` (4.1), in float64 for
  float64 inputs and in float32 otherwise; only the gathered [T, N, S] values go on in float64;
* a frame is non-finite when its log-sum is NaN or its minimum is infinite; an active
  non-finite frame makes its sample NaN (4.4); inactive frames are never read (3.2);
* pads are removed wherever they stand and, if ``preprocess_collapse_repeated``, repeats merged
  (3.3, 3.4), by a stable per-row permutation built with CumSum and ScatterElements;
* the extended-label lattice of section 4.5 with its stay/skip masks derived arithmetically from
  ``merge_repeated``, so one body serves every attribute value;
* a Loop over time carries the forward variables [N, S] in float64; inactive frames leave them
  unchanged. Stay and skip moves are masked by adding precomputed 0 / -inf penalties.

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
# ln 0 inside the Loop of float32 models (see ctc_loss_function).
LOG_ZERO = -1e300


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


def _logsumexp(b: _Builder, terms: list[str], k: dict[str, str]) -> str:
    top = b.op("Max", *terms)
    safe = b.op("Where", b.op("IsInf", top), k["zero_f"], top)
    total = b.op("Sum", *(b.op("Exp", b.op("Sub", t, safe)) for t in terms))
    return b.op("Add", safe, b.op("Log", total))


def _frame_logsumexp(b: _Builder, terms: str, compute: int, guard_inf: bool, k: dict[str, str]) -> str:
    """ln sum_j exp(terms[j]) over axis 0 of [3, S, N] -> [S, N], float64.

    The maximum stays in float64; the bounded remainder ln sum exp(x_j - max), in [0, ln 3], is
    computed in ``compute`` (float32 for float32 models: vectorised, error about 1e-7 per frame).
    ``guard_inf`` handles all-(-inf) columns; without it log-zero must be finite.
    """
    top = b.op("ReduceMax", terms, k["axis0"], keepdims=0)
    if guard_inf:
        top = b.op("Where", b.op("IsInf", top), k["zero_f"], top)
    centred = b.op("Cast", b.op("Sub", terms, top), to=compute)
    rest = b.op("Log", b.op("ReduceSum", b.op("Exp", centred), k["axis0"], keepdims=0))
    return b.op("Add", top, b.op("Cast", rest, to=TensorProto.DOUBLE))


def _loop_body(
    k: dict[str, str], emissions: str, moves: tuple[tuple[str, str], str, str], compute: int, guard_inf: bool
) -> onnx.GraphProto:
    """UNROLL frames of the forward recursion (spec 4.5) as one Loop iteration.

    The forward variables are carried states-first, [S, N]. ``moves`` = (pad, sources,
    penalties): the state axis is padded by two log-zero rows, ``sources`` [3, S] picks for every
    state s the rows of s (stay), s-1 (step) and s-2 (skip), and ``penalties`` [3, S, N] adds 0
    or log-zero for moves the lattice forbids. Every frame's result is a scan output; frames past
    a sample's end are computed too but never read; the UNROLL results of an iteration leave as one
    [UNROLL * S, N] scan output. A Loop, not a Scan: onnxruntime's Scan fails on a zero-length
    scan axis (T = 0). ``emissions`` is [T', UNROLL, S, N].
    """
    b = _Builder("step_")
    pad, sources, penalties = moves
    block = b.op("Gather", emissions, "t", axis=0)
    alpha = "alpha_in"
    scanned = []
    for offset in range(UNROLL):
        terms = b.op("Add", b.op("Gather", b.op("Pad", alpha, pad[0], pad[1]), sources, axis=0), penalties)
        emitted = b.op("Gather", block, b.const(offset, np.int64), axis=0)
        alpha = b.op("Add", _frame_logsumexp(b, terms, compute, guard_inf, k), emitted)
        scanned.append(alpha)
    b.nodes.append(helper.make_node("Identity", [alpha], ["alpha_out"]))
    b.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    b.nodes.append(helper.make_node("Concat", scanned, ["frames_out"], axis=0))
    double = TensorProto.DOUBLE
    return helper.make_graph(
        b.nodes,
        "ctc_forward_step",
        [
            helper.make_tensor_value_info("t", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("alpha_in", double, ["S", "N"]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("alpha_out", double, ["S", "N"]),
            helper.make_tensor_value_info("frames_out", double, ["US", "N"]),
        ],
    )


def _take(b: _Builder, data: str, flat_index: str) -> str:
    """``data.ravel()[flat_index]``: Gather on a flat view. (GatherElements is avoided: in
    onnx.reference it fails, or is wrong, for a gathered axis longer than 64.)"""
    return b.op("Gather", b.op("Reshape", data, b.const([-1], np.int64)), flat_index, axis=0)


def _penalty(b: _Builder, allowed: str, log_zero: str, k: dict[str, str]) -> str:
    return b.op("Where", allowed, k["zero_f"], log_zero)


def ctc_loss_function(opset: int = MIN_OPSET, compute: str = "float64") -> onnx.FunctionProto:
    """The model-local function ``ai.ctcop.CTCLoss`` over standard ONNX operators of ``opset``.

    ``compute`` ("float32" or "float64") is the type of the log-softmax over all C classes; the
    recursion is always float64. The exporters pass float64 for float64 models only.
    """
    spec = form("time_major")
    x_name, mask_name, labels_name = (p.name for p in spec.inputs)
    b = _Builder("")
    f64 = np.float64
    k = {
        "zero": b.const(0, np.int64),
        "one": b.const(1, np.int64),
        "zero_1": b.const([0], np.int64),
        "one_1": b.const([1], np.int64),
        "zero_1x1": b.const([[0]], np.int64),
        "axis0": b.const([0], np.int64),
        "axis1": b.const([1], np.int64),
        "axis2": b.const([2], np.int64),
        "pad_left_1": b.const([0, 1, 0, 0], np.int64),
        "pad_left_2": b.const([0, 2, 0, 0], np.int64),
        "pad_states": b.const([2, 0, 0, 0], np.int64),
        "minus_1": b.const([-1], np.int64),
        "minus_2": b.const([-2], np.int64),
        "zero_f": b.const(0.0, f64),
        "neg_inf": b.const(-np.inf, f64),
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
    blank = b.op("Sub", b.op("Squeeze", classes, k["axis0"]), k["one"])
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

    # Emissions [T, S, N] in float64 (states first, like the forward variables): entry
    # ((t * N + n) * C + class) of the flat log-softmax terms.
    state_count = b.op("Shape", states, start=1, end=2)
    frame_count, batch = (b.op("Squeeze", b.op("Shape", x_name, start=i, end=i + 1), k["axis0"]) for i in (0, 1))
    frame_ids = b.op("Unsqueeze", b.op("Range", k["zero"], frame_count, k["one"]), b.const([1, 2], np.int64))
    sample_ids = b.op("Range", k["zero"], batch, k["one"])
    frame_rows = b.op("Add", b.op("Mul", frame_ids, batch), b.op("Unsqueeze", sample_ids, b.const([0, 2], np.int64)))
    flat_index = b.op(
        "Add", b.op("Mul", frame_rows, b.op("Squeeze", classes, k["axis0"])), b.op("Unsqueeze", states, k["axis0"])
    )
    gathered = b.op("Sub", _take(b, centred, flat_index), log_sum)
    emissions = b.op("Transpose", b.op("Cast", gathered, to=TensorProto.DOUBLE), perm=[0, 2, 1])

    # The forward Loop (4.5). float32 models use a finite log-zero, -1e300: no float32 input can
    # give a log-probability anywhere near it, and it spares the per-frame -inf guard.
    guard_inf = compute == "float64"
    log_zero = k["neg_inf"] if guard_inf else b.const(LOG_ZERO, f64)
    state_index = _positions(b, states, k)
    first = b.op("Where", b.op("Equal", state_index, k["zero"]), k["zero_f"], log_zero)
    alpha0 = b.op(
        "Expand",
        b.op("Unsqueeze", first, k["axis1"]),
        b.op("Concat", state_count, b.op("Shape", x_name, start=1, end=2), axis=0),
    )
    sources = b.op(
        "Concat",
        *(b.op("Unsqueeze", b.op("Add", state_index, b.const(shift, np.int64)), k["axis0"]) for shift in (2, 1, 0)),
        axis=0,
    )
    zeros = b.op("Expand", k["zero_f"], b.op("Shape", alpha0))
    move_penalties = [_penalty(b, b.op("Transpose", stay, perm=[1, 0]), log_zero, k), zeros]
    move_penalties.append(_penalty(b, b.op("Transpose", skip, perm=[1, 0]), log_zero, k))
    penalties = b.op("Concat", *(b.op("Unsqueeze", term, k["axis0"]) for term in move_penalties), axis=0)
    # Frames are padded to a multiple of UNROLL (those frames are never read) and cut into blocks.
    frames = b.op("Shape", x_name, start=0, end=1)
    unroll = b.const([UNROLL], np.int64)
    # At least one block: onnx.reference returns a 0-d placeholder for scan outputs of an empty Loop.
    blocks = b.op("Max", b.op("Div", b.op("Add", frames, b.const([UNROLL - 1], np.int64)), unroll), k["one_1"])
    extra = b.op("Sub", b.op("Mul", blocks, unroll), frames)
    pad_frames = b.op("Concat", k["zero_1"], k["zero_1"], k["zero_1"], extra, k["zero_1"], k["zero_1"], axis=0)
    block_shape = b.op("Concat", blocks, unroll, b.op("Shape", emissions, start=1), axis=0)
    emission_blocks = b.op("Reshape", b.op("Pad", emissions, pad_frames, k["zero_f"]), block_shape, allowzero=1)
    moves = ((k["pad_states"], log_zero), sources, penalties)
    compute_type = helper.np_dtype_to_tensor_dtype(np.dtype(compute))
    body = _loop_body(k, emission_blocks, moves, compute_type, guard_inf)
    final, per_block = b.fresh("final"), b.fresh("frames")
    trips = b.op("Squeeze", blocks, k["axis0"])
    b.nodes.append(helper.make_node("Loop", [trips, b.const(True, np.bool_), alpha0], [final, per_block], body=body))
    # Forward variables after every frame, [1 + T', S, N] with row 0 before any frame; then each
    # sample's row at its own frame count (the mask's column sum). The explicit shape makes the
    # result independent of whether a runtime stacks scan outputs (onnxruntime, the ONNX spec's
    # shape inference) or concatenates them (onnx.reference's vstack).
    flat_shape = b.op("Concat", b.op("Mul", blocks, unroll), b.op("Shape", emissions, start=1), axis=0)
    history = b.op(
        "Concat", b.op("Unsqueeze", alpha0, k["axis0"]), b.op("Reshape", per_block, flat_shape, allowzero=1), axis=0
    )
    lengths = b.op("ReduceSum", b.op("Cast", active, to=TensorProto.INT64), k["axis0"], keepdims=0)
    states_by_samples = b.op("Mul", b.op("Squeeze", state_count, k["axis0"]), batch)
    cell = b.op(
        "Add", b.op("Mul", b.op("Unsqueeze", state_index, k["axis1"]), batch), b.op("Unsqueeze", sample_ids, k["axis0"])
    )
    at_end = b.op("Add", b.op("Mul", b.op("Unsqueeze", lengths, k["axis0"]), states_by_samples), cell)
    alpha = _take(b, history, at_end)

    # Read-out (4.3, 4.4): ln of the mass on states 2L and 2L-1, then NaN for non-finite samples.
    last = b.op("Mul", target_lengths, b.const(2, np.int64))
    on_last = _take(b, alpha, b.op("Add", b.op("Mul", last, batch), sample_ids))
    previous_state = b.op("Max", b.op("Sub", last, k["one"]), k["zero"])
    before = _take(b, alpha, b.op("Add", b.op("Mul", previous_state, batch), sample_ids))
    before = b.op("Where", b.op("Greater", last, k["zero"]), before, k["neg_inf"])
    loss = b.op("Neg", _logsumexp(b, [on_last, before], k))
    loss = b.op("Where", b.op("Greater", loss, b.const(-LOG_ZERO / 10, f64)), b.const(np.inf, f64), loss)
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
