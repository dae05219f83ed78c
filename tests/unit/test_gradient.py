"""ctc_loss_grad against central finite differences, its documented special values, and training."""

import itertools

import numpy as np
import pytest

import ctcop
from ctcop.conformance.cases import random_case
from ctcop.core import scheduler
from ctcop.reference import openvino_ctc_loss_grad


@pytest.mark.parametrize(("collapse", "merge"), [(False, True), (True, True), (False, False), (True, False)])
def test_gradient_matches_finite_differences(collapse: bool, merge: bool) -> None:
    rng = np.random.default_rng(11 + 2 * collapse + merge)
    checked = 0
    for _ in range(30):
        case = random_case(rng, max_t=6, max_c=5, max_n=3)
        kwargs = {"preprocess_collapse_repeated": collapse, "merge_repeated": merge}
        loss, grad = ctcop.ctc_loss_grad(
            case.inputs["inputs"], case.inputs["sequence_mask"], case.inputs["labels"], **kwargs
        )
        np.testing.assert_array_equal(
            loss, ctcop.ctc_loss(case.inputs["inputs"], case.inputs["sequence_mask"], case.inputs["labels"], **kwargs)
        )
        step = 1e-6
        for index in np.ndindex(case.inputs["inputs"].shape):
            t, i, _ = index
            if not np.isfinite(loss[i]):
                assert grad[index] == 0.0
                continue
            up, down = case.inputs["inputs"].copy(), case.inputs["inputs"].copy()
            up[index] += step
            down[index] -= step
            numeric = (
                ctcop.ctc_loss(up, case.inputs["sequence_mask"], case.inputs["labels"], **kwargs)[i]
                - ctcop.ctc_loss(down, case.inputs["sequence_mask"], case.inputs["labels"], **kwargs)[i]
            ) / (2 * step)
            assert grad[index] == pytest.approx(numeric, abs=1e-7), index
            if case.inputs["sequence_mask"][t, i] == 0:
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


GAPS = [1e12, 1e14, 1e16, 1e300]


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("mirrored", [False, True])
def test_gradient_exact_at_extreme_logit_gaps(gap: float, mirrored: bool) -> None:
    # Target (0) over two frames, class 0 far below the blank: the aligned paths are "0 0", "0 -",
    # "- 0" with probabilities e^-2M, e^-M, e^-M, so class 0 holds half the posterior at each frame
    # and the gradient is [-0.5, 0.5] up to terms of order e^-M. The loss, M - ln 2, rounds to M,
    # so an occupancy normalised by the likelihood loses the ln 2 (spec section 5).
    frame = [-gap, 0.0] if mirrored else [0.0, gap]
    inputs = np.array([[frame], [frame]])
    loss, grad = ctcop.ctc_loss_grad(inputs, np.ones((2, 1), np.int8), np.array([[0, -1]]))
    assert loss[0] == pytest.approx(gap - np.log(2), rel=1e-15)
    np.testing.assert_allclose(grad[:, 0], [[-0.5, 0.5], [-0.5, 0.5]], rtol=1e-12, atol=0)


@pytest.mark.parametrize("gap", GAPS)
@pytest.mark.parametrize("mirrored", [False, True])
def test_gradient_exact_when_the_label_dominates(gap: float, mirrored: bool) -> None:
    # The other sign: the label takes all the mass, the path "0 0" has probability 1 - O(e^-M),
    # and the exact gradient is O(e^-2M) in every entry, which rounds to 0.
    frame = [gap, 0.0] if mirrored else [0.0, -gap]
    inputs = np.array([[frame], [frame]])
    loss, grad = ctcop.ctc_loss_grad(inputs, np.ones((2, 1), np.int8), np.array([[0, -1]]))
    assert loss[0] == 0.0
    np.testing.assert_array_equal(grad[:, 0], np.zeros((2, 2)))


def test_gradient_at_large_gaps_matches_closed_form() -> None:
    # Same lattice at moderate gaps, against the closed form: with r = p(blank) at each frame, the
    # posterior of class 0 is 1 / (1 + r) at both frames, so grad[class 0] = (1 - r) - 1 / (1 + r)
    # = -r^2 / (1 + r). The gradient is a difference of two numbers of size up to 1 (spec section 5),
    # so it is held to an absolute 1e-15 besides the relative 1e-12.
    for gap in [-700.0, -40.0, -5.0, 0.0, 5.0, 40.0, 700.0, 1e6]:
        inputs = np.array([[[0.0, gap]], [[0.0, gap]]])
        _, grad = ctcop.ctc_loss_grad(inputs, np.ones((2, 1), np.int8), np.array([[0, -1]]))
        r = 1.0 / (1.0 + np.exp(-gap)) if gap > -700 else np.exp(gap)
        expected = -(r**2) / (1.0 + r)
        np.testing.assert_allclose(grad[:, 0, 0], [expected, expected], rtol=1e-12, atol=1e-15, err_msg=str(gap))
        np.testing.assert_allclose(grad[:, 0, 1], [-expected, -expected], rtol=1e-12, atol=1e-15, err_msg=str(gap))


@pytest.mark.parametrize(("segment_elements", "threads"), [(1, 1), (7, 2), (50, 3), (400, 1), (1 << 20, 2)])
@pytest.mark.usefixtures("every_batch_threaded")
def test_checkpoint_segments_and_threads_change_no_bit(
    monkeypatch: pytest.MonkeyPatch, segment_elements: int, threads: int
) -> None:
    # A small SEGMENT_ELEMENTS forces one checkpoint every ceil(sqrt(T)) frames (spec 5), a large one
    # stores the whole table: the loss and the gradient must not change in any bit, nor with the
    # thread count, nor across the batch's composition.
    rng = np.random.default_rng(3)
    inputs = rng.normal(size=(23, 4, 6)) * 3
    inputs[5, 1, 1] = np.nan
    mask = (np.arange(23)[:, None] < np.array([23, 17, 20, 0])[None, :]).astype(np.int8)
    labels = np.full((4, 23), -1)
    labels[0, :9] = rng.integers(0, 5, size=9)
    labels[1, :3] = [2, 2, 4]
    labels[2, :4] = [1, 0, 1, 3]
    labels[3, :2] = [1, 2]  # no frames: no aligned path
    expected = ctcop.ctc_loss_grad(inputs, mask, labels)
    monkeypatch.setattr(scheduler, "SEGMENT_ELEMENTS", segment_elements)
    previous = scheduler.get_num_threads()
    scheduler.set_num_threads(threads)
    try:
        loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    finally:
        scheduler.set_num_threads(previous)
    np.testing.assert_array_equal(loss, expected[0])
    np.testing.assert_array_equal(grad, expected[1])
    np.testing.assert_array_equal(ctcop.ctc_loss(inputs, mask, labels), expected[0])
    for i in range(4):
        alone = ctcop.ctc_loss_grad(inputs[:, i : i + 1], mask[:, i : i + 1], labels[i : i + 1])
        np.testing.assert_array_equal(alone[0], expected[0][i : i + 1])
        np.testing.assert_array_equal(alone[1][:, 0], expected[1][:, i])
    assert np.isnan(loss[1]) and np.isnan(grad[:17, 1]).all() and (grad[17:, 1] == 0).all()
    assert loss[3] == np.inf and (grad[:, 3] == 0).all()


def released_batch(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A released batch (spec 7): logits [N, T, C], lengths, labels of classes other than a
    random blank in the prefix and anything beyond it, targets longer than their frames among them."""
    n, frames, classes = int(rng.integers(1, 4)), int(rng.integers(0, 6)), int(rng.integers(2, 5))
    blank = int(rng.integers(0, classes))
    others = np.array([c for c in range(classes) if c != blank])
    logits = rng.normal(size=(n, frames, classes)) * float(rng.choice([0.5, 3.0]))
    labels = rng.choice(others, size=(n, frames)) if frames else np.zeros((n, 0), np.int64)
    logit_length = rng.integers(0, frames + 1, size=n)
    label_length = rng.integers(0, frames + 1, size=n)
    return logits, logit_length, labels, label_length, np.int64(blank)


@pytest.mark.parametrize(
    "attributes", [{}, {"preprocess_collapse_repeated": True}, {"unique": True}, {"ctc_merge_repeated": False}]
)
def test_released_gradient_matches_finite_differences(attributes: dict[str, bool]) -> None:
    rng = np.random.default_rng(len(str(attributes)))
    checked = 0
    for _ in range(40):
        logits, *rest = released_batch(rng)
        loss, grad = openvino_ctc_loss_grad(logits, *rest, **attributes)
        np.testing.assert_array_equal(loss, ctcop.openvino_ctc_loss(logits, *rest, **attributes))
        assert grad.shape == logits.shape and grad.dtype == logits.dtype
        step = 1e-6
        for index in np.ndindex(logits.shape):
            i, t, _ = index
            if not np.isfinite(loss[i]) or t >= rest[0][i]:
                assert grad[index] == 0.0
                continue
            up, down = logits.copy(), logits.copy()
            up[index] += step
            down[index] -= step
            numeric = (
                ctcop.openvino_ctc_loss(up, *rest, **attributes)[i]
                - ctcop.openvino_ctc_loss(down, *rest, **attributes)[i]
            ) / (2 * step)
            assert grad[index] == pytest.approx(numeric, abs=1e-7), index
            checked += 1
    assert checked > 150


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_released_gradient_is_the_time_major_gradient_transposed(dtype: str) -> None:
    rng = np.random.default_rng(8)
    for _ in range(20):
        case = random_case(rng, max_t=7, max_c=5, max_n=4)
        inputs = case.inputs["inputs"].astype(dtype)
        keep = case.inputs["labels"] != -1
        compact = np.take_along_axis(case.inputs["labels"], np.argsort(~keep, axis=1, kind="stable"), axis=1)
        for merge in (True, False):
            loss, grad = ctcop.ctc_loss_grad(
                inputs, case.inputs["sequence_mask"], case.inputs["labels"], merge_repeated=merge
            )
            released = openvino_ctc_loss_grad(
                inputs.transpose(1, 0, 2),
                case.inputs["sequence_mask"].sum(axis=0),
                compact,
                keep.sum(axis=1),
                ctc_merge_repeated=merge,
            )
            np.testing.assert_array_equal(released[0], loss)
            np.testing.assert_array_equal(released[1], grad.transpose(1, 0, 2))
