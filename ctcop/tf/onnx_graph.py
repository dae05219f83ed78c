"""TensorFlow's ``CTCLoss`` op in a tf2onnx model: the placeholder node and its expansion (spec 15).

tf2onnx has no rule for the op. The handler of :mod:`ctcop.tf.onnx_handler` writes each one as a
placeholder node ``ai.ctcop.tf.CTCLoss`` over its four inputs (logits [T, N, C], labels_indices
[K, 2], labels_values [K], sequence_length [N]) with the op's three attributes as integers and
``dtype``, the element type of the logits. :func:`finish_onnx` replaces every placeholder by the
mapping of :mod:`ctcop.tf.semantics` in standard operators around one ``ai.ctcop.CTCLoss`` node
(:func:`_expansion`), the steps :mod:`ctcop.tf.openvino_frontend` builds from OpenVINO operators,
with NaN for the samples where TensorFlow raises (spec 11.5, 15.2). Indices, labels and lengths
are read through a Cast to float64 that comes first, as in :mod:`ctcop.onnx.released` (spec 12.2 D6).

The op's second output, the gradient with respect to the logits, is not built: a model that reads
it (a training step) is refused with :data:`ctcop.tf.gradient.GRADIENT_REFUSED` (spec 15.3).
Imports onnx, and openvino through that message's module; not tensorflow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from ..attributes import Attributes
from ..errors import InvalidInputError
from ..onnx.graph import GraphBuilder, Sizes, any_along, fitted
from ..onnx.placeholder import expand_placeholders, placeholder_nodes
from ..onnx.writer import ctc_node
from .gradient import GRADIENT_REFUSED
from .semantics import ATTRIBUTES, OPERATION, WIDE, TfCtcCall

DOMAIN = "ai.ctcop.tf"
OP_TYPE = OPERATION
BOOL, INT32, INT64, DOUBLE = TensorProto.BOOL, TensorProto.INT32, TensorProto.INT64, TensorProto.DOUBLE


@dataclass(frozen=True)
class _Entries:
    """The K sparse entries as float64 [K]: row, column, value; K as [1]; and the scalar fault of
    operands that do not pair up (``labels_values`` not K long, ``labels_indices`` not K x 2)."""

    rows: str
    columns: str
    values: str
    count: str
    mismatch: str


def _entries(g: GraphBuilder, indices: str, values: str) -> _Entries:
    """``labels_indices`` and ``labels_values`` read as float64, cut or padded to K x 2 and K."""
    count = g.Shape(indices, start=0, end=1)
    flat = g.Reshape(values, g.i64([-1]))
    pairs = fitted(g, g.Cast(indices, to=DOUBLE), g.Concat(count, g.i64([2]), axis=0), g.f64(0.0), 2)
    rows, columns = (g.Squeeze(g.Slice(pairs, g.i64([k]), g.i64([k + 1]), g.i64([1])), g.i64([1])) for k in (0, 1))
    differs = g.Or(g.Not(g.Equal(g.Shape(flat), count)), g.Not(g.Equal(g.Shape(indices, start=1, end=2), g.i64([2]))))
    read = fitted(g, g.Cast(flat, to=DOUBLE), count, g.f64(0.0), 1)
    return _Entries(rows, columns, read, count, g.Squeeze(differs, g.i64([0])))


def _previous(g: GraphBuilder, values: str, count: str) -> str:
    """float64 [K] ``values`` moved one step on, -1 entering at the front."""
    return g.Slice(g.Concat(g.f64([-1.0]), values, axis=0), g.i64([0]), count, g.i64([0]))


@dataclass(frozen=True)
class _Rows:
    """The dense labels [N, T] (int64, -1 padded), each row's label count [N] (int64), the
    per-sample faults of the entries [N] and the batch fault of the entries (a scalar)."""

    labels: str
    counts: str
    faults: str
    batch_fault: str


def _dense_rows(g: GraphBuilder, indices: str, values: str, sizes: Sizes) -> _Rows:
    """The SparseTensor made dense: entry k of row b goes to position k minus the row's first
    entry; an entry that names no cell of [N, T] goes to the spare cell [N, T]. Per entry, a fault
    of its sample: a column outside [0, 2**31), a column not after the one before it in the row,
    a label outside [0, C-2]; a row outside [0, N) or rows out of order fault the batch."""
    entries = _entries(g, indices, values)
    batch = g.Cast(sizes.batch, to=DOUBLE)
    in_batch = g.And(g.GreaterOrEqual(entries.rows, g.f64(0.0)), g.Less(entries.rows, batch))
    before = _previous(g, entries.rows, entries.count)
    batch_fault = g.Or(any_along(g, g.Or(g.Not(in_batch), g.Less(entries.rows, before)), 0), entries.mismatch)
    not_after = g.And(
        g.Equal(entries.rows, before),
        g.LessOrEqual(entries.columns, _previous(g, entries.columns, entries.count)),
    )
    wide = g.Or(g.Less(entries.columns, g.f64(0.0)), g.GreaterOrEqual(entries.columns, g.f64(WIDE)))
    last = g.Cast(g.Sub(sizes.class_count, g.i64(1)), to=DOUBLE)
    not_class = g.Or(g.Less(entries.values, g.f64(0.0)), g.GreaterOrEqual(entries.values, last))
    faulty = g.Or(g.Or(wide, not_after), not_class)
    rows = g.Cast(g.Where(in_batch, entries.rows, batch), to=INT64)  # row N is the spare
    zeros = g.Expand(g.i64(0), g.Add(sizes.batch, g.i64([1])))
    counts = g.ScatterND(zeros, g.Unsqueeze(rows, g.i64([1])), g.Expand(g.i64(1), entries.count), reduction="add")
    faults = g.ScatterND(zeros, g.Unsqueeze(rows, g.i64([1])), g.Cast(faulty, to=INT64), reduction="add")
    positions = g.Sub(
        g.Range(g.i64(0), g.Squeeze(entries.count, g.i64([0])), g.i64(1)),
        g.Gather(g.CumSum(counts, g.i64(0), exclusive=1), rows, axis=0),
    )
    in_frames = g.And(g.GreaterOrEqual(positions, g.i64(0)), g.Less(positions, sizes.frames))
    columns = g.Where(g.And(in_batch, in_frames), positions, sizes.frame_count)
    cells = g.Concat(g.Unsqueeze(rows, g.i64([1])), g.Unsqueeze(columns, g.i64([1])), axis=1)
    shape = g.Concat(sizes.batch, sizes.frames, axis=0)
    # Labels + 1 summed onto zeros, then - 1: the empty cells are -1, and the spare cell, which
    # several entries may name, has no order of writes to depend on.
    spare = g.Expand(g.i64(0), g.Add(shape, g.i64([1, 1])))
    dense = g.ScatterND(spare, cells, g.Add(g.Cast(entries.values, to=INT64), g.i64(1)), reduction="add")
    labels = g.Sub(g.Slice(dense, g.i64([0, 0]), shape, g.i64([0, 1])), g.i64(1))
    first = (g.i64([0]), sizes.batch, g.i64([0]))
    faults = g.Greater(g.Slice(faults, *first), g.i64(0))
    return _Rows(labels, g.Slice(counts, *first), faults, batch_fault)


def _expansion(g: GraphBuilder, node: onnx.NodeProto, name: str) -> None:
    """Nodes computing the placeholder ``node``'s loss [N] from its inputs (spec 15.1, 15.2): the
    SparseTensor made dense with a ScatterND whose every index is checked first (:func:`_dense_rows`),
    the mask from ``sequence_length``, TensorFlow's rule for a target longer than its frames, and
    NaN for the samples where TensorFlow raises."""
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    call = TfCtcCall(**{key: bool(values.get(key, default)) for key, default in ATTRIBUTES.items()})
    x, indices, labels_values, sequence_length = node.input
    sizes = Sizes.of(g, x)
    rows = _dense_rows(g, indices, labels_values, sizes)
    flat = g.Cast(g.Reshape(sequence_length, g.i64([-1])), to=DOUBLE)
    lengths = fitted(g, flat, sizes.batch, g.f64(0.0), 1)
    outside = g.Or(g.Less(lengths, g.f64(0.0)), g.Greater(lengths, g.Cast(sizes.frames, to=DOUBLE)))
    every = g.Or(g.Not(g.Equal(g.Shape(flat), sizes.batch)), g.Equal(sizes.frames, g.i64([0])))
    faults = g.Or(g.Or(rows.faults, outside), g.Or(g.Squeeze(every, g.i64([0])), rows.batch_fault))
    labels = g.Where(g.Unsqueeze(faults, g.i64([1])), g.i64(-1), rows.labels)
    steps = g.Cast(g.Range(g.i64(0), sizes.frame_count, g.i64(1)), to=DOUBLE)
    active = g.Less(g.Unsqueeze(steps, g.i64([1])), g.Unsqueeze(lengths, g.i64([0])))
    mask = g.Cast(g.And(active, g.Not(g.Unsqueeze(faults, g.i64([0])))), to=INT32)
    loss = g.fresh("ctcop_loss")
    attributes = Attributes.of(
        {"preprocess_collapse_repeated": call.preprocess_collapse_repeated, "merge_repeated": call.ctc_merge_repeated}
    )
    g.nodes.append(ctc_node([x, mask, labels], loss, attributes, name))
    nan = g.CastLike(g.f64(np.nan), loss)
    too_long = g.Greater(g.Cast(rows.counts, to=DOUBLE), lengths)
    loss = g.Where(too_long, g.CastLike(g.f64(0.0), loss) if call.ignore_longer_outputs_than_inputs else nan, loss)
    g.node("Where", [faults, nan, loss], [node.output[0]])


def _read_names(graph: onnx.GraphProto) -> set[str]:
    """Every name a node of ``graph`` or of its subgraphs reads, and the graph's outputs."""
    names = {output.name for output in graph.output}
    for node in graph.node:
        names.update(node.input)
        for attribute in node.attribute:
            for sub in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                names |= _read_names(sub)
    return names


def finish_onnx(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (as tf2onnx converted it with :func:`ctcop.tf.tf2onnx_handlers`) with every
    ``ai.ctcop.tf.CTCLoss`` placeholder replaced by its expansion and the ``ai.ctcop.CTCLoss``
    function added (:func:`ctcop.onnx.placeholder.expand_placeholders`); checked with
    ``onnx.checker`` (full_check). Changes ``model`` in place. A model that reads an op's gradient
    output is refused (spec 15.3)."""
    read = _read_names(model.graph)
    for node in placeholder_nodes(model, DOMAIN, OP_TYPE):
        if len(node.output) > 1 and node.output[1] and node.output[1] in read:
            raise InvalidInputError("model", GRADIENT_REFUSED)
    return expand_placeholders(model, DOMAIN, OP_TYPE, _expansion, "CTCLoss op")
