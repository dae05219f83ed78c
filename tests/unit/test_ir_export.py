"""OpenVINO IR export on the real OpenVINO runtime: lowered form, custom-op form, attach, raw kernel."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import openvino
import pytest
from support.models import openvino_acoustic_model as acoustic_model
from support.runtime_check import assert_runtime_matches, run

import ctcop
from ctcop.conformance.cases import edge_cases, random_cases
from ctcop.conformance.runtimes import RUNTIMES
from ctcop.openvino import attach_openvino, declared_precision_config, ir_model, openvino_core, save_ir


@pytest.mark.parametrize("runtime", ["openvino-ir", "openvino-custom"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_random_cases_match_reference(runtime: str, dtype: str) -> None:
    for case in random_cases(seed=41, count=80):
        typed = case.astype(dtype)
        assert_runtime_matches(runtime, run(runtime, typed), typed)


@pytest.mark.parametrize("runtime", ["openvino-ir", "openvino-custom"])
@pytest.mark.parametrize("case", edge_cases(), ids=lambda c: c.id)
def test_edge_cases_match_reference(runtime: str, case) -> None:
    for dtype in ("float32", "float64"):
        typed = case.astype(dtype)
        assert_runtime_matches(runtime, run(runtime, typed), typed)


def test_custom_op_is_the_reference_bit_for_bit() -> None:
    # float32 models: OpenVINO hands the op float32 tensors and ctcop computes in float64 and
    # rounds once, exactly as ctc_loss does. (float64 models are converted to float32 by the
    # CPU plugin around any op, this one included: defects D4/D5.)
    for case in edge_cases() + random_cases(seed=42, count=40):
        case = case.astype("float32")
        expected = ctcop.ctc_loss(
            case.inputs["inputs"], case.inputs["sequence_mask"], case.inputs["labels"], **case.attributes
        )
        np.testing.assert_array_equal(run("openvino-custom", case), expected)


def test_ir_files_hold_the_documented_layers(tmp_path) -> None:
    save_ir(ir_model(dims=(150, "N", 28)), str(tmp_path / "lowered.xml"))
    save_ir(ir_model(form="custom", attributes={"merge_repeated": False}), str(tmp_path / "custom.xml"))
    lowered = (tmp_path / "lowered.xml").read_text()
    custom = (tmp_path / "custom.xml").read_text()
    assert 'type="CTCLoss" version="opset4"' in lowered and "ctcop1" not in lowered
    assert custom.count('type="CTCLoss" version="ctcop1"') == 1
    assert 'merge_repeated="false"' in custom and 'preprocess_collapse_repeated="false"' in custom
    model = openvino.Core().read_model(str(tmp_path / "lowered.xml"))
    assert [i.get_any_name() for i in model.inputs] == ["inputs", "sequence_mask", "labels"]
    assert [o.get_any_name() for o in model.outputs] == ["loss"]
    assert str(model.input("inputs").get_partial_shape()) == "[150,?,28]"
    with pytest.raises(RuntimeError):
        openvino.Core().read_model(str(tmp_path / "custom.xml"))  # stock OpenVINO: unknown opset ctcop1


FRESH_PROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import openvino
    data = np.load(sys.argv[2])
    compiled = openvino.Core().compile_model(sys.argv[1], "CPU", json.loads(sys.argv[3]))
    out = {}
    for name in sorted({key.split("/")[0] for key in data.files}):
        feeds = [data[name + "/inputs"], data[name + "/sequence_mask"], data[name + "/labels"]]
        out[name] = [float(v) for v in compiled(feeds)[0]]
    assert not any(m.startswith("ctcop") for m in sys.modules), "ctcop was imported"
    print(json.dumps(out))
    """
)


def test_lowered_ir_runs_in_a_fresh_process_without_ctcop(tmp_path) -> None:
    xml = tmp_path / "ctc.xml"
    save_ir(ir_model(dtype="float32", mask_dtype="int32", labels_dtype="int64"), str(xml))
    cases = [c.astype("float32") for c in edge_cases() if c.attributes == edge_cases()[0].attributes]
    arrays = {}
    for case in cases:
        arrays.update(
            {
                f"{case.id}/inputs": case.inputs["inputs"],
                f"{case.id}/sequence_mask": case.inputs["sequence_mask"].astype(np.int32),
                f"{case.id}/labels": case.inputs["labels"].astype(np.int64),
            }
        )
    np.savez(tmp_path / "cases.npz", **arrays)
    script = tmp_path / "run.py"
    script.write_text(FRESH_PROCESS)
    config = json.dumps(declared_precision_config(openvino.Core(), "CPU", "float32"))  # spec 13
    result = subprocess.run(
        [sys.executable, "-I", str(script), str(xml), str(tmp_path / "cases.npz"), config],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    got = json.loads(result.stdout)
    for case in cases:
        assert_runtime_matches("openvino-ir", np.array(got[case.id]), case)


@pytest.mark.parametrize("form", ["lowered", "custom"])
def test_attach_adds_loss_to_an_openvino_model(form: str) -> None:
    model = attach_openvino(acoustic_model(), "logits", form=form, attributes={"preprocess_collapse_repeated": True})
    assert [i.get_any_name() for i in model.inputs] == ["features", "sequence_mask", "labels"]
    assert [o.get_any_name() for o in model.outputs] == ["logits", "loss"]
    compiled = openvino_core().compile_model(model, "CPU", declared_precision_config(openvino_core(), "CPU", "float32"))
    features = np.random.default_rng(1).normal(size=(8, 3, 6)).astype(np.float32)
    mask = (np.arange(8)[:, None] < np.array([8, 5, 0])[None, :]).astype(np.int32)
    labels = np.array([[1, 1, 2, -1, -1, -1, -1, -1], [-1, 3, -1, 3, -1, -1, -1, -1], [-1] * 8])
    result = compiled([features, mask, labels])
    expected = ctcop.ctc_loss(result["logits"], mask, labels, preprocess_collapse_repeated=True)
    np.testing.assert_allclose(result["loss"], expected, rtol=1e-5, atol=1e-4)
    same = attach_openvino(acoustic_model(), 0, form=form)
    assert [o.get_any_name() for o in same.outputs] == ["logits", "loss"]


def test_attach_refuses_bad_outputs() -> None:
    with pytest.raises(ctcop.InvalidInputError, match=r"^logits_output: 'logits' must have rank 3"):
        attach_openvino(acoustic_model(rank3=False), "logits")
    with pytest.raises(ctcop.InvalidInputError, match=r"^logits_output: 'nope' is not an output"):
        attach_openvino(acoustic_model(), "nope")
    with pytest.raises(ctcop.InvalidInputError, match=r"^logits_output: index 3 is outside \[0, 0\]"):
        attach_openvino(acoustic_model(), 3)
    with pytest.raises(ctcop.InvalidInputError, match=r"^model: already has a value named 'sequence_mask'"):
        attach_openvino(attach_openvino(acoustic_model(), "logits"), "logits")


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"form": "fused"}, r"^form: unknown IR form 'fused'"),
        ({"dtype": "int64"}, r"^dtype: unknown element type 'int64'"),
        ({"dims": ("T", -2, "C")}, r"^dims: N = -2 is negative"),
        ({"attributes": {"unique": True}}, r"^attributes: unknown attribute 'unique'"),
        ({"mask_dtype": "float16"}, r"^mask_dtype: unknown element type"),
    ],
)
def test_bad_exporter_arguments(options: dict, pattern: str) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=pattern):
        ir_model(**options)


def test_custom_op_gives_nan_for_invalid_input_instead_of_failing() -> None:
    # Spec 11.5 / 12.3: the layer calls ctc_loss_or_nan, so a label that breaks rule 3.3 makes its
    # sample NaN (inference no longer fails with ctcop's message); the other samples keep their value.
    case = edge_cases()[0]
    inputs = np.concatenate([case.inputs["inputs"], case.inputs["inputs"]], axis=1)
    mask = np.concatenate([case.inputs["sequence_mask"], case.inputs["sequence_mask"]], axis=1)
    labels = np.concatenate([np.full_like(case.inputs["labels"], -1), case.inputs["labels"]])
    labels[0, 0] = 2
    got = RUNTIMES["openvino-custom"](inputs, mask, labels)
    expected = ctcop.ctc_loss(case.inputs["inputs"], case.inputs["sequence_mask"], case.inputs["labels"])
    assert np.isnan(got[0]) and got[1] == pytest.approx(expected[0], rel=1e-6)
