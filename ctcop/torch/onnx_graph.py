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

import onnx
from onnx import TensorProto, helper

from ..attributes import Attributes
from ..onnx.graph import GraphBuilder, Sizes, any_along, fitted
from ..onnx.placeholder import expand_placeholders
from ..onnx.types import tensor_type
from ..onnx.writer import ctc_node
from .semantics import DEAD_LOSS, STAND_IN_GAP, TorchCtcCall

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
    """Label rows [N, T] over the C classes: inside each target its classes as they are, except
    ``blank`` and negative values, which become -2 (an invalid label: NaN by rule 3.3, as is a
    value >= C); -1 outside."""
    columns = g.Range(g.i64(0), sizes.frame_count, g.i64(1))
    inside = g.Less(g.Unsqueeze(columns, g.i64([0])), g.Unsqueeze(lengths.targets, g.i64([1])))
    invalid = g.Or(g.Less(rows, g.i64(0)), g.Equal(rows, g.i64(blank)))
    return g.Where(inside, g.Where(invalid, g.i64(-2), rows), g.i64(-1))


def _mask(g: GraphBuilder, lengths: _Lengths, sizes: Sizes) -> tuple[str, str]:
    """``sequence_mask`` [T, N] (int32) from the input lengths, and its bool form."""
    frames = g.Range(g.i64(0), sizes.frame_count, g.i64(1))
    active = g.Less(g.Unsqueeze(frames, g.i64([1])), g.Unsqueeze(lengths.frames, g.i64([0])))
    return g.Cast(active, to=INT32), active


@dataclass(frozen=True)
class _Compacted:
    """The classes a path can read (:func:`ctcop.torch.semantics.compacted`): ``columns``
    [N, D + 1], the class of each column fed to CTCLoss-4 (sample i's distinct target classes in
    ascending order, then copies of the blank, the last its CTCLoss-4 blank), and ``labels``
    [N, T] relabelled by column (-1 and -2 kept, a class >= C -2)."""

    columns: str
    labels: str


def _ascending(g: GraphBuilder, values: str, count: str) -> tuple[str, str]:
    """The ``count`` [1] smallest entries of each row of ``values`` [N, K], ascending, and their
    positions (TopK)."""
    smallest, positions = g.fresh("ascending"), g.fresh("positions")
    g.node("TopK", [values, count], [smallest, positions], axis=1, largest=0)
    return smallest, positions


def _compacted(g: GraphBuilder, labels: str, lengths: _Lengths, blank: int, sizes: Sizes) -> _Compacted:
    """:class:`_Compacted` from :func:`_labels` rows [N, T]: a sort of each row's first K entries
    (K the longest target, at most T) and one -1 (no sort is then of 0 entries, and each row's
    last sorted class is a C, a blank column), in which a class's column is the count of
    distinct classes below it."""
    longest = g.Min(g.Max(lengths.targets, g.i64(0)), sizes.frames)
    width = g.ReduceMax(g.Concat(longest, g.i64([0]), axis=0), keepdims=1)
    labels = g.Pad(g.Slice(labels, g.i64([0]), width, g.i64([1])), g.i64([0, 0, 0, 1]), g.i64(-1))
    valid = g.And(g.GreaterOrEqual(labels, g.i64(0)), g.Less(labels, sizes.class_count))
    ascending, order = _ascending(g, g.Where(valid, labels, sizes.class_count), g.Add(width, g.i64(1)))
    previous = g.Pad(g.Slice(ascending, g.i64([0]), g.i64([-1]), g.i64([1])), g.i64([0, 1, 0, 0]), g.i64(-1))
    new = g.Cast(g.And(g.Not(g.Equal(ascending, previous)), g.Less(ascending, sizes.class_count)), to=INT64)
    column = g.Sub(g.CumSum(new, g.i64(1)), g.i64(1))
    relabelled = g.ScatterElements(g.Sub(order, order), order, column, axis=1)
    relabelled = g.Where(valid, relabelled, g.Where(g.Less(labels, g.i64(0)), labels, g.i64(-2)))
    count = g.ReduceMax(g.Concat(g.ReduceSum(new, g.i64([1]), keepdims=0), g.i64([0]), axis=0), keepdims=1)
    distinct = g.Where(g.Cast(new, to=BOOL), ascending, sizes.class_count)
    classes, _ = _ascending(g, distinct, g.Add(count, g.i64(1)))
    # a blank >= C (a batch fault: all NaN) reads class C - 1
    blank_class = g.Min(g.i64(blank), g.Sub(sizes.class_count, g.i64(1)))
    columns = g.Where(g.Less(classes, sizes.class_count), classes, blank_class)
    rows = fitted(g, relabelled, g.Concat(sizes.batch, sizes.frames, axis=0), g.i64(-1), 2)
    return _Compacted(columns, rows)


def _read(g: GraphBuilder, x: str, columns: str, sizes: Sizes) -> str:
    """[T, N, D + 1]: the values of ``x`` [T, N, C] in the ``columns`` [N, D + 1]."""
    shape = g.Concat(sizes.frames, g.Shape(columns), axis=0)
    return g.GatherElements(x, g.Expand(g.Unsqueeze(columns, g.i64([0])), shape), axis=2)


def _non_finite(g: GraphBuilder, x: str) -> str:
    """[T, N] bool: the frames of ``x`` holding NaN or +inf in any class (spec 4.4), read off
    one sum over the classes (NaN or +inf; a ReduceMax may skip NaN), which the frame's finite
    values can reach too only when they sum past the largest finite value."""
    total = g.ReduceSum(x, g.i64([2]), keepdims=0)
    return g.Or(g.IsNaN(total), g.IsInf(total, detect_negative=0))


def _logits(g: GraphBuilder, read: str, compute: int) -> tuple[str, str]:
    """The logits CTCLoss-4 gets, ``read`` [T, N, D + 1] with every -inf replaced by its frame's
    top minus STAND_IN_GAP (the top being the frame's maximum, 0 for a frame of -inf only), and
    the shift of each frame's log-sum-exp [T, N, 1] (the maximum of those logits, 0 for a frame
    of -inf only)."""
    top = g.ReduceMax(read, g.i64([2]), keepdims=1)
    zero = g.const(0.0, compute)
    top = g.Where(g.IsInf(top, detect_positive=0), zero, top)
    # Max puts the stand-in in place of every -inf (and of any value below it: such a gap is past
    # the DEAD_LOSS bound anyway).
    values = g.Max(read, g.Sub(top, g.const(STAND_IN_GAP, compute)))
    shift = g.ReduceMax(values, g.i64([2]), keepdims=1)
    return values, g.Where(g.IsInf(shift, detect_positive=0), zero, shift)


def _corrected(g: GraphBuilder, core: str, logits: str, top: str, active: str, compute: int) -> str:
    """The corrected loss [N] in ``compute``: CTCLoss-4's loss ``core`` less the sum over the
    active frames of the log-sum-exp over the columns, summed and subtracted in float64 (spec
    14.1). Only finite values pass through float64: +inf and NaN are set afterwards, in
    ``compute`` (:func:`_read_out`), as OpenVINO's CPU plugin turns +inf in a float64 value into
    float32's largest (D5)."""
    axis2 = g.i64([2])
    lse = g.Add(g.Squeeze(top, axis2), g.Log(g.ReduceSum(g.Exp(g.Sub(logits, top)), axis2, keepdims=0)))
    kept = g.Where(active, g.Cast(lse, to=DOUBLE), g.f64(0.0))
    loss = g.Sub(g.Cast(core, to=DOUBLE), g.ReduceSum(kept, g.i64([0]), keepdims=0))
    return loss if compute == DOUBLE else g.Cast(loss, to=compute)


def _ctc_node(g: GraphBuilder, logits: str, mask: str, labels: str, name: str) -> str:
    """The ``ai.ctcop.CTCLoss`` node (merge_repeated, no collapse: PyTorch's CTC)."""
    out = g.fresh("ctcop_loss")
    attributes = Attributes.of({"merge_repeated": True, "preprocess_collapse_repeated": False})
    g.nodes.append(ctc_node([logits, mask, labels], out, attributes, name))
    return out


@dataclass(frozen=True)
class _Specials:
    """Run-time zeros [N], +inf and NaN of the compute type: made from the input lengths (0 * |n|,
    1/0, 0/0), never constants, so no runtime's handling of constants reaches them (D7: under
    float16 inference precision OpenVINO's CPU plugin turns an inf or NaN constant into 65504);
    ``compute`` is their element type (TensorProto code)."""

    compute: int
    zeros: str
    infinity: str
    nan: str

    @staticmethod
    def of(g: GraphBuilder, lengths: _Lengths, compute: int) -> _Specials:
        zeros = g.Mul(g.Abs(g.Cast(lengths.frames, to=compute)), g.const(0.0, compute))
        return _Specials(compute, zeros, g.Div(g.const(1.0, compute), zeros), g.Div(zeros, zeros))


def _reduced(g: GraphBuilder, loss: str, lengths: _Lengths, call: TorchCtcCall, specials: _Specials) -> str:
    """zero_infinity, then the reduction, on the [N] losses in the compute type (as PyTorch
    reduces, in the log-probs' type)."""
    if call.zero_infinity:
        loss = g.Where(g.IsInf(loss, detect_negative=0), specials.zeros, loss)
    if call.reduction == "sum":
        return g.ReduceSum(loss, keepdims=0)
    if call.reduction == "mean":
        divisors = g.Cast(g.Max(lengths.targets, g.i64(1)), to=specials.compute)
        return g.ReduceMean(g.Div(loss, divisors), keepdims=0)
    return loss if call.batched else g.Squeeze(loss, g.i64([0]))


def _read_out(g: GraphBuilder, loss: str, lengths: _Lengths, faults: str, specials: _Specials) -> str:
    """PyTorch's per-sample loss [N] from the corrected loss: +inf where no aligned path has a
    nonzero probability or the target is longer than its frames; NaN for faults. NaN is tested
    for itself before any comparison (OpenVINO's CPU plugin orders NaN above every number on
    AVX-512 CPUs, spec 14.4)."""
    number = g.Not(g.IsNaN(loss))
    dead = g.And(g.GreaterOrEqual(loss, g.const(DEAD_LOSS, specials.compute)), number)
    loss = g.Where(dead, specials.infinity, loss)
    too_long = g.And(g.Greater(lengths.targets, lengths.frames), number)
    loss = g.Where(too_long, specials.infinity, loss)
    return g.Where(faults, specials.nan, loss)


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
    x = x if dtype == compute else g.Cast(x, to=compute)
    non_finite = g.And(_non_finite(g, x), active)
    faults = g.Or(faults, any_along(g, non_finite, 0))
    compacted = _compacted(g, _labels(g, rows, lengths, call.blank, sizes), lengths, call.blank, sizes)
    logits, top = _logits(g, _read(g, x, compacted.columns, sizes), compute)
    core = _ctc_node(g, logits, mask, compacted.labels, name)
    specials = _Specials.of(g, lengths, compute)
    loss = _read_out(g, _corrected(g, core, logits, top, active, compute), lengths, faults, specials)
    g.node("Cast", [_reduced(g, loss, lengths, call, specials)], [node.output[0]], to=dtype)


def finish_onnx(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (as PyTorch's exporter wrote it with ctcop's symbolic or translation) with every
    ``ai.ctcop.torch.CTCLoss`` placeholder replaced by its expansion and the ``ai.ctcop.CTCLoss``
    function added; checked with ``onnx.checker`` (full_check). Changes ``model`` in place."""
    return expand_placeholders(model, DOMAIN, OP_TYPE, _expansion, "ctc_loss call")
