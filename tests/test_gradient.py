"""ctc_loss_grad against central finite differences, its documented special values, and training."""

import itertools

import numpy as np
import pytest

import ctcop
from ctcop.conformance.cases import random_case


@pytest.mark.parametrize(("collapse", "merge"), [(False, True), (True, True), (False, False), (True, False)])
def test_gradient_matches_finite_differences(collapse: bool, merge: bool) -> None:
    rng = np.random.default_rng(11 + 2 * collapse + merge)
    checked = 0
    for _ in range(30):
        case = random_case(rng, max_t=6, max_c=5, max_n=3)
        kwargs = {"preprocess_collapse_repeated": collapse, "merge_repeated": merge}
        loss, grad = ctcop.ctc_loss_grad(case.inputs, case.sequence_mask, case.labels, **kwargs)
        np.testing.assert_array_equal(loss, ctcop.ctc_loss(case.inputs, case.sequence_mask, case.labels, **kwargs))
        step = 1e-6
        for index in np.ndindex(case.inputs.shape):
            t, i, _ = index
            if not np.isfinite(loss[i]):
                assert grad[index] == 0.0
                continue
            up, down = case.inputs.copy(), case.inputs.copy()
            up[index] += step
            down[index] -= step
            numeric = (
                ctcop.ctc_loss(up, case.sequence_mask, case.labels, **kwargs)[i]
                - ctcop.ctc_loss(down, case.sequence_mask, case.labels, **kwargs)[i]
            ) / (2 * step)
            assert grad[index] == pytest.approx(numeric, abs=1e-7), index
            if case.sequence_mask[t, i] == 0:
                assert grad[index] == 0.0
            checked += 1
    assert checked > 200


def test_gradient_rows_sum_to_zero_and_respect_bounds() -> None:
    rng = np.random.default_rng(5)
    inputs = rng.normal(size=(30, 4, 7)) * 4
    mask = (np.arange(30)[:, None] < np.array([30, 21, 9, 0])[None, :]).astype(np.int32)
    labels = np.full((4, 30), -1)
    labels[:, :5] = rng.integers(0, 6, size=(4, 5))
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    assert np.isfinite(loss[:3]).all() and loss[3] == np.inf
    np.testing.assert_allclose(grad.sum(axis=2), 0.0, atol=1e-12)
    assert (grad >= -1 - 1e-12).all() and (grad <= 1 + 1e-12).all()
    assert (grad[:, 3] == 0).all()


def test_gradient_of_nonfinite_sample_is_nan_only_there() -> None:
    inputs = np.zeros((3, 2, 3))
    inputs[1, 0, 2] = np.nan
    inputs[2, 1, 0] = np.nan  # masked out for sample 1
    mask = np.array([[1, 1], [1, 1], [1, 0]])
    labels = np.array([[0, -1, -1], [1, -1, -1]])
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    assert np.isnan(loss[0]) and np.isfinite(loss[1])
    assert np.isnan(grad[:, 0]).all()
    assert np.isfinite(grad[:, 1]).all() and (grad[2, 1] == 0).all()


def test_gradient_dtype_follows_inputs() -> None:
    inputs = np.zeros((4, 1, 3), dtype=np.float32)
    loss, grad = ctcop.ctc_loss_grad(inputs, np.ones((4, 1), np.int8), np.array([[0, 1, -1, -1]]))
    assert loss.dtype == np.float32 and grad.dtype == np.float32


def test_gradient_descent_learns_the_target() -> None:
    # In the spirit of seed 000: train a tiny linear model (features -> logits) with the gradient.
    rng = np.random.default_rng(0)
    frames, classes, features = 12, 5, 16
    x = rng.normal(size=(frames, 2, features))
    weights = rng.normal(size=(features, classes)) * 0.1
    mask = np.ones((frames, 2), dtype=np.int32)
    mask[9:, 1] = 0
    labels = np.full((2, frames), -1)
    labels[0, :4] = [0, 1, 1, 2]
    labels[1, :3] = [3, 0, 3]
    history = []
    for _ in range(300):
        logits = x @ weights
        loss, grad = ctcop.ctc_loss_grad(logits, mask, labels)
        history.append(loss.sum())
        weights -= 0.05 * np.einsum("tnf,tnc->fc", x, grad)
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(history))
    assert history[-1] < 0.01 * history[0]
    decoded = ctcop.greedy_decode(x @ weights, mask)
    assert decoded[0, :4].tolist() == [0, 1, 1, 2] and (decoded[0, 4:] == -1).all()
    assert decoded[1, :3].tolist() == [3, 0, 3] and (decoded[1, 3:] == -1).all()
