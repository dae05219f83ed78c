"""PyTorch's ``ctc_loss`` in an exported ONNX model: the placeholder node and its expansion.

Both of PyTorch's exporters (the TorchScript one through a symbolic, the torch.export one through
a translation, :mod:`ctcop.torch.onnx_export`) write each ``ctc_loss`` call as one placeholder
node ``ai.ctcop.torch.CTCLoss`` over the call's four tensors, its static arguments as integer
attributes (:meth:`TorchCtcCall.attributes`, plus ``dtype``, the element type of ``log_probs``).
:func:`finish_onnx` then replaces every placeholder by the mapping of :mod:`ctcop.torch.semantics`
in standard operators around one ``ai.ctcop.CTCLoss`` node, and adds that node's model-local
function (:func:`ctcop.onnx.writer.with_function`): the model runs in any conforming runtime with
no custom library, and ``ctcop validate`` / ``eval`` see the node. The graph is a total function
like the op's own (spec 11.5): where PyTorch raises for the values of the lengths or targets, the
samples concerned are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..attributes import Attributes
from ..onnx.graph import GraphBuilder, Sizes, fitted
from ..onnx.placeholder import expand_placeholders
from ..onnx.types import tensor_type
from ..onnx.writer import ctc_node
from .semantics import DEAD_LOSS, STAND_IN_GAP, UNREAD_GAP, TorchCtcCall

DOMAIN = "ai.ctcop.torch"
OP_TYPE = "CTCLoss"
INPUTS = ("log_probs", "targets", "input_lengths", "target_lengths")
BOOL, INT32, INT64, DOUBLE = TensorProto.BOOL, TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE


def placeholder_attributes(call_attributes: dict[str, int], dtype: str) -> dict[str, int]:
    """The placeholder node's attributes: the call's and ``dtype``, the element type of log_probs."""
    return {**call_attributes, "dtype": tensor_type(dtype)}


def _differs(g: GraphBuilder, values: str, length: str) -> str:
    """Scalar bool: axis 0 of ``values`` is not ``length`` long."""
    return g.Squeeze(g.Not(g.Equal(g.Shape(values, start=0, end=1), length)), g.i64([0]))


@dataclass(frozen=True)
class _Lengths:
    """``input_lengths`` and ``target_lengths`` as int64 [N] (cut or padded with 0), and the
    scalar batch fault: either has another length than N."""

    frames: str
    targets: str
    batch_fault: str


def _lengths(g: GraphBuilder, input_lengths: str, target_lengths: str, sizes: Sizes) -> _Lengths:
    flat = [g.Cast(g.Reshape(v, g.i64([-1])), to=INT64) for v in (input_lengths, target_lengths)]
    fault = g.Or(_differs(g, flat[0], sizes.batch), _differs(g, flat[1], sizes.batch))
    frames, targets = (fitted(g, length, sizes.batch, g.i64(0), 1) for length in flat)
    return _Lengths(frames, targets, fault)


def _padded_rows(g: GraphBuilder, targets: str, lengths: _Lengths, sizes: Sizes) -> tuple[str, str]:
    """Padded targets [N, S] as rows [N, T] (cut or padded with -1) and the faults [N]: a length
    over S, or a targets batch that is not N (every sample)."""
    values = g.Cast(targets, to=INT64)
    width = g.Shape(values, start=1, end=2)
    rows = fitted(g, values, g.Concat(sizes.batch, sizes.frames, axis=0), g.i64(-1), 2)
    faults = g.Or(g.Greater(lengths.targets, width), _differs(g, values, sizes.batch))
    return rows, faults


def _concatenated_rows(g: GraphBuilder, targets: str, lengths: _Lengths, sizes: Sizes) -> tuple[str, str]:
    """Concatenated targets [sum L] as rows [N, T] and the faults [N]: every sample when a length
    is negative or the lengths do not add up to the size of ``targets``."""
    values = g.Concat(g.Cast(g.Reshape(targets, g.i64([-1])), to=INT64), g.i64([-1]), axis=0)
    size = g.Shape(targets)
    offsets = g.CumSum(lengths.targets, g.i64(0), exclusive=1)
    columns = g.Range(g.i64(0), sizes.frame_count, g.i64(1))
    index = g.Add(g.Unsqueeze(offsets, g.i64([1])), g.Unsqueeze(columns, g.i64([0])))
    rows = g.Gather(values, g.Min(g.Max(index, g.i64(0)), size), axis=0)
    negative = g.ReduceMax(g.Concat(g.Cast(g.Less(lengths.targets, g.i64(0)), to=INT64), g.i64([0]), axis=0))
    wrong_sum = g.Not(g.Equal(g.ReduceSum(lengths.targets, g.i64([0]), keepdims=1), size))
    everything = g.Or(g.Squeeze(wrong_sum, g.i64([0])), g.Cast(negative, to=BOOL))
    return rows, g.Expand(everything, sizes.batch)


def _labels(g: GraphBuilder, rows: str, lengths: _Lengths, blank: int, sizes: Sizes) -> str:
    """CTCLoss-4 labels [N, T] over the C + 1 classes of :func:`_with_blank_last`: inside each
    target its classes as they are, except ``blank`` and negative values, which become -2 (an
    invalid label: NaN by rule 3.3, as is a value >= C); -1 outside."""
    columns = g.Range(g.i64(0), sizes.frame_count, g.i64(1))
    inside = g.Less(g.Unsqueeze(columns, g.i64([0])), g.Unsqueeze(lengths.targets, g.i64([1])))
    invalid = g.Or(g.Less(rows, g.i64(0)), g.Equal(rows, g.i64(blank)))
    return g.Where(inside, g.Where(invalid, g.i64(-2), rows), g.i64(-1))


def _mask(g: GraphBuilder, lengths: _Lengths, sizes: Sizes) -> tuple[str, str]:
    """``sequence_mask`` [T, N] (int32) from the input lengths, and its bool form."""
    frames = g.Range(g.i64(0), sizes.frame_count, g.i64(1))
    active = g.Less(g.Unsqueeze(frames, g.i64([1])), g.Unsqueeze(lengths.frames, g.i64([0])))
    return g.Cast(active, to=INT32), active


def _with_blank_last(g: GraphBuilder, values: str, blank: int) -> str:
    """[T, N, C + 1]: ``values`` and a copy of class ``blank`` appended, CTCLoss-4's blank. The
    original column stays in place (no label names it, so no path reads it) and only changes the
    softmax's denominator, which the correction takes into account: one Concat, several times
    faster in onnxruntime than moving the column (a Gather on the class axis, or Slices). A blank
    >= C (a batch fault) appends nothing: the Slice clamps."""
    column = g.Slice(values, g.i64([blank]), g.i64([blank + 1]), g.i64([2]))
    return g.Concat(values, column, axis=2)


def _readable(g: GraphBuilder, labels: str, values: str) -> str:
    """[1, N, W] bool for the W = C + 1 classes of ``values`` [T, N, W]: the classes a path of each
    sample can read (its targets, from the CTCLoss-4 ``labels`` [N, T], and the blank's copy
    W - 1): a ScatterElements of ones. (W is C when ``blank`` >= C, a batch fault: all NaN.)"""
    width = g.Shape(values, start=2, end=3)
    last = g.Sub(g.Squeeze(width, g.i64([0])), g.i64(1))
    is_class = g.And(g.GreaterOrEqual(labels, g.i64(0)), g.Less(labels, last))
    rows = g.Shape(labels, start=0, end=1)
    index = g.Concat(g.Where(is_class, labels, last), g.Expand(last, g.Concat(rows, g.i64([1]), axis=0)), axis=1)
    zeros = g.Expand(g.i64(0), g.Concat(rows, width, axis=0))
    read = g.ScatterElements(zeros, index, g.Expand(g.i64(1), g.Shape(index)), axis=1)
    return g.Unsqueeze(g.Cast(read, to=BOOL), g.i64([0]))


def _logits(g: GraphBuilder, x: str, dtype: int, compute: int, blank: int, labels: str) -> tuple[str, str]:
    """The logits CTCLoss-4 gets (compute type; the blank's copy appended; every -inf replaced by
    its frame's top minus STAND_IN_GAP, the top being the maximum over the classes the sample
    reads (:func:`_readable` of ``labels``; 0 for a frame of -inf only); every unread value above
    ``top + UNREAD_GAP`` replaced by ``top``, +inf by NaN) and the shift of each frame's
    log-sum-exp [T, N, 1] (the maximum of those logits, 0 for a frame of -inf only)."""
    values = _with_blank_last(g, x if dtype == compute else g.Cast(x, to=compute), blank)
    readable = _readable(g, labels, values)
    last = g.Slice(values, g.i64([-1]), g.i64([np.iinfo(np.int64).max]), g.i64([2]))
    top = g.ReduceMax(g.Where(readable, values, last), g.i64([2]), keepdims=1)  # the blank's copy is read
    top = g.Where(g.IsInf(top, detect_positive=0), g.const(0.0, compute), top)
    # Max puts the stand-in in place of every -inf (and of any value below it: such a gap is past
    # the DEAD_LOSS bound anyway): one broadcasting operator, several times faster than a Where.
    values = g.Max(values, g.Sub(top, g.const(STAND_IN_GAP, compute)))
    over = g.And(g.Not(readable), g.Greater(values, g.Add(top, g.const(UNREAD_GAP, compute))))
    values = g.Where(over, g.Add(top, g.Sub(values, values)), values)
    shift = g.ReduceMax(values, g.i64([2]), keepdims=1)
    return values, g.Where(g.IsInf(shift, detect_positive=0), g.const(0.0, compute), shift)


def _correction(g: GraphBuilder, logits: str, top: str, active: str) -> str:
    """sum over the active frames of the log-sum-exp over the classes [N], float64."""
    axis2 = g.i64([2])
    lse = g.Add(g.Squeeze(top, axis2), g.Log(g.ReduceSum(g.Exp(g.Sub(logits, top)), axis2, keepdims=0)))
    kept = g.Where(active, g.Cast(lse, to=DOUBLE), g.f64(0.0))
    return g.ReduceSum(kept, g.i64([0]), keepdims=0)


def _ctc_node(g: GraphBuilder, logits: str, mask: str, labels: str, name: str) -> str:
    """The ``ai.ctcop.CTCLoss`` node (merge_repeated, no collapse: PyTorch's CTC)."""
    out = g.fresh("ctcop_loss")
    attributes = Attributes.of({"merge_repeated": True, "preprocess_collapse_repeated": False})
    g.nodes.append(ctc_node([logits, mask, labels], out, attributes, name))
    return out


def _reduced(g: GraphBuilder, loss: str, lengths: _Lengths, call: TorchCtcCall) -> str:
    """zero_infinity, then the reduction, on float64 [N] losses."""
    if call.zero_infinity:
        loss = g.Where(g.Equal(loss, g.f64(np.inf)), g.f64(0.0), loss)
    if call.reduction == "sum":
        return g.ReduceSum(loss, keepdims=0)
    if call.reduction == "mean":
        divisors = g.Cast(g.Max(lengths.targets, g.i64(1)), to=DOUBLE)
        return g.ReduceMean(g.Div(loss, divisors), keepdims=0)
    return loss if call.batched else g.Squeeze(loss, g.i64([0]))


def _read_out(g: GraphBuilder, core: str, correction: str, lengths: _Lengths, faults: str) -> str:
    """PyTorch's per-sample loss, float64 [N]: the corrected loss; +inf where no aligned path has
    a nonzero probability or the target is longer than its frames; NaN for faults."""
    inf = g.f64(np.inf)
    loss = g.Sub(g.Cast(core, to=DOUBLE), correction)
    loss = g.Where(g.GreaterOrEqual(loss, g.f64(DEAD_LOSS)), inf, loss)
    too_long = g.And(g.Greater(lengths.targets, lengths.frames), g.Not(g.IsNaN(loss)))
    loss = g.Where(too_long, inf, loss)
    return g.Where(faults, g.f64(np.nan), loss)


def _expansion(g: GraphBuilder, node: onnx.NodeProto, name: str) -> None:
    """Nodes computing the placeholder ``node``'s output from its inputs (semantics module)."""
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    call = TorchCtcCall.from_attributes(values)
    dtype = int(values["dtype"])
    compute = DOUBLE if dtype == DOUBLE else TensorProto.FLOAT
    x, targets, input_lengths, target_lengths = node.input
    x = x if call.batched else g.Unsqueeze(x, g.i64([1]))
    sizes = Sizes.of(g, x)
    lengths = _lengths(g, input_lengths, target_lengths, sizes)
    rows, faults = (_concatenated_rows if call.concatenated else _padded_rows)(g, targets, lengths, sizes)
    mask, active = _mask(g, lengths, sizes)
    bad_frames = g.Or(g.Less(lengths.frames, g.i64(0)), g.Greater(lengths.frames, sizes.frames))
    bad_frames = g.Or(bad_frames, g.Less(lengths.targets, g.i64(0)))
    batch_fault = g.Or(lengths.batch_fault, g.GreaterOrEqual(g.i64(call.blank), sizes.class_count))
    faults = g.Or(g.Or(faults, bad_frames), batch_fault)
    labels = _labels(g, rows, lengths, call.blank, sizes)
    logits, top = _logits(g, x, dtype, compute, call.blank, labels)
    core = _ctc_node(g, logits, mask, labels, name)
    loss = _read_out(g, core, _correction(g, logits, top, active), lengths, faults)
    g.node("Cast", [_reduced(g, loss, lengths, call)], [node.output[0]], to=dtype)


def finish_onnx(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (as PyTorch's exporter wrote it with ctcop's symbolic or translation) with every
    ``ai.ctcop.torch.CTCLoss`` placeholder replaced by its expansion and the ``ai.ctcop.CTCLoss``
    function added; checked with ``onnx.checker`` (full_check). Changes ``model`` in place."""
    return expand_placeholders(model, DOMAIN, OP_TYPE, _expansion, "ctc_loss call")
