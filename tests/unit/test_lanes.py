"""The loss over samples side by side (:mod:`ctcop.core.lanes`): every sample gets the bits it gets
alone, whatever its neighbours, and the values of path enumeration."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.lanes import lane_losses
from support.oracle import openvino_loss, time_major_loss
from support.paths import ROOT

import ctcop
from ctcop.core import lanes


def equal_shaped_batch(
    rng: np.random.Generator, steps: int, samples: int, classes: int, length: int, scale: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A time-major batch whose samples all have ``steps`` frames and targets of ``length``
    labels (no label repeated next to itself, so collapsing changes none), logits ``scale`` times
    standard normal."""
    inputs = rng.normal(size=(steps, samples, classes)) * scale
    mask = np.ones((steps, samples), np.int64)
    labels = np.full((samples, steps), -1)
    for i in range(samples):
        target = [int(rng.integers(0, classes - 1))]
        while len(target) < length:
            target.append(int((target[-1] + rng.integers(1, classes - 1)) % (classes - 1)))
        labels[i, :length] = target
    return inputs, mask, labels


def alone(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, **attributes: bool) -> np.ndarray:
    """Each sample's loss computed in a batch of its own (never in lanes)."""
    losses = [
        ctcop.ctc_loss(inputs[:, i : i + 1], mask[:, i : i + 1], labels[i : i + 1], **attributes)
        for i in range(labels.shape[0])
    ]
    return np.concatenate(losses)


def assert_bits(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("merge_repeated", [True, False])
@pytest.mark.parametrize(
    ("steps", "classes", "length", "scale"), [(5, 11, 2, 1.0), (9, 3, 1, 4.0), (6, 17, 0, 0.5), (12, 64, 4, 30.0)]
)
def test_a_sample_in_lanes_has_its_bits_alone(
    dtype: type, merge_repeated: bool, steps: int, classes: int, length: int, scale: float
) -> None:
    """Batches of 2.5 lane groups of one shape (full groups, and a run too short for lanes): each
    loss has the bits of the sample alone and of the gradient's forward pass."""
    rng = np.random.default_rng(steps * classes + length)
    samples = 2 * lanes.LANES + lanes.fewest_samples(classes, 2 * length + 1) - 1
    inputs, mask, labels = equal_shaped_batch(rng, steps, samples, classes, length, scale)
    inputs = inputs.astype(dtype)
    batch = ctcop.ctc_loss(inputs, mask, labels, merge_repeated=merge_repeated)
    assert_bits(batch, alone(inputs, mask, labels, merge_repeated=merge_repeated))
    assert_bits(batch, ctcop.ctc_loss_grad(inputs, mask, labels, merge_repeated=merge_repeated)[0])


def test_lanes_agree_with_path_enumeration() -> None:
    """A full group of short samples, repeated labels included, against the sum over every path."""
    rng = np.random.default_rng(5)
    inputs = rng.normal(size=(4, lanes.LANES, 4)) * 2
    mask = np.ones((4, lanes.LANES), np.int64)
    labels = np.full((lanes.LANES, 4), -1)
    labels[:, :2] = rng.integers(0, 3, size=(lanes.LANES, 2))
    for merge in (True, False):
        for collapse in (True, False):
            attributes = {"merge_repeated": merge, "preprocess_collapse_repeated": collapse}
            expected = time_major_loss(inputs, mask, labels, collapse, merge)
            np.testing.assert_allclose(
                ctcop.ctc_loss(inputs, mask, labels, **attributes), expected, rtol=1e-13, atol=1e-13
            )


@pytest.mark.parametrize("junk", [np.nan, np.inf, -np.inf])
def test_a_non_finite_logit_fails_its_lane_only(junk: float) -> None:
    """A logit that is not finite makes its sample's loss NaN, in a full group and in one of 11
    lanes; its lane neighbours keep their bits."""
    rng = np.random.default_rng(6)
    inputs, mask, labels = equal_shaped_batch(rng, 5, lanes.LANES + 11, 11, 2, 1.0)
    inputs[3, 7, 4] = junk
    inputs[0, lanes.LANES + 4, 10] = junk
    batch = ctcop.ctc_loss(inputs, mask, labels)
    failed = [7, lanes.LANES + 4]
    assert np.isnan(batch[failed]).all() and not np.isnan(np.delete(batch, failed)).any()
    assert_bits(batch, alone(inputs, mask, labels))


@pytest.mark.parametrize("scale", [700.0, 1e5, 1e300])
def test_far_apart_logits_take_the_exact_sums_in_lanes_too(scale: float) -> None:
    """Logits hundreds of units apart flush predecessors' terms, so states are redone with the
    three-term log-sum-exp in some lanes and not in others: the same bits as alone."""
    rng = np.random.default_rng(int(np.log10(scale)))
    inputs, mask, labels = equal_shaped_batch(rng, 7, lanes.LANES + 3, 6, 3, scale)
    batch = ctcop.ctc_loss(inputs, mask, labels)
    assert_bits(batch, alone(inputs, mask, labels))
    if scale == 700.0:
        np.testing.assert_allclose(batch, time_major_loss(inputs, mask, labels), rtol=1e-13)


def test_mixed_shapes_group_only_runs_of_one_shape() -> None:
    """Runs of one frame count and target length interleaved with other shapes and with
    impossible targets (more labels than frames): every loss has its bits alone."""
    rng = np.random.default_rng(7)
    shapes = [(5, 2)] * 20 + [(3, 2)] * 11 + [(5, 1)] * 3 + [(2, 3)] * 12 + [(6, 2)] * 17
    inputs = rng.normal(size=(6, len(shapes), 8))
    mask = np.zeros((6, len(shapes)), np.int64)
    labels = np.full((len(shapes), 6), -1)
    for i, (frames, length) in enumerate(shapes):
        mask[:frames, i] = 1
        labels[i, :length] = (np.arange(length) * 3 + i) % 7
    batch = ctcop.ctc_loss(inputs, mask, labels)
    assert np.isposinf(batch[34:46]).all() and np.isfinite(np.delete(batch, np.s_[34:46])).all()
    assert_bits(batch, alone(inputs, mask, labels))


def test_the_released_form_in_lanes() -> None:
    """Batch-major logits, a blank that is not the last class: the bits alone and enumeration's values."""
    rng = np.random.default_rng(8)
    samples = lanes.LANES + lanes.fewest_samples(5, 5)
    logits = rng.normal(size=(samples, 4, 5))
    lengths = np.full(samples, 4)
    labels = rng.integers(1, 5, size=(samples, 4))
    label_lengths = np.full(samples, 2)
    batch = ctcop.openvino_ctc_loss(logits, lengths, labels, label_lengths, 0)
    each = [
        ctcop.openvino_ctc_loss(logits[i : i + 1], lengths[i : i + 1], labels[i : i + 1], label_lengths[i : i + 1], 0)
        for i in range(samples)
    ]
    assert_bits(batch, np.concatenate(each))
    np.testing.assert_allclose(batch, openvino_loss(logits, lengths, labels, label_lengths, 0), rtol=1e-13)


def test_blocks_that_cut_runs_give_each_sample_its_bits() -> None:
    """The pool hands out blocks ``[first, last)`` that cut runs anywhere: the same bits as the
    whole batch in one block, and as each sample alone; no frames and an empty target give 0,
    no frames and one label +inf."""
    whole = lane_losses(0, 100)
    for first, last in ((0, 9), (3, 30), (20, 37), (26, 58), (41, 100)):
        for part, full in zip(lane_losses(first, last), whole, strict=True):
            assert_bits(part, full[first : first + part.size])
    for i in range(58):
        for single, full in zip(lane_losses(i, i + 1), whole, strict=True):
            assert_bits(single, full[i : i + single.size])
    assert np.isposinf(whole[0][27:37]).all() and (whole[0][49:] == 0.0).all()


PROGRAM = """
import numpy as np
from support.lanes import lane_losses
for losses in lane_losses(0, 100):
    print(" ".join(value.hex() for value in losses))
"""


def test_lanes_stay_within_their_arrays(tmp_path: Path) -> None:
    """Compiled with numba's bounds checking, every run of :func:`support.lanes.lane_batches`
    indexes only inside its arrays (numba checks no index otherwise), and gives the same bits."""
    root = ROOT
    path = os.pathsep.join([str(root), str(root / "tests")])  # this checkout's ctcop, and support.lanes
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, cwd=root, capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-2000:]
    expected = [" ".join(value.hex() for value in losses) for losses in lane_losses(0, 100)]
    assert done.stdout.split("\n")[:2] == expected
