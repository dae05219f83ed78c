"""The one comparison rule between a runtime's losses and the reference (spec section 10).

Per element type, from the schema: ``|got - expected| <= atol + rtol * |expected|`` for finite
expected values, computed in float64; +inf, -inf and NaN exactly where the reference has them.
The conformance suite, the tests and the CLI compare through :func:`compare` only. Core module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .schema import raw_schema


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


def tolerance(dtype: str) -> Tolerance:
    """The tolerance for losses of element type ``dtype`` (float16, bfloat16, float32, float64)."""
    entry = raw_schema()["tolerance"][dtype]
    return Tolerance(float(entry["rtol"]), float(entry["atol"]))


def compare(got: npt.ArrayLike, expected: npt.ArrayLike, dtype: str) -> str | None:
    """None when ``got`` conforms to ``expected`` at the tolerance of ``dtype``; otherwise the
    first disagreement, in one line."""
    got_values = np.asarray(got, dtype=np.float64)
    expected_values = np.asarray(expected, dtype=np.float64)
    if got_values.shape != expected_values.shape:
        return f"shape {got_values.shape}, expected {expected_values.shape}"
    limit = tolerance(dtype)
    for i, (g, e) in enumerate(zip(got_values.ravel(), expected_values.ravel(), strict=True)):
        same_special = (np.isnan(g) and np.isnan(e)) or (np.isinf(e) and g == e)
        close = np.isfinite(e) and np.isfinite(g) and abs(g - e) <= limit.atol + limit.rtol * abs(e)
        if not (same_special or close):
            return f"sample {i}: got {float(g)!r}, expected {float(e)!r}"
    return None


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
