"""CTCLoss-4 as an ONNX model-local function built from standard operators (spec section 11).

The function ``ai.ctcop.CTCLoss`` (version 1) takes the spec's three inputs and two attributes and
computes, in float64 and log space, exactly what :mod:`ctcop.recursion` computes:

* masked frames are replaced by 0 before anything reads them (rule 3.2);
* log-softmax over the C classes as ``(x - max) - ln sum exp(x - max)`` (4.1); non-finite
  active frames mark their sample NaN (4.4);
* pads are removed wherever they stand and, if ``preprocess_collapse_repeated``, repeats merged
  (3.3, 3.4), by a stable per-row permutation built with CumSum and ScatterElements;
* the extended-label lattice of section 4.5 with its stay/skip masks derived arithmetically from
  ``merge_repeated``, so one body serves every attribute value;
* a Loop over time carries the forward variables [N, S]; inactive frames leave them unchanged.

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


def _shift_right(b: _Builder, values: str, by: int, fill: str) -> str:
    """``out[:, s] = values[:, s - by]``, ``fill`` where s < by (any width, including 0)."""
    pads = b.const([0, by, 0, 0], np.int64)
    padded = b.op("Pad", values, pads, fill)
    return b.op("Slice", padded, b.const([0], np.int64), b.const([-by], np.int64), b.const([1], np.int64))


def _compact(b: _Builder, values: str, keep: str, fill: str, k: dict[str, str]) -> tuple[str, str]:
    """Stable move of the kept entries of each row to its front; the rest becomes ``fill``.

    Returns the rows trimmed to the longest kept length, and the kept counts [N].
    """
    kept = b.op("Cast", keep, to=TensorProto.INT64)
    counts = b.op("ReduceSum", kept, k["axis1"], keepdims=1)
    before = b.op("Sub", b.op("CumSum", kept, k["one"]), k["one"])
    dropped = b.op("Sub", k["one"], kept)
    after = b.op("Add", counts, b.op("Sub", b.op("CumSum", dropped, k["one"]), k["one"]))
    destination = b.op("Where", keep, before, after)
    moved = b.op("ScatterElements", values, destination, values, axis=1)
    position = b.op("Range", k["zero"], b.op("Squeeze", b.op("Shape", values, start=1, end=2), k["axis0"]), k["one"])
    filled = b.op("Where", b.op("Less", position, counts), moved, fill)
    longest = b.op("ReduceMax", b.op("Concat", b.op("Flatten", counts, axis=0), k["zero_1x1"], axis=1))
    longest_1 = b.op("Reshape", longest, k["shape_1"])
    trimmed = b.op("Slice", filled, k["zero_1"], longest_1, k["one_1"])
    return trimmed, b.op("Squeeze", counts, k["axis1"])


def _interleave(b: _Builder, values: str, between: str, first: str) -> str:
    """[N, L] -> [N, 2L + 1]: first, v_1, between, v_2, between, ..., v_L, between."""
    column = b.op("Unsqueeze", values, b.const([2], np.int64))
    other = b.op("Expand", between, b.op("Shape", column))
    pairs = b.op("Concat", column, other, axis=2)
    n = b.op("Shape", values, start=0, end=1)
    width = b.op("Mul", b.op("Shape", values, start=1, end=2), b.const([2], np.int64))
    flat = b.op("Reshape", pairs, b.op("Concat", n, width, axis=0))
    head = b.op("Expand", first, b.op("Concat", n, b.const([1], np.int64), axis=0))
    return b.op("Concat", head, flat, axis=1)


def _logsumexp(b: _Builder, terms: list[str], k: dict[str, str]) -> str:
    top = b.op("Max", *terms)
    safe = b.op("Where", b.op("IsInf", top), k["zero_f"], top)
    total = b.op("Sum", *(b.op("Exp", b.op("Sub", t, safe)) for t in terms))
    return b.op("Add", safe, b.op("Log", total))


def _loop_body(k: dict[str, str], names: dict[str, str]) -> onnx.GraphProto:
    """One frame of the forward recursion (spec 4.5) as a Loop body."""
    b = _Builder("step_")
    alpha = "alpha_in"
    stay = b.op("Where", names["stay"], alpha, k["neg_inf"])
    step = _shift_right(b, alpha, 1, k["neg_inf"])
    skip = b.op("Where", names["skip"], _shift_right(b, alpha, 2, k["neg_inf"]), k["neg_inf"])
    emitted = b.op("Gather", names["emissions"], "t", axis=0)
    moved = b.op("Add", _logsumexp(b, [stay, step, skip], k), emitted)
    active = b.op("Unsqueeze", b.op("Less", "t", names["lengths"]), k["axis1"])
    b.nodes.append(helper.make_node("Where", [active, moved, alpha], ["alpha_out"]))
    b.nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    double = TensorProto.DOUBLE
    return helper.make_graph(
        b.nodes,
        "ctc_forward_step",
        [
            helper.make_tensor_value_info("t", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info(alpha, double, ["N", "S"]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("alpha_out", double, ["N", "S"]),
        ],
    )


def ctc_loss_function(opset: int = MIN_OPSET) -> onnx.FunctionProto:
    """The model-local function ``ai.ctcop.CTCLoss`` over standard ONNX operators of ``opset``."""
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
        "shape_1": b.const([1], np.int64),
        "axis0": b.const([0], np.int64),
        "axis1": b.const([1], np.int64),
        "zero_f": b.const(0.0, f64),
        "neg_inf": b.const(-np.inf, f64),
    }
    collapse = b.flag("preprocess_collapse_repeated")
    merge = b.flag("merge_repeated")

    # Frames (3.2, 4.1, 4.4): zero the masked frames, log-softmax in float64, flag non-finite samples.
    active = b.op("Cast", mask_name, to=TensorProto.BOOL)
    lengths = b.op("ReduceSum", b.op("Cast", active, to=TensorProto.INT64), k["axis0"], keepdims=0)
    logits = b.op(
        "Where",
        b.op("Unsqueeze", active, b.const([2], np.int64)),
        b.op("Cast", x_name, to=TensorProto.DOUBLE),
        k["zero_f"],
    )
    nonfinite = b.op("Or", b.op("IsNaN", logits), b.op("IsInf", logits))
    nonfinite_count = b.op(
        "ReduceSum", b.op("Cast", nonfinite, to=TensorProto.INT64), b.const([0, 2], np.int64), keepdims=0
    )
    # (x - max) - ln sum exp(x - max), spelled out as in ctcop.recursion: some runtimes' LogSoftmax
    # is ln(softmax(x)), which underflows to -inf below about -745 (spec 11.4).
    axis2 = b.const([2], np.int64)
    centred = b.op("Sub", logits, b.op("ReduceMax", logits, axis2, keepdims=1))
    log_probs = b.op("Sub", centred, b.op("Log", b.op("ReduceSum", b.op("Exp", centred), axis2, keepdims=1)))

    # Targets (3.3, 3.4): remove every pad, then collapse repeats when asked.
    classes = b.op("Shape", x_name, start=2, end=3)
    blank = b.op("Sub", b.op("Squeeze", classes, k["axis0"]), k["one"])
    labels = b.op("Cast", labels_name, to=TensorProto.INT64)
    targets, target_lengths = _compact(b, labels, b.op("Not", b.op("Equal", labels, b.const(-1, np.int64))), blank, k)
    previous = _shift_right(b, targets, 1, b.const(-1, np.int64))
    width = b.op("Shape", targets, start=1, end=2)
    in_target = b.op(
        "Less",
        b.op("Range", k["zero"], b.op("Squeeze", width, k["axis0"]), k["one"]),
        b.op("Unsqueeze", target_lengths, k["axis1"]),
    )
    starts_run = b.op("Not", b.op("Equal", targets, previous))
    keep = b.op("And", in_target, b.op("Or", b.op("Not", collapse), starts_run))
    targets, target_lengths = _compact(b, targets, keep, blank, k)

    # Lattice (4.5): classes of the 2L+1 states, label-state flags, allowed stay/skip moves.
    states = _interleave(b, targets, blank, blank)
    width = b.op("Shape", targets, start=1, end=2)
    real = b.op(
        "Less",
        b.op("Range", k["zero"], b.op("Squeeze", width, k["axis0"]), k["one"]),
        b.op("Unsqueeze", target_lengths, k["axis1"]),
    )
    false = b.const(False, np.bool_)
    is_label = _interleave(b, real, false, false)
    merge_or_blank = b.op("Or", merge, b.op("Not", is_label))
    differs = b.op("Not", b.op("Equal", states, _shift_right(b, states, 2, b.const(-1, np.int64))))
    skip = b.op("And", is_label, b.op("Or", b.op("Not", merge), differs))

    # Emissions [T, N, S] and the forward Loop.
    frame_shape = b.op("Shape", x_name, start=0, end=2)
    state_count = b.op("Shape", states, start=1, end=2)
    index = b.op("Expand", b.op("Unsqueeze", states, k["axis0"]), b.op("Concat", frame_shape, state_count, axis=0))
    emissions = b.op("GatherElements", log_probs, index, axis=2)
    state_index = b.op("Range", k["zero"], b.op("Squeeze", state_count, k["axis0"]), k["one"])
    start = b.op("Where", b.op("Equal", state_index, k["zero"]), k["zero_f"], k["neg_inf"])
    alpha0 = b.op("Expand", start, b.op("Concat", b.op("Shape", x_name, start=1, end=2), state_count, axis=0))
    frames = b.op("Squeeze", b.op("Shape", x_name, start=0, end=1), k["axis0"])
    body = _loop_body(k, {"stay": merge_or_blank, "skip": skip, "emissions": emissions, "lengths": lengths})
    alpha = b.op("Loop", frames, b.const(True, np.bool_), alpha0, body=body)

    # Read-out (4.3, 4.4): ln of the mass on states 2L and 2L-1, then NaN for non-finite samples.
    last = b.op("Unsqueeze", b.op("Mul", target_lengths, b.const(2, np.int64)), k["axis1"])
    on_last = b.op("GatherElements", alpha, last, axis=1)
    before = b.op("GatherElements", alpha, b.op("Max", b.op("Sub", last, k["one"]), k["zero"]), axis=1)
    before = b.op("Where", b.op("Greater", last, k["zero"]), before, k["neg_inf"])
    loss = b.op("Neg", b.op("Squeeze", _logsumexp(b, [on_last, before], k), k["axis1"]))
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
