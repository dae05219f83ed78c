"""The edge cases of spec/ctcloss4.md section 4.4, each with its defined value."""

import ml_dtypes
import numpy as np
import pytest

import ctcop


def test_empty_batch_gives_empty_output() -> None:
    loss = ctcop.ctc_loss(np.zeros((4, 0, 3), np.float32), np.zeros((4, 0), np.int8), np.zeros((0, 4), np.int8))
    assert loss.shape == (0,) and loss.dtype == np.float32
    loss, grad = ctcop.ctc_loss_grad(np.zeros((4, 0, 3)), np.zeros((4, 0), np.int8), np.zeros((0, 4), np.int8))
    assert loss.shape == (0,) and grad.shape == (4, 0, 3)


def test_zero_frames() -> None:
    loss = ctcop.ctc_loss(np.zeros((0, 2, 3)), np.zeros((0, 2), np.int8), np.zeros((2, 0), np.int8))
    assert loss.tolist() == [0.0, 0.0]


def test_zero_length_sequence_with_and_without_target() -> None:
    inputs = np.random.default_rng(0).normal(size=(3, 2, 3))
    mask = np.array([[0, 0], [0, 0], [0, 0]])
    loss = ctcop.ctc_loss(inputs, mask, np.array([[-1, -1, -1], [1, -1, -1]]))
    assert loss.tolist() == [0.0, np.inf]


def test_single_class_is_only_blank() -> None:
    inputs = np.random.default_rng(1).normal(size=(5, 3, 1)) * 100
    mask = (np.arange(5)[:, None] < np.array([5, 2, 0])[None, :]).astype(np.int8)
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, np.full((3, 5), -1))
    assert loss.tolist() == [0.0, 0.0, 0.0] and (grad == 0).all()


def test_empty_target_is_the_all_blank_path() -> None:
    inputs = np.random.default_rng(2).normal(size=(6, 1, 4)) * 5
    logp = inputs - np.log(np.exp(inputs).sum(axis=2, keepdims=True))
    mask = np.ones((6, 1), np.int8)
    mask[4:] = 0
    for merge in (True, False):
        loss = ctcop.ctc_loss(inputs, mask, np.full((1, 6), -1), merge_repeated=merge)
        assert loss[0] == pytest.approx(-logp[:4, 0, 3].sum(), rel=1e-14)


@pytest.mark.parametrize(
    ("target", "merge", "needed"),
    [
        ([0, 1, 2], True, 3),
        ([0, 0, 1], True, 4),
        ([1, 1, 1], True, 5),
        ([0, 0, 1], False, 3),
        ([2, 2], False, 2),
    ],
)
def test_feasibility_boundary(target: list[int], merge: bool, needed: int) -> None:
    inputs = np.zeros((6, 2, 4))
    mask = (np.arange(6)[:, None] < np.array([needed, needed - 1])[None, :]).astype(np.int8)
    labels = np.full((2, 6), -1)
    labels[:, : len(target)] = target
    loss = ctcop.ctc_loss(inputs, mask, labels, merge_repeated=merge)
    assert np.isfinite(loss[0]) and loss[1] == np.inf


def test_infeasible_repeats_become_feasible_when_collapsed() -> None:
    inputs = np.zeros((2, 1, 3))
    loss = ctcop.ctc_loss(inputs, np.ones((2, 1), np.int8), np.array([[1, 1]]), preprocess_collapse_repeated=True)
    assert loss[0] == pytest.approx(-np.log(3 / 9), rel=1e-14)  # paths 11, 1-, -1 of 9


def test_float16_loss_beyond_range_rounds_to_inf() -> None:
    # The only path is "0 1", each frame costing about 60000 nats: 120000 exceeds float16's 65504.
    inputs = np.zeros((2, 1, 3), np.float16)
    inputs[:, 0, :2] = -60000.0
    loss = ctcop.ctc_loss(inputs, np.ones((2, 1), np.int8), np.array([[0, 1]]))
    assert loss.dtype == np.float16 and loss[0] == np.inf


@pytest.mark.parametrize("dtype", [">f8", ">f4", "<f4", ">f2"])
def test_byte_order_and_memory_layout_change_nothing(dtype: str) -> None:
    # The kernels read native float32/float64: other byte orders and strided views are converted,
    # exactly (a big-endian float64 once went through float32: 2.6e-8 relative error).
    rng = np.random.default_rng(11)
    native = rng.normal(size=(6, 3, 5)).astype(np.dtype(dtype).newbyteorder("="))
    mask = np.ones((6, 3), dtype=np.int8)
    labels = np.array([[0, 1, -1, -1, -1, -1], [3, 3, -1, -1, -1, -1], [-1] * 6])
    want_loss, want_grad = ctcop.ctc_loss_grad(native, mask, labels)
    for inputs in (native.astype(dtype), np.asfortranarray(native), native[::-1][::-1].copy()[:, ::1]):
        loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
        np.testing.assert_array_equal(loss, want_loss)
        np.testing.assert_array_equal(grad, want_grad)
        np.testing.assert_array_equal(ctcop.ctc_loss(inputs, mask, labels), want_loss)
    wide = np.zeros((6, 3, 10), dtype=dtype)
    wide[:, :, ::2] = native  # a strided view of every other class
    np.testing.assert_array_equal(ctcop.ctc_loss(wide[:, :, ::2], mask, labels), want_loss)


def test_bfloat16_results_are_rounded_once_near_every_kind_of_midpoint() -> None:
    # Spec 6: float64 rounded once. Just above / below / on the midpoint of two neighbouring
    # bfloat16 values (ml_dtypes' own float64 cast goes through float32 and rounds twice).
    bfloat16 = ml_dtypes.bfloat16
    from ctcop.core.rounding import round_once

    rng = np.random.default_rng(3)
    low = rng.normal(size=20_000).astype(bfloat16).astype(np.float64)
    high = np.nextafter(low.astype(bfloat16), np.array(np.inf, dtype=bfloat16)).astype(np.float64)
    middle = (low + high) / 2  # exact in float64
    for offset, want in ((2.0**-40, high), (-(2.0**-40), low)):
        values = middle + offset * np.abs(middle)
        got = round_once(values, bfloat16).astype(np.float64)
        np.testing.assert_array_equal(got, want)
    even = np.where((low.astype(bfloat16).view(np.uint16) & 1) == 0, low, high)
    np.testing.assert_array_equal(round_once(middle, bfloat16).astype(np.float64), even)
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 1e39, -1e39, 1e-50])
    got = round_once(special, bfloat16).astype(np.float64)
    np.testing.assert_array_equal(got, [np.inf, -np.inf, 0.0, -0.0, np.inf, -np.inf, 0.0])
    assert np.isnan(round_once(np.array([np.nan]), bfloat16).astype(np.float64)).all()
