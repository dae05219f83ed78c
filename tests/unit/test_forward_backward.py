"""The plain forward-backward (ctcop.forward_backward) against enumeration and finite differences,
and the compiled kernels of both forms (ctcop.ctc_loss*, ctcop.openvino_ctc_loss*) against it."""

import numpy as np
import pytest

import ctcop
from ctcop import canonical
from ctcop.conformance.bruteforce import path_sum
from ctcop.forward_backward import batch_loss_and_grad, ctc_loss_and_grad, sample_loss_and_grad

# The kernels and the plain form compute the same sums in a different order (the kernels: one exp
# per state and frame, log1p of the excess over the largest term; here np.logaddexp pairwise), so
# they differ by a few units u = 2^-53 of float64 rounding. The rule, with the largest differences
# measured over this file's batches (3.3e5 gradient entries, losses up to 2.4e3):
# - a finite loss, a sum of T_i log-probabilities each rounded relatively, to LOSS_RTOL relative
#   (measured 7.9e-16), plus LOSS_ATOL absolute for a loss near 0, where this form's ln of a sum near
#   1 holds u absolute and the kernels' log1p more (measured 1.1e-16);
# - a gradient entry to GRAD_ULPS * u * (1 + loss_i) absolute: an occupancy inherits the absolute
#   error of alpha_t(s) + beta_t(s), about u * loss_i, as a relative one (spec 5, accuracy limit 2;
#   measured 1.7 * u * (1 + loss_i), at most 4.5e-13 at loss 2.4e3, 1.3e-14 at T_i <= 60).
LOSS_RTOL = 2e-15
LOSS_ATOL = 4e-16
GRAD_ULPS = 4.0
U = 2.0**-53


def assert_loss_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    """+inf and NaN in exactly the same places, never below 0, finite losses within the rule."""
    assert actual.dtype == np.float64 and actual.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    np.testing.assert_array_equal(np.isposinf(actual), np.isposinf(expected))
    assert not np.isneginf(actual).any() and (actual[~np.isnan(actual)] >= 0).all()
    finite = np.isfinite(expected)
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=LOSS_RTOL, atol=LOSS_ATOL)


def assert_grad_equal(actual: np.ndarray, expected: np.ndarray, loss: np.ndarray, sample_axis: int) -> None:
    """NaN in exactly the same places, zero frames where the plain form has them (inactive frames,
    +inf losses), every other entry within GRAD_ULPS * u * (1 + loss_i)."""
    assert actual.dtype == np.float64 and actual.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    zero_rows = (expected == 0).all(axis=-1)
    np.testing.assert_array_equal(actual[zero_rows], 0.0)
    shape = [1] * actual.ndim
    shape[sample_axis] = -1
    bound = GRAD_ULPS * U * (1 + np.where(np.isfinite(loss), loss, 0.0)).reshape(shape)
    known = ~np.isnan(expected)
    assert (np.abs(actual - expected)[known] <= np.broadcast_to(bound, actual.shape)[known]).all()


# -- the plain form against the spec -----------------------------------------------------------


def test_the_worked_examples_of_spec_9() -> None:
    logits = np.log(np.array([[0.5, 0.2, 0.3], [0.4, 0.1, 0.5], [0.6, 0.3, 0.1]]))
    loss, grad = sample_loss_and_grad(logits, np.array([0]), 2, True)
    assert loss == pytest.approx(1.0817551716016867, rel=1e-15)
    assert grad[0, 0] == pytest.approx(0.5 - (0.120 + 0.020 + 0.025) / 0.339, rel=1e-13)
    assert sample_loss_and_grad(logits, np.array([0]), 2, False)[0] == pytest.approx(-np.log(0.127), rel=1e-15)
    assert sample_loss_and_grad(logits, np.array([0, 0]), 2, True)[0] == pytest.approx(-np.log(0.15), rel=1e-15)
    assert sample_loss_and_grad(logits, np.array([], np.int64), 2, True)[0] == pytest.approx(-np.log(0.015), rel=1e-14)
    equal = np.zeros((9, 5))
    assert sample_loss_and_grad(equal, np.array([0, 3, 2, 2]), 4, True)[0] == pytest.approx(8.280383449338212)
    assert sample_loss_and_grad(equal, np.array([0, 3, 2, 2]), 4, False)[0] == pytest.approx(9.648659304955423)


@pytest.mark.parametrize("merge", [True, False])
def test_the_plain_form_is_the_sum_over_every_path(merge: bool) -> None:
    rng = np.random.default_rng(3 + merge)
    infinite = 0
    for _ in range(150):
        frames, classes = int(rng.integers(0, 6)), int(rng.integers(2, 5))
        logits = rng.normal(scale=3.0, size=(frames, classes))
        target = rng.integers(0, min(classes - 1, 2), size=int(rng.integers(0, 4)))  # repeats are common
        loss, grad = sample_loss_and_grad(logits, target, classes - 1, merge)
        expected_loss, expected_grad = path_sum(logits, target.tolist(), classes - 1, merge)
        infinite += loss == np.inf
        assert loss == pytest.approx(expected_loss, rel=1e-13, abs=1e-15)
        np.testing.assert_allclose(grad, expected_grad, rtol=0, atol=1e-14)
    assert 10 < infinite < 100


@pytest.mark.parametrize("merge", [True, False])
def test_the_gradient_is_the_derivative_of_the_loss(merge: bool) -> None:
    rng = np.random.default_rng(7 + merge)
    step = 1e-6
    for _ in range(6):
        frames, classes = int(rng.integers(3, 9)), int(rng.integers(2, 6))
        logits = rng.normal(scale=2.0, size=(frames, classes))
        target = rng.integers(0, classes - 1, size=int(rng.integers(0, 3)))
        loss, grad = sample_loss_and_grad(logits, target, classes - 1, merge)
        assert np.isfinite(loss)
        numeric = np.zeros_like(logits)
        for index in np.ndindex(logits.shape):
            up, down = logits.copy(), logits.copy()
            up[index] += step
            down[index] -= step
            numeric[index] = (
                sample_loss_and_grad(up, target, classes - 1, merge)[0]
                - sample_loss_and_grad(down, target, classes - 1, merge)[0]
            ) / (2 * step)
        np.testing.assert_allclose(grad, numeric, rtol=0, atol=1e-8)
        np.testing.assert_allclose(grad.sum(axis=1), 0.0, atol=1e-15)


def test_the_edge_cases_of_spec_4_4() -> None:
    empty = np.zeros((0, 4))
    loss, grad = sample_loss_and_grad(empty, np.array([], np.int64), 3, True)
    assert loss == 0.0 and grad.shape == (0, 4)
    assert sample_loss_and_grad(empty, np.array([1]), 3, True)[0] == np.inf
    logits = np.random.default_rng(0).normal(size=(3, 4))
    blank_only = -np.log(np.exp(logits).sum(axis=1)) + logits[:, 3]
    assert sample_loss_and_grad(logits, np.array([], np.int64), 3, False)[0] == pytest.approx(-blank_only.sum())
    for target, merge in (([1, 1, 1], True), ([0, 1, 2, 0], False), ([2, 0, 0], True)):
        loss, grad = sample_loss_and_grad(logits, np.array(target), 3, merge)
        assert loss == np.inf and (grad == 0).all()
    assert sample_loss_and_grad(logits, np.array([1, 1, 1]), 3, False)[0] < np.inf  # no blank needed between
    assert sample_loss_and_grad(logits, np.array([2, 0]), 3, True)[0] < np.inf
    for bad in (np.nan, np.inf, -np.inf):
        poisoned = logits.copy()
        poisoned[1, 2] = bad
        loss, grad = sample_loss_and_grad(poisoned, np.array([1]), 3, True)
        assert np.isnan(loss) and np.isnan(grad).all()
    assert sample_loss_and_grad(np.zeros((1, 1)), np.array([], np.int64), 0, True)[0] == 0.0  # C = 1


def test_the_time_major_form_reads_the_rules_from_canonical() -> None:
    inputs = np.random.default_rng(1).normal(size=(4, 3, 3))
    inputs[3, 0] = np.nan  # inactive for sample 0
    inputs[1, 2, 0] = np.inf  # active for sample 2
    mask = np.array([[1, 1, 1], [1, 1, 1], [1, 0, 1], [0, 0, 1]])
    labels = np.array([[-1, 0, -1, 0], [1, 1, -1, -1], [0, -1, -1, -1]])
    losses, grad = ctc_loss_and_grad(inputs, mask, labels, preprocess_collapse_repeated=True)
    assert losses[0] == pytest.approx(sample_loss_and_grad(inputs[:3, 0], np.array([0]), 2, True)[0])
    assert losses[1] == pytest.approx(sample_loss_and_grad(inputs[:2, 1], np.array([1]), 2, True)[0])
    assert np.isnan(losses[2]) and np.isnan(grad[:, 2]).all()
    assert (grad[3, :2] == 0).all() and (grad[2, 1] == 0).all()
    with pytest.raises(ctcop.InvalidInputError):
        ctc_loss_and_grad(inputs, mask, labels + 1)  # the blank 2 as a label (rule 3.3)


# -- the compiled kernels against the plain form -----------------------------------------------


def random_time_major(rng: np.random.Generator, frames: int, samples: int, classes: int) -> tuple[np.ndarray, ...]:
    """A batch of every kind of sample: mask lengths from 0 to T, targets empty, feasible, longer
    than their frames and full of repeats, pads anywhere in the row, non-finite values in active
    and inactive frames."""
    inputs = rng.normal(scale=float(rng.choice([0.5, 3.0, 12.0])), size=(frames, samples, classes))
    lengths = rng.integers(0, frames + 1, size=samples)
    lengths[: min(samples, 2)] = [0, frames][: min(samples, 2)]
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(rng.choice([np.int32, np.bool_]))
    labels = np.full((samples, frames), -1, dtype=np.int64)
    for i in range(samples):
        most = min(frames, int(lengths[i]) + 2) if rng.random() < 0.3 else min(frames, int(lengths[i]) // 2)
        count = int(rng.integers(0, most + 1))
        alphabet = 2 if rng.random() < 0.4 else classes - 1  # a small alphabet repeats
        places = np.sort(rng.choice(frames, size=count, replace=False))
        labels[i, places] = rng.integers(0, min(alphabet, classes - 1), size=count)
    for i in rng.choice(samples, size=samples // 5, replace=False):
        t = int(rng.integers(0, frames))
        inputs[t, i, int(rng.integers(0, classes))] = rng.choice([np.nan, np.inf, -np.inf])
    return inputs, mask, labels


BATCHES = [(seed, 1 + seed % 60, 1 + (7 * seed) % 20, 2 + (11 * seed) % 39) for seed in range(24)]


@pytest.mark.parametrize(("collapse", "merge"), [(False, True), (True, True), (False, False), (True, False)])
def test_the_time_major_kernels_are_the_plain_form(collapse: bool, merge: bool) -> None:
    kinds = {"nan": 0, "inf": 0, "finite": 0}
    for seed, frames, samples, classes in BATCHES:
        rng = np.random.default_rng([seed, collapse, merge])
        inputs, mask, labels = random_time_major(rng, frames, samples, classes)
        kwargs = {"preprocess_collapse_repeated": collapse, "merge_repeated": merge}
        expected_loss, expected_grad = ctc_loss_and_grad(inputs, mask, labels, **kwargs)
        loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels, **kwargs)
        assert_loss_equal(loss, expected_loss)
        assert_grad_equal(grad, expected_grad, expected_loss, 1)
        np.testing.assert_array_equal(ctcop.ctc_loss(inputs, mask, labels, **kwargs), loss)
        kinds["nan"] += int(np.isnan(loss).sum())
        kinds["inf"] += int(np.isposinf(loss).sum())
        kinds["finite"] += int(np.isfinite(loss).sum())
    assert min(kinds.values()) >= 10, kinds


def test_the_kernels_are_the_plain_form_where_paths_underflow() -> None:
    rng = np.random.default_rng(17)
    frames, samples, classes = 600, 3, 30
    inputs = rng.normal(scale=2.0, size=(frames, samples, classes))
    mask = (np.arange(frames)[:, None] < np.array([600, 450, 300])[None, :]).astype(np.int64)
    labels = np.full((samples, frames), -1)
    labels[:, :40] = rng.integers(0, classes - 1, size=(samples, 40))
    expected_loss, expected_grad = ctc_loss_and_grad(inputs, mask, labels)
    assert (expected_loss > 1000).all()  # the likelihood is below e^-1000, 0 in float64 linear space
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    assert_loss_equal(loss, expected_loss)
    assert_grad_equal(grad, expected_grad, expected_loss, 1)


@pytest.mark.parametrize(
    ("collapse", "merge", "unique"), [(False, True, False), (True, False, True), (False, False, True)]
)
def test_the_released_kernels_are_the_plain_form(collapse: bool, merge: bool, unique: bool) -> None:
    kinds = {"nan": 0, "inf": 0, "finite": 0}
    for seed, frames, samples, classes in BATCHES[::2]:
        rng = np.random.default_rng([seed, 5])
        inputs, mask, _ = random_time_major(rng, frames, samples, classes)
        logits, logit_length = inputs.transpose(1, 0, 2).copy(), mask.astype(np.int64).sum(axis=0)
        blank = int(rng.integers(0, classes))
        labels = rng.integers(0, classes - 1, size=(samples, frames))
        labels[labels >= blank] += 1  # any class but the blank
        label_length = rng.integers(0, frames + 1, size=samples) // rng.choice([1, 3], size=samples)
        args = (logits, logit_length, labels, label_length, np.int64(blank))
        kwargs = {"preprocess_collapse_repeated": collapse, "ctc_merge_repeated": merge, "unique": unique}
        expected_loss, expected_grad = batch_loss_and_grad(canonical.from_openvino(*args, **kwargs))
        loss, grad = ctcop.openvino_ctc_loss_grad(*args, **kwargs)
        assert_loss_equal(loss, expected_loss)
        assert_grad_equal(grad, expected_grad, expected_loss, 0)
        np.testing.assert_array_equal(ctcop.openvino_ctc_loss(*args, **kwargs), loss)
        kinds["nan"] += int(np.isnan(loss).sum())
        kinds["inf"] += int(np.isposinf(loss).sum())
        kinds["finite"] += int(np.isfinite(loss).sum())
    assert min(kinds.values()) >= 5, kinds
