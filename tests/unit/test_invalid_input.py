"""Every class of invalid input raises InvalidInputError naming the input, the position and the rule."""

import os
import subprocess
import sys

import numpy as np
import pytest

import ctcop

X = np.zeros((4, 2, 3))
MASK = np.ones((4, 2), dtype=np.int32)
LABELS = np.array([[0, 1, -1, -1], [1, -1, -1, -1]])


def raises(pattern: str):
    return pytest.raises(ctcop.InvalidInputError, match=pattern)


@pytest.mark.parametrize(
    ("inputs", "mask", "labels", "pattern"),
    [
        (np.zeros((4, 2)), MASK, LABELS, r"^inputs: rank must be 3 \(\[T, N, C\]\), got shape \(4, 2\)"),
        (X, np.ones(4), LABELS, r"^sequence_mask: rank must be 2"),
        (X, MASK, LABELS[0], r"^labels: rank must be 2"),
        (X, np.ones((4, 3), np.int32), LABELS, r"^sequence_mask: dimension 1 \(N\) is 3 but N = 2"),
        (X, np.ones((5, 2), np.int32), LABELS, r"^sequence_mask: dimension 0 \(T\) is 5 but T = 4"),
        (X, MASK, np.zeros((2, 3), np.int64), r"^labels: dimension 1 \(T\) is 3 but T = 4"),
        (X.astype(np.int32), MASK, LABELS, r"^inputs: element type int32 is not one of float16"),
        (X.astype(np.complex128), MASK, LABELS, r"^inputs: element type complex128"),
        (X, MASK.astype(np.float32), LABELS, r"^sequence_mask: element type float32 is not one of bool"),
        (X, MASK, LABELS.astype(np.float64), r"^labels: element type float64 is not one of int8"),
        (X, MASK, LABELS.astype(bool), r"^labels: element type bool"),
        (np.zeros((4, 2, 0)), MASK, LABELS, r"^inputs: C must be at least 1"),
        ([[[0.0, 1.0]], [[0.0]]], [[1], [1]], [[-1, -1]], r"^inputs: cannot be read as a rectangular array"),
    ],
)
def test_shape_and_type_rules(inputs, mask, labels, pattern: str) -> None:
    with raises(pattern):
        ctcop.ctc_loss(inputs, mask, labels)
    with raises(pattern):
        ctcop.ctc_loss_grad(inputs, mask, labels)


def test_mask_value_must_be_0_or_1() -> None:
    mask = MASK.copy()
    mask[2, 1] = 2
    with raises(r"^sequence_mask\[2, 1\]: value 2 is not 0 or 1"):
        ctcop.ctc_loss(X, mask, LABELS)
    mask[2, 1] = -1
    with raises(r"^sequence_mask\[2, 1\]: value -1 is not 0 or 1"):
        ctcop.ctc_loss(X, mask, LABELS)


def test_mask_must_be_prefix_shaped() -> None:
    mask = np.array([[1, 1], [0, 1], [1, 1], [0, 0]])
    with raises(r"^sequence_mask\[2, 0\]: 1 after a 0 in column 0: a column must be a run of 1s"):
        ctcop.ctc_loss(X, mask, LABELS)
    with raises(r"^sequence_mask\[2, 0\]"):
        ctcop.greedy_decode(X, mask)


@pytest.mark.parametrize(
    ("value", "position"),
    [(2, (1, 3)), (3, (0, 2)), (-2, (1, 0)), (10**9, (0, 0)), (-(2**40), (1, 1))],
)
def test_label_must_be_a_class_or_pad(value: int, position: tuple[int, int]) -> None:
    labels = LABELS.copy()
    labels[position] = value
    where = rf"labels\[{position[0]}, {position[1]}\]: value {value} "
    with raises("^" + where + r"is not a class in \[0, 1\] nor the pad -1 \(rule 3.3: blank 2"):
        ctcop.ctc_loss(X, MASK, labels)


def test_huge_unsigned_labels_are_rejected_not_wrapped() -> None:
    labels = np.array([[0, 2**64 - 1, 0, 0], [1, 1, 1, 1]], dtype=np.uint64)
    with raises(r"^labels\[0, 1\]: value 18446744073709551615 is not a class"):
        ctcop.ctc_loss(X, MASK, labels)


def test_c_equal_1_allows_only_pads() -> None:
    with raises(r"^labels\[0, 0\]: value 0 is not a class"):
        ctcop.ctc_loss(np.zeros((2, 1, 1)), np.ones((2, 1), np.int8), np.array([[0, -1]]))


@pytest.mark.parametrize("name", ["preprocess_collapse_repeated", "merge_repeated"])
@pytest.mark.parametrize("value", ["yes", 1, None, 0.0])
def test_attributes_must_be_booleans(name: str, value: object) -> None:
    with raises(rf"^{name}: attribute must be a boolean, got {value!r}"):
        ctcop.ctc_loss(X, MASK, LABELS, **{name: value})


def test_decode_rejects_nan_in_active_frame_only() -> None:
    inputs = X.copy()
    inputs[3, 1, 0] = np.nan
    mask = MASK.copy()
    mask[3, 1] = 0
    assert ctcop.greedy_decode(inputs, mask).shape == (2, 4)
    with raises(r"^inputs\[3, 1\]: NaN in an active frame has no arg-max"):
        ctcop.greedy_decode(inputs, MASK)
    with raises(r"^merge_repeated: attribute must be a boolean"):
        ctcop.greedy_decode(X, MASK, merge_repeated="no")


OV_LOGITS = np.zeros((2, 4, 3))


@pytest.mark.parametrize(
    ("args", "kwargs", "pattern"),
    [
        ((OV_LOGITS, [4, 5], LABELS, [1, 1]), {}, r"^logit_length\[1\]: length 5 is outside \[0, 4\]"),
        ((OV_LOGITS, [4, -1], LABELS, [1, 1]), {}, r"^logit_length\[1\]: length -1 is outside"),
        ((OV_LOGITS, [4, 4], LABELS, [7, 1]), {}, r"^label_length\[0\]: length 7 is outside \[0, 4\]"),
        ((OV_LOGITS, [4, 4], LABELS, [2, 2]), {}, r"^labels\[1, 1\]: value -1 is not a class in \[0, 2\]"),
        ((OV_LOGITS, [4, 4], LABELS, [2, 1], np.int64(3)), {}, r"^blank_index: value 3 is outside \[0, 2\]"),
        ((OV_LOGITS, [4, 4], LABELS, [2, 1], np.int64(1)), {}, r"^labels\[0, 1\]: value 1 is not a class"),
        ((OV_LOGITS, [4, 4], LABELS, [2, 1], np.zeros(2, np.int64)), {}, r"^blank_index: rank must be 0"),
        ((OV_LOGITS, [4.0, 4.0], LABELS, [2, 1]), {}, r"^logit_length: element type float64"),
        ((OV_LOGITS, [4, 4, 4], LABELS, [2, 1]), {}, r"^logit_length: dimension 0 \(N\) is 3 but N = 2"),
        ((OV_LOGITS, [4, 4], LABELS, [2, 1]), {"unique": "no"}, r"^unique: attribute must be a boolean"),
        ((OV_LOGITS, [4, 4], LABELS, [2, 1]), {"ctc_merge_repeated": 1}, r"^ctc_merge_repeated: attribute"),
    ],
)
def test_openvino_form_rules(args: tuple, kwargs: dict, pattern: str) -> None:
    with raises(pattern):
        ctcop.openvino_ctc_loss(*args, **kwargs)


def test_invalid_input_error_is_a_value_error_with_fields() -> None:
    with pytest.raises(ValueError) as info:
        ctcop.ctc_loss(X, MASK, np.full((2, 4), 7))
    error = info.value
    assert isinstance(error, ctcop.InvalidInputError)
    assert error.name == "labels" and error.index == (0, 0) and "rule 3.3" in error.rule


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2", 1025, 100000])
def test_thread_count_must_be_a_positive_integer(value: object) -> None:
    with raises(r"^threads: must be a positive integer"):
        ctcop.set_num_threads(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["0", "two", "-3", "1e2", "100000"])
def test_thread_count_from_the_environment_is_checked(value: str) -> None:
    code = "import numpy as np, ctcop; ctcop.ctc_loss(np.zeros((1, 1, 2)), np.ones((1, 1), np.int8), [[0]])"
    result = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "CTCOP_NUM_THREADS": value}, capture_output=True, text=True
    )
    assert result.returncode == 1
    message = f"InvalidInputError: CTCOP_NUM_THREADS: must be a positive integer, at most 1024; got '{value}'"
    assert message in result.stderr


def test_thread_count_is_kept() -> None:
    before = ctcop.get_num_threads()
    try:
        ctcop.set_num_threads(3)
        assert ctcop.get_num_threads() == 3
    finally:
        ctcop.set_num_threads(before)


HUGE = 10**12  # elements: terabytes of working memory, more than any machine this runs on


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (  # a broadcast (stride-0) view: 4 TB of logits in a few bytes
            lambda: ctcop.ctc_loss(np.broadcast_to(np.float32(0), (4, 2, HUGE)), MASK, LABELS),
            "inputs",
        ),
        (
            lambda: ctcop.ctc_loss_or_nan(np.broadcast_to(np.float32(0), (4, 2, HUGE)), MASK, LABELS),
            "inputs",
        ),
        (  # very long labels (and the frames they need)
            lambda: ctcop.ctc_loss(
                np.broadcast_to(np.float32(0), (HUGE, 1, 2)),
                np.broadcast_to(np.int8(1), (HUGE, 1)),
                np.broadcast_to(np.int64(0), (1, HUGE)),
            ),
            "inputs",
        ),
        (
            lambda: ctcop.openvino_ctc_loss(
                np.broadcast_to(np.float32(0), (1, HUGE, 2)), [HUGE], np.broadcast_to(np.int64(0), (1, HUGE)), [1]
            ),
            "logits",
        ),
        (lambda: ctcop.greedy_decode(np.broadcast_to(np.float32(0), (4, 2, HUGE)), MASK), "inputs"),
    ],
)
def test_inputs_beyond_memory_are_refused_before_allocating(call, name: str) -> None:
    pattern = rf"^{name}: shape .* needs \d+ bytes .* of working memory"
    with pytest.raises(ctcop.InvalidInputError, match=pattern) as info:
        call()
    assert "this process may use" in str(info.value)


class ClaimsToBeHuge:
    """A sequence whose length says 10^18 elements: numpy cannot even start to read it."""

    def __len__(self) -> int:
        return 10**18

    def __getitem__(self, index: int) -> float:
        return 0.0


@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_sequence_claiming_more_than_memory_is_refused(position: int) -> None:
    args: list[object] = [np.zeros((4, 2, 3), np.float32), MASK, LABELS]
    args[position] = ClaimsToBeHuge()
    name = ("inputs", "sequence_mask", "labels")[position]
    with pytest.raises(ctcop.InvalidInputError, match=rf"^{name}: cannot be read as an array: it does not fit"):
        ctcop.ctc_loss(*args)
