"""ctc_loss and openvino_ctc_loss against brute-force path enumeration (the spec read literally)."""

import itertools

import numpy as np
import pytest
from support.cases import random_openvino_case
from support.oracle import openvino_loss, time_major_loss

import ctcop
from ctcop.conformance.cases import random_case

ATTRIBUTES = list(itertools.product([False, True], [False, True]))


def assert_matches(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-12) -> None:
    assert actual.shape == expected.shape
    assert np.array_equal(np.isinf(actual), np.isinf(expected)), (actual, expected)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(actual[finite], expected[finite], rtol=rtol, atol=1e-14)


@pytest.mark.parametrize(("collapse", "merge"), ATTRIBUTES)
def test_random_cases_match_enumeration(collapse: bool, merge: bool) -> None:
    rng = np.random.default_rng(1000 + 2 * collapse + merge)
    seen_inf = seen_empty = seen_zero_length = 0
    for _ in range(120):
        case = random_case(rng)
        expected = time_major_loss(
            case.inputs["inputs"], case.inputs["sequence_mask"], case.inputs["labels"], collapse, merge
        )
        actual = ctcop.ctc_loss(
            case.inputs["inputs"],
            case.inputs["sequence_mask"],
            case.inputs["labels"],
            preprocess_collapse_repeated=collapse,
            merge_repeated=merge,
        )
        assert_matches(actual, expected)
        seen_inf += int(np.isinf(expected).sum())
        seen_empty += int((case.inputs["labels"] == -1).all(axis=1).sum())
        seen_zero_length += int((case.inputs["sequence_mask"].sum(axis=0) == 0).sum())
    assert seen_inf > 10 and seen_empty > 10 and seen_zero_length > 10


@pytest.mark.parametrize(("collapse", "merge"), ATTRIBUTES)
def test_large_logits_and_shifts_match_enumeration(collapse: bool, merge: bool) -> None:
    rng = np.random.default_rng(7)
    for shift in [0.0, 1e4, -3e5]:
        inputs = np.round(rng.normal(size=(4, 3, 3)) * 1e4) + shift
        mask = np.ones((4, 3), dtype=np.int8)
        labels = np.array([[0, -1, 1, -1], [1, 1, -1, -1], [-1, -1, -1, -1]])
        expected = time_major_loss(inputs, mask, labels, collapse, merge)
        actual = ctcop.ctc_loss(inputs, mask, labels, preprocess_collapse_repeated=collapse, merge_repeated=merge)
        assert_matches(actual, expected)


@pytest.mark.parametrize("blank_at", ["first", "middle", "last"])
@pytest.mark.parametrize(("collapse", "merge", "unique"), list(itertools.product([False, True], repeat=3)))
def test_openvino_form_matches_enumeration(blank_at: str, collapse: bool, merge: bool, unique: bool) -> None:
    rng = np.random.default_rng([len(blank_at), collapse, merge, unique])
    for _ in range(25):
        logits, logit_length, labels, label_length, blank = random_openvino_case(rng, blank_at)
        expected = openvino_loss(logits, logit_length, labels, label_length, blank, collapse, merge, unique)
        blank_arg = None if blank_at == "last" else np.int64(blank)
        actual = ctcop.openvino_ctc_loss(
            logits,
            logit_length,
            labels,
            label_length,
            blank_arg,
            preprocess_collapse_repeated=collapse,
            ctc_merge_repeated=merge,
            unique=unique,
        )
        assert_matches(actual, expected)


def test_openvino_unique_keeps_first_occurrences_in_order() -> None:
    logits = np.zeros((1, 6, 4))
    labels = np.array([[2, 0, 2, 1, 0, 9]])
    loss = ctcop.openvino_ctc_loss(logits, [6], labels, [5], None, unique=True)
    same = ctcop.openvino_ctc_loss(logits, [6], np.array([[2, 0, 1, 0, 0, 0]]), [3], None)
    assert loss[0] == same[0]


def test_time_major_and_openvino_forms_agree() -> None:
    rng = np.random.default_rng(3)
    case = random_case(rng, max_t=6, max_c=5, max_n=4)
    while case.inputs["inputs"].shape[2] < 2:
        case = random_case(rng, max_t=6, max_c=5, max_n=4)
    lengths = case.inputs["sequence_mask"].sum(axis=0)
    keep = case.inputs["labels"] != -1
    order = np.argsort(~keep, axis=1, kind="stable")
    compact = np.take_along_axis(case.inputs["labels"], order, axis=1)
    expected = ctcop.ctc_loss(case.inputs["inputs"], case.inputs["sequence_mask"], case.inputs["labels"])
    actual = ctcop.openvino_ctc_loss(case.inputs["inputs"].transpose(1, 0, 2), lengths, compact, keep.sum(axis=1))
    np.testing.assert_array_equal(actual, expected)
