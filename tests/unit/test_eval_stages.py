"""``ctcop eval`` and ``validate`` describe what the model computes: ctcop's lowerings (a guarded
layer, the released and time-major exports; a converted PyTorch model in
tests/integration/torch/test_eval_torch.py) are read back as the layer they compute, on the values
that enter them, with the attributes they were built with; the native kernel inside is shown only
with ``--kernels`` (spec 13)."""

import numpy as np
import openvino
import openvino.opset4 as opset4
import openvino.opset15 as ops
import pytest
from support.eval_stages import C, N, T, evaluated

import ctcop
from ctcop import cli
from ctcop.layers.find import openvino_layers
from ctcop.openvino import declared_precision_config
from ctcop.openvino.released import ReleasedInputs, released_loss
from ctcop.openvino.stage import KERNEL, stages


def native_ir(path) -> None:
    """logits [3, 8, 5] and the lengths and labels as parameters -> native CTCLoss-4, blank 0."""
    parameters = [
        ops.parameter([N, T, C], np.float32, name="logits"),
        ops.parameter([N], np.int32, name="logit_length"),
        ops.parameter([N, T], np.int32, name="labels"),
        ops.parameter([N], np.int32, name="label_length"),
    ]
    for node in parameters:
        node.output(0).get_tensor().set_names({node.get_friendly_name()})
    loss = opset4.ctc_loss(*parameters, ops.constant(np.int32(0)), ctc_merge_repeated=True, unique=False)
    loss.set_friendly_name("ctc")
    model = openvino.Model([ops.result(loss)], parameters, "native")
    openvino.save_model(model, str(path), compress_to_fp16=False)


def feeds(labels: list[list[int]], logit_length: list[int], label_length: list[int]) -> dict[str, np.ndarray]:
    padded = np.zeros((N, T), np.int32)
    for i, row in enumerate(labels):
        padded[i, : len(row)] = row
    return {
        "logits": np.random.default_rng(0).normal(size=(N, T, C)).astype(np.float32),
        "logit_length": np.array(logit_length, np.int32),
        "labels": padded,
        "label_length": np.array(label_length, np.int32),
    }


def model_output(path: str, inputs: dict[str, np.ndarray]) -> np.ndarray:
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(path), "CPU", declared_precision_config(core, "CPU", "f32"))
    return np.asarray(compiled(inputs)[0])


def values(listed: list) -> np.ndarray:
    return np.array([float(v) for v in listed])


@pytest.fixture
def guarded(tmp_path, capsys) -> str:
    native_ir(tmp_path / "native.xml")
    out = str(tmp_path / "guarded.xml")
    assert cli.main(["guard", str(tmp_path / "native.xml"), "-o", out]) == 0
    capsys.readouterr()
    return out


def test_eval_of_a_guarded_ir_reports_the_models_output_and_names_invalid_input(guarded, tmp_path, capsys) -> None:
    inputs = feeds([[1, 2, 3], [0, 1], [2, 2]], [8, 8, 6], [3, 2, 2])  # sample 1's first label is the blank 0
    output = model_output(guarded, inputs)
    assert np.isnan(output[1]) and np.isfinite(output[[0, 2]]).all()
    code, (layer,) = evaluated(capsys, tmp_path, guarded, inputs)
    assert (layer["name"], layer["form"], layer["verdict"], code) == ("ctc", "guarded", "agree", 0)
    np.testing.assert_array_equal(values(layer["runtime"]), output.astype(np.float64))
    expected = values(layer["reference"])
    assert np.isnan(expected[1])
    assert expected[0] == ctcop.openvino_ctc_loss(inputs["logits"][:1], [8], inputs["labels"][:1], [3], np.int32(0))[0]
    assert layer["note"].startswith("invalid input in sample 1, NaN expected: labels[1, 0]")
    assert "rule 7.2" in layer["note"]


def test_eval_of_a_guarded_ir_agrees_on_empty_and_too_long_targets(guarded, tmp_path, capsys) -> None:
    inputs = feeds([[1, 2, 3], [], [1, 2, 1, 2]], [8, 8, 3], [3, 0, 4])
    output = model_output(guarded, inputs)
    code, (layer,) = evaluated(capsys, tmp_path, guarded, inputs)
    assert (layer["verdict"], layer["note"], code) == ("agree", "", 0)
    np.testing.assert_array_equal(values(layer["runtime"]), output.astype(np.float64))
    logits = inputs["logits"].astype(np.float64)
    all_blank = -np.log(np.exp(logits[1, :, 0]) / np.exp(logits[1]).sum(axis=1)).sum()  # blank 0 in every frame
    assert values(layer["reference"])[1] == pytest.approx(all_blank, rel=1e-6)
    assert layer["reference"][2] == "inf" and output[2] == np.inf


def test_kernels_are_shown_only_on_request(guarded, tmp_path, capsys) -> None:
    inputs = feeds([[1, 2, 3], [1], [2, 3]], [8, 8, 6], [3, 1, 2])
    _, layers = evaluated(capsys, tmp_path, guarded, inputs, "--kernels")
    assert [(layer["name"], layer["form"]) for layer in layers] == [(f"ctc/{KERNEL}", "released"), ("ctc", "guarded")]
    assert cli.main(["validate", guarded]) == 0
    listed = capsys.readouterr().out
    assert (
        listed.splitlines()[0]
        == "layer ctc [guarded] preprocess_collapse_repeated=false,ctc_merge_repeated=true,unique=false"
    )
    assert "from Parameter logits" in listed and "from Constant" in listed and KERNEL not in listed


def test_guard_leaves_a_guarded_ir_as_it_is(guarded, tmp_path, capsys) -> None:
    assert cli.main(["guard", guarded, "-o", str(tmp_path / "again.xml")]) == 2
    assert "holds no released CTCLoss-4 layer" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "form", "flags"),
    [
        (["--form", "released", "--unique"], "guarded", {"unique": True, "ctc_merge_repeated": True}),
        (["--no-merge-repeated"], "lowered", {"merge_repeated": False, "preprocess_collapse_repeated": False}),
    ],
)
def test_exported_ir_is_read_as_the_layer_it_was_exported_as(tmp_path, capsys, args, form, flags) -> None:
    path = str(tmp_path / "ctc.xml")
    assert cli.main(["export", "--format", "ir", "-o", path, "--dims", "8,3,5", *args]) == 0
    (layer,) = openvino_layers(openvino.Core().read_model(path))
    assert layer.form == form and {name: layer.attributes[name] for name in flags} == flags
    assert all(port.producer.startswith("Parameter ") for port in layer.ports)


def test_a_stage_whose_names_were_changed_is_not_read(tmp_path) -> None:
    """A transformation that renames a node the stage reads its inputs by leaves the kernel to be
    seen as what it is, a native layer, rather than a guess at the stage."""
    parameters = [
        ops.parameter([N, T, C], np.float32),
        ops.parameter([N], np.int32),
        ops.parameter([N, T], np.int32),
        ops.parameter([N], np.int32),
    ]
    loss = released_loss(ReleasedInputs(*(p.output(0) for p in parameters)), {})
    model = openvino.Model([ops.result(loss)], parameters)
    assert [(s.form, len(s.inputs)) for s in stages(model)] == [("openvino", 4)]
    readers = [t.get_node() for t in parameters[1].output(0).get_target_inputs()]
    (reader,) = [node for node in readers if node.get_output_element_type(0) == openvino.Type.f32]
    reader.set_friendly_name("renamed")  # the float copy of logit_length, which the rules read
    assert stages(model) == []
    assert [layer.form for layer in openvino_layers(model)] == ["released"]
