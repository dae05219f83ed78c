"""The kernels' exp and ln (ctcop.core.logexp) against the C library's (Python's ``math``, the same on
every x86-64 CPU, unlike numpy's SIMD paths) over the domains the kernels use, and the
recursion's exact fallback where a state's predecessors lie far below the frame's top."""

import math

import mpmath
import numba
import numpy as np
import pytest
from support.oracle import path_sum

import ctcop
from ctcop.core import logexp


@numba.njit
def _exp_all(values: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    for k in range(values.shape[0]):
        out[k] = logexp.exp_nonpositive(values[k])
    return out


@numba.njit
def _log_all(values: np.ndarray) -> np.ndarray:
    out = np.empty_like(values)
    for k in range(values.shape[0]):
        out[k] = logexp.log_normal(values[k])
    return out


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


def test_exp_is_within_one_ulp_on_its_domain() -> None:
    rng = np.random.default_rng(0)
    d = -np.concatenate(
        [
            rng.uniform(0, 1, 200_000),
            rng.uniform(0, 700, 200_000),
            np.exp(rng.uniform(-60, math.log(700), 200_000)),
            [0.0, 5e-324, 1e-300, 0.5 * math.log(2), math.log(2) / 128, 699.999, 700.0],
        ]
    )
    got = _exp_all(d)
    assert ulps(got, np.array([math.exp(value) for value in d])).max() <= 1.0
    assert got[-7] == 1.0


def test_exp_is_within_one_ulp_of_the_exact_value_where_rounding_is_hardest() -> None:
    """Against exact values (mpmath at 200 bits): results whose reduced argument r lies in
    [-ln(2) / 2, -0.25], where exp(r) - 1 is largest against exp(r) and the polynomial's
    roundings weigh most, among them four inputs that an Estrin form rounding h(r) three times
    at its own size put 1.002-1.02 ulp off."""
    rng = np.random.default_rng(5)
    d = -rng.integers(0, 1009, 4000) * math.log(2) + rng.uniform(-math.log(2) / 2, -0.25, 4000)
    hard = [-362.8458333316858, -362.85643834519215, -206.90215462402128, -143.8234573525195]
    d = np.concatenate([d[(d >= -700) & (d <= 0)], hard])
    with mpmath.workprec(200):
        exact = [mpmath.exp(mpmath.mpf(value)) for value in d]
        errors = [
            abs(mpmath.mpf(got) - want) / math.ulp(float(want)) for got, want in zip(_exp_all(d), exact, strict=True)
        ]
    assert max(errors) <= 1.0


def test_exp_flushes_below_minus_700_and_at_minus_infinity() -> None:
    got = _exp_all(np.array([-700.0000001, -708.5, -745.2, -1e300, -np.inf]))
    assert (got == 0.0).all()


def test_log_is_within_three_ulp_on_positive_normals() -> None:
    rng = np.random.default_rng(1)
    v = np.concatenate(
        [
            np.exp(rng.uniform(-708, 709, 200_000)),
            rng.uniform(0.5, 3.0, 200_000),
            1.0 + rng.uniform(-1e-9, 1e-9, 50_000),
            [1.0, 2.0, math.sqrt(2.0), np.nextafter(math.sqrt(2.0), 2), 2.0**-1022, np.finfo(np.float64).max],
        ]
    )
    got = _log_all(v)
    want = np.array([math.log(value) for value in v])
    exact = want == 0.0
    assert (got[exact] == 0.0).all()
    assert ulps(got[~exact], want[~exact]).max() <= 3.0
    assert _log_all(np.array([0.0]))[0] == -np.inf


@pytest.mark.parametrize("gap", [700.0, 760.0, 5000.0, 1e4, 1e6])
def test_states_far_below_the_frame_top_are_exact(gap: float) -> None:
    # Target (0, 1) over three frames, C = 3 (blank 2). Class 1 is `gap` nats less likely than
    # the others at every frame, so the states that hold it sit about `gap` below the frame's top:
    # their sums underflow in the one-exp-per-state form and are redone term by term.
    inputs = np.zeros((3, 1, 3))
    inputs[:, 0, 1] = -gap
    mask = np.ones((3, 1), dtype=np.int8)
    labels = np.array([[0, 1, -1]])
    for merge in (True, False):
        want, want_grad = path_sum(inputs[:, 0], [0, 1], blank=2, merge_repeated=merge)
        assert ctcop.ctc_loss(inputs, mask, labels, merge_repeated=merge)[0] == pytest.approx(want, rel=1e-14)
        loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels, merge_repeated=merge)
        assert loss[0] == pytest.approx(want, rel=1e-14)
        # spec 5, accuracy limit (2): occupancies hold a relative u |alpha + beta| T_i, here u gap 3
        np.testing.assert_allclose(grad[:, 0], want_grad, rtol=1e-12, atol=8 * 2.0**-53 * gap * 3)
