"""The one comparison rule between a runtime's answers and the reference (spec section 10.2).

For the loss of each sample, and elementwise for the gradient, in float64::

    |got - expected| <= eps(type) |expected| + UNITS eps(wide) max(1, |loss_i|)

``eps`` the machine epsilon, ``type`` the answer's element type, ``wide`` float64 for float64 and
float32 otherwise, ``loss_i`` the reference's loss of the sample (1 where it is not finite); +inf,
-inf and NaN exactly where the reference has them. The first term is the two roundings to ``type``
(the reference's and the runtime's: half an eps each); the second a correct computation in
``wide``, whose error is a small multiple of eps(wide) |loss_i| (the loss and the gradient's
occupancies inherit the absolute error of alpha + beta, spec 5). ``UNITS`` and the epsilons are
the schema's ("tolerance"). Every comparison (conformance suite, ``ctcop eval``, bench, tests) goes
through :func:`mismatch` / :func:`compare` and :func:`allowance` only. Core module.
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
    """The rule's constants for one element type (module docstring), and the ``allclose`` form
    that contains it, ``|got - expected| <= atol + rtol |expected|``, for tools that take only
    that form (an ONNX backend test's data.json): rtol = eps(type) + UNITS eps(wide), atol =
    UNITS eps(wide)."""

    eps: float
    wide_eps: float
    units: float

    @property
    def rtol(self) -> float:
        return self.eps + self.units * self.wide_eps

    @property
    def atol(self) -> float:
        return self.units * self.wide_eps


@dataclass(frozen=True)
class Mismatch:
    """Where a runtime's answer departs from the reference: facts that the conformance suite
    classifies and renders into its messages, never reads back out of them. ``kind`` is one of
    :data:`KINDS`:

    - ``"shape"``: the loss's ``shape`` is not the reference's ``expected_shape``;
    - ``"loss"``: the loss of ``sample`` is ``got`` where the reference has ``expected`` and the
      rule allows ``allowed`` (the first sample off by this module's rule);
    - ``"gradient-shape"``: the gradient's ``shape`` is not the reference's ``expected_shape``;
    - ``"gradient"``: the gradient's worst ``entry`` (its index; in ``sample``) is ``got`` where the
      reference has ``expected``, ``allowed`` the bound there, ``off`` of ``entries`` entries off
      (spec 5; :mod:`ctcop.conformance.verdict`);
    - ``"accepted-invalid-input"``: a case that must be rejected got a number: ``got`` for the
      offending ``sample`` (-1 when every sample had to be NaN and ``got`` is the first number), or
      a loss of ``shape`` where the batch has ``expected_shape`` (spec 3.1/3.3, 7.1/7.2, 11.5)."""

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
    """The rule's constants for answers of element type ``dtype`` (float16, bfloat16, float32, float64)."""
    schema = raw_schema()["tolerance"]
    return Tolerance(float(schema[dtype]["eps"]), float(schema[dtype]["wide_eps"]), float(schema["units"]))


def allowance(expected: npt.ArrayLike, loss: npt.ArrayLike, dtype: str) -> np.ndarray:
    """The rule's bound for each element of ``expected``, whose samples' reference losses
    ``loss`` broadcast against it (the loss itself for losses); the gradient's bound for
    :mod:`ctcop.conformance.verdict`."""
    limit = tolerance(dtype)
    scale = np.abs(np.asarray(loss, dtype=np.float64))
    scale = np.where(np.isfinite(scale), np.maximum(scale, 1.0), 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.abs(np.nan_to_num(np.asarray(expected, dtype=np.float64), posinf=0.0, neginf=0.0))
        bound: np.ndarray = limit.eps * magnitude + limit.units * limit.wide_eps * scale
    return bound


# OpenVINO's inference precisions narrower than float32 and the element types they compute in.
REDUCED_TYPES = {"bf16": "bfloat16", "f16": "float16"}


def reduced_range(precision: str) -> float:
    """The largest finite value of ``precision``'s element type."""
    return float(np.finfo(np.float16).max) if precision == "f16" else float(np.finfo(np.float32).max)


def reduced_allowance(
    loss: npt.ArrayLike, frames: npt.ArrayLike, largest: npt.ArrayLike, classes: int, precision: str
) -> np.ndarray:
    """Spec 10.5: the bound on each sample's loss computed with every operation rounded to
    ``precision`` (``bf16`` or ``f16``), for reference losses ``loss``, ``frames`` active frames
    T_i, the largest logit magnitude X_i over them and C ``classes``::

        eps(p) ((1 + T_i / 2) |loss_i| + T_i (2 X_i + ln C + 1))

    and no bound (an overflow to infinity included) where |loss_i| exceeds p's range. Each frame's
    log-softmax rounds values of magnitude up to X_i + ln C, and their errors can repeat from
    frame to frame: T_i (2 X_i + ln C + 1). Each frame's forward step rounds alpha, whose
    magnitude grows to |loss_i|: half an eps of up to |loss_i| per frame, T_i |loss_i| / 2 in
    all, one-signed where a long sum stops growing (a term below half an ulp of alpha is lost).
    The output is rounded once. A target's length enters through |loss_i| only."""
    eps = tolerance(REDUCED_TYPES[precision]).eps
    values = np.abs(np.asarray(loss, dtype=np.float64))
    magnitude = np.where(np.isfinite(values), values, 0.0)
    t = np.asarray(frames, dtype=np.float64)
    x = np.nan_to_num(np.asarray(largest, dtype=np.float64), nan=0.0, posinf=0.0)
    bound = eps * (magnitude * (1.0 + t / 2.0) + t * (2.0 * x + math.log(max(classes, 1)) + 1.0))
    beyond: np.ndarray = np.where(magnitude > reduced_range(precision), np.inf, bound)
    return beyond


def mismatch(
    got: npt.ArrayLike, expected: npt.ArrayLike, dtype: str, reduced: npt.ArrayLike | None = None
) -> Mismatch | None:
    """None when the losses ``got`` conform to ``expected`` by the rule at element type ``dtype``
    (or, where ``reduced`` gives a larger bound per sample, :func:`reduced_allowance`, by that);
    otherwise the first disagreement (kind ``"shape"`` or ``"loss"``)."""
    got_values = np.asarray(got, dtype=np.float64)
    expected_values = np.asarray(expected, dtype=np.float64)
    if got_values.shape != expected_values.shape:
        return Mismatch("shape", shape=got_values.shape, expected_shape=expected_values.shape)
    bounds = allowance(expected_values, expected_values, dtype)
    if reduced is not None:
        bounds = np.maximum(bounds, np.asarray(reduced, dtype=np.float64).reshape(bounds.shape))
    for i, (g, e, bound) in enumerate(zip(got_values.ravel(), expected_values.ravel(), bounds.ravel(), strict=True)):
        same_special = (np.isnan(g) and np.isnan(e)) or (np.isinf(e) and g == e)
        close = np.isfinite(e) and (np.isfinite(g) or bound == np.inf) and abs(g - e) <= bound
        if not (same_special or close):
            allowed = float(bound) if np.isfinite(e) else 0.0
            return Mismatch("loss", sample=i, got=float(g), expected=float(e), allowed=allowed)
    return None


def describe(found: Mismatch) -> str:
    """A ``"shape"`` or ``"loss"`` mismatch in one line."""
    if found.kind == "shape":
        return f"shape {found.shape}, expected {found.expected_shape}"
    allowed = f" (allowed {found.allowed:.3g})" if math.isfinite(found.expected) else ""
    return f"sample {found.sample}: got {found.got!r}, expected {found.expected!r}{allowed}"


def compare(got: npt.ArrayLike, expected: npt.ArrayLike, dtype: str) -> str | None:
    """None when ``got`` conforms to ``expected`` by the rule at ``dtype``; otherwise the first
    disagreement, in one line (:func:`mismatch`, described)."""
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
