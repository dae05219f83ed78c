"""`ctcop guard`: a user's IR with OpenVINO's native CTCLoss-4 replaced by the guarded released
lowering, read back by a stock ``openvino.Core`` (nothing of ctcop added) and compared with the
reference, on the inputs where the native kernel crashes (D1), raises (D2) or overflows (D3). The
native kernel runs on those only inside ``ctcop eval``'s crash-isolated workers."""

import json

import numpy as np
import openvino
import openvino.opset4 as opset4
import openvino.opset15 as ops
import pytest
from support.cli import ctcop_cli

import ctcop
from ctcop import cli
from ctcop.openvino import declared_precision_config
from ctcop.openvino.stage import KERNEL
from ctcop.tolerance import compare

N, T, FEATURES, C = 4, 8, 6, 5
RELEASED = ("logit_length", "labels", "label_length")


def native_ir(path, *, blank: str | int | None = None, layers: int = 1, **attributes: bool) -> np.ndarray:
    """features [N, T, 6] -> MatMul -> logits [N, T, 5] -> native CTCLoss-4 (``layers`` of them),
    ``blank`` None (absent), an int (a constant) or "input" (a parameter); returns the weights."""
    weights = np.random.default_rng(3).normal(size=(FEATURES, C)).astype(np.float32)
    features = ops.parameter([N, T, FEATURES], np.float32, name="features")
    lengths = [ops.parameter([N], np.int32, name=name) for name in ("logit_length", "label_length")]
    labels = ops.parameter([N, T], np.int32, name="labels")
    parameters = [features, lengths[0], labels, lengths[1]]
    extra = []
    if blank == "input":
        parameters.append(ops.parameter([], np.int32, name="blank_index"))
        extra = [parameters[-1]]
    elif blank is not None:
        extra = [ops.constant(np.int32(blank))]
    for node in parameters:
        node.output(0).get_tensor().set_names({node.get_friendly_name()})
    logits = ops.matmul(features, ops.constant(weights), False, False)
    results = []
    for k in range(layers):
        loss = opset4.ctc_loss(logits, lengths[0], labels, lengths[1], *extra, **attributes)
        loss.set_friendly_name(f"ctc_loss_{k}")
        loss.output(0).get_tensor().set_names({f"loss_{k}"})
        results.append(ops.result(loss))
    openvino.save_model(openvino.Model(results, parameters, "acoustic"), str(path), compress_to_fp16=False)
    return weights


def inputs_for(blank: int, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Four samples: a valid one, an empty target (D1), a target longer than its frames (D2), and
    a target of repeats; features times ``scale`` (D3 where logits reach about 100)."""
    rng = np.random.default_rng(5)
    classes = np.array([c for c in range(C) if c != blank])
    labels = classes[rng.integers(0, C - 1, size=(N, T))]
    labels[2, :5] = classes[[0, 1, 2, 3, 0]]  # 4 > 3 frames also after collapse and unique
    labels[3, :3] = labels[3, 0]
    return {
        "features": (rng.normal(size=(N, T, FEATURES)) * scale).astype(np.float32),
        "logit_length": np.array([8, 6, 3, 7], np.int32),
        "labels": labels.astype(np.int32),
        "label_length": np.array([3, 0, 5, 3], np.int32),
    }


def reference(inputs: dict[str, np.ndarray], weights: np.ndarray, blank: int | None, attributes) -> np.ndarray:
    """The released form's reference per sample on the model's logits (NaN where it refuses)."""
    logits = inputs["features"].astype(np.float64) @ weights.astype(np.float64)
    out = []
    for i in range(N):
        one = [inputs[name][i : i + 1] for name in RELEASED]
        try:
            out.append(ctcop.openvino_ctc_loss(logits[i : i + 1], *one, blank, **attributes)[0])
        except ctcop.InvalidInputError:
            out.append(np.nan)
    return np.array(out)


def guarded(tmp_path, capsys, name: str = "model") -> tuple[str, str]:
    """``ctcop guard`` on ``tmp_path/name.xml`` in this process; the output path and its stdout."""
    out = str(tmp_path / f"{name}.guarded.xml")
    assert cli.main(["guard", str(tmp_path / f"{name}.xml"), "-o", out]) == 0
    return out, capsys.readouterr().out


def stock_run(path: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The model at ``path`` on a stock Core at its declared float32."""
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", declared_precision_config(core, "CPU", "f32"))
    results = compiled(inputs)
    return [np.asarray(results[output]) for output in compiled.outputs]


CONFIGS = [
    (None, {}),
    (0, {}),
    (2, {"unique": True}),
    ("input", {"preprocess_collapse_repeated": True, "ctc_merge_repeated": False}),
    (4, {"preprocess_collapse_repeated": True, "unique": True}),
]


@pytest.mark.parametrize(("blank", "attributes"), CONFIGS, ids=lambda value: str(value))
def test_guarded_layers_agree_with_the_reference_where_the_kernel_fails(tmp_path, capsys, blank, attributes) -> None:
    weights = native_ir(tmp_path / "model.xml", blank=blank, **attributes)
    path, printed = guarded(tmp_path, capsys)
    value = 1 if blank == "input" else blank
    chosen = {"ctc_merge_repeated": True, **attributes}
    assert printed.startswith("guarded ctc_loss_0: ") and "guards D1, D2, D3" in printed
    assert isinstance(blank, str) or f"= {blank};" in printed or "absent" in printed
    for scale in (1.0, 60.0):  # D1 and D2 in samples 1 and 2; D3 at the larger scale
        inputs = inputs_for(C - 1 if value is None else value, scale)
        feeds = {**inputs, **({"blank_index": np.array(value, np.int32)} if blank == "input" else {})}
        (got,) = stock_run(path, feeds)
        expected = reference(inputs, weights, None if value is None else np.int32(value), chosen)
        assert np.isinf(expected[2]) and np.isfinite(expected[1]) and got.dtype == np.float32
        assert compare(got, expected, "float32") is None, f"scale {scale}: {got} vs {expected}"


def test_guard_keeps_the_models_names_and_guards_every_layer(tmp_path, capsys) -> None:
    native_ir(tmp_path / "model.xml", blank="input", layers=2)
    path, printed = guarded(tmp_path, capsys)
    assert sorted(printed.splitlines()[:2]) == [
        f"guarded ctc_loss_{k}: blank_index from Parameter blank_index; preprocess_collapse_repeated=false, "
        "ctc_merge_repeated=true, unique=false; guards D1, D2, D3, D6, D8, D11"
        for k in range(2)
    ]
    before = openvino.Core().read_model(str(tmp_path / "model.xml"))
    after = openvino.Core().read_model(path)
    assert [i.get_names() for i in after.inputs] == [i.get_names() for i in before.inputs]
    assert [o.get_names() for o in after.outputs] == [o.get_names() for o in before.outputs]
    names = {op.get_friendly_name(): op.get_type_name() for op in after.get_ops()}
    flags = "preprocess_collapse_repeated=0,ctc_merge_repeated=1,unique=0"
    assert names["ctc_loss_0"] != "CTCLoss" and names[f"ctc_loss_0/ctcop:released:{flags}/{KERNEL}"] == "CTCLoss"
    assert f"ctc_loss_1/ctcop:released:{flags}/{KERNEL}" in names


def test_an_absent_attribute_is_read_as_openvino_reads_it(tmp_path, capsys) -> None:
    native_ir(tmp_path / "model.xml")
    text = (tmp_path / "model.xml").read_text()
    assert 'ctc_merge_repeated="true"' in text
    (tmp_path / "model.xml").write_text(text.replace('ctc_merge_repeated="true"', ""))
    _, printed = guarded(tmp_path, capsys)
    assert "ctc_merge_repeated=false" in printed  # as OpenVINO's reader makes it (spec 13)


def eval_verdicts(path: str, inputs_path: str, report: str) -> list[dict]:
    result = ctcop_cli("eval", path, "--inputs", inputs_path, "--json", report)
    assert result.returncode in (0, 1), result.stderr
    with open(report) as file:
        return json.load(file)["layers"]


def test_eval_agrees_on_the_guarded_model_where_the_native_one_crashes_or_disagrees(tmp_path, capsys) -> None:
    native_ir(tmp_path / "model.xml", blank=0)
    path, _ = guarded(tmp_path, capsys)
    # D1 kills the worker or, in some runs, returns a wrong loss; D3 is a wrong loss every run
    for scale, native_verdicts, empty in ((1.0, {"crash", "disagree"}, 0), (60.0, {"disagree"}, 2)):
        inputs = inputs_for(0, scale)  # D1 alone, then D3 alone: every target feasible
        inputs["label_length"] = np.array([3, empty, 2, 3], np.int32)
        np.savez(tmp_path / "inputs.npz", **inputs)
        original = eval_verdicts(str(tmp_path / "model.xml"), str(tmp_path / "inputs.npz"), str(tmp_path / "a.json"))
        (native,) = original
        assert native["verdict"] in native_verdicts
        after = eval_verdicts(path, str(tmp_path / "inputs.npz"), str(tmp_path / "b.json"))
        assert [(layer["name"], layer["form"], layer["verdict"]) for layer in after] == [
            ("ctc_loss_0", "guarded", "agree")
        ]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "model: cannot read"),
        ("no_bin", "has no weights file"),
        ("onnx", "ctcop guard rewrites an IR .xml"),
        ("no_layer", "holds no released CTCLoss-4 layer"),
        ("same_output", "is an input file of this command"),
        ("maybe", "cannot guard it: error: ctc_loss_0: attribute unique = 'maybe' is not a boolean"),
        ("dynamic_rank", "cannot guard it"),
        ("doctype", "DOCTYPE or entity declaration is refused"),
    ],
)
def test_bad_files_are_one_line_and_exit_2(tmp_path, setup: str, message: str) -> None:
    model, out = tmp_path / "model.xml", tmp_path / "out.xml"
    native_ir(model)
    text = model.read_text()
    if setup == "missing":
        model.unlink()
    if setup == "no_bin":
        (tmp_path / "model.bin").unlink()
    if setup == "onnx":
        model = tmp_path / "model.onnx"
        model.write_bytes(b"\x08\x07")
    if setup == "no_layer":
        plain = ops.parameter([2], np.float32, name="x")
        openvino.save_model(openvino.Model([ops.relu(plain)], [plain]), str(model))
    if setup == "same_output":
        out = tmp_path / "model.xml"
    if setup == "maybe":
        model.write_text(text.replace('unique="false"', 'unique="maybe"'))
    if setup == "dynamic_rank":
        logits = ops.parameter(openvino.PartialShape.dynamic(), np.float32, name="logits")
        others = [
            ops.parameter(shape, np.int32, name=name) for name, shape in zip(RELEASED, ([N], [N, T], [N]), strict=True)
        ]
        loss = opset4.ctc_loss(logits, *others)
        openvino.save_model(openvino.Model([loss], [logits, *others]), str(model))
    if setup == "doctype":
        model.write_text(text.replace("?>", '?><!DOCTYPE net [<!ENTITY a "aaaa">]>', 1))
    result = ctcop_cli("guard", str(model), "-o", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ctcop: invalid input: "), result.stderr
    assert message in result.stderr
    assert setup == "same_output" or not out.exists()
