"""greedy_decode: best path per active frame, merge, blank removal, -1 padding."""

import numpy as np
import pytest

import ctcop


def one_hot_logits(paths: list[list[int]], classes: int) -> np.ndarray:
    frames = max(len(p) for p in paths)
    logits = np.zeros((frames, len(paths), classes))
    for i, path in enumerate(paths):
        for t, c in enumerate(path):
            logits[t, i, c] = 5.0
    return logits


@pytest.mark.parametrize(
    ("merge", "expected"),
    [
        (True, [[0, 1, 0, 0, -1, -1, -1], [2, -1, -1, -1, -1, -1, -1]]),
        (False, [[0, 0, 1, 0, 0, -1, -1], [2, 2, -1, -1, -1, -1, -1]]),
    ],
)
def test_best_path_merge_and_blanks(merge: bool, expected: list[list[int]]) -> None:
    paths = [[0, 0, 3, 1, 0, 3, 0], [2, 2, 3, 3, 1, 1, 1]]
    mask = np.ones((7, 2), dtype=np.int32)
    mask[2:, 1] = 0
    decoded = ctcop.greedy_decode(one_hot_logits(paths, 4), mask, merge_repeated=merge)
    assert decoded.dtype == np.int64
    assert decoded.tolist() == expected


def test_ties_pick_the_lowest_class_and_empty_shapes_work() -> None:
    assert ctcop.greedy_decode(np.zeros((3, 1, 4)), np.ones((3, 1), bool)).tolist() == [[0, -1, -1]]
    assert ctcop.greedy_decode(np.zeros((0, 2, 4)), np.zeros((0, 2), np.int8)).shape == (2, 0)
    assert ctcop.greedy_decode(np.zeros((3, 0, 4)), np.zeros((3, 0), np.int8)).shape == (0, 3)


def test_decoded_best_path_is_a_valid_label_row() -> None:
    rng = np.random.default_rng(4)
    inputs = rng.normal(size=(8, 5, 6))
    mask = (np.arange(8)[:, None] < rng.integers(0, 9, size=5)[None, :]).astype(np.int64)
    decoded = ctcop.greedy_decode(inputs, mask)
    assert np.isfinite(ctcop.ctc_loss(inputs, mask, decoded)).all()
