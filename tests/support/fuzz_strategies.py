"""Hypothesis strategies shared by the fuzz tests (tests/*/test_fuzz_*.py), and their budgets.

Two profiles (tests/conftest.py picks one): *bounded*, the default, sized so that the whole fuzz
set adds a few minutes to ``python -m pytest -q``; and *long*, chosen by ``pytest -m fuzz`` or the
environment variable ``CTCOP_FUZZ=long``, with at least 10,000 examples for the reference and for
each exported graph's runtime. :func:`budget` gives a test its ``max_examples`` in the active one.

Strategies draw the structure (shapes, element types, attributes, masks, labels, where special
values go) from hypothesis, so that a failure shrinks to a small example; logits are drawn as a
recipe (seed, scale, shift, special values) so that a [6, 4, 40] array costs a few bytes of data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from ctcop.schema import type_constraint

LONG = os.environ.get("CTCOP_FUZZ", "") == "long"

# target: (bounded, long) examples. The long profile's reference targets add up to more than 10,000,
# and every graph runtime gets 10,000 on its own.
BUDGETS: dict[str, tuple[int, int]] = {
    "reference": (300, 4000),
    "openvino_form": (200, 3000),
    "invalid": (300, 2000),
    "arbitrary": (200, 1000),
    "or_nan": (150, 2000),  # each of the two ctc_loss_or_nan tests
    "graph": (100, 10000),  # per runtime form
    "files": (5, 60),  # mutations per source file; each runs `ctcop validate` and `ctcop eval`
}


def examples(target: str) -> int:
    bounded, long = BUDGETS[target]
    return long if LONG else bounded


def budget(target: str) -> settings:
    """Hypothesis settings of ``target`` in the active profile."""
    return settings(max_examples=examples(target))


FLOAT_TYPES = type_constraint("T_F")
MASK_TYPES = type_constraint("T_MASK")
INDEX_TYPES = type_constraint("T_IND")
SIGNED_INDEX_TYPES = tuple(name for name in INDEX_TYPES if not name.startswith("u"))


def dtype_of(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def fits(value: int, dtype: str) -> bool:
    if dtype == "bool":
        return value in (0, 1)
    info = np.iinfo(np.dtype(dtype))
    return int(info.min) <= value <= int(info.max)


def extremes(dtype: str) -> list[int]:
    if dtype == "bool":
        return [0, 1]
    info = np.iinfo(np.dtype(dtype))
    return [int(info.min), int(info.max)]


def as_type(values: Any, dtype: str) -> np.ndarray:
    """Integer ``values`` (Python ints that fit ``dtype``) as an array of ``dtype``."""
    if not np.size(values):
        return np.zeros(np.shape(values), np.dtype(dtype))
    return np.array(values, dtype=object).astype(np.dtype(dtype))


def attributes() -> st.SearchStrategy[dict[str, bool]]:
    return st.fixed_dictionaries({"preprocess_collapse_repeated": st.booleans(), "merge_repeated": st.booleans()})


def openvino_attributes() -> st.SearchStrategy[dict[str, bool]]:
    return st.fixed_dictionaries(
        {"preprocess_collapse_repeated": st.booleans(), "ctc_merge_repeated": st.booleans(), "unique": st.booleans()}
    )


# -- logits ----------------------------------------------------------------------------------------

SCALES = (1.0, 4.0, 0.01, 30.0, 1e4)
SHIFTS = (0.0, 100.0, -200.0, 1024.0, -3e5)
SPECIALS = (np.nan, np.inf, -np.inf, 1e38, -1e38, 6e4, 1e300)


@dataclass(frozen=True)
class Logits:
    """A recipe for logits: normal * scale on a 1/64 grid, plus shift, then special values put at
    [t, i, c] positions, cast to ``dtype`` (float16 / bfloat16 casts may overflow to inf)."""

    shape: tuple[int, int, int]
    dtype: str
    seed: int = 0
    scale: float = 1.0
    shift: float = 0.0
    specials: tuple[tuple[int, int, int, float], ...] = ()

    def array(self) -> np.ndarray:
        values = np.round(np.random.default_rng(self.seed).normal(size=self.shape) * self.scale * 64) / 64 + self.shift
        for t, i, c, value in self.specials:
            values[t, i, c] = value
        with np.errstate(over="ignore"):
            return values.astype(dtype_of(self.dtype))

    def with_column(self, i: int, other: Logits) -> np.ndarray:
        """This array with sample ``i``'s frames taken from ``other`` (same shape)."""
        values = self.array()
        values[:, i] = other.array()[:, i]
        return values


@st.composite
def logits(draw: st.DrawFn, shape: tuple[int, int, int], dtype: str, specials: bool = True) -> Logits:
    positions: list[tuple[int, int, int, float]] = []
    if specials and all(shape):
        position = st.tuples(
            st.integers(0, shape[0] - 1),
            st.integers(0, shape[1] - 1),
            st.integers(0, shape[2] - 1),
            st.sampled_from(SPECIALS),
        )
        positions = draw(st.lists(position, max_size=3))
    return Logits(
        shape=shape,
        dtype=dtype,
        seed=draw(st.integers(0, 2**32 - 1)),
        scale=draw(st.sampled_from(SCALES)),
        shift=draw(st.sampled_from(SHIFTS)),
        specials=tuple(positions),
    )


def nonfinite_active(inputs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[N]: samples with a NaN or +-inf in an active frame (a valid prefix mask)."""
    wide = inputs.astype(np.float64)
    active = mask.astype(bool)[:, :, None]
    return (~np.isfinite(wide) & active).any(axis=(0, 2)) if wide.size else np.zeros(inputs.shape[1], bool)


# -- valid time-major batches (small enough for brute-force enumeration) ---------------------------


@dataclass
class Batch:
    """The spec's three inputs and the attributes; ``logits`` is the recipe of ``inputs``."""

    inputs: np.ndarray
    sequence_mask: np.ndarray
    labels: np.ndarray
    attributes: dict[str, bool]
    logits: Logits | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"Batch(inputs={self.inputs.dtype.name}{list(self.inputs.shape)} {self.logits!r},\n"
            f"  sequence_mask={self.sequence_mask.dtype.name}{list(self.sequence_mask.shape)}"
            f" {self.sequence_mask.astype(np.int64).tolist()},\n"
            f"  labels={self.labels.dtype.name}{list(self.labels.shape)} {self.labels.tolist()},"
            f" attributes={self.attributes})"
        )


def max_frames(classes: int, max_paths: int, cap: int) -> int:
    """The most frames for which ``classes ** frames`` paths stay within ``max_paths``."""
    frames = 0
    while frames < cap and classes ** (frames + 1) <= max_paths:
        frames += 1
    return frames


def prefix_mask(lengths: list[int], frames: int, dtype: str) -> np.ndarray:
    values = (np.arange(frames)[:, None] < np.array(lengths, dtype=np.int64).reshape(1, -1)).astype(np.int64)
    return values.reshape(frames, len(lengths)).astype(np.dtype(dtype))


def valid_entries(classes: int, signed: bool) -> st.SearchStrategy[int]:
    """A label entry that rule 3.3 accepts: the pad -1 (signed types only) or a class in [0, C-2]."""
    options = []
    if signed:
        options.append(st.just(-1))
    if classes >= 2:
        options.append(st.integers(0, classes - 2))
    return st.one_of(*options) if options else st.nothing()


@st.composite
def valid_batches(
    draw: st.DrawFn,
    float_types: tuple[str, ...] = FLOAT_TYPES,
    max_paths: int = 1024,
    max_n: int = 4,
    max_frames_cap: int = 7,
    junk: bool = True,
) -> Batch:
    """Valid time-major batches of every element type, pads anywhere, junk in masked frames and
    now and then a non-finite active value; at most ``max_paths`` paths per sample."""
    classes = draw(st.integers(1, 5))
    frames = draw(st.integers(0, max_frames(classes, max_paths, max_frames_cap)))
    n = draw(st.integers(0, max_n))
    dtype = draw(st.sampled_from(float_types))
    mask_dtype = draw(st.sampled_from(MASK_TYPES))
    labels_dtype = draw(st.sampled_from(INDEX_TYPES))
    if classes == 1 and frames > 0:
        labels_dtype = draw(st.sampled_from(SIGNED_INDEX_TYPES))
    lengths = draw(st.lists(st.integers(0, frames), min_size=n, max_size=n))
    entry = valid_entries(classes, labels_dtype in SIGNED_INDEX_TYPES)
    rows = [draw(st.lists(entry, min_size=frames, max_size=frames)) for _ in range(n)]
    recipe = draw(logits((frames, n, classes), dtype, specials=draw(st.integers(0, 4)) == 0))
    inputs = recipe.array()
    mask = prefix_mask(lengths, frames, mask_dtype)
    if junk:
        filler = draw(st.sampled_from([None, np.nan, np.inf, -np.inf, 1e300, 0.0]))
        if filler is not None:
            with np.errstate(over="ignore"):
                inputs = np.where(mask.astype(bool)[..., None], inputs, np.asarray(filler).astype(inputs.dtype))
    labels = as_type(rows, labels_dtype).reshape(n, frames)
    return Batch(inputs, mask, labels, draw(attributes()), recipe)


# -- the released OpenVINO form ---------------------------------------------------------------------


@dataclass
class OpenVINOBatch:
    logits: np.ndarray
    logit_length: np.ndarray
    labels: np.ndarray
    label_length: np.ndarray
    blank_index: Any
    attributes: dict[str, bool]

    def args(self) -> tuple[Any, ...]:
        return (self.logits, self.logit_length, self.labels, self.label_length, self.blank_index)

    def blank(self) -> int:
        return self.logits.shape[2] - 1 if self.blank_index is None else int(self.blank_index)

    def __repr__(self) -> str:
        return (
            f"OpenVINOBatch(logits={self.logits.dtype.name}{list(self.logits.shape)} {self.logits.tolist()},\n"
            f"  logit_length={self.logit_length.dtype.name} {self.logit_length.tolist()},"
            f" labels={self.labels.dtype.name} {self.labels.tolist()},\n"
            f"  label_length={self.label_length.dtype.name} {self.label_length.tolist()},"
            f" blank_index={self.blank_index!r}, attributes={self.attributes})"
        )


@st.composite
def openvino_batches(draw: st.DrawFn, max_paths: int = 1024, max_n: int = 4) -> OpenVINOBatch:
    """Valid released-form batches: blank anywhere (given as a scalar of any index type, a Python
    int or left out), ``unique``, targets shorter than the row with junk of any value after them."""
    classes = draw(st.integers(1, 5))
    frames = draw(st.integers(0, max_frames(classes, max_paths, 7)))
    n = draw(st.integers(0, max_n))
    dtype = draw(st.sampled_from(FLOAT_TYPES))
    length_types = [draw(st.sampled_from(INDEX_TYPES)) for _ in range(3)]
    how = draw(st.sampled_from(["none", "python", "numpy"]))
    blank = draw(st.integers(0, classes - 1)) if how != "none" else classes - 1
    blank_index: Any = None
    if how == "python":
        blank_index = blank
    elif how == "numpy":
        blank_index = np.array(blank, dtype=draw(st.sampled_from(INDEX_TYPES)))
    others = [c for c in range(classes) if c != blank]
    logit_length = draw(st.lists(st.integers(0, frames), min_size=n, max_size=n))
    label_length = draw(st.lists(st.integers(0, frames if others else 0), min_size=n, max_size=n))
    labels_dtype = length_types[1]
    junk = st.one_of(st.integers(-3, classes + 2), st.sampled_from(extremes(labels_dtype))).filter(
        lambda v: fits(v, labels_dtype)
    )
    rows = []
    for k in range(n):
        size = label_length[k]
        target = draw(st.lists(st.sampled_from(others), min_size=size, max_size=size)) if others else []
        rows.append(target + draw(st.lists(junk, min_size=frames - len(target), max_size=frames - len(target))))
    recipe = draw(logits((n, frames, classes), dtype, specials=False))
    return OpenVINOBatch(
        logits=recipe.array(),
        logit_length=as_type(logit_length, length_types[0]),
        labels=as_type(rows, labels_dtype).reshape(n, frames),
        label_length=as_type(label_length, length_types[2]),
        blank_index=blank_index,
        attributes=draw(openvino_attributes()),
    )


# -- any input of the declared ranks and element types (the exported graphs' domain) --------------

BAD_MASK_VALUES = (2, -1, 3, 255, 2**31, -(2**63))


def bad_labels(classes: int, dtype: str) -> list[int]:
    """Label values rule 3.3 refuses that ``dtype`` can hold: the blank, C..C+2, -2, -3, huge."""
    pool = [classes - 1, classes, classes + 1, classes + 2, -2, -3, 10**9, 2**31 - 1, 2**31, 2**32]
    pool += [2**63 - 1, -(2**63), *extremes(dtype)]
    return sorted({v for v in pool if fits(v, dtype) and not (v == -1 or 0 <= v <= classes - 2)})


@st.composite
def mask_column(draw: st.DrawFn, frames: int) -> list[int]:
    """A column of 0/1 values as a prefix run, or with a gap, or with a value other than 0 and 1."""
    length = draw(st.integers(0, frames))
    column = [1 if t < length else 0 for t in range(frames)]
    kind = draw(st.integers(0, 9))
    if frames and kind == 8:
        column[draw(st.integers(0, frames - 1))] ^= 1
    if frames and kind == 9:
        column[draw(st.integers(0, frames - 1))] = draw(st.sampled_from(BAD_MASK_VALUES))
    return column


@st.composite
def label_row(draw: st.DrawFn, frames: int, classes: int, dtype: str) -> list[int]:
    """A row of pads and classes, or (one row in five) with values rule 3.3 refuses."""
    entry = valid_entries(classes, dtype in SIGNED_INDEX_TYPES)
    if entry.is_empty:
        entry = st.integers(0, max(classes + 2, 0)).filter(lambda v: fits(v, dtype))
    row = draw(st.lists(entry, min_size=frames, max_size=frames))
    if frames and draw(st.integers(0, 4)) == 0:
        bad = st.sampled_from(bad_labels(classes, dtype))
        for _ in range(draw(st.integers(1, 2))):
            row[draw(st.integers(0, frames - 1))] = draw(bad)
    return row


def wrapped(values: list[int], dtype: str) -> np.ndarray:
    """Python ints as ``dtype`` by two's complement wrapping (-1 as uint8 is 255), bool by != 0."""
    if dtype == "bool":
        return np.array([v != 0 for v in values], dtype=bool)
    bits = np.dtype(dtype).itemsize * 8
    unsigned = [v % (1 << bits) for v in values]
    if np.dtype(dtype).kind == "u":
        return np.array(unsigned, dtype=np.dtype(dtype))
    return np.array([v - (1 << bits) if v >= 1 << (bits - 1) else v for v in unsigned], dtype=np.dtype(dtype))


@st.composite
def class_counts(draw: st.DrawFn, max_c: int = 40) -> int:
    """C in 1..max_c, a third of the time above 8 and often above 32 (the ONNX function's gather
    changes there), and now and then 0 (every loss NaN)."""
    kind = draw(st.integers(0, 19))
    if kind == 19:
        return 0
    if kind >= 13:
        return draw(st.integers(33, max_c)) if kind >= 16 else draw(st.integers(9, max_c))
    return draw(st.integers(1, 8))


@st.composite
def shape_variant(draw: st.DrawFn, shape: tuple[int, int]) -> tuple[int, int]:
    """``shape``, or (one time in ten) one of its dimensions one more or one less."""
    if draw(st.integers(0, 9)) != 0:
        return shape
    axis = draw(st.integers(0, 1))
    changed = list(shape)
    changed[axis] = max(changed[axis] + draw(st.sampled_from([1, -1])), 0)
    if tuple(changed) == shape:
        changed[axis] += 1
    return (changed[0], changed[1])


@dataclass
class GraphCase:
    """An input of the exported graphs' declared ranks and types (maybe invalid, maybe of
    disagreeing shapes), and a second input that differs from it in sample ``other`` only."""

    batch: Batch
    other: int | None = None
    perturbed: Batch | None = None

    def __repr__(self) -> str:
        text = f"GraphCase(\n {self.batch!r}"
        if self.perturbed is not None:
            text += f",\n other={self.other}, perturbed=\n {self.perturbed!r}"
        return text + ")"


@st.composite
def sample_inputs(
    draw: st.DrawFn, frames: int, n: int, classes: int, mask_dtype: str, labels_dtype: str, shapes: bool
) -> tuple[np.ndarray, np.ndarray]:
    mask_shape = draw(shape_variant((frames, n))) if shapes else (frames, n)
    labels_shape = draw(shape_variant((n, frames))) if shapes else (n, frames)
    columns = [draw(mask_column(mask_shape[0])) for _ in range(mask_shape[1])]
    rows = [draw(label_row(labels_shape[1], classes, labels_dtype)) for _ in range(labels_shape[0])]
    mask = wrapped([v for column in columns for v in column], mask_dtype)
    mask = mask.reshape(mask_shape[1], mask_shape[0]).T.copy()
    labels = as_type(rows, labels_dtype).reshape(labels_shape)
    return mask, labels


@st.composite
def graph_cases(draw: st.DrawFn, float_types: tuple[str, ...], max_t: int = 6, max_n: int = 4) -> GraphCase:
    """Any input of the declared ranks and element types: T 0..max_t, N 1..max_n, C 0..40, masks
    with values in {0, 1, 2, -1, ...} and gaps, labels in [-3, C+2] and the type's extremes, shapes
    of mask and labels that disagree with the logits now and then; and, when the shapes agree and
    N >= 2, the same input with one sample's logits, mask column and label row drawn anew."""
    classes = draw(class_counts())
    frames, n = draw(st.integers(0, max_t)), draw(st.integers(1, max_n))
    dtype = draw(st.sampled_from(float_types))
    mask_dtype, labels_dtype = draw(st.sampled_from(MASK_TYPES)), draw(st.sampled_from(INDEX_TYPES))
    mask, labels = draw(sample_inputs(frames, n, classes, mask_dtype, labels_dtype, shapes=True))
    recipe = draw(logits((frames, n, classes), dtype, specials=draw(st.integers(0, 2)) == 0))
    chosen = draw(attributes())
    batch = Batch(recipe.array(), mask, labels, chosen, recipe)
    if n < 2 or mask.shape != (frames, n) or labels.shape != (n, frames):
        return GraphCase(batch)
    other = draw(st.integers(0, n - 1))
    new_mask, new_labels = draw(sample_inputs(frames, n, classes, mask_dtype, labels_dtype, shapes=False))
    new_logits = draw(logits((frames, n, classes), dtype, specials=draw(st.integers(0, 2)) == 0))
    mask2, labels2 = mask.copy(), labels.copy()
    mask2[:, other], labels2[other] = new_mask[:, other], new_labels[other]
    perturbed = Batch(recipe.with_column(other, new_logits), mask2, labels2, chosen, new_logits)
    return GraphCase(batch, other, perturbed)


# -- invalid input: one rule of spec sections 3, 6 and 7 broken on an otherwise valid batch --------

NOT_FLOAT_TYPES = ("int8", "int32", "uint64", "bool", "complex64", "complex128", "object", "str", "datetime64[s]")
NOT_INDEX_TYPES = ("float16", "float32", "float64", "bool", "complex128", "object", "str")
NOT_MASK_TYPES = ("float16", "float32", "float64", "complex64", "object", "str")
NOT_BOOLEANS = ("yes", 1, 0, None, 0.0, "true", (True,))


@dataclass
class Call:
    """``function(*args, **kwargs)`` of ctcop, which must raise InvalidInputError naming ``name``."""

    function: str
    args: dict[str, Any]
    kwargs: dict[str, Any]
    name: str
    what: str

    def __repr__(self) -> str:
        shown = {
            key: f"{value.dtype.name}{list(value.shape)} {value.tolist()}" if isinstance(value, np.ndarray) else value
            for key, value in self.args.items()
        }
        return f"Call({self.function}, {self.what}, expects {self.name!r}: {shown}, {self.kwargs})"


def retyped(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` as element type ``dtype`` (any numpy type name, "str" included)."""
    if dtype.startswith("datetime"):
        return np.zeros(array.shape, dtype=dtype)
    wide = array.astype(np.float64) if array.dtype == dtype_of("bfloat16") else array
    with np.errstate(all="ignore"):
        return wide.astype(dtype)


@st.composite
def wrong_rank(draw: st.DrawFn, array: np.ndarray) -> np.ndarray:
    rank = draw(st.integers(0, 4).filter(lambda r: r != array.ndim))
    shape = tuple(draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
    return np.zeros(shape, dtype=array.dtype)


@st.composite
def wrong_dims(draw: st.DrawFn, array: np.ndarray) -> np.ndarray:
    axis = draw(st.integers(0, array.ndim - 1))
    shape = list(array.shape)
    shape[axis] = draw(st.integers(0, shape[axis] + 2).filter(lambda size: size != array.shape[axis]))
    return np.zeros(shape, dtype=array.dtype)


@st.composite
def with_value(draw: st.DrawFn, array: np.ndarray, values: list[int]) -> np.ndarray:
    """``array`` with one entry set to one of ``values``."""
    changed = array.copy()
    position = tuple(draw(st.integers(0, size - 1)) for size in array.shape)
    changed[position] = draw(st.sampled_from(values))
    return changed


def bad_mask_values(dtype: str) -> list[int]:
    pool = [2, 3, -1, 7, *extremes(dtype)]
    return sorted({v for v in pool if fits(v, dtype) and v not in (0, 1)})


@st.composite
def gapped(draw: st.DrawFn, mask: np.ndarray) -> np.ndarray:
    """A mask with a 1 after a 0 in one column (needs T >= 2)."""
    changed = mask.copy()
    column = draw(st.integers(0, mask.shape[1] - 1))
    zero = draw(st.integers(0, mask.shape[0] - 2))
    one = draw(st.integers(zero + 1, mask.shape[0] - 1))
    changed[zero, column], changed[one, column] = 0, 1
    return changed


@st.composite
def invalid_time_major_calls(draw: st.DrawFn) -> Call:
    """``ctc_loss`` or ``ctc_loss_grad`` with one rule of sections 3 and 6 broken."""
    base = draw(valid_batches(max_paths=10**9, junk=False))
    args = {"inputs": base.inputs, "sequence_mask": base.sequence_mask, "labels": base.labels}
    kwargs: dict[str, Any] = dict(base.attributes)
    t, n, c = base.inputs.shape
    kinds = ["rank", "type", "classes", "attribute"] + (["dims"] if n or t else [])
    kinds += ["mask_value", "label_value"] if n and t else []
    kinds += ["gap"] if n and t >= 2 else []
    kind = draw(st.sampled_from(kinds))
    name = draw(st.sampled_from(list(args)))
    if kind == "rank":
        args[name] = draw(wrong_rank(args[name]))
    elif kind == "type":
        wrong = {"inputs": NOT_FLOAT_TYPES, "sequence_mask": NOT_MASK_TYPES, "labels": NOT_INDEX_TYPES}[name]
        args[name] = retyped(args[name], draw(st.sampled_from(wrong)))
    elif kind == "dims":
        name = draw(st.sampled_from(["sequence_mask", "labels"]))
        args[name] = draw(wrong_dims(args[name]))
    elif kind == "classes":
        name, args["inputs"] = "inputs", np.zeros((t, n, 0), dtype=base.inputs.dtype)
    elif kind == "mask_value":
        name, mask = "sequence_mask", args["sequence_mask"]
        mask = mask.astype(np.int16) if mask.dtype == bool else mask
        args[name] = draw(with_value(mask, bad_mask_values(mask.dtype.name)))
    elif kind == "gap":
        name, args[name] = "sequence_mask", draw(gapped(args["sequence_mask"]))
    elif kind == "label_value":
        name = "labels"
        args[name] = draw(with_value(args[name], bad_labels(c, args[name].dtype.name)))
    else:
        name = draw(st.sampled_from(sorted(kwargs)))
        kwargs[name] = draw(st.sampled_from(NOT_BOOLEANS))
    function = draw(st.sampled_from(["ctc_loss", "ctc_loss_grad"]))
    return Call(function, args, kwargs, name, kind)


def _openvino_args(base: OpenVINOBatch) -> dict[str, Any]:
    args = {
        "logits": base.logits,
        "logit_length": base.logit_length,
        "labels": base.labels,
        "label_length": base.label_length,
    }
    return args if base.blank_index is None else {**args, "blank_index": np.asarray(base.blank_index)}


def _out_of_range_lengths(frames: int, dtype: str) -> list[int]:
    pool = [-1, -2, frames + 1, frames + 5, 10**9, *extremes(dtype)]
    return sorted({v for v in pool if fits(v, dtype) and not 0 <= v <= frames})


@st.composite
def _openvino_value_fault(draw: st.DrawFn, kind: str, base: OpenVINOBatch, args: dict[str, Any]) -> str:
    """Breaks rule 7.1 or 7.2 in ``args`` in place; returns the name of the input at fault."""
    n, frames, classes = base.logits.shape
    if kind in ("logit_length", "label_length"):
        array = args[kind]
        args[kind] = draw(with_value(array, _out_of_range_lengths(frames, array.dtype.name)))
        return kind
    if kind == "blank_index":
        dtype = draw(st.sampled_from(INDEX_TYPES))
        pool = [v for v in (classes, classes + 3, -1, -(2**40), 2**63 - 1, *extremes(dtype)) if fits(v, dtype)]
        args[kind] = np.array(draw(st.sampled_from([v for v in pool if not 0 <= v < classes])), dtype=dtype)
        return kind
    labels = args["labels"].copy()
    rows = [i for i in range(n) if base.label_length[i] > 0]
    row = draw(st.sampled_from(rows))
    column = draw(st.integers(0, int(base.label_length[row]) - 1))
    pool = [base.blank(), classes, classes + 1, -1, -5, *extremes(labels.dtype.name)]
    bad = [v for v in pool if fits(v, labels.dtype.name) and (v == base.blank() or not 0 <= v < classes)]
    labels[row, column] = draw(st.sampled_from(bad))
    args["labels"] = labels
    return "labels"


@st.composite
def invalid_openvino_calls(draw: st.DrawFn) -> Call:
    """``openvino_ctc_loss`` with one rule of sections 6 and 7 broken."""
    base = draw(openvino_batches(max_paths=10**9))
    args = _openvino_args(base)
    kwargs: dict[str, Any] = dict(base.attributes)
    n, frames, _ = base.logits.shape
    kinds = ["rank", "type", "classes", "attribute", "blank_index"]
    kinds += ["dims", "logit_length", "label_length"] if n else []
    kinds += ["label_value"] if (base.label_length > 0).any() else []
    kind = draw(st.sampled_from(kinds))
    name = draw(st.sampled_from(list(args)))
    if kind == "rank":
        args[name] = draw(wrong_rank(args[name]))
    elif kind == "type":
        args[name] = retyped(
            args[name], draw(st.sampled_from(NOT_FLOAT_TYPES if name == "logits" else NOT_INDEX_TYPES))
        )
    elif kind == "dims":
        name = draw(st.sampled_from(["logit_length", "labels", "label_length"]))
        args[name] = draw(wrong_dims(args[name]))
    elif kind == "classes":
        name, args["logits"] = "logits", np.zeros((n, frames, 0), dtype=base.logits.dtype)
    elif kind == "attribute":
        name = draw(st.sampled_from(sorted(kwargs)))
        kwargs[name] = draw(st.sampled_from(NOT_BOOLEANS))
    else:
        name = draw(_openvino_value_fault(kind, base, args))
    return Call("openvino_ctc_loss", args, kwargs, name, kind)


# -- anything at all: arrays of any rank, shape and element type, and Python objects ---------------

ANY_TYPES = (*FLOAT_TYPES, *MASK_TYPES, "complex64", "object", "str", "datetime64[s]")


@st.composite
def anything(draw: st.DrawFn) -> Any:
    """An array of rank 0..4, dims 0..3, any element type, small integer values; or a Python
    object (None, a string, a ragged list, a float)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([None, "abc", [[1, 2], [3]], 1.5, [[[0.0, 1.0]], [[0.0]]], {"a": 1}]))
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=4)))
    values = np.array(draw(st.lists(st.integers(-3, 5), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))))
    return retyped(values.reshape(shape), draw(st.sampled_from(ANY_TYPES)))
