"""The ctcop command line, run as a user runs it (a subprocess of `python -m ctcop`)."""

import numpy as np
import onnx
import onnxruntime
import pytest
from support.cli import ctcop_process
from support.models import openvino_acoustic_model

import ctcop
from ctcop import cli
from ctcop.openvino import load_ir, save_ir


def test_example_prints_the_worked_examples() -> None:
    result = ctcop_process("example")
    assert result.returncode == 0
    assert "1.081755171601687" in result.stdout  # -ln 0.339
    # 9 ln 5 - ln 495 = 8.2803834493382130699...: ctcop prints the correctly rounded float64, the
    # example's own float64 arithmetic (9 * log(5) - log(495)) rounds twice and ends one ulp lower
    assert "ctcop loss 8.280383449338213 " in result.stdout
    assert "9 ln 5 - ln 495 = 8.280383449338212" in result.stdout


def test_export_writes_a_runnable_model(tmp_path) -> None:
    path = tmp_path / "ctc.onnx"
    result = ctcop_process("export", "-o", str(path), "--dims", "6,N,4", "--dtype", "float64", "--no-merge-repeated")
    assert result.returncode == 0, result.stderr
    model = onnx.load(path)
    assert {a.name: a.i for a in model.graph.node[0].attribute}["merge_repeated"] == 0
    inputs = np.random.default_rng(0).normal(size=(6, 2, 4))
    mask = np.ones((6, 2), np.int32)
    labels = np.array([[0, 0, -1, -1, -1, -1], [2, -1, 1, -1, -1, -1]])
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (loss,) = session.run(None, {"inputs": inputs, "sequence_mask": mask, "labels": labels})
    np.testing.assert_allclose(loss, ctcop.ctc_loss(inputs, mask, labels, merge_repeated=False), rtol=1e-9)


@pytest.mark.parametrize("form", ["lowered", "custom"])
def test_export_ir_and_attach(tmp_path, form: str) -> None:
    op = tmp_path / "ctc.xml"
    assert ctcop_process("export", "--format", "ir", "--form", form, "-o", str(op)).returncode == 0
    assert (tmp_path / "ctc.bin").exists()
    acoustic = tmp_path / "acoustic.xml"
    save_ir(openvino_acoustic_model(), str(acoustic))
    trained = tmp_path / "train.xml"
    result = ctcop_process("export", "--format", "ir", "--form", form, "-o", str(trained), "--attach", str(acoustic))
    assert result.returncode == 0, result.stderr
    model = load_ir(str(trained))
    assert [o.get_any_name() for o in model.outputs] == ["logits", "loss"]
    refused = ctcop_process(
        "export", "--format", "ir", "-o", str(trained), "--attach", str(op), "--logits-output", "loss"
    )
    assert refused.returncode == 2 and "must have rank 3" in refused.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "-o", "{tmp}/x.onnx", "--dtype", "int8"], "dtype: unknown element type 'int8'"),
        (["export", "-o", "{tmp}/x.onnx", "--dims=-3,N,C"], "dims: T = -3 is negative"),
        (["export", "-o", "{tmp}/x.onnx", "--attach", "{tmp}/missing.onnx"], "model: cannot read"),
        (["export", "-o", "{tmp}/x.onnx", "--attach", "{tmp}/junk.onnx"], "model: cannot read"),
        (["export", "-o", "{tmp}/no/such/dir/x.onnx"], "output: the folder of"),
        (["export", "--format", "ir", "-o", "{tmp}/x.xml", "--attach", "{tmp}/junk.onnx"], "model: cannot read"),
        (["export", "--format", "ir", "-o", "{tmp}/x.xml", "--form", "fused"], "invalid choice: 'fused'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args: list[str], message: str) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x96\x01garbage")
    result = ctcop_process(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.count("\n") == 1  # argparse's usage errors too: no usage block
    kind = "usage" if "invalid choice" in message else "input"
    assert result.stderr.startswith(f"ctcop: invalid {kind}: ")


def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``ctcop ARGS`` in this process: exit code, stdout, stderr."""
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


COMMANDS = ("example", "conformance", "conformance-merge", "conformance-diff", "export", "guard", "eval", "bench",
            "defects", "validate")  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_a_usage_error_names_its_command_and_every_command_describes_itself(capsys, command: str) -> None:
    code, out, err = in_process(capsys, command, "--no-such-option")
    assert (code, out) == (2, "")
    assert err.startswith(f"ctcop: invalid usage: ctcop {command}: ") and err.count("\n") == 1
    assert err.endswith(f" (see ctcop {command} --help)\n")
    code, out, _ = in_process(capsys, command, "--help")
    description = out.split("\n\n")[1]
    assert code == 0 and not description.startswith(("positional arguments", "options")), out
    assert in_process(capsys, "eval", "x.xml", "--foo")[2].startswith("ctcop: invalid usage: ctcop eval: unrecognized")


def test_no_arguments_prints_the_help_and_exits_2(capsys) -> None:
    code, out, err = in_process(capsys)
    assert (code, err) == (2, "") and out.startswith("usage: ctcop ") and "Error policy" in out
    assert all(command in out for command in COMMANDS)


def test_both_spellings_of_the_merge_flag_set_either_forms_attribute(tmp_path, capsys) -> None:
    for flag in ("--no-merge-repeated", "--no-ctc-merge-repeated"):
        onnx_path, ir_path = tmp_path / f"{flag}.onnx", tmp_path / f"{flag}.xml"
        assert in_process(capsys, "export", "-o", str(onnx_path), flag)[0] == 0
        assert {a.name: a.i for a in onnx.load(onnx_path).graph.node[0].attribute}["merge_repeated"] == 0
        assert in_process(capsys, "export", "--format", "ir", "--form", "released", "-o", str(ir_path), flag)[0] == 0
        assert 'ctc_merge_repeated="false"' in ir_path.read_text()
    default = tmp_path / "default.xml"
    assert in_process(capsys, "export", "--format", "ir", "--form", "released", "-o", str(default))[0] == 0
    assert 'ctc_merge_repeated="true"' in default.read_text()
