"""Rounding a float64 result once to the logits' element type (spec section 6). Core module.

numpy rounds float64 to float16 and float32 directly, to nearest even. ml_dtypes converts float64
to bfloat16 through float32, which rounds twice: a value just above a bfloat16 midpoint can land
on the midpoint in float32 and then round to even, the wrong way. The float32 step here rounds to
odd instead (toward zero, then the last bit set when inexact), after which the rounding to
bfloat16 is the correctly rounded one: float32 has 16 more bits than bfloat16.
"""

from __future__ import annotations

import numpy as np


def round_once(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` (float64) rounded to nearest even in ``dtype`` with a single rounding. Overflow to
    infinity and underflow to zero are what rounding means here, whatever ``np.seterr`` says."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":  # float16, float32, float64 in any byte order: numpy rounds once
        with np.errstate(over="ignore", under="ignore"):
            direct: np.ndarray = values.astype(dtype)
        return direct
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        narrow = values.astype(np.float32)
        away = np.abs(narrow.astype(np.float64)) > np.abs(values)
        narrow = np.where(away, np.nextafter(narrow, np.float32(0.0)), narrow)
        inexact = np.isfinite(values) & (narrow.astype(np.float64) != values)
    odd = (narrow.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)
    rounded: np.ndarray = odd.astype(dtype)
    return rounded
