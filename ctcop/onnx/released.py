"""The released OpenVINO form (spec section 7) as an ONNX model: standard operators in front of
ctcop's ``ai.ctcop.CTCLoss`` node and its model-local function (spec 7, 11.5).

Graph inputs ``logits`` [N, T, C], ``logit_length`` [N], ``labels`` [N, T], ``label_length`` [N]
and, when asked for, the scalar ``blank_index``; output ``loss`` [N]. Rules the front keeps:

* lengths, labels and ``blank_index`` are read as float64 by a Cast that is their first operator
  (spec 12.2 D6, :func:`_read`); their dynamic dims are declared without names (onnxruntime plans
  buffers from dim names, 11.4, and such inputs may contradict the logits' N and T);
* a sample with a fault of spec 11.5 (released form; :func:`_front`) reaches the node as a valid
  empty one (mask 0, labels -1), so nothing out of range reaches an index; its NaN is set after
  the node by a Where (with T = 0 no mask entry or label position could carry the fault);
* the node gets the time-major inputs (:func:`_front`, :func:`_time_major_logits`) and the
  attributes of :func:`node_attributes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..attributes import Attributes
from ..options import Dim, ExportOptions, released_index_types
from ..schema import form
from . import function
from .graph import GraphBuilder, Sizes, any_along, fitted
from .writer import checked_opset, ctc_node, value_info, with_function

RELEASED = "openvino"
BOOL, INT32, INT64, DOUBLE = TensorProto.BOOL, TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE
# The element type of the sequence_mask the front hands to the node.
NODE_MASK_DTYPE = "int32"


def _read(g: GraphBuilder, values: str, shape: str, rank: int) -> str:
    """Rank-``rank`` ``values`` of any integer type as float64 (exact for every value that can be
    valid; no cast wraps), cut and padded with 0 to ``shape``. The Cast comes first: OpenVINO's CPU
    plugin wraps int64 inputs to int32 before any integer operator sees them, but a Convert straight
    to a float type reads the true value (spec 12.2 D6)."""
    return fitted(g, g.Cast(values, to=DOUBLE), shape, g.f64(0.0), rank)


def _within(g: GraphBuilder, values: str, low: str, high: str) -> str:
    return g.And(g.GreaterOrEqual(values, low), g.LessOrEqual(values, high))


def _blank(g: GraphBuilder, blank_index: str | None, sizes: Sizes) -> tuple[str, str]:
    """The blank class as a float64 scalar (C-1 when absent or out of range) and the batch fault
    of a ``blank_index`` outside [0, C-1] (rule 7.1) or of a rank other than 0."""
    last = g.Cast(g.Sub(sizes.class_count, g.i64(1)), to=DOUBLE)
    if blank_index is None:
        return last, g.const(False, np.bool_)
    # onnxruntime and onnx.reference take any rank for a declared scalar: another rank is a fault.
    scalar = g.Equal(g.Size(g.Shape(blank_index)), g.i64(0))
    first = g.Concat(g.Reshape(g.Cast(blank_index, to=DOUBLE), g.i64([-1])), g.Reshape(last, g.i64([1])), axis=0)
    value = g.Gather(first, g.i64(0), axis=0)
    valid = g.And(scalar, _within(g, value, g.f64(0.0), last))
    return g.Where(valid, value, last), g.Not(valid)


def _time_major_logits(g: GraphBuilder, logits: str, blank: str | None, sizes: Sizes) -> str:
    """``logits`` [N, T, C] as [T, N, C] with class ``blank`` (a float64 scalar) moved last: a Gather
    along C with the classes 0..b-1, b+1..C-1, b, only when the model has ``blank_index``."""
    values = logits
    if blank is not None:
        b = g.Cast(blank, to=INT64)
        classes = g.Range(g.i64(0), sizes.class_count, g.i64(1))
        shifted = g.Add(classes, g.Cast(g.GreaterOrEqual(classes, b), to=INT64))
        order = g.Where(g.Equal(classes, g.Sub(sizes.class_count, g.i64(1))), b, shifted)
        values = g.Gather(values, order, axis=2)
    return g.Transpose(values, perm=[1, 0, 2])


@dataclass(frozen=True)
class _Front:
    """What the node is given, and the faults [N] whose loss the model sets to NaN."""

    mask: str
    labels: str
    faults: str


def _first_occurrences(g: GraphBuilder, values: str, keep: str, width: str) -> str:
    """``keep`` [N, T] less every kept entry whose value a kept entry before it already holds
    (``unique``), compared over the first ``width`` [1] columns only (no entry is kept beyond): an
    [N, W, W] equality with a strict lower triangle, W the longest prefix."""
    axis1 = g.i64([1])
    head = g.Slice(values, g.i64([0]), width, axis1)
    kept = g.Slice(keep, g.i64([0]), width, axis1)
    positions = g.Range(g.i64(0), g.Squeeze(width, g.i64([0])), g.i64(1))
    earlier = g.Less(g.Unsqueeze(positions, g.i64([0])), g.Unsqueeze(positions, g.i64([1])))  # [j, k]: k < j
    same = g.Equal(g.Unsqueeze(head, g.i64([2])), g.Unsqueeze(head, axis1))  # [N, j, k]
    repeats = g.And(g.And(same, earlier), g.Unsqueeze(kept, axis1))
    first = g.And(kept, g.Not(any_along(g, repeats, 2)))
    rest = g.Slice(keep, width, g.i64([np.iinfo(np.int64).max]), axis1)
    return g.Concat(first, rest, axis=1)


def _front(
    g: GraphBuilder, names: Mapping[str, str], blank: str, batch_fault: str, unique: bool, sizes: Sizes
) -> _Front:
    """Faults (rules 7.1, 7.2, 11.5), the mask from ``logit_length`` and the node's labels.

    Sample i is faulty when ``logit_length[i]`` or ``label_length[i]`` lies outside [0, T] or an
    entry of its prefix ``labels[i, :label_length[i]]`` is not a class in [0, C-1] other than the
    blank; every sample is, by ``batch_fault``, when ``blank_index`` lies outside [0, C-1] or is
    not a scalar (onnxruntime and onnx.reference take any rank for a declared scalar), or the
    lengths or labels disagree with [N] and [N, T]. The labels are the prefix's classes, those
    above b renumbered down by one, every other entry -1; with ``unique`` only the first
    occurrence of each class is kept. A faulty sample gets mask 0 and labels -1."""
    zero, frame_count = g.f64(0.0), g.Cast(sizes.frame_count, to=DOUBLE)
    lengths = _read(g, names["logit_length"], sizes.batch, 1)
    target_lengths = _read(g, names["label_length"], sizes.batch, 1)
    values = _read(g, names["labels"], g.Concat(sizes.batch, sizes.frames, axis=0), 2)
    positions = g.Cast(g.Range(g.i64(0), sizes.frame_count, g.i64(1)), to=DOUBLE)
    in_prefix = g.Less(g.Unsqueeze(positions, g.i64([0])), g.Unsqueeze(target_lengths, g.i64([1])))
    last_class = g.Cast(g.Sub(sizes.class_count, g.i64(1)), to=DOUBLE)
    label_ok = g.And(_within(g, values, zero, last_class), g.Not(g.Equal(values, blank)))
    sample_faults = g.Or(
        g.Or(
            g.Not(_within(g, lengths, zero, frame_count)),
            g.Not(_within(g, target_lengths, zero, frame_count)),
        ),
        any_along(g, g.And(in_prefix, g.Not(label_ok)), 1),
    )
    faults = g.Or(sample_faults, batch_fault)
    keep = g.And(g.And(in_prefix, label_ok), g.Not(g.Unsqueeze(faults, g.i64([1]))))
    if unique:
        kept_lengths = g.Where(faults, zero, target_lengths)
        width = g.ReduceMax(g.Concat(kept_lengths, g.f64([0.0]), axis=0), g.i64([0]), keepdims=1)
        keep = _first_occurrences(g, values, keep, g.Cast(width, to=INT64))
    renumbered = g.Sub(values, g.Cast(g.Greater(values, blank), to=DOUBLE))
    labels = g.Cast(g.Where(keep, renumbered, g.f64(-1.0)), to=INT64)
    active = g.Less(g.Unsqueeze(positions, g.i64([1])), g.Unsqueeze(lengths, g.i64([0])))
    mask = g.Cast(g.And(active, g.Not(g.Unsqueeze(faults, g.i64([0])))), to=INT32)
    return _Front(mask, labels, faults)


def _shape_fault(g: GraphBuilder, names: Mapping[str, str], sizes: Sizes) -> str:
    """True when ``logit_length``, ``labels`` or ``label_length`` is not [N], [N, T], [N]."""
    actual = g.Concat(*(g.Shape(names[port]) for port in ("logit_length", "labels", "label_length")), axis=0)
    declared = g.Concat(sizes.batch, sizes.batch, sizes.frames, sizes.batch, axis=0)
    return any_along(g, g.Not(g.Equal(actual, declared)), 0)


def node_attributes(attributes: Attributes) -> Attributes:
    """The time-major node's attributes for the released form's ``attributes``: ``merge_repeated`` =
    ``ctc_merge_repeated``; ``preprocess_collapse_repeated`` passed through, false with ``unique``
    (first occurrences hold no adjacent repeats, and unique(collapse(x)) = unique(x))."""
    collapse = attributes["preprocess_collapse_repeated"] and not attributes["unique"]
    return Attributes.of({"preprocess_collapse_repeated": collapse, "merge_repeated": attributes["ctc_merge_repeated"]})


def released_nodes(attributes: Attributes, with_blank_index: bool) -> list[onnx.NodeProto]:
    """The graph's nodes: the front over the schema's released input names, the node, the NaNs."""
    names = {name: name for name in form(RELEASED).input_names}
    g = GraphBuilder("released_")
    sizes = Sizes.of(g, names["logits"], "NTC")
    blank, blank_fault = _blank(g, names["blank_index"] if with_blank_index else None, sizes)
    batch_fault = g.Or(blank_fault, _shape_fault(g, names, sizes))
    logits = _time_major_logits(g, names["logits"], blank if with_blank_index else None, sizes)
    front = _front(g, names, blank, batch_fault, attributes["unique"], sizes)
    loss = g.fresh("node_loss")
    g.nodes.append(ctc_node([logits, front.mask, front.labels], loss, node_attributes(attributes)))
    nan = g.CastLike(g.f64(np.nan), loss)
    g.node("Where", [front.faults, nan, loss], [form(RELEASED).output_name])
    return g.nodes


def released_model(
    *,
    dtype: str = "float32",
    index_dtype: str | Mapping[str, str] = "int64",
    dims: tuple[Dim, Dim, Dim] = ("N", "T", "C"),
    blank_index: bool = False,
    attributes: Mapping[str, Any] | None = None,
    opset: int = function.MIN_OPSET,
) -> onnx.ModelProto:
    """The released OpenVINO CTCLoss-4 (spec 7) as an ONNX model: inputs ``logits`` [N,T,C],
    ``logit_length`` [N], ``labels`` [N,T], ``label_length`` [N] and, if ``blank_index``, a scalar
    ``blank_index``; output ``loss`` [N]. ``dtype``: float16/float32/float64 (not bfloat16, spec
    11.1); ``index_dtype``: the integer type of the other inputs, or a mapping from their names to
    types; ``dims`` (N, T, C): ints or symbolic names; ``attributes``: the released form's
    ``preprocess_collapse_repeated``, ``ctc_merge_repeated``, ``unique``. A total function (spec
    11.5): NaN for faulty samples, every loss NaN for a bad ``blank_index`` or disagreeing shapes.
    """
    chosen = Attributes.of(attributes, form_name=RELEASED)
    n, t, c = dims
    options = ExportOptions.of(
        dtype=dtype,
        mask_dtype=NODE_MASK_DTYPE,
        labels_dtype="int64",
        dims=(t, n, c),
        attributes=node_attributes(chosen),
    )
    types = released_index_types(index_dtype)
    chosen_opset = checked_opset(opset)
    spec = form(RELEASED)
    logits, *_ = spec.input_names
    n, t, c = options.dims[1], options.dims[0], options.dims[2]
    # The lengths' and labels' dynamic dims are declared without names: their first operator is a
    # Cast (D6), whose output onnxruntime would otherwise plan from the logits' names (11.4).
    m, u = (dim if isinstance(dim, int) else None for dim in (n, t))
    shapes: dict[str, list[Dim]] = {"logit_length": [m], "labels": [m, u], "label_length": [m], "blank_index": []}
    inputs = [value_info(logits, options.dtype, [n, t, c])]
    inputs += [value_info(port, types[port], shapes[port]) for port in spec.input_names[1:4]]
    if blank_index:
        inputs.append(value_info("blank_index", types["blank_index"], []))
    graph = helper.make_graph(
        released_nodes(chosen, blank_index),
        "ctcop_released_ctc_loss",
        inputs,
        [value_info(spec.output_name, options.dtype, [n])],
    )
    return with_function(helper.make_model(graph, producer_name="ctcop"), options, chosen_opset)
