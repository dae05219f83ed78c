"""The hand-worked example of spec/ctcloss4.md section 9 and the seed's own example, as fixed values."""

import math

import numba
import numpy as np
import pytest
from support.oracle import decode_path

import ctcop
from ctcop import canonical
from ctcop.core import kernels, scheduler
from ctcop.examples import HAND_WORKED_PROBS, SEED_LABELS, worked_examples

# Section 9.1: T = 3, C = 3 (classes a = 0, b = 1, blank = 2); logits are ln of these probabilities.
INPUTS = np.log(HAND_WORKED_PROBS)[:, None, :]
MASK = np.ones((3, 1), dtype=np.int64)


@pytest.mark.parametrize(
    ("labels", "collapse", "merge", "total"),
    [
        # a a a, a a -, a - -, - a a, - - a, - a -
        ([0, -1, -1], False, True, 0.12 + 0.02 + 0.025 + 0.072 + 0.09 + 0.012),
        # a - -, - - a, - a -  (without merging, "a a" would emit two symbols)
        ([0, -1, -1], False, False, 0.025 + 0.09 + 0.012),
        # target a a: only a - a separates the two a's
        ([0, 0, -1], False, True, 0.5 * 0.5 * 0.6),
        # collapsed first, a a becomes a
        ([0, 0, -1], True, True, 0.339),
        # pads anywhere: -1 0 -1 is the target a
        ([-1, 0, -1], False, True, 0.339),
        # without merging: a a -, a - a, - a a
        ([0, 0, -1], False, False, 0.5 * 0.4 * 0.1 + 0.5 * 0.5 * 0.6 + 0.3 * 0.4 * 0.6),
        # empty target: the all-blank path
        ([-1, -1, -1], False, True, 0.3 * 0.5 * 0.1),
        # a b a needs all three frames
        ([0, 1, 0], False, True, 0.5 * 0.1 * 0.6),
    ],
)
def test_hand_worked_example(labels: list[int], collapse: bool, merge: bool, total: float) -> None:
    loss = ctcop.ctc_loss(INPUTS, MASK, np.array([labels]), preprocess_collapse_repeated=collapse, merge_repeated=merge)
    assert loss[0] == pytest.approx(-math.log(total), rel=1e-13)


@numba.njit
def forward_table(logits: np.ndarray, target: np.ndarray, blank: int, merge: bool) -> np.ndarray:
    """The kernels' forward variables after each frame, [T, S], for one sample's logits [T, C]."""
    classes, moves = np.empty(2 * target.shape[0] + 3, dtype=np.int64), np.empty((2, 2 * target.shape[0] + 3))
    states = kernels.lattice(target, blank, merge, classes, moves)
    classes = classes[:states]
    alpha = np.full(states + 2, -np.inf)  # two pads, then the states
    alpha[2] = 0.0
    work, scaled, emission = np.empty(logits.shape[1]), np.zeros((2, states + 2)), np.empty(states)
    table = np.empty((logits.shape[0], states))
    for t in range(logits.shape[0]):
        top, log_sum = kernels.frame_normaliser(logits[t], work)
        for s in range(states):
            emission[s] = (logits[t, classes[s]] - top) - log_sum
        following = np.full(states + 2, -np.inf)
        kernels.forward_step(
            alpha, following, scaled[0], scaled[1], emission, moves[0], moves[1], min(states, 2 * t + 2)
        )
        alpha = following
        table[t] = alpha[2:]
    return table


def test_hand_worked_forward_table() -> None:
    # Section 9.1 table: forward variables over the states (blank, a, blank) for the target a.
    batch = canonical.from_time_major(
        INPUTS, MASK, np.array([[0, -1, -1]]), preprocess_collapse_repeated=False, merge_repeated=True
    )
    expected = [[0.3, 0.5, 0.0], [0.15, 0.32, 0.25], [0.015, 0.282, 0.057]]
    table = forward_table(batch.logits[:, 0], batch.targets[0, :1], batch.blank, batch.merge_repeated)
    np.testing.assert_allclose(np.exp(table), expected, rtol=1e-13, atol=0)
    assert scheduler.log_likelihood(batch)[0] == pytest.approx(math.log(0.339), rel=1e-14)


def test_hand_worked_gradient() -> None:
    loss, grad = ctcop.ctc_loss_grad(INPUTS, MASK, np.array([[0, -1, -1]]))
    assert loss[0] == pytest.approx(1.0817551716016867, rel=1e-14)
    # Posterior occupancy of class a at frame 0: paths starting with a over the total.
    occupancy_a0 = (0.12 + 0.02 + 0.025) / 0.339
    assert grad[0, 0, 0] == pytest.approx(0.5 - occupancy_a0, rel=1e-12)
    occupancy_blank2 = (0.02 + 0.025 + 0.012) / 0.339
    assert grad[2, 0, 2] == pytest.approx(0.1 - occupancy_blank2, rel=1e-12)


def test_seed_example_decoding() -> None:
    # Seed: with K = 5, target (0,3,2,2,-1,...) is (0,3,2,2) and path (0,0,4,3,2,2,4,2,4) decodes to it.
    path = (0, 0, 4, 3, 2, 2, 4, 2, 4)
    assert decode_path(path, blank=4, merge_repeated=True) == (0, 3, 2, 2)
    one_hot = np.full((9, 1, 5), -10.0)
    one_hot[np.arange(9), 0, list(path)] = 10.0
    decoded = ctcop.greedy_decode(one_hot, np.ones((9, 1), dtype=np.int32))
    assert decoded.tolist() == [[0, 3, 2, 2, -1, -1, -1, -1, -1]]


@pytest.mark.parametrize(("merge", "paths"), [(True, 495), (False, 126)])
def test_seed_example_uniform_logits(merge: bool, paths: int) -> None:
    # With uniform logits every path has probability 5**-9, so loss = 9 ln 5 - ln(#aligned paths).
    # 495 = C(12, 4) aligned paths when merging, 126 = C(9, 4) without (spec section 9.2).
    labels = np.array([SEED_LABELS])
    loss = ctcop.ctc_loss(np.zeros((9, 1, 5)), np.ones((9, 1), dtype=np.int8), labels, merge_repeated=merge)
    assert loss[0] == pytest.approx(9 * math.log(5) - math.log(paths), rel=1e-13)


@pytest.mark.parametrize("example", worked_examples(), ids=lambda e: e.name)
def test_worked_example_table(example) -> None:
    # The table behind `ctcop example` and the corpus: its closed forms are the values above.
    closed = {"-ln(0.339)": -math.log(0.339), "9 ln 5 - ln 495": 9 * math.log(5) - math.log(495)}
    closed["9 ln 5 - ln 126"] = 9 * math.log(5) - math.log(126)
    assert example.expected == closed[example.closed_form]
    loss = ctcop.ctc_loss(example.inputs, example.sequence_mask, example.labels, **example.attributes)
    assert loss[0] == pytest.approx(example.expected, rel=1e-13)
