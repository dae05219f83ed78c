"""TensorFlow's ``CTCLoss`` op in ``openvino.convert_model``: a TensorFlow-frontend ConversionExtension.

OpenVINO's own rule for the op feeds the native CTCLoss-4 directly (an empty target crashes the
process, D1; a target longer than its frames raises, D2; ``ignore_longer_outputs_than_inputs`` is
dropped). :func:`tensorflow_extensions` replaces it with the mapping of spec section 15
(:mod:`.semantics`, restated in OpenVINO operators by :func:`tf_loss`) around the guarded lowering
of CTCLoss-4 (:func:`ctcop.openvino.lowering.lower`). Like the lowering it is a total function: the
SparseTensor is made dense with a scatter whose every index is checked first (:func:`_dense_rows`),
where TensorFlow raises the samples concerned are NaN, integers are range-checked on a float32
copy before the CPU plugin's narrowing to int32 can wrap them (D6), and +inf and NaN are made at
run time (D7). The op's second output, the gradient with respect to the logits, is not built: a
graph that reads it (a training step) is refused at conversion (:mod:`.gradient`). Importing this
module imports openvino, not tensorflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import openvino as ov
import openvino.opset15 as ops

from ..openvino.lowering import lower, runtime_nan
from .gradient import GradientRefused
from .semantics import ATTRIBUTES, OPERATION, WIDE, TfCtcCall


def _i64(value: object) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.int64))


def _f32(value: float) -> ov.Node:
    return ops.constant(np.asarray(value, dtype=np.float32))


def _any(values: ov.Output) -> ov.Node:
    """Scalar: any of 1-D bool ``values``."""
    return ops.reduce_logical_or(values, _i64([0]), keep_dims=False)


def _fit(values: ov.Output, length: ov.Output, fill: ov.Node, rank: int = 1) -> ov.Node:
    """``values`` of rank ``rank`` cut or padded with ``fill`` along axis 0 to ``length`` [1]."""
    cut = ops.slice(values, _i64([0]), length, _i64([1]), _i64([0]))
    short = ops.subtract(length, ops.gather(ops.shape_of(cut, "i64"), _i64([0]), _i64(0)))
    return ops.pad(cut, _i64([0] * rank), ops.concat([short, *([_i64([0])] * (rank - 1))], 0), "constant", fill)


def _length(values: ov.Output, axis: int = 0) -> ov.Node:
    return ops.gather(ops.shape_of(values, "i64"), _i64([axis]), _i64(0))


@dataclass(frozen=True)
class _Entries:
    """The K sparse entries: row (float32 and int64), column (float32 and int64), value (float32
    and int64), each [K]; and the scalar fault of operands that do not pair up."""

    rows_f: ov.Node
    rows: ov.Node
    columns_f: ov.Node
    columns: ov.Node
    values_f: ov.Node
    values: ov.Node
    mismatch: ov.Node


def _entries(indices: ov.Output, values: ov.Output) -> _Entries:
    """The entries of ``labels_indices`` [K, 2] and ``labels_values`` [K], cut or padded to the
    K of the indices (a different K, or indices not K x 2, is a batch fault)."""
    count = _length(indices)
    flat = ops.reshape(values, _i64([-1]), special_zero=False)
    mismatch = ops.logical_or(ops.not_equal(_length(flat), count), ops.not_equal(_length(indices, 1), _i64([2])))
    found = []
    for kind, fill in (("f32", _f32(0.0)), ("i64", _i64(0))):  # converted first (D6)
        pairs = ops.slice(ops.convert(indices, kind), _i64([0]), _i64([2]), _i64([1]), _i64([1]))
        both = _fit(ops.transpose(pairs, _i64([1, 0])), _i64([2]), fill, rank=2)
        columns = [
            ops.squeeze(ops.slice(both, _i64([k]), _i64([k + 1]), _i64([1]), _i64([0])), _i64([0])) for k in (0, 1)
        ]
        found.append((*columns, _fit(ops.convert(flat, kind), count, fill)))
    (rows_f, columns_f, values_f), (rows, columns, value) = found
    return _Entries(rows_f, rows, columns_f, columns, values_f, value, ops.squeeze(mismatch, _i64([0])))


def _previous(values: ov.Output, fill: int) -> ov.Node:
    """1-D ``values`` moved one step on, ``fill`` entering at the front."""
    padded = ops.pad(values, _i64([1]), _i64([0]), "constant", _i64(fill))
    return ops.slice(padded, _i64([0]), _i64([-1]), _i64([1]), _i64([0]))


def _entry_faults(entries: _Entries, batch: ov.Output, classes: ov.Output) -> tuple[ov.Node, ov.Node]:
    """Per entry [K]: a fault of its sample (a column outside [0, 2**31), a column not after the
    one before it in the row, a label outside [0, C-2]); and the batch fault (a row outside
    [0, N), rows out of order)."""
    outside = ops.logical_or(
        ops.less(entries.rows_f, _f32(0.0)), ops.greater_equal(entries.rows_f, ops.convert(batch, "f32"))
    )
    backwards = ops.less(entries.rows, _previous(entries.rows, -1))
    batch_fault = _any(ops.logical_or(outside, backwards))
    wide = ops.logical_or(ops.less(entries.columns_f, _f32(0.0)), ops.greater_equal(entries.columns_f, _f32(WIDE)))
    same_row = ops.equal(entries.rows, _previous(entries.rows, -1))
    not_after = ops.logical_and(same_row, ops.less_equal(entries.columns, _previous(entries.columns, -1)))
    last_class = ops.convert(ops.subtract(classes, _i64([1])), "f32")
    not_class = ops.logical_or(ops.less(entries.values_f, _f32(0.0)), ops.greater_equal(entries.values_f, last_class))
    return ops.logical_or(ops.logical_or(wide, not_after), not_class), batch_fault


def _per_row(rows: ov.Output, updates: ov.Output, batch: ov.Output) -> ov.Node:
    """Sum of int64 ``updates`` [K] by ``rows`` [K] (each in [0, N]; row N is the spare) -> [N + 1]."""
    zeros = ops.broadcast(_i64(0), ops.add(batch, _i64([1])))
    return ops.scatter_nd_update(zeros, ops.unsqueeze(rows, _i64([1])), updates, reduction="sum")


@dataclass(frozen=True)
class _Rows:
    """The dense labels [N, T] (int64, -1 padded), the label count of each row [N] and the faults [N]."""

    labels: ov.Node
    counts: ov.Node
    faults: ov.Node


def _dense_rows(
    indices: ov.Output, values: ov.Output, frames: ov.Output, batch: ov.Output, classes: ov.Output
) -> _Rows:
    """The SparseTensor made dense with ScatterND: entry k of row b goes to position k minus the
    row's first entry; every entry that names no cell of [N, T] goes to the spare cell [N, T], whose
    row and column are cut off."""
    entries = _entries(indices, values)
    faulty, batch_fault = _entry_faults(entries, batch, classes)
    in_batch = ops.logical_and(
        ops.greater_equal(entries.rows_f, _f32(0.0)), ops.less(entries.rows_f, ops.convert(batch, "f32"))
    )
    rows = ops.select(in_batch, entries.rows, ops.squeeze(batch, _i64([0])))
    ones = ops.broadcast(_i64(1), _length(rows))
    counts = _per_row(rows, ones, batch)
    faults = ops.greater(_per_row(rows, ops.convert(faulty, "i64"), batch), _i64(0))
    starts = ops.cumsum(counts, _i64(0), exclusive=True)
    positions = ops.subtract(ops.range(_i64(0), ops.squeeze(_length(rows), _i64([0])), _i64(1), "i64"),
                             ops.gather(starts, rows, _i64(0)))  # fmt: skip
    in_frames = ops.logical_and(ops.greater_equal(positions, _i64(0)), ops.less(positions, frames))
    columns = ops.select(ops.logical_and(in_batch, in_frames), positions, ops.squeeze(frames, _i64([0])))
    spare = ops.broadcast(_i64(-1), ops.add(ops.concat([batch, frames], 0), _i64([1, 1])))
    cells = ops.concat([ops.unsqueeze(rows, _i64([1])), ops.unsqueeze(columns, _i64([1]))], 1)
    dense = ops.scatter_nd_update(spare, cells, entries.values)
    labels = ops.slice(dense, _i64([0, 0]), ops.concat([batch, frames], 0), _i64([1, 1]))
    cut = ops.slice(counts, _i64([0]), batch, _i64([1]), _i64([0]))
    every = ops.logical_or(batch_fault, entries.mismatch)
    return _Rows(labels, cut, ops.logical_or(ops.slice(faults, _i64([0]), batch, _i64([1]), _i64([0])), every))


def tf_loss(inputs: list[ov.Output], call: TfCtcCall) -> ov.Node:
    """TensorFlow's ``CTCLoss`` loss [N] of ``inputs`` (logits [T, N, C], labels_indices,
    labels_values, sequence_length) for the attributes ``call``, in the logits' element type."""
    logits, indices, values, sequence_length = inputs
    dims = ops.shape_of(logits, "i64")
    frames, batch, classes = (ops.gather(dims, _i64([axis]), _i64(0)) for axis in range(3))
    rows = _dense_rows(indices, values, frames, batch, classes)
    flat = ops.reshape(sequence_length, _i64([-1]), special_zero=False)
    lengths_f = _fit(ops.convert(flat, "f32"), batch, _f32(0.0))
    lengths = _fit(ops.convert(flat, "i64"), batch, _i64(0))
    outside = ops.logical_or(ops.less(lengths_f, _f32(0.0)), ops.greater(lengths_f, ops.convert(frames, "f32")))
    every = ops.logical_or(ops.not_equal(_length(flat), batch), ops.equal(frames, _i64([0])))
    faults = ops.logical_or(ops.logical_or(rows.faults, outside), ops.squeeze(every, _i64([0])))
    steps = ops.range(_i64(0), ops.squeeze(frames, _i64([0])), _i64(1), "i64")
    active = ops.less(ops.unsqueeze(steps, _i64([1])), ops.unsqueeze(lengths, _i64([0])))
    loss = lower(
        logits,
        active,
        rows.labels,
        preprocess_collapse_repeated=call.preprocess_collapse_repeated,
        merge_repeated=call.ctc_merge_repeated,
    )
    zero = ops.convert_like(_f32(0.0), loss)
    too_long = ops.greater(rows.counts, lengths)
    loss = ops.select(too_long, zero if call.ignore_longer_outputs_than_inputs else runtime_nan(loss), loss)
    return ops.select(faults, runtime_nan(loss), loss)


def _convert(context: Any) -> list[ov.Output]:
    """The conversion rule: one ``CTCLoss`` node of the TensorFlow frontend."""
    inputs = [context.get_input(k) for k in range(4)]
    call = TfCtcCall(**{name: bool(context.get_attribute(name, default)) for name, default in ATTRIBUTES.items()})
    return [tf_loss(inputs, call).output(0), GradientRefused([inputs[0]]).output(0)]


def tensorflow_extensions() -> list[Any]:
    """TensorFlow-frontend ConversionExtensions for ``CTCLoss``, to pass to
    ``openvino.convert_model(..., extension=...)`` (``ctcop.openvino_extensions()`` includes
    them); empty where the installed openvino has no TensorFlow frontend."""
    try:
        from openvino.frontend.tensorflow import ConversionExtension
    except ImportError:
        return []
    return [ConversionExtension(OPERATION, _convert)]
