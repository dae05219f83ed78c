"""Which registered defect explains a runtime's failure: the registry's defects as predicates.

The registry (``ctcop/data/defects.json``, read by :mod:`ctcop.defects`; spec 10.1) holds what
each defect is: its runtimes, the statuses it was measured with, its thresholds (``evidence``).
This module holds when a failure shows one (spec 12.2, 13): given a batch of either form
(:func:`read`), the runtime, the failure's status and, for a disagreement, the first
:class:`~ctcop.tolerance.Mismatch`, :func:`explain` names every registered defect whose runtimes
and statuses cover the failure and whose predicate holds on the inputs, with its evidence.
``ctcop eval`` (:mod:`ctcop.layers.causes`) and the conformance suite's failure classes ask it.

Each predicate takes the facts of :class:`Inputs` and the :class:`Failure` and returns its evidence
in words, or None. A predicate reads the inputs as the runtime's kernel sees them: frame counts
and target lengths before any check of the spec's rules (for invalid input too), the processed
target (spec 3.4, 7.3) where the input is valid. Core module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .. import canonical
from ..attributes import Attributes
from ..errors import InvalidInputError
from ..tolerance import Mismatch
from . import STATUSES, Defect, registry

IntArray = npt.NDArray[np.int64]

# A float64 output at or beyond this magnitude is float32's largest value, 3.4028235e38 (D5).
SATURATED_AT_LEAST = 3e38
# A float64 result computed in float32 is off by float32's rounding: at most this, relatively (D4).
FLOAT32_ROUNDING_AT_MOST = 1e-3


@dataclass(frozen=True)
class Inputs:
    """The facts of one batch that the predicates read, batch-major whatever its form.

    ``frames[i]``: sample i's frame count (``logit_length[i]``, or the 1s of mask column i);
    ``labels[i]``: its target's length as given (``label_length[i]``, or the non-pad entries of
    label row i); ``processed[i]``: its target's length after collapse and ``unique`` (spec 3.4,
    7.3), None when the batch breaks a rule, and then ``broken`` the first rule it breaks, in the
    words of :class:`~ctcop.InvalidInputError` ("" for valid input); ``blank``: the blank class
    (``blank_index``, else C-1).
    """

    attributes: Attributes
    dtype: str
    logits: npt.NDArray[np.float64]
    frames: IntArray
    labels: IntArray
    processed: IntArray | None
    blank: int
    broken: str

    @property
    def form(self) -> str:
        """The schema's name of the form: "time_major" or "openvino"."""
        return self.attributes.form

    @property
    def blank_moved(self) -> bool:
        """``blank_index`` is not C-1 (released form only)."""
        return bool(self.blank != self.logits.shape[2] - 1)

    def targets(self) -> IntArray:
        """Target lengths after processing where known, as given otherwise."""
        return self.labels if self.processed is None else self.processed

    def names(self) -> tuple[str, str]:
        """How the form names a sample's target length and frame count."""
        return ("label_length", "logit_length") if self.form == "openvino" else ("labels", "frames")


def read(inputs: Mapping[str, np.ndarray], attributes: Attributes, dtype: str | None = None) -> Inputs:
    """The facts of a batch of the form ``attributes.form`` ("time_major": ``inputs``,
    ``sequence_mask``, ``labels``; "openvino": ``logits``, ``logit_length``, ``labels``,
    ``label_length``, optional ``blank_index``); ``dtype`` the logits' element type as declared
    (default: the array's). Malformed arrays (wrong ranks) raise."""
    if attributes.form == "time_major":
        logits = np.asarray(inputs["inputs"]).swapaxes(0, 1)
        frames = canonical.as_int64(np.asarray(inputs["sequence_mask"])).sum(axis=0)
        labels = (np.asarray(inputs["labels"]) != -1).sum(axis=1)
        blank = logits.shape[2] - 1
    else:
        logits = np.asarray(inputs["logits"])
        frames = canonical.as_int64(np.asarray(inputs["logit_length"]))
        labels = canonical.as_int64(np.asarray(inputs["label_length"]))
        blank = _blank(inputs.get("blank_index"), logits.shape[2])
    processed, broken = None, ""
    try:
        processed = _batch(inputs, attributes).target_lengths
    except InvalidInputError as error:
        broken = str(error)
    return Inputs(
        attributes,
        dtype or logits.dtype.name,
        np.asarray(logits, dtype=np.float64),
        frames,
        canonical.as_int64(labels),
        processed,
        blank,
        broken,
    )


def _blank(given: np.ndarray | None, classes: int) -> int:
    """The blank class a released batch names (C-1 when ``blank_index`` is absent or empty)."""
    if given is None or np.asarray(given).size != 1:
        return classes - 1
    return int(canonical.as_int64(np.asarray(given).reshape(1))[0])


def _batch(inputs: Mapping[str, np.ndarray], attributes: Attributes) -> canonical.CanonicalBatch:
    if attributes.form == "time_major":
        return canonical.from_time_major(inputs["inputs"], inputs["sequence_mask"], inputs["labels"], **attributes)
    x = inputs
    return canonical.from_openvino(
        x["logits"], x["logit_length"], x["labels"], x["label_length"], x.get("blank_index"), **attributes
    )


@dataclass(frozen=True)
class Failure:
    """How a runtime failed: ``status`` one of the registry's (:data:`ctcop.defects.STATUSES`;
    ``ctcop eval``'s "disagree" is "fail") and, for a disagreement, the first mismatch."""

    status: str
    mismatch: Mismatch | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"failure status {self.status!r} is not one of {', '.join(STATUSES)}")

    def pair(self) -> tuple[float, float] | None:
        """(got, expected) of the first sample off, where the failure says."""
        found = self.mismatch
        return None if found is None or found.kind != "loss" else (found.got, found.expected)


def _first(flags: npt.NDArray[np.bool_]) -> int | None:
    return int(np.argmax(flags)) if flags.any() else None


def active_frames(x: Inputs) -> npt.NDArray[np.bool_]:
    """[N, T]: the frames a sample's frame count makes active (counts clipped to [0, T])."""
    frames = x.logits.shape[1]
    return np.arange(frames)[None, :] < np.clip(x.frames, 0, frames)[:, None]


def empty_target(x: Inputs, failure: Failure) -> str | None:
    """D1: a sample whose target is empty (the kernel dies on it)."""
    i = _first(x.labels == 0)
    if i is None:
        return None
    return f"sample {i} has an empty target ({'label_length 0' if x.form == 'openvino' else 'every label is -1'})"


def longer_than_frames(x: Inputs, failure: Failure) -> str | None:
    """D2: a sample whose target, processed, is longer than its frames (+inf, not an error)."""
    i = _first(x.targets() > x.frames)
    if i is None:
        return None
    target, frames = x.names()
    return f"sample {i} has {target} {x.labels[i]} > {frames} {x.frames[i]}"


def exponent_out_of_range(x: Inputs, failure: Failure) -> str | None:
    """D3: a finite logit in an active frame at or above the registry's ``logit_at_least``, or an
    active frame whose largest finite logit is at or below ``frame_max_at_most``; in a mismatch,
    a non-finite loss where a finite one is expected."""
    pair = failure.pair()
    if pair is not None and (abs(pair[0]) < SATURATED_AT_LEAST or not math.isfinite(pair[1])):
        return None
    finite = np.where(np.isfinite(x.logits), x.logits, -np.inf)
    frame_max = finite.max(axis=2, initial=-np.inf)
    read = active_frames(x) & np.isfinite(frame_max)
    if not read.any():
        return None
    top, low = float(frame_max[read].max()), float(frame_max[read].min())
    evidence = registry()["D3"].evidence
    if top >= evidence["logit_at_least"] or low <= evidence["frame_max_at_most"]:
        return f"largest logit {top:.6g}, smallest frame maximum {low:.6g}"
    return None


def _on_float64(x: Inputs, failure: Failure, shows: Callable[[float, float], bool]) -> str | None:
    """Float64 logits and, where the failure has a mismatch, a (got, expected) pair that ``shows``."""
    if x.dtype != "float64":
        return None
    pair = failure.pair()
    if pair is None:
        return "float64 logits"
    got, expected = pair
    return f"float64 logits, {got!r} where {expected!r} is expected" if shows(got, expected) else None


def _float32_rounding(got: float, expected: float) -> bool:
    finite = math.isfinite(got) and math.isfinite(expected)
    return finite and abs(got - expected) <= FLOAT32_ROUNDING_AT_MOST * max(abs(expected), 1e-30)


def _saturated(got: float, expected: float) -> bool:
    return expected == math.inf and math.isfinite(got) and abs(got) >= SATURATED_AT_LEAST


def float64_in_float32(x: Inputs, failure: Failure) -> str | None:
    """D4: float64 logits; in a mismatch, finite values off by no more than float32's rounding."""
    return _on_float64(x, failure, _float32_rounding)


def saturated_infinity(x: Inputs, failure: Failure) -> str | None:
    """D5: float64 logits; in a mismatch, float32's largest value where +inf is expected."""
    return _on_float64(x, failure, _saturated)


def no_frames(x: Inputs, failure: Failure) -> str | None:
    """D8: no sample of a non-empty batch has a frame."""
    if x.frames.size == 0 or (x.frames > 0).any():
        return None
    return f"no sample has a frame (every {x.names()[1]} is 0)"


def shortened_to_fit(x: Inputs, failure: Failure) -> str | None:
    """D9: a sample whose target as given is longer than its frames, and fits once processed."""
    if x.processed is None:
        return None
    i = _first((x.labels > x.frames) & (x.processed <= x.frames))
    if i is None:
        return None
    target, frames = x.names()
    return f"sample {i} has {target} {x.labels[i]} > {frames} {x.frames[i]}, {x.processed[i]} after processing"


def collapsed(x: Inputs, failure: Failure) -> str | None:
    """D10: ``preprocess_collapse_repeated`` is set (its losses are wrong whether or not it
    shortens a target: the registry's cases include empty targets)."""
    return "preprocess_collapse_repeated is true" if x.attributes["preprocess_collapse_repeated"] else None


def invalid_released(x: Inputs, failure: Failure) -> str | None:
    """D11: released input that breaks rule 7.1 or 7.2 (the first broken rule)."""
    if x.form != "openvino" or not x.broken:
        return None
    return x.broken


Predicate = Callable[[Inputs, Failure], str | None]

PREDICATES: dict[str, Predicate] = {
    "D1": empty_target,
    "D2": longer_than_frames,
    "D3": exponent_out_of_range,
    "D4": float64_in_float32,
    "D5": saturated_infinity,
    "D8": no_frames,
    "D9": shortened_to_fit,
    "D10": collapsed,
    "D11": invalid_released,
}


@dataclass(frozen=True)
class Cause:
    """A registered defect that explains a failure, and what in the inputs shows it."""

    defect: Defect
    evidence: str

    def text(self) -> str:
        """``D1 (spec 4.4): <title> — <evidence>``, the registry's words for the defect."""
        return f"{self.defect.label} — {self.evidence}"


def explain(x: Inputs, failure: Failure, runtime: str) -> list[Cause]:
    """Every registered defect, in the registry's order, whose runtimes include ``runtime`` (a
    conformance runtime's name: "openvino" is OpenVINO's own kernel, "openvino-ir",
    "openvino-custom", "openvino-onnx" ctcop's forms on OpenVINO), whose statuses include
    ``failure.status`` and whose predicate holds."""
    causes = []
    for defect in registry().defects:
        test = PREDICATES.get(defect.id)
        if test is None or runtime not in defect.runtimes or failure.status not in defect.statuses:
            continue
        evidence = test(x, failure)
        if evidence is not None:
            causes.append(Cause(defect, evidence))
    return causes
