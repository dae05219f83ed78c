"""``ctcop.defects.predicates``: which registered defect explains a failure, with its evidence (spec 10.1,
12.2, 13), on each defect's smallest input; the registry decides runtimes, statuses and thresholds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ctcop.attributes import Attributes
from ctcop.conformance import corpus
from ctcop.defects import Registry, defect, predicates, registry
from ctcop.defects.predicates import Failure, explain, read
from ctcop.layers.causes import likely_cause
from ctcop.layers.find import Layer, Port
from ctcop.tolerance import Mismatch

RELEASED = Attributes.of(form_name="openvino")
SPEC = Attributes.of()


def released(logits, logit_length, labels, label_length, blank_index=None, **attributes):
    arrays = {
        "logits": np.asarray(logits, dtype=np.float32),
        "logit_length": np.asarray(logit_length, dtype=np.int32),
        "labels": np.asarray(labels, dtype=np.int32),
        "label_length": np.asarray(label_length, dtype=np.int32),
    }
    if blank_index is not None:
        arrays["blank_index"] = np.asarray(blank_index, dtype=np.int32)
    return read(arrays, RELEASED.replace(**attributes))


def ids(x, status: str, runtime: str = "openvino", mismatch: Mismatch | None = None) -> list[str]:
    return [cause.defect.id for cause in explain(x, Failure(status, mismatch), runtime)]


def loss_off(got: float, expected: float) -> Mismatch:
    return Mismatch("loss", sample=0, got=got, expected=expected)


def test_d1_an_empty_target_and_a_crash() -> None:
    x = released(np.zeros((2, 1, 2)), [1, 1], [[0], [0]], [1, 0])
    (cause,) = explain(x, Failure("crash"), "openvino")
    assert cause.text() == f"{defect('D1').label} — sample 1 has an empty target (label_length 0)"
    assert ids(x, "error") == [] and ids(x, "crash", "openvino-ir") == []


def test_d1_also_explains_a_wrong_loss_which_some_runs_return() -> None:
    x = released(np.zeros((2, 1, 2)), [1, 1], [[0], [0]], [1, 0])
    assert ids(x, "fail", mismatch=loss_off(7.5, 0.69)) == ["D1"]
    assert ids(released(np.zeros((2, 1, 2)), [1, 1], [[0], [0]], [1, 1]), "fail") == []  # no empty target


def test_d1_in_the_time_major_form_is_a_row_of_pads() -> None:
    x = read({"inputs": np.zeros((1, 1, 2)), "sequence_mask": np.ones((1, 1)), "labels": np.array([[-1]])}, SPEC)
    (cause,) = explain(x, Failure("crash"), "openvino")
    assert cause.evidence == "sample 0 has an empty target (every label is -1)"


def test_d2_a_target_longer_than_its_frames_and_an_error() -> None:
    x = released(np.zeros((1, 1, 2)), [0], [[0]], [1])
    (cause,) = explain(x, Failure("error"), "openvino")
    assert cause.text() == f"{defect('D2').label} — sample 0 has label_length 1 > logit_length 0"


def test_d9_a_target_that_fits_once_processed() -> None:
    # the registry's smallest input: unique on [0, 0, 1] with logit_length 2
    x = released(np.zeros((1, 3, 3)), [2], [[0, 0, 1]], [3], unique=True)
    assert ids(x, "error") == ["D9"]
    assert explain(x, Failure("error"), "openvino")[0].evidence == (
        "sample 0 has label_length 3 > logit_length 2, 2 after processing"
    )
    assert ids(released(np.zeros((1, 3, 3)), [2], [[0, 0, 1]], [3]), "error") == ["D2"]


@pytest.mark.parametrize(
    ("logits", "evidence"), [([[0, 100]], "largest logit 100"), ([[-200, -201]], "smallest frame")]
)
def test_d3_a_logit_beyond_the_registry_thresholds_and_a_disagreement(logits, evidence: str) -> None:
    x = released([logits], [1], [[0]], [1])
    assert ids(x, "fail") == ["D3"]
    assert evidence in explain(x, Failure("fail"), "openvino")[0].evidence
    assert ids(x, "fail", mismatch=loss_off(np.inf, 100.0)) == ["D3"]
    assert ids(x, "fail", mismatch=loss_off(99.0, 100.0)) == []  # a finite loss is not D3's


def test_d3_reads_only_active_frames_and_finite_logits() -> None:
    logits = np.zeros((1, 2, 2))
    logits[0, 1] = [500.0, -500.0]  # an inactive frame
    assert ids(released(logits, [1], [[0, 0]], [1]), "fail") == []
    logits[0, 0] = [np.inf, 0.0]
    assert ids(released(logits, [1], [[0, 0]], [1]), "fail") == []


def test_d3_thresholds_come_from_the_registry(monkeypatch) -> None:
    x = released([[[0, 50]]], [1], [[0]], [1])
    assert ids(x, "fail") == []
    entries = tuple(
        dataclasses.replace(d, evidence={**d.evidence, "logit_at_least": 40.0}) if d.id == "D3" else d
        for d in registry().defects
    )
    monkeypatch.setattr(predicates, "registry", lambda: Registry(registry().libraries, entries))
    assert ids(x, "fail") == ["D3"]


def test_d4_and_d5_float64_logits_and_their_mismatch() -> None:
    arrays = {
        "logits": np.array([[[0.1, 0.2]]]),
        "logit_length": np.array([1]),
        "labels": np.array([[0]]),
        "label_length": np.array([1]),
    }
    x = read(arrays, RELEASED)
    assert x.dtype == "float64"
    for runtime in ("openvino", "openvino-ir", "openvino-custom", "openvino-onnx"):
        assert ids(x, "fail", runtime) == ["D4", "D5"]
    assert ids(x, "fail", "onnxruntime") == []
    assert ids(x, "fail", mismatch=loss_off(0.7443966865539551, 0.744396660073571)) == ["D4"]
    assert ids(x, "fail", mismatch=loss_off(3.4028234663852886e38, np.inf)) == ["D5"]
    assert ids(x, "fail", mismatch=loss_off(1.0, 2.0)) == []
    assert ids(read(arrays, RELEASED, "float32"), "fail") == []


def test_d8_no_sample_has_a_frame() -> None:
    x = released(np.zeros((2, 0, 2)), [0, 0], np.zeros((2, 0)), [0, 0])
    assert "D8" in ids(x, "fail") and "D8" in ids(x, "nondeterministic")
    assert explain(x, Failure("fail"), "openvino")[-1].evidence == "no sample has a frame (every logit_length is 0)"
    assert "D8" not in ids(released(np.zeros((2, 1, 2)), [0, 1], [[0], [0]], [0, 1]), "fail")


def test_d10_collapse_asked_for() -> None:
    x = released(np.zeros((1, 3, 3)), [3], [[0, 1, 0]], [3], preprocess_collapse_repeated=True)
    assert ids(x, "fail") == ["D10"]
    assert ids(released(np.zeros((1, 3, 3)), [3], [[0, 0, 1]], [3]), "fail") == []


def test_d11_invalid_released_input_names_the_broken_rule() -> None:
    x = released(np.zeros((1, 1, 3)), [1], [[0]], [1], blank_index=-1)
    assert x.processed is None and x.blank_moved
    (cause,) = explain(x, Failure("fail", Mismatch("accepted-invalid-input", sample=0, got=0.5)), "openvino")
    assert cause.defect.id == "D11" and cause.evidence == "blank_index: value -1 is outside [0, 2] (rule 7.1)"


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError, match="disagree"):
        Failure("disagree")


def released_layer(form: str = "released", dtype: str = "float32") -> Layer:
    names = ("logits", "logit_length", "labels", "label_length")
    ports = tuple(Port(name, name, None, dtype if name == "logits" else "int32", "input") for name in names)
    return Layer(0, "ctc", form, ports, {"ctc_merge_repeated": "true"}, dtype)


def test_eval_names_the_causes_from_the_rules() -> None:
    inputs = [np.zeros((2, 1, 2), np.float32), np.array([1, 1]), np.array([[0], [0]]), np.array([1, 0])]
    assert likely_cause(released_layer(), inputs, "crash", "openvino") == (
        f"{defect('D1').label} — sample 1 has an empty target (label_length 0)"
    )
    assert likely_cause(released_layer(), inputs, "crash", "onnxruntime") == ""
    assert likely_cause(released_layer(), inputs, "agree", "openvino") == ""
    as_float64 = [inputs[0].astype(np.float64), *inputs[1:]]
    assert likely_cause(released_layer(dtype="float64"), as_float64, "disagree", "openvino") == (
        f"{defect('D1').label} — sample 1 has an empty target (label_length 0); "
        f"{defect('D4').label} — float64 logits; {defect('D5').label} — float64 logits"
    )


@pytest.mark.parametrize("defect_id", sorted(predicates.PREDICATES, key=lambda d: int(d[1:])))
def test_every_measured_case_of_a_defect_meets_its_predicate(defect_id: str) -> None:
    # The registry's cases are where each defect was measured: the predicate must hold on each,
    # for the case's runtime and every status the defect lists.
    entry = defect(defect_id)
    root = corpus.default_root()
    for runtime, case_ids in entry.cases.items():
        for case_id in case_ids:
            case = corpus.load(corpus.case_folder(root, case_id))
            x = read(case.inputs, case.attributes, case.tolerance)
            for status in entry.statuses:
                assert defect_id in ids(x, status, runtime), (case_id, runtime, status)
