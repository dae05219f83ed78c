"""Validation and normalisation: the one module that holds the rules of CTCLoss-4.

Both forms of the op (the spec's time-major form and the released OpenVINO form) are checked here
and reduced to one :class:`CanonicalBatch` (logits source, frame counts, compacted targets, blank,
merge flag). Everything else in ctcop computes from a ``CanonicalBatch`` and never re-applies a
rule of the spec. The rules are also read one at a time, where a model file states an input
without its values or with unknown dimensions (the ``*_problems`` functions, for ``ctcop
validate``), and per sample (:func:`time_major_faults`, :func:`openvino_faults`, spec 11.5).
Section numbers refer to ``spec/ctcloss4.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .attributes import flag
from .errors import InvalidInputError
from .process.limits import memory_budget
from .schema import FormSpec, PortSpec, form

IntArray = npt.NDArray[np.int64]


class CanonicalBatch(NamedTuple):
    """A validated batch in the form the compiled core consumes.

    ``logits`` is the caller's array (never copied here); frame ``t`` of sample ``i`` is
    ``logits[t, i]`` when ``time_axis`` is 0 and ``logits[i, t]`` when it is 1. Only frames
    ``t < lengths[i]`` are active. ``targets[i, :target_lengths[i]]`` is the processed target
    (pads removed, collapse/unique applied); the rest of each row holds ``blank``.
    """

    logits: np.ndarray
    time_axis: int
    lengths: IntArray
    targets: IntArray
    target_lengths: IntArray
    blank: int
    merge_repeated: bool

    @property
    def num_frames(self) -> int:
        return int(self.logits.shape[self.time_axis])

    @property
    def batch_size(self) -> int:
        return int(self.logits.shape[1 - self.time_axis])


# -- generic checks (spec section 6) ---------------------------------------------------------


def _as_array(value: Any, name: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except MemoryError as exc:  # a sequence claiming more elements than memory holds
        raise InvalidInputError(name, f"cannot be read as an array: it does not fit in memory ({exc})") from None
    except Exception as exc:  # ragged sequences, and whatever a caller's __array__ raises
        raise InvalidInputError(name, f"cannot be read as a rectangular array ({type(exc).__name__}: {exc})") from None
    return array


# Bytes per element of the working copies the core makes of an input (int64 mask and labels, a
# float64 gradient or float32/float64 logits): what the size budget counts.
WORKING_BYTES = 8
# Working memory that check_size grants without reading the system's limits (a syscall and a file
# read per call, more than a small batch's whole computation).
ALWAYS_FITS = 1 << 20


def _gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def always_fit(elements: int) -> bool:
    """Whether inputs of this many elements in all are within ALWAYS_FITS (see :func:`check_size`)."""
    return elements * WORKING_BYTES <= ALWAYS_FITS


def check_size(arrays: Sequence[tuple[str, np.ndarray]]) -> None:
    """Refuse inputs whose working copies cannot fit in memory, before anything is allocated:
    ``InvalidInputError`` naming the largest input, its shape and the bytes. Counts elements
    (a broadcast, stride-0 view counts every element it shows), WORKING_BYTES each. Up to
    ALWAYS_FITS bytes the limits are not read (a process without that much room fails at its next
    allocation anyway, which :func:`ctcop.errors.refusing_memory_errors` turns into an
    ``InvalidInputError`` naming the input)."""
    elements = sum([array.size for _, array in arrays])
    if always_fit(elements):
        return
    total = elements * WORKING_BYTES
    budget = memory_budget()
    if budget is not None and total > budget:
        size, name, shape = max((int(array.size) * WORKING_BYTES, name, array.shape) for name, array in arrays)
        raise InvalidInputError(
            name,
            f"shape {shape} needs {size} bytes ({_gib(size)}) of working memory, {total} bytes with the other "
            f"inputs: more than the {budget} bytes ({_gib(budget)}) this process may use",
        )


Dim = int | None  # a dimension: its size, or None where a model file leaves it unknown


def _shape_text(shape: Sequence[Dim]) -> str:
    return str(tuple(shape)).replace("None", "?")


def port_problems(
    shape: Sequence[Dim] | None, dtype: str, port: PortSpec, dims: dict[str, int] | None = None
) -> list[InvalidInputError]:
    """Every way one input breaks the schema (spec 6, 10), rank first: its rank, its element type
    and, when ``dims`` is given, the agreement of its dimensions with the sizes ``dims`` holds from
    earlier inputs (its new symbols are added to ``dims``). An unknown rank (``shape`` None) or
    dimension (None), as a model file may declare them, agrees with anything."""
    problems = []
    rank = len(port.dims)
    if shape is not None and len(shape) != rank:
        problems.append(
            InvalidInputError(
                port.name, f"rank must be {port.rank} ([{', '.join(port.dims)}]), got shape {_shape_text(shape)}"
            )
        )
    if dtype not in port.types:
        problems.append(InvalidInputError(port.name, f"element type {dtype} is not one of {', '.join(port.types)}"))
    if shape is None or dims is None or len(shape) != rank:
        return problems
    for axis, symbol in enumerate(port.dims):
        size = shape[axis]
        if size is None:
            continue
        expected = dims.setdefault(symbol, int(size))
        if size != expected:
            problems.append(
                InvalidInputError(
                    port.name, f"dimension {axis} ({symbol}) is {size} but {symbol} = {expected} from earlier inputs"
                )
            )
    return problems


def classes_problems(spec: FormSpec, dims: Mapping[str, int]) -> list[InvalidInputError]:
    """C = 0 (spec 6: C >= 1, the blank class); nothing while C is unknown."""
    if dims.get("C") == 0:
        return [InvalidInputError(spec.inputs[0].name, "C must be at least 1 (the blank class)")]
    return []


def _raise_first(problems: Sequence[InvalidInputError]) -> None:
    if problems:
        raise problems[0]


@cache
def _type_name(dtype: np.dtype) -> str:
    """``dtype.name``, which numpy forms anew on every read (microseconds, on every call)."""
    return dtype.name


def _check_declared(array: np.ndarray, port: PortSpec) -> None:
    """Rank and element type of one input: what a graph declares for its inputs."""
    _raise_first(port_problems(array.shape, _type_name(array.dtype), port))


def _fits(array: np.ndarray, port: PortSpec, dims: dict[str, int]) -> bool:
    """Whether ``array`` breaks none of the rules :func:`port_problems` reads (then its new
    symbols are in ``dims``): the common case, decided without forming a list of problems."""
    shape = array.shape
    if len(shape) != len(port.dims) or _type_name(array.dtype) not in port.types:
        return False
    return all(dims.setdefault(symbol, size) == size for symbol, size in zip(port.dims, shape, strict=True))


def _checked(spec: FormSpec, values: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    arrays: dict[str, np.ndarray] = {}
    dims: dict[str, int] = {}
    for port in spec.inputs:
        if port.name not in values:
            continue
        array = _as_array(values[port.name], port.name)
        if not _fits(array, port, dims):
            _raise_first(port_problems(array.shape, _type_name(array.dtype), port, dims))
        arrays[port.name] = array
    _raise_first(classes_problems(spec, dims))
    check_size(list(arrays.items()))
    return arrays, dims


def _first(bad: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(bad)[0])


def as_int64(array: np.ndarray) -> IntArray:
    """Integers as int64; values beyond int64 are clipped (range rules reject them anyway)."""
    if array.dtype == np.uint64:
        array = np.minimum(array, np.uint64(np.iinfo(np.int64).max))
    return array.astype(np.int64, copy=False)


# -- frames (spec section 3.1 and 3.2) -------------------------------------------------------


def _mask_value_faults(values: IntArray) -> npt.NDArray[np.bool_]:
    """[T, N]: mask entries other than 0 and 1 (rule 3.1)."""
    faults: npt.NDArray[np.bool_] = (values != 0) & (values != 1)
    return faults


def _mask_rises(values: IntArray) -> npt.NDArray[np.bool_]:
    """[T-1, N]: a 1 right after a 0 in a column (a gapped column, rule 3.1)."""
    rises: npt.NDArray[np.bool_] = values[1:] > values[:-1]
    return rises


def mask_lengths(mask: np.ndarray) -> IntArray:
    """Frame counts from a [T, N] ``sequence_mask``: 0/1 values, each column a run of 1s then 0s."""
    values = as_int64(mask)
    bad = _mask_value_faults(values)
    if bad.any():
        t, i = _first(bad)
        raise _mask_value_error(mask, t, i)
    rises = _mask_rises(values)
    if rises.any():
        t, i = _first(rises)
        raise _mask_gap_error(t + 1, i)
    lengths: IntArray = values.sum(axis=0)
    return lengths


def _mask_value_error(mask: np.ndarray, t: int, i: int) -> InvalidInputError:
    return InvalidInputError("sequence_mask", f"value {mask[t, i]} is not 0 or 1 (rule 3.1: mask values)", (t, i))


def _mask_gap_error(t: int, i: int) -> InvalidInputError:
    """The 1 at ``[t, i]`` follows a 0 (rule 3.1)."""
    return InvalidInputError(
        "sequence_mask", f"1 after a 0 in column {i}: a column must be a run of 1s followed by 0s (rule 3.1)", (t, i)
    )


def _length_faults(values: IntArray, upper: int) -> npt.NDArray[np.bool_]:
    """[N]: lengths outside [0, ``upper``] (rule 7.1)."""
    faults: npt.NDArray[np.bool_] = (values < 0) | (values > upper)
    return faults


def length_problems(array: np.ndarray, name: str, upper: int) -> list[InvalidInputError]:
    """The first entry of the length vector ``array`` outside [0, ``upper``] (rule 7.1)."""
    bad = _length_faults(as_int64(array), upper)
    if not bad.any():
        return []
    (i,) = _first(bad)
    return [InvalidInputError(name, f"length {array[i]} is outside [0, {upper}] (rule 7.1)", (i,))]


def blank_problems(array: np.ndarray, classes: int) -> list[InvalidInputError]:
    """A scalar ``blank_index`` outside [0, C-1] (rule 7.1)."""
    blank = int(as_int64(array))
    if 0 <= blank < classes:
        return []
    return [InvalidInputError("blank_index", f"value {blank} is outside [0, {classes - 1}] (rule 7.1)")]


# -- targets (spec section 3.3 and 7.2) ------------------------------------------------------


def _compact(values: IntArray, keep: np.ndarray, fill: int) -> tuple[IntArray, IntArray]:
    """Move the kept entries of each row to its front, in order, fill the rest with ``fill``, and
    trim the rows to the longest kept length."""
    lengths = keep.sum(axis=1)
    width = int(lengths.max(initial=0))
    order = np.argsort(~keep, axis=1, kind="stable")[:, :width]
    out = np.take_along_axis(values, order, axis=1)
    out[np.arange(width)[None, :] >= lengths[:, None]] = fill
    return out, lengths


def collapse_repeated(targets: IntArray, lengths: IntArray, fill: int) -> tuple[IntArray, IntArray]:
    """Merge runs of equal adjacent labels into one label (``preprocess_collapse_repeated``)."""
    position = np.arange(targets.shape[1])[None, :]
    keep = position < lengths[:, None]
    keep[:, 1:] &= targets[:, 1:] != targets[:, :-1]
    return _compact(targets, keep, fill)


def unique_labels(targets: IntArray, lengths: IntArray, fill: int) -> tuple[IntArray, IntArray]:
    """Keep the first occurrence of each label, in order (OpenVINO's ``unique``)."""
    n, width = targets.shape
    rows = np.repeat(np.arange(n), width)
    cols = np.tile(np.arange(width), n)
    flat = targets.ravel()
    order = np.lexsort((cols, flat, rows))
    first = np.ones(order.size, dtype=bool)
    first[1:] = (rows[order][1:] != rows[order][:-1]) | (flat[order][1:] != flat[order][:-1])
    keep = np.zeros(order.size, dtype=bool)
    keep[order] = first
    keep = keep.reshape(n, width) & (np.arange(width)[None, :] < lengths[:, None])
    return _compact(targets, keep, fill)


def _label_problems(labels: np.ndarray, valid: np.ndarray, where: np.ndarray, rule: str) -> list[InvalidInputError]:
    bad = where & ~valid
    if not bad.any():
        return []
    i, j = _first(bad)
    return [_label_error(labels, i, j, rule)]


def _label_error(labels: np.ndarray, i: int, j: int, rule: str) -> InvalidInputError:
    return InvalidInputError("labels", f"value {labels[i, j]} {rule}", (i, j))


def _time_major_label_ok(values: IntArray, classes: int) -> npt.NDArray[np.bool_]:
    """Label entries that are a class in [0, C-2] (rule 3.3; the pad -1 is tested apart)."""
    return (values >= 0) & (values < classes - 1)


def time_major_label_problems(labels: np.ndarray, classes: int) -> list[InvalidInputError]:
    """The first entry of the time-major ``labels`` [N, T] that is neither the pad -1 nor a class
    in [0, C-2] (rule 3.3)."""
    values = as_int64(labels)
    return _label_problems(labels, _time_major_label_ok(values, classes), values != -1, _time_major_label_rule(classes))


def _time_major_label_rule(classes: int) -> str:
    blank = classes - 1
    return (
        f"is not a class in [0, {blank - 1}] nor the pad -1 (rule 3.3: blank {blank} and values "
        f"outside [-1, C-2] are invalid)"
    )


def _released_label_ok(values: IntArray, classes: int, blank: int) -> npt.NDArray[np.bool_]:
    """Label entries that are a class in [0, C-1] other than the blank (rule 7.2)."""
    ok: npt.NDArray[np.bool_] = (values >= 0) & (values < classes) & (values != blank)
    return ok


def _prefix(target_lengths: IntArray, frames: int) -> npt.NDArray[np.bool_]:
    """[N, T]: the entries ``labels[i, :label_length[i]]`` that hold the target (rule 7.2)."""
    return np.arange(frames)[None, :] < target_lengths[:, None]


# -- the two forms ---------------------------------------------------------------------------


def time_major_frames(inputs: npt.ArrayLike, sequence_mask: npt.ArrayLike) -> tuple[np.ndarray, IntArray]:
    """Validated ``inputs`` [T, N, C] and the frame counts its ``sequence_mask`` encodes."""
    arrays, _ = _checked(form("time_major"), {"inputs": inputs, "sequence_mask": sequence_mask})
    return arrays["inputs"], mask_lengths(arrays["sequence_mask"])


class TimeMajorInputs(NamedTuple):
    """The spec form's inputs (section 2) with every rule read but those on the values of the mask
    and the labels (3.1, 3.3): ranks, element types, dimensions, C >= 1, size and attributes.
    ``sequence_mask`` and ``labels`` are the caller's (for the messages of the value rules);
    ``mask_values`` and ``label_values`` the same as C-contiguous int64, as the rule scan reads them."""

    logits: np.ndarray
    sequence_mask: np.ndarray
    labels: np.ndarray
    mask_values: IntArray
    label_values: IntArray
    collapse: bool
    merge_repeated: bool


@cache
def _time_major_types(logits: np.dtype, mask: np.dtype, labels: np.dtype) -> bool:
    """Whether the three element types are the form's (spec 6)."""
    ports = form("time_major").inputs
    return all(_type_name(dtype) in port.types for dtype, port in zip((logits, mask, labels), ports, strict=True))


def _time_major_arrays(inputs: Any, sequence_mask: Any, labels: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three inputs checked for ranks, element types, dimensions, C >= 1 and size. numpy
    arrays that break none of these rules are told apart in a few comparisons; anything else goes
    through :func:`_checked`, which names the first rule broken."""
    if type(inputs) is np.ndarray and type(sequence_mask) is np.ndarray and type(labels) is np.ndarray:
        shape = inputs.shape
        if (
            len(shape) == 3
            and shape[2] > 0
            and sequence_mask.shape == shape[:2]
            and labels.shape == (shape[1], shape[0])
            and _time_major_types(inputs.dtype, sequence_mask.dtype, labels.dtype)
        ):
            if not always_fit(inputs.size + sequence_mask.size + labels.size):
                check_size((("inputs", inputs), ("sequence_mask", sequence_mask), ("labels", labels)))
            return inputs, sequence_mask, labels
    values = {"inputs": inputs, "sequence_mask": sequence_mask, "labels": labels}
    arrays, _ = _checked(form("time_major"), values)
    return arrays["inputs"], arrays["sequence_mask"], arrays["labels"]


def time_major_inputs(
    inputs: npt.ArrayLike,
    sequence_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    preprocess_collapse_repeated: Any,
    merge_repeated: Any,
) -> TimeMajorInputs:
    """The spec's form (section 2) checked for every rule but 3.1 and 3.3, which the compiled rule
    scan reads (:func:`time_major_batch`)."""
    logits, mask, raw = _time_major_arrays(inputs, sequence_mask, labels)
    collapse = flag(preprocess_collapse_repeated, "preprocess_collapse_repeated")
    merge = flag(merge_repeated, "merge_repeated")
    return TimeMajorInputs(logits, mask, raw, _int64_rows(mask), _int64_rows(raw), collapse, merge)


def _int64_rows(array: np.ndarray) -> IntArray:
    """``array`` as C-contiguous int64, itself where it is already."""
    if array.dtype == np.int64 and array.flags.c_contiguous:
        return array
    return np.ascontiguousarray(as_int64(array))


def from_time_major(
    inputs: npt.ArrayLike,
    sequence_mask: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    preprocess_collapse_repeated: Any,
    merge_repeated: Any,
) -> CanonicalBatch:
    """Validate the spec's form (section 2) and reduce it to a :class:`CanonicalBatch`."""
    checked = time_major_inputs(
        inputs,
        sequence_mask,
        labels,
        preprocess_collapse_repeated=preprocess_collapse_repeated,
        merge_repeated=merge_repeated,
    )
    return time_major_batch(checked)


def time_major_batch(checked: TimeMajorInputs) -> CanonicalBatch:
    """Rules 3.1 and 3.3 (labels first, then mask values, then gaps) in one compiled pass
    (:mod:`ctcop.core.rule_scan`): the first fault raised, or the batch."""
    from .core import rule_scan  # compiled: loaded on first use, not by ``ctcop validate``

    classes = int(checked.logits.shape[2])
    frames, samples = checked.mask_values.shape
    lengths, targets = np.empty(samples, np.int64), np.empty((samples, frames), np.int64)
    target_lengths, fault = np.empty(samples, np.int64), np.empty(3, np.int64)  # fault: kind, row, column
    scan = rule_scan.time_major_scan
    longest = scan(
        checked.mask_values, checked.label_values, classes, checked.collapse, lengths, targets, target_lengths, fault
    )
    return _scanned_batch(checked, fault, lengths, targets, target_lengths, longest)


def _scanned_batch(
    checked: TimeMajorInputs,
    fault: IntArray,
    lengths: IntArray,
    targets: IntArray,
    target_lengths: IntArray,
    longest: int,
) -> CanonicalBatch:
    """The batch of ``checked`` from what :func:`ctcop.core.rule_scan.time_major_scan` wrote: its
    fault raised as the rule it breaks, or the frame counts and the processed targets (spec 3.2,
    3.4; rows trimmed to the ``longest``)."""
    kind, row, column = fault.tolist()
    if kind:
        from .core import rule_scan

        if kind == rule_scan.LABEL:
            raise _label_error(checked.labels, row, column, _time_major_label_rule(int(checked.logits.shape[2])))
        if kind == rule_scan.MASK_VALUE:
            raise _mask_value_error(checked.sequence_mask, row, column)
        raise _mask_gap_error(row, column)
    return CanonicalBatch(
        logits=checked.logits,
        time_axis=0,
        lengths=lengths,
        targets=targets[:, :longest],
        target_lengths=target_lengths,
        blank=int(checked.logits.shape[2]) - 1,
        merge_repeated=checked.merge_repeated,
    )


def from_openvino(
    logits: npt.ArrayLike,
    logit_length: npt.ArrayLike,
    labels: npt.ArrayLike,
    label_length: npt.ArrayLike,
    blank_index: npt.ArrayLike | None,
    *,
    preprocess_collapse_repeated: Any,
    ctc_merge_repeated: Any,
    unique: Any,
) -> CanonicalBatch:
    """Validate the released OpenVINO form (spec section 7) and reduce it to a batch."""
    values_in: dict[str, Any] = {
        "logits": logits,
        "logit_length": logit_length,
        "labels": labels,
        "label_length": label_length,
    }
    if blank_index is not None:
        values_in["blank_index"] = blank_index
    arrays, dims = _checked(form("openvino"), values_in)
    collapse = flag(preprocess_collapse_repeated, "preprocess_collapse_repeated")
    merge = flag(ctc_merge_repeated, "ctc_merge_repeated")
    keep_unique = flag(unique, "unique")
    frames, classes = dims["T"], dims["C"]
    blank = classes - 1
    if "blank_index" in arrays:
        _raise_first(blank_problems(arrays["blank_index"], classes))
        blank = int(as_int64(arrays["blank_index"]))
    _raise_first(length_problems(arrays["logit_length"], "logit_length", frames))
    _raise_first(length_problems(arrays["label_length"], "label_length", frames))
    lengths, target_lengths = as_int64(arrays["logit_length"]), as_int64(arrays["label_length"])
    raw = arrays["labels"]
    values = as_int64(raw)
    in_prefix = _prefix(target_lengths, frames)
    _raise_first(
        _label_problems(
            raw,
            _released_label_ok(values, classes, blank),
            in_prefix,
            f"is not a class in [0, {classes - 1}] other than blank {blank} (rule 7.2)",
        )
    )
    targets, target_lengths = _compact(values, in_prefix, blank)
    if collapse:
        targets, target_lengths = collapse_repeated(targets, target_lengths, blank)
    if keep_unique:
        targets, target_lengths = unique_labels(targets, target_lengths, blank)
    return CanonicalBatch(
        logits=arrays["logits"],
        time_axis=1,
        lengths=lengths,
        targets=targets,
        target_lengths=target_lengths,
        blank=blank,
        merge_repeated=merge,
    )


def time_major_faults(
    inputs: npt.ArrayLike, sequence_mask: npt.ArrayLike, labels: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray, IntArray, npt.NDArray[np.bool_]]:
    """The per-sample reading of rules 3.1 and 3.3 that the exported graphs compute (spec 11.5).

    Ranks and element types are checked as in :func:`from_time_major` (a graph declares them;
    they raise). Returns ``inputs``, ``sequence_mask`` and ``labels`` (int64) with every faulty
    sample's column and row replaced by a valid empty one (mask 0, labels -1), and the faults [N]:
    sample i is faulty when mask column i holds a value other than 0/1 or a 1 after a 0, or label
    row i a value other than -1 and [0, C-2]. Shapes that disagree ([T, N], [N, T] against
    ``inputs``) or C = 0 fault every sample.
    """
    spec = form("time_major")
    arrays = [
        _as_array(value, port.name) for value, port in zip((inputs, sequence_mask, labels), spec.inputs, strict=True)
    ]
    for array, port in zip(arrays, spec.inputs, strict=True):
        _check_declared(array, port)
    check_size([(port.name, array) for array, port in zip(arrays, spec.inputs, strict=True)])
    logits, mask, raw = arrays
    frames, n, classes = logits.shape
    if mask.shape != (frames, n) or raw.shape != (n, frames) or classes == 0:
        empty = np.zeros((frames, n), dtype=np.int64)
        return logits, empty, np.full((n, frames), -1, dtype=np.int64), np.ones(n, dtype=bool)
    mask_values, values = as_int64(mask), as_int64(raw)
    faults = _mask_value_faults(mask_values).any(axis=0) | _mask_rises(mask_values).any(axis=0)
    faults |= ((values != -1) & ~_time_major_label_ok(values, classes)).any(axis=1)
    return logits, np.where(faults[None, :], 0, mask_values), np.where(faults[:, None], -1, values), faults


def openvino_faults(
    logits: npt.ArrayLike,
    logit_length: npt.ArrayLike,
    labels: npt.ArrayLike,
    label_length: npt.ArrayLike,
    blank_index: npt.ArrayLike | None = None,
    *,
    preprocess_collapse_repeated: Any = False,
    ctc_merge_repeated: Any = True,
    unique: Any = False,
) -> npt.NDArray[np.bool_]:
    """The per-sample reading of rules 7.1 and 7.2 (spec 11.5, released form): faults [N].

    Sample i is faulty when ``logit_length[i]`` or ``label_length[i]`` lies outside [0, T], or an
    entry of ``labels[i, :label_length[i]]`` is not a class in [0, C-1] other than the blank
    (entries beyond ``label_length[i]`` are never read); exactly the samples
    :func:`from_openvino` refuses when given alone. A target longer than its frames is no fault
    (+inf, spec 4.4). Every sample is faulty when ``blank_index`` is not a scalar in [0, C-1], when
    the lengths and labels are not [N], [N, T], [N] (N, T from ``logits``), or when C = 0. Ranks
    and element types of the four declared inputs, the element type of ``blank_index`` and
    non-boolean attributes raise :class:`InvalidInputError`, as in :func:`from_openvino`.
    """
    spec = form("openvino")
    given = (logits, logit_length, labels, label_length) + (() if blank_index is None else (blank_index,))
    arrays = [_as_array(value, port.name) for value, port in zip(given, spec.inputs, strict=False)]
    for array, port in zip(arrays, spec.inputs, strict=False):
        _raise_first(port_problems(None if port.optional else array.shape, _type_name(array.dtype), port))
    check_size([(port.name, array) for array, port in zip(arrays, spec.inputs, strict=False)])
    flag(preprocess_collapse_repeated, "preprocess_collapse_repeated")
    flag(ctc_merge_repeated, "ctc_merge_repeated")
    flag(unique, "unique")
    values, lengths, raw, target_lengths = arrays[:4]
    n, frames, classes = values.shape
    blank = classes - 1
    if blank_index is not None:
        scalar = arrays[4]
        blank = -1 if scalar.ndim != 0 or blank_problems(scalar, classes) else int(as_int64(scalar))
    if lengths.shape != (n,) or raw.shape != (n, frames) or target_lengths.shape != (n,) or not 0 <= blank < classes:
        return np.ones(n, dtype=bool)
    frame_counts, label_counts = as_int64(lengths), as_int64(target_lengths)
    faults = _length_faults(frame_counts, frames) | _length_faults(label_counts, frames)
    in_prefix = _prefix(label_counts, frames)
    faults |= (in_prefix & ~_released_label_ok(as_int64(raw), classes, blank)).any(axis=1)
    return faults
