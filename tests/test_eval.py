"""`ctcop eval` and `ctcop validate` on real files built here: IR written by openvino.save_model with
OpenVINO's released CTCLoss-4 fed by a small acoustic model, and ctcop's ONNX export attached to a
model; and broken variants of each."""

import json
import subprocess
import sys

import numpy as np
import onnx
import openvino
import openvino.opset4 as opset4
import openvino.opset15 as ops
import pytest
from models import onnx_acoustic_model

import ctcop
from ctcop.onnx import attach_onnx, save_onnx

T, N, FEATURES, C = 8, 3, 6, 5


def ctcop_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctcop", *args], capture_output=True, text=True, timeout=600)


def released_ir(path, *, shift: float = 0.0, blank_zero_unique: bool = False, layers: int = 1) -> tuple:
    """features [N, T, 6] -> MatMul -> Add (+ shift) -> logits [N, T, 5] -> CTCLoss-4 (x ``layers``);
    returns the weights and bias."""
    rng = np.random.default_rng(3)
    features = ops.parameter([N, T, FEATURES], np.float32, name="features")
    lengths = [ops.parameter([N], np.int32, name=name) for name in ("logit_length", "label_length")]
    labels = ops.parameter([N, T], np.int32, name="labels")
    for node in (features, labels, *lengths):
        node.output(0).get_tensor().set_names({node.get_friendly_name()})
    weights = rng.normal(size=(FEATURES, C)).astype(np.float32)
    bias = (rng.normal(size=C) + shift).astype(np.float32)
    logits = ops.add(ops.matmul(features, ops.constant(weights), False, False), ops.constant(bias))
    extra = [ops.constant(np.int32(0))] if blank_zero_unique else []
    results = []
    for k in range(layers):
        loss = opset4.ctc_loss(
            logits, lengths[0], labels, lengths[1], *extra, ctc_merge_repeated=k == 0, unique=blank_zero_unique
        )
        loss.set_friendly_name(f"ctc_loss_{k}")
        results.append(ops.result(loss))
    openvino.save_model(openvino.Model(results, [features, lengths[0], labels, lengths[1]]), str(path))
    return weights, bias


def inputs_npz(path, label_length=(2, 1, 3), blank: int = C - 1) -> None:
    rng = np.random.default_rng(5)
    classes = [c for c in range(C) if c != blank]
    np.savez(
        path,
        features=rng.normal(size=(N, T, FEATURES)).astype(np.float32),
        logit_length=np.array([8, 6, 5], np.int32),
        labels=np.array(classes, np.int32)[rng.integers(0, C - 1, size=(N, T))],
        label_length=np.array(label_length, np.int32),
    )


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
    # The runtime column is what plain OpenVINO gives for the whole model.
    data = dict(np.load(tmp_path / "inputs.npz"))
    direct = openvino.Core().compile_model(str(tmp_path / "model.xml"), "CPU")(data)[0]
    np.testing.assert_allclose(layer["runtime"], direct, rtol=1e-6)
    # The reference column is the reference on the logits the model computes; here they are
    # recomputed in float64 (OpenVINO's MatMul may run in bfloat16 on this CPU: about 1e-3).
    logits = data["features"].astype(np.float64) @ weights + bias
    alone = ctcop.openvino_ctc_loss(logits, data["logit_length"], data["labels"], data["label_length"])
    np.testing.assert_allclose(layer["reference"], alone, rtol=1e-2)


def test_eval_reports_the_d3_defect_with_its_cause(tmp_path) -> None:
    released_ir(tmp_path / "model.xml", shift=200.0)
    inputs_npz(tmp_path / "inputs.npz")
    result = ctcop_cli("eval", str(tmp_path / "model.xml"), "--inputs", str(tmp_path / "inputs.npz"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "verdict DISAGREE" in result.stdout and "spec 12.2 D3: largest logit" in result.stdout


def test_eval_survives_the_kernel_crash_on_an_empty_target(tmp_path) -> None:
    released_ir(tmp_path / "model.xml", layers=2)
    inputs_npz(tmp_path / "inputs.npz", label_length=(2, 0, 3))
    out = tmp_path / "eval.json"
    result = ctcop_cli(
        "eval", str(tmp_path / "model.xml"), "--inputs", str(tmp_path / "inputs.npz"), "--json", str(out)
    )
    assert result.returncode == 1
    layers = json.loads(out.read_text())["layers"]
    assert [layer["verdict"] for layer in layers] == ["crash", "crash"]
    assert "D1: sample 1 has an empty target" in layers[0]["cause"]
    assert layers[0]["reference"][1] == pytest.approx(layers[0]["reference"][1])  # a number, not a crash


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
    assert len(layer["reference"]) == N and all(np.isfinite(layer["reference"]))


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
