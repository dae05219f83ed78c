"""The released OpenVINO form (spec section 7) lowered onto stock OpenVINO operators: a front that
reads the released inputs per sample (spec 7.1, 7.2, 11.5) feeding the guarded time-major core of
:mod:`.lowering` (spec 12.1).

From ``logits`` [N, T, C], ``logit_length`` [N], ``labels`` [N, T], ``label_length`` [N] and the
optional scalar ``blank_index``, the front (:func:`_front`) reads the integers through a float32
copy first (:func:`_read`, D6), finds the faults of spec 11.5 (released form) and hands the core
time-major logits with the blank last, the active frames and the renumbered labels; a faulty
sample reaches the core empty and the core sets its loss to NaN. The core's attributes are those
of :func:`core_attributes`.

The result equals ``ctcop.openvino_ctc_loss`` per sample on valid input within the tolerance of
the logits' type (D4/D5 aside), NaN where it raises: the same contract as the ONNX front,
:func:`ctcop.onnx.released_model`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset15 as ops

from ..attributes import Attributes
from ..options import Dim, ExportOptions, released_index_types
from ..schema import form
from .files import save_ir
from .lowering import WIDE, disagrees, f32, fitted, guarded_loss, i64, positions
from .precision import precision_config
from .stage import mark
from .writer import ir_dim, named

RELEASED = "openvino"


@dataclass(frozen=True)
class ReleasedInputs:
    """The outputs that feed a released CTCLoss-4; ``blank_index`` None when it has none."""

    logits: ov.Output
    logit_length: ov.Output
    labels: ov.Output
    label_length: ov.Output
    blank_index: ov.Output | None = None


def _read(values: ov.Output, shape: ov.Output | None = None) -> ov.Node:
    """Integer ``values`` as int64, -1 for every value outside [0, 2**31) (read on a float32 copy
    first, D6), fitted to ``shape`` with 0 where one is given. -1 is never a valid length, class or
    blank; the CPU plugin wraps int64, uint64 and uint32 to int32 before an integer operator sees
    them, while the float copy still shows the true value."""
    wide = ops.convert(values, "f32")
    outside = ops.logical_or(ops.less(wide, f32(0.0)), ops.greater_equal(wide, f32(WIDE)))
    codes = ops.select(outside, i64(-1), ops.convert(values, "i64"))
    return codes if shape is None else fitted(codes, shape, i64(0))


def _within(values: ov.Output, low: ov.Output, high: ov.Output) -> ov.Node:
    return ops.logical_and(ops.greater_equal(values, low), ops.less_equal(values, high))


def _blank(blank_index: ov.Output | None, last: ov.Output) -> tuple[ov.Node, ov.Node | None]:
    """The blank class as an int64 scalar (C-1 when absent or invalid) and, when given, the batch
    fault of a ``blank_index`` outside [0, C-1] (rule 7.1) or of a rank other than 0."""
    if blank_index is None:
        return last, None
    scalar = ops.squeeze(ops.equal(ops.shape_of(ops.shape_of(blank_index, "i64"), "i64"), i64([0])), i64([0]))
    first = ops.concat([ops.reshape(_read(blank_index), i64([-1]), False), ops.reshape(last, i64([1]), False)], 0)
    value = ops.gather(first, i64(0), i64(0))
    valid = ops.logical_and(scalar, _within(value, i64(0), last))
    return ops.select(valid, value, last), ops.logical_not(valid)


def _time_major_logits(logits: ov.Output, blank: ov.Output | None, classes: ov.Output) -> ov.Node:
    """``logits`` [N, T, C] as [T, N, C] with class ``blank`` moved last (when given): a Gather along
    C with the classes 0..b-1, b+1..C-1, b."""
    values: ov.Output | ov.Node = logits
    if blank is not None:
        order = ops.range(i64(0), classes, i64(1), "i64")
        shifted = ops.add(order, ops.convert(ops.greater_equal(order, blank), "i64"))
        last = ops.subtract(classes, i64(1))
        values = ops.gather(logits, ops.select(ops.equal(order, last), blank, shifted), i64(2))
    return ops.transpose(values, i64([1, 0, 2]))


def _first_occurrences(values: ov.Output, keep: ov.Output, width: ov.Output) -> ov.Node:
    """``keep`` [N, T] less every kept entry whose value a kept entry before it already holds
    (``unique``), compared over the first ``width`` [1] columns only (no entry is kept beyond): an
    [N, W, W] equality with a strict lower triangle, W the longest prefix of a valid sample."""
    axis1 = i64([1])
    head = ops.slice(values, i64([0]), width, i64([1]), axis1)
    kept = ops.slice(keep, i64([0]), width, i64([1]), axis1)
    columns = positions(head)
    earlier = ops.less(ops.unsqueeze(columns, i64([0])), ops.unsqueeze(columns, i64([1])))  # [j, k]: k < j
    same = ops.equal(ops.unsqueeze(head, i64([2])), ops.unsqueeze(head, axis1))  # [N, j, k]
    repeats = ops.logical_and(ops.logical_and(same, earlier), ops.unsqueeze(kept, axis1))
    first = ops.logical_and(kept, ops.logical_not(ops.reduce_logical_or(repeats, i64([2]), keep_dims=False)))
    rest = ops.slice(keep, width, i64([np.iinfo(np.int64).max]), i64([1]), axis1)
    return ops.concat([first, rest], 1)


def _shape_fault(x: ReleasedInputs, batch: ov.Output, batch_by_frames: ov.Output) -> ov.Node:
    """True when ``logit_length``, ``labels`` or ``label_length`` is not [N], [N, T], [N]."""
    lengths = ops.logical_or(disagrees(x.logit_length, batch), disagrees(x.label_length, batch))
    return ops.logical_or(lengths, disagrees(x.labels, batch_by_frames))


def _front(x: ReleasedInputs, unique: bool) -> tuple[ov.Node, ov.Node, ov.Node, ov.Node]:
    """The core's time-major logits, active frames [T, N], labels [N, T] and faults [N]
    (rules 7.1, 7.2, 11.5).

    Sample i is faulty when ``logit_length[i]`` or ``label_length[i]`` lies outside [0, T] or an
    entry of ``labels[i, :label_length[i]]`` is not a class in [0, C-1] other than the blank
    (entries beyond are never read); every sample is when ``blank_index`` lies outside [0, C-1]
    or is not a scalar, when the lengths or labels are not [N], [N, T], [N], or when C = 0. The
    labels keep the prefix's classes, those above b renumbered down by one, every other entry -1;
    with ``unique`` only the first occurrence of each class in the prefix."""
    dims = ops.shape_of(x.logits, "i64")
    batch, frame_count = ops.gather(dims, i64([0]), i64(0)), ops.gather(dims, i64(1), i64(0))
    classes = ops.gather(dims, i64(2), i64(0))
    batch_by_frames = ops.gather(dims, i64([0, 1]), i64(0))
    last = ops.subtract(classes, i64(1))
    blank, blank_fault = _blank(x.blank_index, last)
    lengths, target_lengths = _read(x.logit_length, batch), _read(x.label_length, batch)
    values = _read(x.labels, batch_by_frames)
    frames = positions(values)
    in_prefix = ops.less(ops.unsqueeze(frames, i64([0])), ops.unsqueeze(target_lengths, i64([1])))
    label_ok = ops.logical_and(_within(values, i64(0), last), ops.not_equal(values, blank))
    bad_lengths = ops.logical_not(
        ops.logical_and(_within(lengths, i64(0), frame_count), _within(target_lengths, i64(0), frame_count))
    )
    bad_labels = ops.reduce_logical_or(ops.logical_and(in_prefix, ops.logical_not(label_ok)), i64([1]), False)
    batch_fault = ops.logical_or(_shape_fault(x, batch, batch_by_frames), ops.equal(classes, i64(0)))
    if blank_fault is not None:
        batch_fault = ops.logical_or(batch_fault, blank_fault)
    faults = ops.logical_or(ops.logical_or(bad_lengths, bad_labels), batch_fault)
    keep = ops.logical_and(ops.logical_and(in_prefix, label_ok), ops.logical_not(ops.unsqueeze(faults, i64([1]))))
    if unique:
        kept_lengths = ops.select(faults, i64(0), target_lengths)
        width = ops.reduce_max(ops.concat([kept_lengths, i64([0])], 0), i64([0]), keep_dims=True)
        keep = _first_occurrences(values, keep, width)
    renumbered = ops.subtract(values, ops.convert(ops.greater(values, blank), "i64"))
    labels = ops.select(keep, renumbered, i64(-1))
    active = ops.logical_and(
        ops.less(ops.unsqueeze(frames, i64([1])), ops.unsqueeze(lengths, i64([0]))),
        ops.logical_not(ops.unsqueeze(faults, i64([0]))),
    )
    logits = _time_major_logits(x.logits, None if x.blank_index is None else blank, classes)
    return logits, active, labels, faults


def core_attributes(attributes: Mapping[str, bool]) -> Attributes:
    """The time-major core's attributes for the released form's ``attributes``: ``merge_repeated`` =
    ``ctc_merge_repeated``; ``preprocess_collapse_repeated`` as given, false with ``unique`` (first
    occurrences hold no adjacent repeats, and unique(collapse(x)) = unique(x))."""
    chosen = Attributes.of(attributes, form_name=RELEASED)
    collapse = chosen["preprocess_collapse_repeated"] and not chosen["unique"]
    return Attributes.of({"preprocess_collapse_repeated": collapse, "merge_repeated": chosen["ctc_merge_repeated"]})


def released_loss(x: ReleasedInputs, attributes: Mapping[str, bool], within: str = "") -> ov.Node:
    """The [N] loss of the released CTCLoss-4 over ``x`` with the released form's ``attributes``,
    in stock OpenVINO operators, a total function (spec 7, 11.5, 12.1). Its nodes are named as a
    stage (:func:`ctcop.openvino.stage.mark`), inside the layer ``within`` where it replaces one."""
    chosen = Attributes.of(attributes, form_name=RELEASED)
    logits, active, labels, faults = _front(x, chosen["unique"])
    loss = guarded_loss(logits, active, labels, faults, **core_attributes(chosen))
    given = (x.logits, x.logit_length, x.labels, x.label_length, x.blank_index)
    sources = {port: value for port, value in zip(form(RELEASED).input_names, given, strict=True) if value is not None}
    return mark(loss, sources, RELEASED, chosen, within)


def released_ir_model(
    *,
    dtype: str = "float32",
    index_dtype: str | Mapping[str, str] = "int64",
    dims: tuple[Dim, Dim, Dim] = ("N", "T", "C"),
    blank_index: bool = False,
    attributes: Mapping[str, Any] | None = None,
) -> ov.Model:
    """The released OpenVINO CTCLoss-4 (spec 7) as an ``openvino.Model`` of stock operators (the
    native kernel guarded, spec 12.1): parameters ``logits`` [N,T,C], ``logit_length`` [N],
    ``labels`` [N,T], ``label_length`` [N] and, if ``blank_index``, a scalar ``blank_index``;
    result ``loss`` [N]. ``dtype``: float16/float32/float64; ``index_dtype``: the integer type of
    the other inputs, or a mapping from their names to types; ``dims`` (N, T, C): ints, or names
    and None for dynamic dims; ``attributes``: the released form's. A total function (spec 11.5)."""
    chosen = Attributes.of(attributes, form_name=RELEASED)
    n, t, c = dims
    options = ExportOptions.of(
        dtype=dtype, mask_dtype="int32", labels_dtype="int64", dims=(t, n, c), attributes=core_attributes(chosen)
    )
    types = released_index_types(index_dtype)
    t, n, c = (ir_dim(d) for d in options.dims)
    shapes = {"logit_length": [n], "labels": [n, t], "label_length": [n], "blank_index": []}
    names = form(RELEASED).input_names
    parameters = [named(ops.parameter([n, t, c], np.dtype(options.dtype)), names[0])]
    for port in names[1:] if blank_index else names[1:4]:
        parameters.append(named(ops.parameter(shapes[port], np.dtype(types[port])), port))
    x = ReleasedInputs(*(p.output(0) for p in parameters))
    loss = named(released_loss(x, chosen), form(RELEASED).output_name)
    return ov.Model([ops.result(loss)], parameters, "ctcop_released_ctc_loss")


def compiled_released_model(
    types: tuple[tuple[str, str], ...], attributes: Attributes, device: str = "CPU", precision: str = "declared"
) -> Any:
    """:func:`released_ir_model` for the released inputs' element types ``types`` ((name, type)
    pairs in port order, ``blank_index`` among them when given; dynamic dims), written as IR,
    read back by a stock ``openvino.Core`` (nothing of ctcop added) and compiled for ``device`` at
    ``precision`` (:func:`ctcop.openvino.precision.precision_config`; by default the precision the
    logits declare, spec 13)."""
    dtypes = dict(types)
    logits = dtypes.pop("logits")
    model = released_ir_model(
        dtype=logits,
        index_dtype=dtypes,
        dims=(None, None, None),
        blank_index="blank_index" in dtypes,
        attributes=attributes,
    )
    core = ov.Core()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "released.xml")
        save_ir(model, path)
        return core.compile_model(core.read_model(path), device, precision_config(core, device, precision, logits))
