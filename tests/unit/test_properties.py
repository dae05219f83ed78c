"""Property tests (hypothesis): invariances that the spec implies for every valid input."""

import ml_dtypes
import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st

import ctcop


@st.composite
def batches(draw: st.DrawFn, max_t: int = 7, max_n: int = 5, max_c: int = 6) -> tuple:
    t = draw(st.integers(0, max_t))
    n = draw(st.integers(1, max_n))
    c = draw(st.integers(1, max_c))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # Logits on a 1/64 grid, so adding a shift that is a multiple of 1/64 is exact in float64.
    inputs = np.round(rng.normal(size=(t, n, c)) * 4 * 64) / 64
    lengths = rng.integers(0, t + 1, size=n)
    mask = (np.arange(t)[:, None] < lengths[None, :]).astype(np.int64)
    labels = rng.integers(-1, max(c - 1, 0), size=(n, t)) if c > 1 else np.full((n, t), -1)
    attrs = {
        "preprocess_collapse_repeated": draw(st.booleans()),
        "merge_repeated": draw(st.booleans()),
    }
    return inputs, mask, labels, attrs


def same(a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(a, b)


@given(batches(), st.sampled_from([-1e5, -7.5, 3.25, 1024.0, 4e5]))
def test_constant_shift_per_frame_changes_nothing(batch: tuple, shift: float) -> None:
    inputs, mask, labels, attrs = batch
    base = ctcop.ctc_loss(inputs, mask, labels, **attrs)
    shifted = ctcop.ctc_loss(inputs + shift, mask, labels, **attrs)
    np.testing.assert_allclose(shifted, base, rtol=1e-12, atol=1e-12)


@given(batches(), st.randoms(use_true_random=False))
def test_batch_permutation_permutes_results(batch: tuple, random) -> None:
    inputs, mask, labels, attrs = batch
    order = list(range(inputs.shape[1]))
    random.shuffle(order)
    base = ctcop.ctc_loss(inputs, mask, labels, **attrs)
    permuted = ctcop.ctc_loss(inputs[:, order], mask[:, order], labels[order], **attrs)
    same(permuted, base[order])


@given(batches())
def test_each_sample_alone_gives_its_batch_result(batch: tuple) -> None:
    inputs, mask, labels, attrs = batch
    base = ctcop.ctc_loss(inputs, mask, labels, **attrs)
    base_grad = ctcop.ctc_loss_grad(inputs, mask, labels, **attrs)[1]
    for i in range(inputs.shape[1]):
        alone = ctcop.ctc_loss(inputs[:, i : i + 1], mask[:, i : i + 1], labels[i : i + 1], **attrs)
        same(alone, base[i : i + 1])
        grad = ctcop.ctc_loss_grad(inputs[:, i : i + 1], mask[:, i : i + 1], labels[i : i + 1], **attrs)[1]
        same(grad[:, 0], base_grad[:, i])


@given(batches(), st.sampled_from([np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0]))
def test_masked_frames_never_matter(batch: tuple, junk: float) -> None:
    inputs, mask, labels, attrs = batch
    base = ctcop.ctc_loss(inputs, mask, labels, **attrs)
    dirty = np.where(mask[..., None] == 1, inputs, junk)
    same(ctcop.ctc_loss(dirty, mask, labels, **attrs), base)
    same(
        ctcop.ctc_loss_grad(dirty, mask, labels, **attrs)[1],
        ctcop.ctc_loss_grad(inputs, mask, labels, **attrs)[1],
    )


@given(batches(), st.sampled_from(["float16", "float32", "bfloat16"]))
def test_other_dtypes_compute_in_float64_and_round_once(batch: tuple, dtype: str) -> None:
    inputs, mask, labels, attrs = batch
    narrow = inputs.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    loss = ctcop.ctc_loss(narrow, mask, labels, **attrs)
    assert loss.dtype == narrow.dtype
    wide = ctcop.ctc_loss(narrow.astype(np.float64), mask, labels, **attrs)
    same(loss, wide.astype(dtype))


@given(batches())
def test_mask_and_label_integer_types_do_not_matter(batch: tuple) -> None:
    inputs, mask, labels, attrs = batch
    base = ctcop.ctc_loss(inputs, mask, labels, **attrs)
    same(ctcop.ctc_loss(inputs, mask.astype(bool), labels.astype(np.int8), **attrs), base)
    same(ctcop.ctc_loss(inputs, mask.astype(np.uint8), labels.astype(np.int32), **attrs), base)


@given(batches())
def test_nonfinite_active_value_gives_nan_for_that_sample_only(batch: tuple) -> None:
    inputs, mask, labels, attrs = batch
    active = np.argwhere(mask == 1)
    assume(active.size > 0)
    t, i = active[len(active) // 2]
    dirty = inputs.copy()
    dirty[t, i, 0] = np.inf
    loss = ctcop.ctc_loss(dirty, mask, labels, **attrs)
    base = ctcop.ctc_loss(inputs, mask, labels, **attrs)
    assert np.isnan(loss[i])
    others = np.arange(inputs.shape[1]) != i
    same(loss[others], base[others])
