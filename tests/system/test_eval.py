"""`ctcop eval` and `ctcop validate` on real files: IR written by openvino.save_model with
OpenVINO's released CTCLoss-4 fed by a small acoustic model (tests/support/eval_files.py), and
ctcop's ONNX export attached to a model; and broken variants of each."""

import json
import re

import numpy as np
import onnx
import openvino
import pytest
from support.cli import ctcop_cli
from support.eval_files import FEATURES, N, T, inputs_npz, released_ir
from support.models import onnx_acoustic_model

import ctcop
from ctcop.defects import defect
from ctcop.layers.causes import precision_cause
from ctcop.layers.result import LayerResult
from ctcop.onnx import attach_onnx, save_onnx
from ctcop.openvino import declared_precision_config


def test_eval_agrees_with_the_reference_where_openvino_is_right(tmp_path) -> None:
    weights, bias = released_ir(tmp_path / "model.xml")
    inputs_npz(tmp_path / "inputs.npz")
    out = tmp_path / "eval.json"
    result = ctcop_cli(
        "eval", str(tmp_path / "model.xml"), "--inputs", str(tmp_path / "inputs.npz"), "--json", str(out)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict AGREE" in result.stdout
    report = json.loads(out.read_text())
    (layer,) = report["layers"]
    assert layer["form"] == "released" and layer["verdict"] == "agree" and report["runtime"] == "openvino"
    assert len(layer["reference"]) == N and layer["max_rel_err"] < 1e-5
    assert layer["precision"] == "declared" and layer["compiled_precision"] == "f32"
    # The runtime column is what plain OpenVINO gives for the whole model at its declared float32.
    data = dict(np.load(tmp_path / "inputs.npz"))
    core = openvino.Core()
    direct = core.compile_model(str(tmp_path / "model.xml"), "CPU", declared_precision_config(core, "CPU", "f32"))
    np.testing.assert_allclose(layer["runtime"], direct(data)[0], rtol=1e-6)
    # The reference column is the reference on the logits the model computes in float32 (spec 13),
    # here recomputed in float64 from the weights as the IR stores them (save_model's default
    # compresses constants to float16).
    stored_weights, stored_bias = (w.astype(np.float16).astype(np.float64) for w in (weights, bias))
    logits = data["features"].astype(np.float64) @ stored_weights + stored_bias
    alone = ctcop.openvino_ctc_loss(logits, data["logit_length"], data["labels"], data["label_length"])
    np.testing.assert_allclose(layer["reference"], alone, rtol=1e-5)


def native_precision(model_path: str) -> str:
    """The inference precision OpenVINO's CPU plugin compiles ``model_path`` at without a hint."""
    compiled = openvino.Core().compile_model(model_path, "CPU")
    return str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())


def test_a_disagreement_at_a_reduced_native_precision_is_evaluated_at_the_declared_one(tmp_path) -> None:
    # Logits from a wide MatMul of float32 weights: where the CPU's default precision is bfloat16,
    # the model up to the layer and the model up to its loss round them differently.
    released_ir(tmp_path / "model.xml", width=64, compress_to_fp16=False)
    inputs_npz(tmp_path / "inputs.npz", width=64)
    model, out = str(tmp_path / "model.xml"), tmp_path / "native.json"
    result = ctcop_cli(
        "eval", model, "--inputs", str(tmp_path / "inputs.npz"), "--precision", "native", "--json", str(out)
    )
    (layer,) = json.loads(out.read_text())["layers"]
    native = native_precision(model)
    assert layer["compiled_precision"] == native, result.stdout
    if layer["verdict"] == "disagree":
        assert native in ("bf16", "f16"), result.stdout
        pattern = rf"runtime ran in {native}: agrees at the declared f32 \(max rel err \S+\); the difference is "
        assert re.match(pattern, layer["cause"]) and "sample " in layer["cause"], layer["cause"]
    else:
        assert layer["verdict"] == "agree", result.stdout


def test_precision_cause_says_what_the_declared_precision_showed() -> None:
    at_declared = LayerResult("ctc", "released", {}, verdict="agree", max_rel_err=3.1e-7, compiled_precision="f32")
    assert precision_cause("bf16", "float32", at_declared) == (
        "runtime ran in bf16: agrees at the declared f32 (max rel err 3.1e-07); "
        "the difference is bf16's rounding of the model before the layer"
    )
    at_declared.verdict, at_declared.max_rel_err = "disagree", 0.25
    assert precision_cause("f16", "float32", at_declared) == (
        "runtime ran in f16 and still disagrees at the declared f32 (max rel err 2.5e-01)"
    )
    at_declared.verdict, at_declared.max_rel_err = "crash", None
    assert precision_cause("bf16", "float64", at_declared) == (
        "runtime ran in bf16; at the declared f64 (compiled f32) the verdict is crash"
    )


def test_eval_reports_the_d3_defect_with_its_cause(tmp_path) -> None:
    released_ir(tmp_path / "model.xml", shift=200.0)
    inputs_npz(tmp_path / "inputs.npz")
    result = ctcop_cli("eval", str(tmp_path / "model.xml"), "--inputs", str(tmp_path / "inputs.npz"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verdict DISAGREE" in result.stdout
    assert f"cause: {defect('D3').label} — largest logit 2" in result.stdout


def test_eval_survives_the_kernel_crash_on_an_empty_target(tmp_path) -> None:
    released_ir(tmp_path / "model.xml", layers=2)
    inputs_npz(tmp_path / "inputs.npz", label_length=(2, 0, 3))
    out = tmp_path / "eval.json"
    result = ctcop_cli(
        "eval", str(tmp_path / "model.xml"), "--inputs", str(tmp_path / "inputs.npz"), "--json", str(out)
    )
    assert result.returncode == 1
    layers = json.loads(out.read_text())["layers"]
    # D1 corrupts the process: a layer's worker dies, or in some runs returns a wrong loss (both
    # among D1's registered statuses); either way the cause is D1 with its evidence.
    assert {layer["verdict"] for layer in layers} <= {"crash", "disagree"}
    for layer in layers:
        assert layer["cause"].startswith(f"{defect('D1').label} — sample 1 has an empty target (label_length 0)")
    assert 0 < layers[0]["reference"][1] < np.inf  # the reference of the empty target is a number


def test_eval_with_blank_zero_constant_and_unique_and_random_inputs(tmp_path) -> None:
    released_ir(tmp_path / "model.xml", blank_zero_unique=True)
    out = tmp_path / "eval.json"
    result = ctcop_cli("eval", str(tmp_path / "model.xml"), "--seed", "7", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    (layer,) = json.loads(out.read_text())["layers"]
    assert layer["attributes"]["unique"] is True and layer["verdict"] == "agree"
    listing = ctcop_cli("validate", str(tmp_path / "model.xml"))
    assert listing.returncode == 0 and "blank_index" in listing.stdout and "= 0" in listing.stdout


def test_eval_of_a_ctcop_onnx_export_attached_to_a_model(tmp_path) -> None:
    path = tmp_path / "train.onnx"
    save_onnx(attach_onnx(onnx_acoustic_model(), "logits"), str(path))
    rng = np.random.default_rng(2)
    features = rng.normal(size=(T, N, FEATURES)).astype(np.float32)
    mask = (np.arange(T)[:, None] < np.array([8, 5, 2])[None, :]).astype(np.int32)
    labels = np.full((N, T), -1, np.int64)
    labels[0, :3], labels[1, 1:3], labels[2, 0] = [0, 1, 0], [3, 3], 2
    np.savez(tmp_path / "in.npz", features=features, sequence_mask=mask, labels=labels)
    for runtime in ("onnxruntime", "openvino"):
        out = tmp_path / f"{runtime}.json"
        args = ["eval", str(path), "--inputs", str(tmp_path / "in.npz"), "--runtime", runtime, "--json", str(out)]
        result = ctcop_cli(*args)
        assert result.returncode == 0, result.stdout + result.stderr
        (layer,) = json.loads(out.read_text())["layers"]
        assert layer["form"] == "ctcop-onnx" and layer["verdict"] == "agree"
        # onnxruntime computes the model's own types: no inference precision to report (spec 13)
        expected = ("declared", "f32") if runtime == "openvino" else (None, None)
        assert (layer["precision"], layer["compiled_precision"]) == expected
    assert len(layer["reference"]) == N and all(np.isfinite(layer["reference"]))
    refused = ctcop_cli("eval", str(path), "--inputs", str(tmp_path / "in.npz"), "--precision", "native")
    assert refused.returncode == 2 and "--precision is ignored with onnxruntime" in refused.stderr


def test_validate_finds_a_broken_layer(tmp_path) -> None:
    released_ir(tmp_path / "model.xml")
    text = (tmp_path / "model.xml").read_text()
    broken = tmp_path / "broken.xml"
    broken.write_text(text.replace('unique="false"', 'unique="maybe"'))
    (tmp_path / "broken.bin").write_bytes((tmp_path / "model.bin").read_bytes())
    result = ctcop_cli("validate", str(broken))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: ctc_loss_0: attribute unique = 'maybe' is not a boolean" in result.stdout
    evaluated = ctcop_cli("eval", str(broken), "--seed", "1")
    assert evaluated.returncode == 1 and "verdict INVALID-LAYER" in evaluated.stdout


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        ("none", ["eval", "{tmp}/missing.xml"], "model: "),
        ("no_bin", ["eval", "{tmp}/model.xml"], "has no weights file"),
        ("truncated_bin", ["eval", "{tmp}/model.xml"], "model: "),
        ("doctype", ["validate", "{tmp}/model.xml"], "DOCTYPE or entity declaration is refused"),
        ("model", ["eval", "{tmp}/model.txt"], "expected an IR .xml"),
        ("model", ["eval", "{tmp}/model.xml", "--inputs", "{tmp}/missing.npz"], "inputs: cannot read"),
        ("partial_npz", ["eval", "{tmp}/model.xml", "--inputs", "{tmp}/partial.npz"], "no array for model input"),
        ("model", ["eval", "{tmp}/model.xml", "--layer", "nope"], "layer: no CTCLoss layer named 'nope'"),
        ("no_layer", ["validate", "{tmp}/plain.onnx"], "holds no CTCLoss layer"),
        ("traversal", ["eval", "{tmp}/escape.onnx"], "external data '../outside.bin' is outside"),
        ("huge_const", ["eval", "{tmp}/model.xml"], "outside the"),
        (
            "float64_npz",
            ["eval", "{tmp}/model.xml", "--inputs", "{tmp}/f64.npz"],
            "'features' is float64, the model takes float32",
        ),
        ("short_npz", ["eval", "{tmp}/model.xml", "--inputs", "{tmp}/short.npz"], "'features' has shape (3, 7, 6)"),
        (
            "extra_npz",
            ["eval", "{tmp}/model.xml", "--inputs", "{tmp}/extra.npz"],
            "'featurez' is no input of the model",
        ),
        ("junk_onnx", ["eval", "{tmp}/junk.onnx"], "cannot read"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(tmp_path, setup: str, args: list[str], message: str) -> None:
    if setup != "none":
        released_ir(tmp_path / "model.xml")
    (tmp_path / "model.txt").write_text("x")
    if setup == "no_bin":
        (tmp_path / "model.bin").unlink()
    if setup == "truncated_bin":
        (tmp_path / "model.bin").write_bytes((tmp_path / "model.bin").read_bytes()[:10])
    if setup == "doctype":
        text = (tmp_path / "model.xml").read_text()
        (tmp_path / "model.xml").write_text(text.replace("?>", '?><!DOCTYPE net [<!ENTITY a "aaaa">]>', 1))
    if setup == "partial_npz":
        np.savez(tmp_path / "partial.npz", features=np.zeros((N, T, FEATURES), np.float32))
    if setup == "no_layer":
        save_onnx(onnx_acoustic_model(), str(tmp_path / "plain.onnx"))
    if setup == "traversal":
        model = attach_onnx(onnx_acoustic_model(), "logits")
        weights = next(t for t in model.graph.initializer if t.name == "W")
        weights.ClearField("raw_data")
        weights.ClearField("float_data")
        weights.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", "../outside.bin"), ("offset", "0"), ("length", "120")):
            weights.external_data.add(key=key, value=value)
        (tmp_path / "escape.onnx").write_bytes(model.SerializeToString())
    if setup == "huge_const":
        text = (tmp_path / "model.xml").read_text()
        (tmp_path / "model.xml").write_text(text.replace('size="60"', 'size="99999999999"', 1))
    if setup == "extra_npz":
        inputs_npz(tmp_path / "good.npz")
        np.savez(tmp_path / "extra.npz", **dict(np.load(tmp_path / "good.npz")), featurez=np.zeros(1))
    if setup in ("float64_npz", "short_npz"):
        inputs_npz(tmp_path / "good.npz")
        data = dict(np.load(tmp_path / "good.npz"))
        wrong = data["features"].astype(np.float64) if setup == "float64_npz" else data["features"][:, :7]
        np.savez(tmp_path / ("f64.npz" if setup == "float64_npz" else "short.npz"), **{**data, "features": wrong})
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x96\x01garbage")
    result = ctcop_cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ctcop: invalid input: ")
    assert message in result.stderr


def test_version_and_help() -> None:
    assert ctcop_cli("--version").stdout.strip() == f"ctcop {ctcop.__version__}"
    for command in ("eval", "validate", "export", "conformance", "example"):
        assert ctcop_cli(command, "--help").returncode == 0


@pytest.mark.parametrize("labels_dtype", ["uint64", "uint8", "int32"])
def test_random_labels_fit_their_type_and_are_feasible(tmp_path, labels_dtype: str) -> None:
    # An unsigned labels input cannot hold the pad -1: random rows are whole targets (distinct
    # neighbours), never 2^64-1 read as a pad or as a class.
    path = tmp_path / "loss.onnx"
    save_onnx(ctcop.onnx.onnx_model(labels_dtype=labels_dtype, dims=(8, 3, 4)), str(path))
    out = tmp_path / "eval.json"
    result = ctcop_cli("eval", str(path), "--seed", "5", "--runtime", "onnxruntime", "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    (layer,) = json.loads(out.read_text())["layers"]
    assert layer["verdict"] == "agree" and len(layer["reference"]) == 3
    losses = np.array(layer["reference"], dtype=np.float64)  # inf arrives as the string "inf"
    assert not np.isnan(losses).any() and (losses > 0).all(), losses
    if labels_dtype == "int32":
        assert np.isfinite(losses).all(), losses  # padded targets of at most T/4 labels
