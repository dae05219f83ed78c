"""``ctcop validate``'s static findings come from the core's rules (spec 3.3, 6, 7.1, 13): the
schema's rank, element type and dimension agreement with unknown dimensions allowed, the value
rules on constant inputs, and the attribute words a file writes."""

from __future__ import annotations

import numpy as np
import pytest

import ctcop
from ctcop.attributes import written_flag
from ctcop.layers.find import Layer, Port
from ctcop.layers.validate import attributes_of, validate_layer

Shape = tuple[int | None, ...] | None


def port(name: str, shape: Shape, dtype: str, constant: np.ndarray | None = None) -> Port:
    return Port(name, name, shape, dtype, "Constant c" if constant is not None else "input", constant)


def released(*ports: Port, **attributes: object) -> Layer:
    chosen = {"preprocess_collapse_repeated": "false", "ctc_merge_repeated": "true", "unique": "false", **attributes}
    return Layer(0, "ctc", "released", ports, chosen, "float32")


def errors(layer: Layer) -> list[str]:
    return [f.message for f in validate_layer(layer) if f.level == "error"]


def test_unknown_dimensions_agree_with_anything() -> None:
    layer = released(
        port("logits", (None, 4, 3), "float32"),
        port("logit_length", (2,), "int32"),
        port("labels", (None, None), "int32"),
        port("label_length", None, "int32"),
    )
    assert errors(layer) == []


def test_ranks_types_and_dimensions_are_the_cores_words() -> None:
    layer = released(
        port("logits", (2, 4, 3), "float32"),
        port("logit_length", (3,), "int32"),
        port("labels", (2,), "float32"),
        port("label_length", (2,), "int32"),
    )
    assert errors(layer) == [
        "logit_length: dimension 0 (N) is 3 but N = 2 from earlier inputs",
        "labels: rank must be 2 ([N, T]), got shape (2,)",
        "labels: element type float32 is not one of int8, int16, int32, int64, uint8, uint16, uint32, uint64",
    ]
    with pytest.raises(ctcop.InvalidInputError, match=r"^labels: rank must be 2 \(\[N, T\]\), got shape \(2,\)"):
        ctcop.openvino_ctc_loss(np.zeros((2, 4, 3)), [1, 1], np.zeros(2, np.int32), [1, 1])


def test_no_classes_is_an_error() -> None:
    layer = released(
        *(port(n, s, t) for n, s, t in [("logits", (1, 1, 0), "float32"), ("logit_length", (1,), "int32")])
    )
    assert "logits: C must be at least 1 (the blank class)" in errors(layer)


def test_constants_are_checked_by_the_value_rules() -> None:
    layer = released(
        port("logits", (2, 4, 3), "float32"),
        port("logit_length", (2,), "int64", np.array([4, 5])),
        port("labels", (2, 4), "int32"),
        port("label_length", (2,), "int64", np.array([-1, 0])),
        port("blank_index", (), "int64", np.array(3)),
    )
    assert errors(layer) == [
        "logit_length[1]: length 5 is outside [0, 4] (rule 7.1)",
        "label_length[0]: length -1 is outside [0, 4] (rule 7.1)",
        "blank_index: value 3 is outside [0, 2] (rule 7.1)",
    ]
    spec_layer = Layer(
        0,
        "ctc",
        "ctcop-onnx",
        (
            port("inputs", (2, 1, 3), "float32"),
            port("sequence_mask", (2, 1), "int32"),
            port("labels", (1, 2), "int64", np.array([[0, 2]])),
        ),
        {},
        "float32",
    )
    assert errors(spec_layer) == [
        "labels[0, 1]: value 2 is not a class in [0, 1] nor the pad -1 (rule 3.3: blank 2 and values outside "
        "[-1, C-2] are invalid)"
    ]


@pytest.mark.parametrize(
    ("written", "read"), [("true", True), ("FALSE", False), ("True", True), (1, True), (0, False), (True, True)]
)
def test_a_file_writes_booleans_as_words_or_integers(written: object, read: bool) -> None:
    assert written_flag(written, "unique") is read


@pytest.mark.parametrize("written", [" true", "yes", 2, None, 1.0])
def test_anything_else_is_not_a_boolean(written: object) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=r"^unique: attribute must be a boolean"):
        written_flag(written, "unique")
    layer = released(port("logits", (1, 1, 2), "float32"), unique=written)
    assert f"attribute unique = {written!r} is not a boolean" in errors(layer)
    assert attributes_of(layer)["unique"] is False
