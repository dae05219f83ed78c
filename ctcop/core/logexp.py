"""``exp`` and ``ln`` for the compiled kernels, written so that a loop calling them vectorises.

``math.exp``/``math.log`` compile to one libm call per element, which no loop vectoriser widens.
These two are plain float64 arithmetic with a bit cast, so LLVM widens them to the CPU's vector
width. Rules they keep: no table (a lookup is a gather, which AVX2 does not vectorise), no
int64/float64 conversion (integers move through a float's low bits by adding 2**52), no fused
multiply-add (numba does not contract without fast-math), so every CPU computes the same bits;
polynomials by Estrin's scheme (short dependency chains, so the CPU overlaps a loop's elements).

* :func:`exp_nonpositive`: ``exp(d)`` for ``d <= 0`` within 1 ulp; exactly 0 below :data:`EXP_FLUSH`
  (see :data:`EXACT_BELOW`);
* :func:`log_normal`: ``ln(v)`` for a positive normal ``v`` within 3 ulp, ``-inf`` for 0.

Both are tested against the C library's in tests/unit/test_logexp.py.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .jit import compiled

LN2_HI = 6.93147180369123816490e-01  # ln 2 rounded to 32 significant bits: k * LN2_HI is exact
LN2_LO = 1.90821492927058770002e-10  # ln 2 - LN2_HI
SQRT2 = 1.41421356237309514547
EXP_FLUSH = -700.0  # exp(d) below this is returned as 0 (< 1e-304; also keeps every intermediate normal)
# A sum of terms exp(d) below this may have lost a flushed term; the kernels redo it exactly.
EXACT_BELOW = 2.0**-900
# exp: d = k ln(2) + r, exp(d) = 2**k * exp(r), |r| <= ln(2) / 2; k * LN2_HI is exact for |k| < 2**21
_PER_LN2 = 1.0 / math.log(2.0)
_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(14))  # 1 / n!
# 2**52 + 1023: an integer k >= -1023 added to it is exact, and the sum's low 52 bits hold k + 1023,
# the biased exponent of 2**k (the bits above them are shifted out); ln subtracts it the other way
_BIASED = 2.0**52 + 1023.0
_MANTISSA = (1 << 52) - 1
_EXPONENT_ZERO = 1023 << 52
_TWO_52_BITS = (1023 + 52) << 52  # 2**52: a positive integer below it in the low bits is the float 2**52 + it


def _bitcast(source: types.Type, target: types.Type, llvm_target: ir.Type) -> Any:
    """A numba intrinsic that reinterprets the bits of a ``source`` value as a ``target``."""

    def typer(context: Any, value: types.Type) -> Any:
        if value != source:
            return None

        def codegen(context: Any, builder: ir.IRBuilder, signature: Any, args: list[ir.Value]) -> ir.Value:
            return builder.bitcast(args[0], llvm_target)

        return target(source), codegen

    return cast(Any, intrinsic(typer))


_float_bits = _bitcast(types.float64, types.int64, ir.IntType(64))  # the IEEE-754 bits of a float64
_bits_float = _bitcast(types.int64, types.float64, ir.DoubleType())  # the float64 of IEEE-754 bits


@compiled
def exp_nonpositive(d: float) -> float:
    """``exp(d)`` for ``d <= 0`` (-inf included) within 1 ulp; 0 below :data:`EXP_FLUSH`.

    Cody-Waite reduction ``d = k ln(2) + r``, ``|r| <= ln(2) / 2``, then Taylor to degree 13 by
    Estrin's scheme (a dependent chain of 12 operations, not Horner's 24)."""
    clamped = d if d > EXP_FLUSH else EXP_FLUSH
    k = np.floor(clamped * _PER_LN2 + 0.5)  # an integer in float64: no conversion, which AVX2 lacks
    r = (clamped - k * LN2_HI) - k * LN2_LO
    r2 = r * r  # h(r) = sum of r**j / (j + 2)! by Estrin's scheme: short dependency chains
    r4 = r2 * r2
    h4 = (_TAYLOR[6] + _TAYLOR[7] * r) + (_TAYLOR[8] + _TAYLOR[9] * r) * r2
    h8 = (_TAYLOR[10] + _TAYLOR[11] * r) + (_TAYLOR[12] + _TAYLOR[13] * r) * r2
    rest = (_TAYLOR[4] + _TAYLOR[5] * r) * r2 + (h4 * r4 + h8 * (r4 * r4))
    h = _TAYLOR[2] + (_TAYLOR[3] * r + rest)  # one rounding at h's size, as Horner's last step
    p = r + r2 * h  # exp(r) - 1
    scale = _bits_float(_float_bits(k + _BIASED) << 52)
    result: float = scale + scale * p
    return result if d >= EXP_FLUSH else 0.0


@compiled
def log_normal(v: float) -> float:
    """``ln(v)`` for a positive normal ``v`` within 3 ulp; -inf for ``v == 0``.

    ``e ln(2) + 2 atanh(f)`` with the series to ``f**23`` by Estrin's scheme (a dependent chain of 9
    operations, not Horner's 22)."""
    bits = _float_bits(v)
    exponent = _bits_float((bits >> 52) | _TWO_52_BITS) - _BIASED  # exact, and no conversion
    m = _bits_float((bits & _MANTISSA) | _EXPONENT_ZERO)
    high = m > SQRT2
    m = m * 0.5 if high else m
    e = exponent + 1.0 if high else exponent
    f = (m - 1.0) / (m + 1.0)
    f2 = f * f
    f4 = f2 * f2  # s(f2) = sum of f2**j / (2 j + 1) by Estrin's scheme, as for exp
    f8 = f4 * f4
    s0 = (1.0 / 3.0 + (1.0 / 5.0) * f2) + (1.0 / 7.0 + (1.0 / 9.0) * f2) * f4
    s4 = (1.0 / 11.0 + (1.0 / 13.0) * f2) + (1.0 / 15.0 + (1.0 / 17.0) * f2) * f4
    s8 = (1.0 / 19.0 + (1.0 / 21.0) * f2) + (1.0 / 23.0) * f4
    s = 1.0 + f2 * ((s0 + s4 * f8) + s8 * (f8 * f8))
    result: float = e * LN2_HI + (2.0 * f * s + e * LN2_LO)
    return result if v > 0.0 else -math.inf
