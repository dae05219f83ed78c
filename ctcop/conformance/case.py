"""A conformance case: the one representation the tests, the corpus generator, the corpus reader
and the runner share (spec section 10).

A :class:`Case` is one call of either form: ``spec`` (the time-major inputs of spec section 2,
``inputs``, ``sequence_mask``, ``labels``) or ``released`` (OpenVINO's form of section 7,
``logits``, ``logit_length``, ``labels``, ``label_length`` and, when given, ``blank_index``),
its attributes, and what the corpus records about it (tags, description, whether a value or a
refusal is expected, what vouches for its values). Its inputs are a mapping from port name to
array; a case read from the corpus reads (or, for a scale case, draws) them when first used
(:class:`LazyArrays`). Its expected values are the stored ones when it has them and otherwise the
reference's (spec 4, 5; section 7 for the released form).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..attributes import Attributes
from ..reference import ctc_loss, ctc_loss_grad, openvino_ctc_loss, openvino_ctc_loss_grad

FLOAT_TYPES = ("float16", "bfloat16", "float32", "float64")
# The float input of each form.
LOGITS = {"spec": "inputs", "released": "logits"}
ATTRIBUTE_FORMS = {"spec": "time_major", "released": "openvino"}


class LazyArrays(Mapping[str, np.ndarray]):
    """Arrays by name whose names, element types and shapes are known before the arrays are read:
    ``entries`` ({"name", "dtype", "shape", ...} each, in port order) up front, ``load()`` (all
    arrays by name) on first use."""

    def __init__(self, entries: Sequence[Mapping[str, Any]], load: Callable[[], dict[str, np.ndarray]]) -> None:
        self.entries = [dict(entry) for entry in entries]
        self._load = load
        self._arrays: dict[str, np.ndarray] | None = None

    def _loaded(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            self._arrays = self._load()
        return self._arrays

    def __getitem__(self, name: str) -> np.ndarray:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(entry["name"] for entry in self.entries)

    def __len__(self) -> int:
        return len(self.entries)


def declared_entries(arrays: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Name, element type and shape of each array, in order, without reading a lazy one."""
    if isinstance(arrays, LazyArrays):
        return [dict(entry) for entry in arrays.entries]
    return [{"name": name, "dtype": value.dtype.name, "shape": list(value.shape)} for name, value in arrays.items()]


def reference_loss(form: str, inputs: Mapping[str, np.ndarray], attributes: Mapping[str, bool]) -> np.ndarray:
    """The reference loss [N] of the inputs of ``form`` ("spec" or "released")."""
    arguments: dict[str, Any] = {**inputs, **attributes}
    return ctc_loss(**arguments) if form == "spec" else openvino_ctc_loss(**arguments)


def reference_grad(form: str, inputs: Mapping[str, np.ndarray], attributes: Mapping[str, bool]) -> np.ndarray:
    """The reference gradient: [T, N, C] for the spec form (``ctcop.ctc_loss_grad``), the gradient
    with respect to ``logits`` [N, T, C] for the released form (``openvino_ctc_loss_grad``)."""
    arguments: dict[str, Any] = {**inputs, **attributes}
    return (ctc_loss_grad(**arguments) if form == "spec" else openvino_ctc_loss_grad(**arguments))[1]


def warm() -> None:
    """Load the reference's compiled kernels (loss and gradient, both forms) into this process.
    A fork server calls it once, so that each worker it forks starts with them: loading them from
    numba's cache takes a third of a second in each new process."""
    spec: dict[str, np.ndarray] = {
        "inputs": np.zeros((2, 1, 3)),
        "sequence_mask": np.ones((2, 1), np.int32),
        "labels": np.array([[0, -1]]),
    }
    released: dict[str, np.ndarray] = {
        "logits": np.zeros((1, 2, 3)),
        "logit_length": np.array([2]),
        "labels": np.array([[0, 0]]),
        "label_length": np.array([1]),
    }
    for form, inputs in (("spec", spec), ("released", released)):
        reference_loss(form, inputs, {})
        reference_grad(form, inputs, {})


@dataclass(frozen=True)
class Case:
    """One case of either form.

    ``expect`` is "value" (compare with the expected values) or "reject" (a conforming runtime
    refuses the input: ``rule`` is the spec rule it breaks, ``error`` ctcop's message).
    ``expected`` holds stored expected values by name ("loss", "grad"); None means the reference
    computes them. ``generator`` is the recipe a scale case's inputs are drawn from; ``folder``
    where the case is stored (None for a case built in memory)."""

    id: str
    form: str
    inputs: Mapping[str, np.ndarray]
    attributes: Attributes
    tags: tuple[str, ...] = ()
    description: str = ""
    expect: str = "value"
    rule: str | None = None
    error: str | None = None
    provenance: str | None = None
    brute_force_paths: int | None = None
    hand_worked: Mapping[str, Any] | None = None
    generator: Mapping[str, Any] | None = None
    expected: Mapping[str, np.ndarray] | None = field(default=None, repr=False)
    folder: Path | None = field(default=None, repr=False)

    @classmethod
    def spec(
        cls,
        name: str,
        inputs: np.ndarray,
        sequence_mask: np.ndarray,
        labels: np.ndarray,
        attributes: Attributes | None = None,
    ) -> Case:
        """A spec-form case named ``name``: logits [T, N, C], mask [T, N], labels [N, T]."""
        arrays = {"inputs": inputs, "sequence_mask": sequence_mask, "labels": labels}
        return cls(name, "spec", arrays, Attributes.of() if attributes is None else attributes)

    def stored_in(self) -> Path:
        """The folder the case was read from; a case built in memory has none (ValueError)."""
        if self.folder is None:
            raise ValueError(f"case {self.id!r} was built in memory, not read from a corpus folder")
        return self.folder

    def declared(self) -> list[dict[str, Any]]:
        """Each input's name, element type and shape, in port order (nothing is read or drawn)."""
        return declared_entries(self.inputs)

    @property
    def logits_name(self) -> str:
        return LOGITS[self.form]

    @property
    def logits_dtype(self) -> str | None:
        """The logits' element type as declared (bfloat16 even when stored as bits); None without logits."""
        return next((str(e["dtype"]) for e in self.declared() if e["name"] == self.logits_name), None)

    @property
    def tolerance(self) -> str | None:
        """The element type whose tolerance applies: the logits', None when it is no float type."""
        dtype = self.logits_dtype
        return dtype if dtype in FLOAT_TYPES else None

    def astype(self, dtype: Any) -> Case:
        """This case with its logits converted to ``dtype``."""
        inputs = dict(self.inputs)
        inputs[self.logits_name] = np.asarray(inputs[self.logits_name]).astype(dtype)
        return replace(self, inputs=inputs)

    def with_attributes(self, **attributes: bool) -> Case:
        """This case with ``attributes`` changed, its id suffixed with the changed attributes."""
        changed = self.attributes.replace(**attributes)
        return replace(self, id=f"{self.id}[{changed.label()}]", attributes=changed)

    def handed(self) -> Case:
        """This case as a runtime receives it (spec section 10): the same fields, and inputs that
        are fresh read-only copies in a fresh dict. Whatever a runtime does to what it is handed
        (an in-place write raises numpy's ``ValueError``) leaves this case, and so every later
        evaluation, unchanged."""
        arrays = {}
        for name, array in self.inputs.items():
            private = np.array(array, copy=True)
            private.flags.writeable = False
            arrays[name] = private
        hand_worked, generator = copy.deepcopy(self.hand_worked), copy.deepcopy(self.generator)
        return replace(self, inputs=arrays, hand_worked=hand_worked, generator=generator)

    def _expected(self, name: str, compute: Callable[..., np.ndarray]) -> np.ndarray | None:
        if self.expect != "value":
            return None
        if self.expected is None:
            return compute(self.form, self.inputs, self.attributes)
        return self.expected.get(name)

    @cached_property
    def expected_loss(self) -> np.ndarray | None:
        """The expected loss [N] (None for a case that must be rejected)."""
        return self._expected("loss", reference_loss)

    @cached_property
    def expected_grad(self) -> np.ndarray | None:
        """The expected gradient (see :func:`reference_grad`; None for a case that must be rejected)."""
        return self._expected("grad", reference_grad)
