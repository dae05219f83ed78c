"""Batches for the ONNX export's tests: :func:`hostile_batch`, one batch of the inputs that
need care (empty, too-long and repeat-infeasible targets, pads inside a row, a sample with no
frames), and :func:`batches`, fuzzed batches of every validity (hypothesis), built of
:func:`random_inputs`, :func:`random_mask` and :func:`random_labels`."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from numpy.typing import NDArray

INT64 = np.iinfo(np.int64)
Batch = tuple[NDArray[np.floating], NDArray[np.integer], NDArray[np.integer], dict[str, bool]]
EXTREME_LABELS = [10**9, -(10**9), int(INT64.max), int(INT64.min)]


def hostile_batch() -> dict[str, np.ndarray]:
    """T = 6, N = 6, C = 5: a plain target, an empty one, one longer than its frames, one whose
    repeats make it infeasible, pads inside a row, and a sample with no frames."""
    frames = np.array([6, 6, 2, 2, 6, 0])
    rng = np.random.default_rng(5)
    labels = np.full((6, 6), -1, np.int64)
    labels[0, :3] = [0, 1, 2]
    labels[2, :3] = [0, 1, 2]
    labels[3, :2] = [1, 1]
    labels[4, [0, 2, 5]] = [3, 3, 0]
    labels[5, 0] = 1
    return {
        "inputs": (rng.normal(size=(6, 6, 5)) * 2.0).astype(np.float32),
        "sequence_mask": (np.arange(6)[:, None] < frames[None, :]).astype(np.int32),
        "labels": labels,
    }


SPECIAL_LOGITS = [np.nan, np.inf, -np.inf, 100.0]
FAULTY_LABELS: list[int | str] = [-3, -2, "blank", "C", "C+1", "C+2", *EXTREME_LABELS]


def _faulty_label(rng: np.random.Generator, classes: int) -> int:
    choice = FAULTY_LABELS[int(rng.integers(len(FAULTY_LABELS)))]
    named = {"blank": classes - 1, "C": classes, "C+1": classes + 1, "C+2": classes + 2}
    return named[choice] if isinstance(choice, str) else choice


def random_mask(rng: np.random.Generator, frames: int, batch: int) -> np.ndarray:
    """Prefix columns; about a third of them broken by a gap or a value 2 / -1."""
    mask = (np.arange(frames)[:, None] < rng.integers(0, frames + 1, size=batch)[None, :]).astype(np.int64)
    for i in range(batch):
        if frames and rng.random() < 0.35:
            mask[int(rng.integers(frames)), i] = int(rng.choice([0, 1, 2, -1]))
    return mask


def random_labels(rng: np.random.Generator, frames: int, batch: int, classes: int) -> np.ndarray:
    """Labels in [0, C-2] with pads anywhere; about a third of the rows hold one faulty value."""
    valid = rng.integers(0, max(classes - 1, 1), size=(batch, frames))
    labels = np.where((rng.random((batch, frames)) < 0.5) | (classes < 2), -1, valid)
    for i in range(batch):
        if frames and rng.random() < 0.35:
            labels[i, int(rng.integers(frames))] = _faulty_label(rng, classes)
    return labels


def random_inputs(rng: np.random.Generator, frames: int, batch: int, classes: int, dtype: str) -> np.ndarray:
    inputs = rng.normal(size=(frames, batch, classes)) * 3.0
    if inputs.size and rng.random() < 0.3:
        inputs.flat[int(rng.integers(inputs.size))] = SPECIAL_LOGITS[int(rng.integers(len(SPECIAL_LOGITS)))]
    return inputs.astype(dtype)


def _misshaped(rng: np.random.Generator, array: np.ndarray, fill: int) -> np.ndarray:
    """``array`` with one axis one longer or one shorter."""
    axis = int(rng.integers(2))
    shape = list(array.shape)
    shape[axis] = max(shape[axis] + int(rng.choice([-1, 1])), 0)
    out = np.full(shape, fill, array.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(array.shape, shape, strict=True))
    out[common] = array[common]
    return out


@st.composite
def batches(draw: st.DrawFn, misshape: bool = True) -> Batch:
    """(inputs, mask, labels, attributes): T 0..6, N 1..4, C 1..40, float32 or float64."""
    frames, batch, classes = draw(st.integers(0, 6)), draw(st.integers(1, 4)), draw(st.integers(1, 40))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    attributes = {"preprocess_collapse_repeated": draw(st.booleans()), "merge_repeated": draw(st.booleans())}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    inputs = random_inputs(rng, frames, batch, classes, dtype)
    mask, labels = random_mask(rng, frames, batch), random_labels(rng, frames, batch, classes)
    if misshape and draw(st.integers(0, 9)) == 0:
        mask, labels = (_misshaped(rng, mask, 1), labels) if rng.random() < 0.5 else (mask, _misshaped(rng, labels, 0))
    return inputs, mask, labels, attributes
