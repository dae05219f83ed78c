"""Corpus cases written for other harnesses and consumed without ctcop.

The ONNX backend tests are read with onnx.numpy_helper and run in onnxruntime from the files
alone, compared with output_0.pb by the tolerance in data.json (NaN and infinities exactly, as
onnx's backend runner does with numpy.testing.assert_allclose). The IR tests are read with a plain
``openvino.Core().read_model`` and run on the .npy inputs. Released cases in IR run OpenVINO's
own kernel, so the IR part takes released cases that stay clear of its defects D1-D3 (no empty
target, no target longer than its frames, moderate logits) and no float64 (D4/D5).
"""

import io
import json
import shutil
import unittest
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import onnxruntime.backend
import openvino
import pytest
from ml_dtypes import bfloat16
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner

import ctcop
from ctcop.conformance import corpus, writers
from ctcop.openvino import declared_precision_config

BY_ID = {case.id: case for case in corpus.load_all()}
SPEC = ["spec/hand_worked/float32", "spec/interior_pads_collapse/float16", "spec/many_classes_02_nomerge/float32"]
SPEC_ALSO = ["spec/empty_targets/float32", "spec/infeasible_too_long/float32", "spec/logits_1e4/float64"]
RELEASED_SAFE = [
    "released/flags_collapse_unique/int32/float16",
    "released/flags_nomerge/int64/float32",
    "released/many_classes/int64/float32",
    "released/flags_default/int32/bfloat16",
]
RELEASED_ALSO = ["released/blank_middle/int32/float32", "released/no_frames/int64/float32"]
REJECTS = ["invalid/mask_gap", "invalid/released/label_is_blank_in_prefix"]
UNWRITABLE = ["spec/hand_worked/bfloat16", "invalid/mask_shape", "invalid/released/blank_index_rank_1"]


def assert_loss(got: np.ndarray, expected: np.ndarray, rtol: float, atol: float, where: str) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype, where
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, err_msg=where)


def read_pb(path: Path) -> tuple[str, np.ndarray]:
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return tensor.name, numpy_helper.to_array(tensor)


@pytest.fixture(scope="module")
def onnx_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("onnx_tests")
    cases = [BY_ID[i] for i in SPEC + SPEC_ALSO + RELEASED_SAFE + RELEASED_ALSO + REJECTS + UNWRITABLE]
    written = writers.write_onnx_tests(cases, folder)
    assert written == len(cases) - len(UNWRITABLE) - 1  # and the released bfloat16 case
    return folder


def test_onnx_backend_tests_run_from_the_files_alone(onnx_folder: Path) -> None:
    folders = sorted(path for path in onnx_folder.iterdir() if path.is_dir())
    assert len(folders) == len(SPEC + SPEC_ALSO + RELEASED_SAFE + RELEASED_ALSO + REJECTS) - 1
    for folder in folders:
        model = onnx.load(str(folder / "model.onnx"))
        onnx.checker.check_model(model, full_check=True)
        data = folder / "test_data_set_0"
        inputs = sorted(data.glob("input_*.pb"), key=lambda path: int(path.stem.split("_")[1]))
        feeds = dict(read_pb(path) for path in inputs)
        assert list(feeds) == [value.name for value in model.graph.input]
        output, expected = read_pb(data / "output_0.pb")
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        (got,) = session.run([output], feeds)
        limit = json.loads((folder / "data.json").read_text())
        assert_loss(got, expected, limit["rtol"], limit["atol"], folder.name)


def test_onnx_tests_name_the_cases_and_list_what_was_skipped(onnx_folder: Path) -> None:
    names = {path.name for path in onnx_folder.iterdir() if path.is_dir()}
    assert "test_ctcop_released_flags_nomerge_int64_float32" in names
    index = json.loads((onnx_folder / writers.INDEX_FILE).read_text())
    skipped = {entry["id"]: entry["reason"] for entry in index["skipped"]}
    assert set(skipped) == {*UNWRITABLE, "released/flags_default/int32/bfloat16"}
    assert "bfloat16" in skipped["spec/hand_worked/bfloat16"]
    assert "shape" in skipped["invalid/mask_shape"]
    # a case that must be rejected is written with the total function's answer (spec 11.5)
    _, expected = read_pb(onnx_folder / "test_ctcop_invalid_mask_gap" / "test_data_set_0" / "output_0.pb")
    assert np.isnan(expected).any() and not np.isnan(expected).all()


def run_backend_tests(folder: Path) -> unittest.TestResult:
    """onnx's standard backend-test runner with onnxruntime's backend, in the default environment,
    over the test folders under ``folder`` (on CPU)."""
    runner = Runner(onnxruntime.backend, __name__)
    for case in load_model_tests(data_dir=str(folder.parent), kind=folder.name):
        runner._add_model_test(case, "Ctcop")  # the runner's one way in for folders of one's own
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(runner.test_cases["OnnxBackendCtcopModelTest"])
    on_cpu = unittest.TestSuite(test for test in suite if test.id().endswith("_cpu"))
    return unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(on_cpu)


@pytest.mark.parametrize("model_form", writers.ONNX_FORMS)
def test_the_standard_backend_runner_runs_every_written_test(tmp_path: Path, model_form: str) -> None:
    cases = [BY_ID[i] for i in [*SPEC, "released/flags_nomerge/int64/float32", "invalid/mask_gap"]]
    folder = tmp_path / "ctcop"
    written = writers.write_onnx_tests(cases, folder, model_form)
    result = run_backend_tests(folder)
    assert result.testsRun == written == len(cases) and not result.failures and not result.errors
    if model_form == "function":  # onnxruntime's backend runs released opsets only by default
        assert len(result.skipped) == written and "ALLOW_RELEASED_ONNX_OPSET_ONLY" in result.skipped[0][1]
        return
    assert not result.skipped
    broken = folder / "test_ctcop_spec_hand_worked_float32" / "test_data_set_0" / "output_0.pb"
    name, expected = read_pb(broken)
    broken.write_bytes(numpy_helper.from_array(expected * np.float32(1.01), name).SerializeToString())
    shutil.rmtree(folder / "test_ctcop_invalid_mask_gap")
    result = run_backend_tests(folder)
    assert result.testsRun == written - 1 and len(result.failures) == 1 and not result.skipped
    assert "hand_worked_float32" in result.failures[0][0].id()


def test_onnx_tests_refuse_an_unknown_model_form(tmp_path: Path) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=r"^onnx_form: 'custom' is not one of inlined, function"):
        writers.write_onnx_tests([BY_ID[SPEC[0]]], tmp_path, "custom")


@pytest.fixture(scope="module")
def ir_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ir_tests")
    cases = [BY_ID[i] for i in SPEC + RELEASED_SAFE + REJECTS + UNWRITABLE]
    assert writers.write_ir_tests(cases, folder) == len(cases) - len(UNWRITABLE)
    return folder


def read_npy(folder: Path, entry: dict) -> np.ndarray:
    array = np.load(folder / entry["file"], allow_pickle=False)
    return array.view(bfloat16) if entry.get("storage") == "uint16 bits" else array


def feed(array: np.ndarray) -> object:
    if array.dtype == bfloat16:
        return openvino.Tensor(array.view(np.uint16), array.shape, openvino.Type.bf16)
    return array


def test_ir_tests_run_on_plain_openvino(ir_folder: Path) -> None:
    core = openvino.Core()
    manifests = sorted(ir_folder.glob("**/case.json"))
    assert len(manifests) == len(SPEC + RELEASED_SAFE + REJECTS)
    for path in manifests:
        folder, manifest = path.parent, json.loads(path.read_text())
        assert manifest["format"] == writers.IR_TEST_FORMAT and folder == ir_folder.joinpath(*manifest["id"].split("/"))
        config = declared_precision_config(core, "CPU", manifest["tolerance"]["dtype"])
        dtype = manifest["tolerance"]["dtype"]
        hint = {"float64": "f32", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}[dtype]
        assert manifest["compile"] == {"INFERENCE_PRECISION_HINT": hint, "without_it": "f32"}
        assert config["INFERENCE_PRECISION_HINT"] in (hint, "f32")
        compiled = core.compile_model(core.read_model(str(folder / "model.xml")), "CPU", config)
        inputs = [read_npy(folder, entry) for entry in manifest["inputs"]]
        assert [port.get_any_name() for port in compiled.inputs] == [entry["name"] for entry in manifest["inputs"]]
        if manifest["expect"] == "reject":
            assert manifest["form"] == "released" and not (folder / "expected_loss.npy").exists()
            continue
        got = np.asarray(compiled([feed(array) for array in inputs])[0])
        expected = read_npy(folder, manifest["expected"]["loss"])
        if expected.dtype == bfloat16:
            got = got.view(np.uint16).view(bfloat16)  # OpenVINO hands bf16 bits back typed float16
        limit = manifest["tolerance"]
        assert_loss(got, expected, limit["rtol"], limit["atol"], manifest["id"])


def test_ir_tests_say_what_the_model_is(ir_folder: Path) -> None:
    released = json.loads((ir_folder / "released" / "flags_nomerge" / "int64" / "float32" / "case.json").read_text())
    assert "opset4" in released["model"]["layers"] and released["attributes"]["ctc_merge_repeated"] is False
    spec = json.loads((ir_folder / "invalid" / "mask_gap" / "case.json").read_text())
    assert spec["expect"] == "value" and spec["rule"] == BY_ID["invalid/mask_gap"].rule
    index = json.loads((ir_folder / writers.INDEX_FILE).read_text())
    assert {entry["id"] for entry in index["skipped"]} == set(UNWRITABLE)
