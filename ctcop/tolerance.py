"""The one comparison rule between a runtime's losses and the reference (spec section 10).

Per element type, from the schema: ``|got - expected| <= atol + rtol * |expected|`` for finite
expected values, computed in float64; +inf, -inf and NaN exactly where the reference has them.
The conformance suite, the tests and the CLI compare through :func:`compare` (one line of text)
or :func:`mismatch` (the same disagreement as a :class:`Mismatch`) only. Core module.

A disagreement is a :class:`Mismatch`: facts that the conformance suite classifies and renders
into its messages, never reads back out of them. Its ``kind`` is one of :data:`KINDS`:

- ``"shape"``: the loss's ``shape`` is not the reference's ``expected_shape``;
- ``"loss"``: the loss of ``sample`` is ``got`` where the reference has ``expected`` (the first
  sample off by this module's rule);
- ``"gradient-shape"``: the gradient's ``shape`` is not the reference's ``expected_shape``;
- ``"gradient"``: the gradient's worst ``entry`` (its index; in ``sample``) is ``got`` where the
  reference has ``expected``, ``allowed`` the bound there, ``off`` of ``entries`` entries off (spec
  5; the rule: :mod:`ctcop.conformance.verdict`);
- ``"accepted-invalid-input"``: a case that must be rejected got a number: ``got`` for the
  offending ``sample`` (-1 when every sample had to be NaN and ``got`` is the first number), or a
  loss of ``shape`` where the batch has ``expected_shape`` (spec 3.1/3.3, 7.1/7.2, 11.5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .schema import raw_schema

KINDS = ("shape", "loss", "gradient-shape", "gradient", "accepted-invalid-input")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class Mismatch:
    """Where a runtime's answer departs from the reference (module docstring: the kinds and the
    fields each one sets)."""

    kind: str
    sample: int = -1
    got: float = math.nan
    expected: float = math.nan
    shape: tuple[int, ...] = ()
    expected_shape: tuple[int, ...] = ()
    entry: tuple[int, ...] = ()
    allowed: float = math.nan
    off: int = 0
    entries: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"mismatch kind {self.kind!r} is not one of {', '.join(KINDS)}")


def tolerance(dtype: str) -> Tolerance:
    """The tolerance for losses of element type ``dtype`` (float16, bfloat16, float32, float64)."""
    entry = raw_schema()["tolerance"][dtype]
    return Tolerance(float(entry["rtol"]), float(entry["atol"]))


def mismatch(got: npt.ArrayLike, expected: npt.ArrayLike, dtype: str) -> Mismatch | None:
    """None when ``got`` conforms to ``expected`` at the tolerance of ``dtype``; otherwise the
    first disagreement (kind ``"shape"`` or ``"loss"``)."""
    got_values = np.asarray(got, dtype=np.float64)
    expected_values = np.asarray(expected, dtype=np.float64)
    if got_values.shape != expected_values.shape:
        return Mismatch("shape", shape=got_values.shape, expected_shape=expected_values.shape)
    limit = tolerance(dtype)
    for i, (g, e) in enumerate(zip(got_values.ravel(), expected_values.ravel(), strict=True)):
        same_special = (np.isnan(g) and np.isnan(e)) or (np.isinf(e) and g == e)
        close = np.isfinite(e) and np.isfinite(g) and abs(g - e) <= limit.atol + limit.rtol * abs(e)
        if not (same_special or close):
            return Mismatch("loss", sample=i, got=float(g), expected=float(e))
    return None


def describe(found: Mismatch) -> str:
    """A ``"shape"`` or ``"loss"`` mismatch in one line."""
    if found.kind == "shape":
        return f"shape {found.shape}, expected {found.expected_shape}"
    return f"sample {found.sample}: got {found.got!r}, expected {found.expected!r}"


def compare(got: npt.ArrayLike, expected: npt.ArrayLike, dtype: str) -> str | None:
    """None when ``got`` conforms to ``expected`` at the tolerance of ``dtype``; otherwise the
    first disagreement, in one line (:func:`mismatch`, described)."""
    found = mismatch(got, expected, dtype)
    return None if found is None else describe(found)


def max_errors(got: npt.ArrayLike, expected: npt.ArrayLike) -> tuple[float, float]:
    """Largest absolute and relative difference over the samples: 0 where both hold the same
    special value (+inf, -inf, NaN), +inf where only one of them is finite."""
    got_values = np.asarray(got, dtype=np.float64).ravel()
    expected_values = np.asarray(expected, dtype=np.float64).ravel()
    if got_values.shape != expected_values.shape:
        return float("nan"), float("nan")
    if got_values.size == 0:
        return 0.0, 0.0
    same_special = (np.isnan(got_values) & np.isnan(expected_values)) | (
        np.isinf(expected_values) & (got_values == expected_values)
    )
    both_finite = np.isfinite(got_values) & np.isfinite(expected_values)
    with np.errstate(invalid="ignore"):
        difference = np.where(both_finite, np.abs(got_values - expected_values), np.where(same_special, 0.0, np.inf))
    scale = np.maximum(np.abs(np.where(both_finite, expected_values, 1.0)), np.finfo(np.float64).tiny)
    return float(difference.max()), float((difference / scale).max())
