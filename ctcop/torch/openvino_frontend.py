"""PyTorch's ``ctc_loss`` in ``openvino.convert_model``: a PyTorch-frontend ConversionExtension.

OpenVINO's PyTorch frontend has no rule for ``aten::ctc_loss``. :func:`torch_extensions` gives
one, for ``aten::ctc_loss`` and for ctcop's custom op ``ctcop::ctc_loss`` (in a traced module or,
as ``ctcop.ctc_loss.default``, in an ExportedProgram; :mod:`.custom_op`): the mapping of spec
section 14 (:mod:`.semantics`, restated in OpenVINO operators by :func:`torch_loss`) around the
guarded lowering of CTCLoss-4 (:func:`ctcop.openvino.lowering.lower`), so a converted model never
reaches the native kernel's defects (spec 12.2) and computes what PyTorch computes. Like the
lowering it is a total function: where PyTorch raises for the values of the lengths or targets,
the samples concerned are NaN; +inf and NaN are made at run time (D7); integer inputs are
range-checked on a float32 copy before the CPU plugin's narrowing to int32 can wrap them (D6). A
rule for ``aten.masked_select`` of an ExportedProgram comes with them (:func:`_masked_select`).
Importing this module imports openvino, not torch (:func:`torch_extensions` imports
``openvino.frontend.pytorch``, which does).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset15 as ops

from ..openvino.extensions import openvino_extensions as openvino_wing_extensions
from ..openvino.lowering import lower, runtime_nan
from ..openvino.types import type_name
from .semantics import DEAD_LOSS, STAND_IN_GAP, ArgumentFacts, TorchCtcCall, checked_call

# TorchScript names (convert_model of a module, traced) and the torch.export name of the custom op
# (convert_model of an ExportedProgram made under ctcop.torch.redirect_ctc_loss or with ctcop's CTCLoss).
OPERATIONS = ("aten::ctc_loss", "ctcop::ctc_loss", "ctcop.ctc_loss.default")
MASKED_SELECT = "aten.masked_select.default"  # no rule in the frontend's ExportedProgram route
LIST_NODE = "SequenceMark"  # how the PyTorch frontend hands over a list (a Python int list traced)


def _i64(value: object) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.int64))


def _like(value: float, like: ov.Output) -> ov.Node:
    return ops.convert_like(ops.constant(np.asarray(value, dtype=np.float32)), like)


@dataclass(frozen=True)
class _Sizes:
    """T, N, C as 1-element int64 tensors, and their float32 copies (for range checks)."""

    frames: ov.Node
    batch: ov.Node
    classes: ov.Node

    @classmethod
    def of(cls, x: ov.Output) -> _Sizes:
        dims = ops.shape_of(x, "i64")
        return cls(*(ops.gather(dims, _i64([axis]), _i64(0)) for axis in range(3)))


def _fit(values: ov.Node | ov.Output, rank: int, axis: int, length: ov.Output, fill: ov.Node) -> ov.Node:
    """``values`` of rank ``rank`` cut or padded with ``fill`` along ``axis`` to ``length`` [1]."""
    cut = ops.slice(values, _i64([0]), length, _i64([1]), _i64([axis]))
    ends: list[ov.Node] = [_i64([0])] * rank
    ends[axis] = ops.subtract(length, ops.gather(ops.shape_of(cut, "i64"), _i64([axis]), _i64(0)))
    return ops.pad(cut, _i64([0] * rank), ops.concat(ends, 0), "constant", fill)


def _differs(values: ov.Output, axis: int, length: ov.Output) -> ov.Node:
    """Scalar: axis ``axis`` of ``values`` is not ``length`` long."""
    size = ops.gather(ops.shape_of(values, "i64"), _i64([axis]), _i64(0))
    return ops.squeeze(ops.not_equal(size, length), _i64([0]))


def _as_float(values: ov.Output) -> ov.Node:
    return ops.convert(values, "f32")


@dataclass(frozen=True)
class _Lengths:
    """The lengths [N] as float32 (exact range tests) and int64 (exact where in range), cut or
    padded with 0, and the scalar fault of a length vector that is not N long."""

    frames: ov.Node
    targets: ov.Node
    frames_f: ov.Node
    targets_f: ov.Node
    batch_fault: ov.Node


def _lengths(input_lengths: ov.Output, target_lengths: ov.Output, sizes: _Sizes) -> _Lengths:
    flat = [ops.reshape(v, _i64([-1]), special_zero=False) for v in (input_lengths, target_lengths)]
    fault = ops.logical_or(_differs(flat[0], 0, sizes.batch), _differs(flat[1], 0, sizes.batch))
    floats = [_fit(_as_float(v), 1, 0, sizes.batch, ops.constant(np.float32(0))) for v in flat]
    ints = [_fit(ops.convert(v, "i64"), 1, 0, sizes.batch, _i64(0)) for v in flat]
    return _Lengths(ints[0], ints[1], floats[0], floats[1], fault)


def _padded_rows(targets: ov.Output, lengths: _Lengths, sizes: _Sizes) -> tuple[ov.Node, ov.Node, ov.Node]:
    """Padded targets as rows [N, T] (float32 and int64 copies) and the faults [N]: a length over
    S, or a targets batch that is not N (every sample)."""
    width = _as_float(ops.gather(ops.shape_of(targets, "i64"), _i64([1]), _i64(0)))
    copies = ((_as_float(targets), ops.constant(np.float32(-1))), (ops.convert(targets, "i64"), _i64(-1)))
    rows = [_fit(_fit(v, 2, 0, sizes.batch, fill), 2, 1, sizes.frames, fill) for v, fill in copies]
    faults = ops.logical_or(ops.greater(lengths.targets_f, width), _differs(targets, 0, sizes.batch))
    return rows[0], rows[1], faults


def _concatenated_rows(targets: ov.Output, lengths: _Lengths, sizes: _Sizes) -> tuple[ov.Node, ov.Node, ov.Node]:
    """Concatenated targets as rows [N, T] and the faults [N]: every sample when a length is
    negative or beyond the concatenation, or the lengths do not add up to its size."""
    flat = ops.reshape(targets, _i64([-1]), special_zero=False)
    size = ops.shape_of(flat, "i64")
    offsets = ops.cumsum(lengths.targets, _i64(0), exclusive=True)
    columns = ops.range(_i64(0), ops.squeeze(sizes.frames, _i64([0])), _i64(1), "i64")
    index = ops.add(ops.unsqueeze(offsets, _i64([1])), ops.unsqueeze(columns, _i64([0])))
    index = ops.minimum(ops.maximum(index, _i64(0)), size)
    copies = ((_as_float(flat), ops.constant(np.asarray([-1], np.float32))), (ops.convert(flat, "i64"), _i64([-1])))
    rows = [ops.gather(ops.concat([v, pad], 0), index, _i64(0)) for v, pad in copies]
    negative = ops.less(lengths.targets_f, ops.constant(np.float32(0)))
    out_of_range = ops.logical_or(negative, ops.greater(lengths.targets_f, _as_float(size)))
    wrong_sum = ops.not_equal(ops.reduce_sum(lengths.targets, _i64([0]), keep_dims=True), size)
    everything = ops.logical_or(
        ops.reduce_logical_or(out_of_range, _i64([0]), False), ops.squeeze(wrong_sum, _i64([0]))
    )
    return rows[0], rows[1], ops.broadcast(everything, sizes.batch)


def _labels(rows_f: ov.Output, rows: ov.Output, lengths: _Lengths, blank: int, sizes: _Sizes) -> ov.Node:
    """Label rows [N, T] over the C classes: inside each target its classes as they are, except
    ``blank`` and any value outside [0, C), which become -2 (an invalid label: NaN by rule 3.3);
    -1 outside."""
    columns = ops.range(_i64(0), ops.squeeze(sizes.frames, _i64([0])), _i64(1), "i64")
    inside = ops.less(ops.unsqueeze(columns, _i64([0])), ops.unsqueeze(lengths.targets, _i64([1])))
    non_negative = ops.greater_equal(rows_f, ops.constant(np.float32(0)))
    is_class = ops.logical_and(non_negative, ops.less(rows_f, _as_float(sizes.classes)))
    valid = ops.logical_and(is_class, ops.not_equal(rows, _i64(blank)))
    return ops.select(inside, ops.select(valid, rows, _i64(-2)), _i64(-1))


def _ascending(values: ov.Node, count: ov.Node) -> tuple[ov.Output, ov.Output]:
    """The ``count`` [1] smallest entries of each row of ``values`` [N, K], ascending, and their
    positions (TopK)."""
    smallest = ops.topk(values, ops.squeeze(count, _i64([0])), 1, "min", "value", "i64")
    return smallest.output(0), smallest.output(1)


def _compacted(labels: ov.Output, lengths: _Lengths, blank: int, sizes: _Sizes) -> tuple[ov.Node, ov.Node]:
    """The classes a path can read (:func:`ctcop.torch.semantics.compacted`): the class of each
    column fed to CTCLoss-4 [N, D + 1] (sample i's distinct target classes in ascending order,
    then copies of the blank, the last its CTCLoss-4 blank) and the label rows [N, T] relabelled
    by column (-1 and -2 kept), from :func:`_labels` rows: a sort of each row's first K entries
    (K the longest target, at most T) and one -1 (no TopK is then for 0 entries, which the CPU
    plugin refuses, and each row's last sorted class is a C, a blank column), in which a
    class's column is the count of distinct classes below it."""
    longest = ops.minimum(ops.maximum(lengths.targets, _i64(0)), sizes.frames)
    width = ops.reduce_max(ops.concat([longest, _i64([0])], 0), _i64([0]), keep_dims=True)
    head = ops.slice(labels, _i64([0]), width, _i64([1]), _i64([1]))
    head = ops.pad(head, _i64([0, 0]), _i64([0, 1]), "constant", _i64(-1))
    valid = ops.greater_equal(head, _i64(0))  # -1 outside, -2 invalid, classes in [0, C) else
    ascending, order = _ascending(ops.select(valid, head, sizes.classes), ops.add(width, _i64([1])))
    previous = ops.slice(ascending, _i64([0]), _i64([-1]), _i64([1]), _i64([1]))
    previous = ops.pad(previous, _i64([0, 1]), _i64([0, 0]), "constant", _i64(-1))
    new = ops.logical_and(ops.not_equal(ascending, previous), ops.less(ascending, sizes.classes))
    column = ops.subtract(ops.cumsum(ops.convert(new, "i64"), _i64(1)), _i64(1))
    relabelled = ops.scatter_elements_update(ops.subtract(order, order), order, column, _i64(1))
    relabelled = ops.select(valid, relabelled, head)
    distinct = ops.reduce_sum(ops.convert(new, "i64"), _i64([1]), keep_dims=False)
    count = ops.reduce_max(ops.concat([distinct, _i64([0])], 0), _i64([0]), keep_dims=True)
    classes, _ = _ascending(ops.select(new, ascending, sizes.classes), ops.add(count, _i64([1])))
    blank_class = ops.minimum(_i64([blank]), ops.subtract(sizes.classes, _i64([1])))  # blank >= C: a batch fault
    columns = ops.select(ops.less(classes, sizes.classes), classes, blank_class)
    return columns, _fit(relabelled, 2, 1, sizes.frames, _i64(-1))


def _non_finite(x: ov.Output) -> ov.Node:
    """[T, N]: the frames of ``x`` holding NaN or +inf in any class (spec 4.4), read off one sum
    over the classes (NaN or +inf; ReduceMax skips NaN), which the frame's finite values can
    reach too only when they sum past the largest finite value."""
    total = ops.reduce_sum(x, _i64([2]), keep_dims=False)
    return ops.logical_or(ops.is_nan(total), ops.is_inf(total, {"detect_positive": True, "detect_negative": False}))


def _logits(read: ov.Output) -> tuple[ov.Output, ov.Node]:
    """CTCLoss-4's logits, ``read`` [T, N, D + 1] with every -inf replaced by its frame's top
    (their maximum) minus STAND_IN_GAP, and the shift of each frame's log-sum-exp [T, N, 1]
    (the maximum of those logits). Selects, not Maximum: the CPU plugin's Maximum drops a NaN
    first operand."""
    negative = {"detect_positive": False, "detect_negative": True}
    top = ops.reduce_max(read, _i64([2]), keep_dims=True)
    top = ops.select(ops.is_inf(top, negative), _like(0.0, read), top)
    stand_in = ops.subtract(top, _like(STAND_IN_GAP, read))
    replaced = ops.select(ops.is_inf(read, negative), stand_in, read)
    shift = ops.reduce_max(replaced, _i64([2]), keep_dims=True)
    return replaced.output(0), ops.select(ops.is_inf(shift, negative), _like(0.0, read), shift)


def _correction(logits: ov.Output, top: ov.Output, active: ov.Output) -> ov.Node:
    """sum over the active frames of the log-sum-exp over the columns [N]."""
    sums = ops.reduce_sum(ops.exp(ops.subtract(logits, top)), _i64([2]), keep_dims=False)
    lse = ops.add(ops.squeeze(top, _i64([2])), ops.log(sums))
    return ops.reduce_sum(ops.select(active, lse, _like(0.0, lse)), _i64([0]), keep_dims=False)


def _read_out(loss: ov.Output, lengths: _Lengths, faults: ov.Output, call: TorchCtcCall) -> ov.Node:
    """+inf for dead and too-long samples, NaN for faults, zero_infinity, the reduction."""
    zeros = ops.multiply(ops.convert_like(lengths.frames, loss), _like(0.0, loss))
    infinity = ops.divide(_like(1.0, loss), zeros)  # computed at run time (D7)
    number = ops.logical_not(ops.is_nan(loss))  # the CPU plugin's Greater(Equal) is true for NaN
    loss = ops.select(ops.logical_and(ops.greater_equal(loss, _like(DEAD_LOSS, loss)), number), infinity, loss)
    too_long = ops.logical_and(ops.greater(lengths.targets, lengths.frames), number)
    loss = ops.select(too_long, infinity, loss)
    loss = ops.select(faults, runtime_nan(loss), loss)
    if call.zero_infinity:
        loss = ops.select(ops.equal(loss, infinity), zeros, loss)
    if call.reduction == "sum":
        return ops.reduce_sum(loss, _i64([0]), keep_dims=False)
    if call.reduction == "mean":
        divisors = ops.convert_like(ops.maximum(lengths.targets, _i64(1)), loss)
        return ops.reduce_mean(ops.divide(loss, divisors), _i64([0]), keep_dims=False)
    return loss if call.batched else ops.squeeze(loss, _i64([0]))


def _facts(inputs: list[ov.Output]) -> ArgumentFacts:
    """ArgumentFacts of the frontend's inputs: ranks, element types, lists (SequenceMark)."""
    lists = tuple(v.get_node().get_type_name() == LIST_NODE for v in inputs[2:4])
    shapes = [v.get_partial_shape() for v in inputs]
    ranks = tuple(s.rank.get_length() if s.rank.is_static else None for s in shapes)
    last = shapes[0][ranks[0] - 1] if ranks[0] in (2, 3) else None
    classes = last.get_length() if last is not None and last.is_static else None
    pairs = zip(inputs[2:4], lists, strict=True)
    types = tuple("int64" if is_list else type_name(v.get_element_type()) for v, is_list in pairs)
    return ArgumentFacts(ranks, type_name(inputs[0].get_element_type()), types, classes, lists)


def torch_loss(inputs: list[ov.Output], call: TorchCtcCall) -> ov.Node:
    """PyTorch's ``ctc_loss`` of the four tensors ``inputs`` (log_probs, targets, input_lengths,
    target_lengths) for the static arguments ``call``, in the element type of log_probs."""
    x, targets, input_lengths, target_lengths = inputs
    x3 = x if call.batched else ops.unsqueeze(x, _i64([1])).output(0)
    sizes = _Sizes.of(x3)
    lengths = _lengths(input_lengths, target_lengths, sizes)
    rows_f, rows, faults = (_concatenated_rows if call.concatenated else _padded_rows)(targets, lengths, sizes)
    frames = ops.range(_i64(0), ops.squeeze(sizes.frames, _i64([0])), _i64(1), "i64")
    active = ops.less(ops.unsqueeze(frames, _i64([1])), ops.unsqueeze(lengths.frames, _i64([0])))
    negative = ops.less(lengths.frames_f, ops.constant(np.float32(0)))
    bad_frames = ops.logical_or(negative, ops.greater(lengths.frames_f, _as_float(sizes.frames)))
    bad_frames = ops.logical_or(bad_frames, ops.less(lengths.targets_f, ops.constant(np.float32(0))))
    blank_fault = ops.squeeze(ops.greater_equal(_i64([call.blank]), sizes.classes), _i64([0]))
    faults = ops.logical_or(ops.logical_or(faults, bad_frames), ops.logical_or(lengths.batch_fault, blank_fault))
    values = x3 if x3.get_element_type() in (ov.Type.f32, ov.Type.f64) else ops.convert(x3, "f32").output(0)
    faults = ops.logical_or(faults, ops.reduce_logical_or(ops.logical_and(_non_finite(values), active), _i64([0])))
    columns, labels = _compacted(_labels(rows_f, rows, lengths, call.blank, sizes), lengths, call.blank, sizes)
    shape = ops.concat([sizes.frames, ops.shape_of(columns, "i64")], 0)
    read = ops.gather_elements(values, ops.broadcast(ops.unsqueeze(columns, _i64([0])), shape), 2)
    logits, top = _logits(read.output(0))
    core = lower(logits, active, labels, preprocess_collapse_repeated=False, merge_repeated=True)
    loss = ops.subtract(core, _correction(logits, top, active))
    return ops.convert_like(_read_out(loss.output(0), lengths, faults, call), x)


def _convert(context: Any) -> list[ov.Output]:
    """The conversion rule: one ``ctc_loss`` node of the PyTorch frontend."""
    inputs = [context.get_input(k) for k in range(4)]
    blank = context.get_values_from_const_input(4, 0, int)
    reduction = context.get_values_from_const_input(5, 1, int)
    zero_infinity = context.get_values_from_const_input(6, False, bool)
    facts = _facts(inputs)
    call = checked_call(blank, reduction, zero_infinity, facts)
    return [torch_loss(inputs, call).output(0)]


def _masked_select(context: Any) -> list[ov.Output]:
    """``aten.masked_select`` of an ExportedProgram (the frontend converts the TorchScript
    ``aten::masked_select`` itself): the entries of ``values`` where ``mask`` (broadcast
    together) is true, in row-major order, 1-D: GatherND at the Transpose of NonZero."""
    values, mask = context.get_input(0), context.get_input(1)
    broadcast = ops.select(mask, values, values)
    where = ops.non_zero(ops.broadcast(mask, ops.shape_of(broadcast, "i64")), "i64")
    return [ops.gather_nd(broadcast, ops.transpose(where, _i64([1, 0])), 0).output(0)]


def torch_extensions() -> list[Any]:
    """PyTorch-frontend ConversionExtensions for ``aten::ctc_loss`` and ``ctcop::ctc_loss``, and
    for ``aten.masked_select`` of an ExportedProgram (Hugging Face's CTC loss concatenates its
    targets with it), to pass to ``openvino.convert_model(..., extension=...)``
    (``ctcop.openvino_extensions()`` includes them)."""
    from openvino.frontend.pytorch import ConversionExtension

    rules = [ConversionExtension(name, _convert) for name in OPERATIONS]
    return [*rules, ConversionExtension(MASKED_SELECT, _masked_select)]


def openvino_extensions(*, pytorch: bool | None = None) -> list[Any]:
    """Extensions to pass, one at a time, to ``openvino.Core.add_extension``::

        for extension in ctcop.openvino_extensions():
            core.add_extension(extension)

    or all at once to ``openvino.convert_model(..., extension=ctcop.openvino_extensions())``:
    the OpenVINO wing's (:func:`ctcop.openvino.openvino_extensions`: the ``ai.ctcop.CTCLoss``
    ONNX node and the custom-op IR layer) and, with ``pytorch`` (by default: when torch is
    already imported, as it is for ``convert_model`` of a torch model; the PyTorch frontend
    imports torch), :func:`torch_extensions`, so that ``convert_model`` of a PyTorch model maps
    ``aten::ctc_loss`` and ``ctcop::ctc_loss`` exactly. All are total functions (spec 11.5):
    input that breaks a rule gives NaN for the samples that break it, never a crash or a failed
    inference.
    """
    extensions = openvino_wing_extensions()
    if pytorch or (pytorch is None and "torch" in sys.modules):
        extensions.extend(torch_extensions())
    return extensions
