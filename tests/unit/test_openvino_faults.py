"""``canonical.openvino_faults``: the released form's rules read per sample (spec 7.1, 7.2, 11.5).

A sample is faulty exactly when the reference refuses that sample given alone; a batch-wide fault
(``blank_index``, shapes that disagree, C = 0) faults every sample; ranks, element types and
non-boolean attributes raise as in the reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctcop
from ctcop.canonical import openvino_faults

RELEASED = ("logits", "logit_length", "labels", "label_length")


def refused_alone(inputs: dict[str, np.ndarray], blank_index: object, **attributes: bool) -> np.ndarray:
    """[N]: whether ``openvino_ctc_loss`` raises on each sample given alone."""
    refused = []
    for i in range(inputs["logits"].shape[0]):
        one = [inputs[name][i : i + 1] for name in RELEASED]
        try:
            ctcop.openvino_ctc_loss(*one, blank_index, **attributes)
        except ctcop.InvalidInputError:
            refused.append(True)
        else:
            refused.append(False)
    return np.array(refused, dtype=bool)


@st.composite
def released_batches(draw: st.DrawFn) -> tuple[dict[str, np.ndarray], object, dict[str, bool]]:
    """Small released batches whose lengths, labels and blank_index stray just outside the rules."""
    n, t, c = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    index_type = draw(st.sampled_from(["int32", "int64", "uint8", "uint64"]))
    low = 0 if index_type.startswith("u") else -2
    inputs = {
        "logits": rng.normal(size=(n, t, c)),
        "logit_length": rng.integers(max(low, -1), t + 2, size=n).astype(index_type),
        "labels": rng.integers(low, c + 1, size=(n, t)).astype(index_type),
        "label_length": rng.integers(max(low, -1), t + 2, size=n).astype(index_type),
    }
    blank_index = draw(st.sampled_from([None, *range(-1, c + 1)]))
    attributes = {
        "preprocess_collapse_repeated": draw(st.booleans()),
        "ctc_merge_repeated": draw(st.booleans()),
        "unique": draw(st.booleans()),
    }
    return inputs, blank_index, attributes


@given(released_batches())
def test_a_sample_is_faulty_exactly_when_the_reference_refuses_it_alone(batch) -> None:
    inputs, blank_index, attributes = batch
    faults = openvino_faults(*(inputs[name] for name in RELEASED), blank_index, **attributes)
    assert faults.dtype == bool and faults.shape == (inputs["logits"].shape[0],)
    np.testing.assert_array_equal(faults, refused_alone(inputs, blank_index, **attributes))


def test_each_rule_faults_its_own_sample() -> None:
    logits = np.zeros((6, 3, 4))
    logit_length = np.array([3, 4, 3, 3, 0, 1])
    labels = np.array([[0, 1, 2], [0, 0, 0], [3, 0, 0], [0, -1, 7], [1, 2, 0], [2, 2, 2]])
    label_length = np.array([2, 1, 1, 1, 3, -1])
    faults = openvino_faults(logits, logit_length, labels, label_length)
    # 0 valid; 1 logit_length > T; 2 the blank 3 in the prefix; 3 -1 beyond the prefix is ignored;
    # 4 a target longer than its frames is valid (+inf); 5 label_length < 0
    np.testing.assert_array_equal(faults, [False, True, True, False, False, True])


def test_values_beyond_int32_are_faults_never_wrapped() -> None:
    logits = np.zeros((3, 2, 3))
    labels = np.array([[0, 0], [2**32, 0], [2**64 - 1, 0]], dtype=np.uint64)
    faults = openvino_faults(logits, np.array([2, 2, 2]), labels, np.array([1, 1, 1]))
    np.testing.assert_array_equal(faults, [False, True, True])
    lengths = np.array([1, 2**32 + 1, 2**64 - 1], dtype=np.uint64)
    np.testing.assert_array_equal(openvino_faults(logits, lengths, labels[:1].repeat(3, 0), lengths * 0), [0, 1, 1])


@pytest.mark.parametrize(
    ("logit_length", "labels", "label_length", "blank_index"),
    [
        (np.array([1, 1, 1]), np.zeros((2, 2), np.int64), np.array([1, 1]), None),
        (np.array([1, 1]), np.zeros((2, 3), np.int64), np.array([1, 1]), None),
        (np.array([1, 1]), np.zeros((2, 2), np.int64), np.array([1]), None),
        (np.array([1, 1]), np.zeros((2, 2), np.int64), np.array([1, 1]), 3),
        (np.array([1, 1]), np.zeros((2, 2), np.int64), np.array([1, 1]), -1),
        (np.array([1, 1]), np.zeros((2, 2), np.int64), np.array([1, 1]), np.array([1])),
    ],
)
def test_a_batch_fault_faults_every_sample(logit_length, labels, label_length, blank_index) -> None:
    faults = openvino_faults(np.zeros((2, 2, 3)), logit_length, labels, label_length, blank_index)
    np.testing.assert_array_equal(faults, [True, True])


def test_no_classes_faults_every_sample() -> None:
    faults = openvino_faults(np.zeros((2, 1, 0)), np.array([1, 1]), np.zeros((2, 1), np.int64), np.array([0, 0]))
    np.testing.assert_array_equal(faults, [True, True])


X, LENGTHS, LABELS = np.zeros((2, 2, 3)), np.ones(2, np.int64), np.zeros((2, 2), np.int64)


@pytest.mark.parametrize(
    ("arguments", "attributes", "pattern"),
    [
        ((np.zeros((2, 3)), LENGTHS, LABELS, LENGTHS), {}, "^logits: rank"),
        ((X, np.ones((2, 1), np.int64), LABELS, LENGTHS), {}, "^logit_length: rank"),
        ((X, LENGTHS, LABELS, np.ones(2)), {}, "^label_length: element"),
        ((X, LENGTHS, np.zeros((2, 2)), LENGTHS), {}, "^labels: element"),
        ((X, LENGTHS, LABELS, LENGTHS, 1.0), {}, "^blank_index: element"),
        ((X, LENGTHS, LABELS, LENGTHS), {"unique": 1}, "^unique: attribute must be a boolean"),
    ],
)
def test_ranks_types_and_attributes_raise(arguments, attributes, pattern: str) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=pattern):
        openvino_faults(*arguments, **attributes)
