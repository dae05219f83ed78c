"""The model's inputs for ``ctcop eval``: from an npz keyed by input name, or drawn at random.

Random inputs need static shapes. An input that feeds a CTCLoss port directly gets values valid
for that port (spec 3 and 7): lengths within the frames, labels among the non-blank classes (a
target of at most a quarter of the frames, so it is feasible; unsigned labels, which cannot hold
the pad, a whole row of distinct neighbours, feasible where the mask covers every frame), a
prefix mask; every other float
input is normal noise, every other integer input zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..canonical import Dim
from ..errors import InvalidInputError
from ..schema import PortSpec, form
from .files import MAX_TENSOR_BYTES
from .find import Layer


@dataclass(frozen=True)
class ModelInput:
    name: str
    shape: tuple[Dim, ...] | None  # None: not even the rank is known
    dtype: str


def checked_feeds(given: dict[str, np.ndarray], inputs: list[ModelInput]) -> dict[str, np.ndarray]:
    """The npz's arrays for the model's inputs: each present, of the input's type and shape, and
    no array for a name the model has no input for (a misspelt name would otherwise go unused)."""
    extra = sorted(set(given) - {model_input.name for model_input in inputs})
    if extra:
        names = ", ".join(repr(model_input.name) for model_input in inputs)
        raise InvalidInputError("inputs", f"{extra[0]!r} is no input of the model (its inputs: {names})")
    feeds = {}
    for model_input in inputs:
        if model_input.name not in given:
            raise InvalidInputError("inputs", f"no array for model input {model_input.name!r}")
        array = given[model_input.name]
        _fed_dtype(model_input)
        if array.dtype.name != model_input.dtype:
            raise InvalidInputError(
                "inputs", f"{model_input.name!r} is {array.dtype.name}, the model takes {model_input.dtype}"
            )
        declared = model_input.shape
        if declared is not None and not (
            array.ndim == len(declared) and all(d is None or d == s for d, s in zip(declared, array.shape, strict=True))
        ):
            raise InvalidInputError(
                "inputs", f"{model_input.name!r} has shape {array.shape}, the model takes {list(declared)}"
            )
        feeds[model_input.name] = array
    return feeds


def _frames_and_classes(layer: Layer) -> tuple[int, int]:
    shape = layer.ports[0].shape or ()
    time_axis = 1 if layer.spec_form == "openvino" else 0
    frames = shape[time_axis] if len(shape) == 3 else None
    classes = shape[2] if len(shape) == 3 else None
    return frames or 1, classes or 2


def _time_major_labels(
    rng: np.random.Generator, others: np.ndarray, shape: tuple[int, ...], longest: int, dtype: np.dtype
) -> np.ndarray:
    """Padded targets of 1..``longest`` labels; an unsigned type holds no pad -1 (spec 3), so
    there every row is a whole target, its neighbours distinct (feasible over a full mask)."""
    if dtype.kind == "u":
        steps = rng.integers(1, max(2, others.size), size=shape) if others.size > 1 else np.zeros(shape, dtype=int)
        return np.take(others, np.cumsum(steps, axis=1) % others.size)
    labels = others[rng.integers(0, others.size, size=shape)]
    lengths = rng.integers(1, longest + 1, size=(shape[0], 1))
    return np.where(np.arange(shape[1])[None, :] < lengths, labels, -1)


def _for_port(rng: np.random.Generator, layer: Layer, port: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    frames, classes = _frames_and_classes(layer)
    blank_port = layer.port("blank_index")
    blank = int(blank_port.constant) if blank_port is not None and blank_port.constant is not None else classes - 1
    longest = max(1, frames // 4)
    if port == "logit_length":
        return rng.integers(max(1, frames // 2), frames + 1, size=shape)
    if port == "blank_index":
        return np.full(shape, blank)
    if port == "label_length":
        return rng.integers(1, longest + 1, size=shape)
    if port == "sequence_mask":
        return (np.arange(shape[0])[:, None] < rng.integers(max(1, frames // 2), frames + 1, size=shape[1])).astype(int)
    if port == "labels":
        others = np.array([c for c in range(classes) if c != blank] or [0])
        if layer.spec_form == "time_major":
            return _time_major_labels(rng, others, shape, longest, dtype)
        return others[rng.integers(0, others.size, size=shape)]
    return rng.normal(size=shape) * 2.0


# What ``ctcop eval`` feeds a model: bool, integer and IEEE float inputs (an npz holds no strings
# without pickle, and bfloat16 or float8 have no npy type that every side reads back).
FED_TYPES = frozenset(
    ["bool", "float16", "float32", "float64"] + [f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)]
)


def _fed_dtype(model_input: ModelInput) -> np.dtype:
    if model_input.dtype not in FED_TYPES:
        raise InvalidInputError(
            "inputs",
            f"model input {model_input.name!r} has element type {model_input.dtype}: ctcop eval feeds bool, "
            "integer, float16, float32 and float64 inputs only",
        )
    return np.dtype(model_input.dtype)


def _static_shape(model_input: ModelInput) -> tuple[int, ...]:
    if model_input.shape is None:
        raise InvalidInputError(
            "inputs", f"model input {model_input.name!r} has a dynamic rank: give --inputs FILE.npz"
        )
    if any(d is None for d in model_input.shape):
        axis = next(i for i, d in enumerate(model_input.shape) if d is None)
        raise InvalidInputError(
            "inputs", f"model input {model_input.name!r} has a dynamic dimension {axis}: give --inputs FILE.npz"
        )
    return tuple(int(d) for d in model_input.shape if d is not None)


def random_feeds(inputs: list[ModelInput], layers: list[Layer], seed: int) -> dict[str, np.ndarray]:
    """Random inputs of the model's static shapes; a dynamic dimension, an element type ctcop does
    not feed, or inputs over the tensor limit together are usage errors, before any is drawn."""
    roles: dict[str, list[tuple[Layer, str, PortSpec]]] = {}
    for layer in layers:
        for port, spec in zip(layer.ports, form(layer.spec_form).inputs, strict=False):
            roles.setdefault(port.value, []).append((layer, port.name, spec))
    planned = [(model_input, _static_shape(model_input), _fed_dtype(model_input)) for model_input in inputs]
    total = sum(math.prod(shape) * dtype.itemsize for _, shape, dtype in planned)  # Python ints: no overflow
    if total > MAX_TENSOR_BYTES:
        raise InvalidInputError(
            "inputs", f"the model's inputs take {total} bytes together, over {MAX_TENSOR_BYTES}: give --inputs FILE.npz"
        )
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for model_input, shape, dtype in planned:
        # A port's values only for an input of the port's rank and an element type it takes: a
        # layer wired otherwise is invalid-layer, and the input gets plain values.
        fitting = [
            (layer, port)
            for layer, port, spec in roles.get(model_input.name, [])
            if len(shape) == spec.rank and dtype.name in spec.types
        ]
        if fitting:
            values = _for_port(rng, *fitting[0], shape, dtype)
        else:
            values = rng.normal(size=shape) if dtype.kind == "f" else np.zeros(shape)
        feeds[model_input.name] = values.astype(dtype)
    return feeds
