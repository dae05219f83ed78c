"""Hostile command lines: every refusal is exactly one line on stderr, no traceback, exit code 2,
and it comes before any work is done. The commands run in-process through the CLI's main
function; the signals while the command line starts, and what importing it loads, in real
processes."""

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper
from support.cli import assert_refused, ctcop_cli
from support.models import WEIGHTS, onnx_acoustic_model, openvino_acoustic_model

import ctcop
from ctcop import cli
from ctcop.cli import example
from ctcop.errors import InvalidInputError
from ctcop.onnx import save_onnx
from ctcop.openvino import ir_model, load_ir, save_ir

TP = onnx.TensorProto


def old_opset_model(opset: int, extra: list[onnx.NodeProto], outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """features [T, N, 6] -> MatMul -> logits [T, N, 5], plus ``extra`` nodes, at ``opset``."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["features", "W"], ["logits"]), *extra],
        "old",
        [helper.make_tensor_value_info("features", TP.FLOAT, ["T", "N", 6])],
        [helper.make_tensor_value_info("logits", TP.FLOAT, ["T", "N", 5]), *outputs],
        initializer=[onnx.numpy_helper.from_array(WEIGHTS, "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def test_attach_converts_an_opset_13_model(tmp_path) -> None:
    # ReduceMean takes `axes` as an attribute up to opset 17 and as an input from 18 on: the model
    # must be converted, not merely relabelled, or onnx.checker refuses it (a traceback before).
    pooled = helper.make_node("ReduceMean", ["logits"], ["pooled"], axes=[2], keepdims=1)
    model = old_opset_model(13, [pooled], [helper.make_tensor_value_info("pooled", TP.FLOAT, ["T", "N", 1])])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, tmp_path / "old.onnx")
    out = tmp_path / "train.onnx"
    result = ctcop_cli("export", "-o", str(out), "--attach", str(tmp_path / "old.onnx"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    trained = onnx.load(out)
    onnx.checker.check_model(trained, full_check=True)
    assert {op.domain: op.version for op in trained.opset_import}[""] == 18
    (reduce,) = [node for node in trained.graph.node if node.op_type == "ReduceMean"]
    assert len(reduce.input) == 2 and "axes" not in [a.name for a in reduce.attribute]
    features = np.random.default_rng(1).normal(size=(4, 2, 6)).astype(np.float32)
    mask = np.ones((4, 2), np.int32)
    labels = np.array([[0, 1, -1, -1], [3, -1, -1, -1]])
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    logits, pooled_value, loss = session.run(None, {"features": features, "sequence_mask": mask, "labels": labels})
    np.testing.assert_allclose(pooled_value[..., 0], logits.mean(axis=2), rtol=1e-6)
    np.testing.assert_allclose(loss, ctcop.ctc_loss(logits, mask, labels), rtol=1e-5)


def test_attach_refuses_an_opset_it_cannot_convert(tmp_path) -> None:
    # onnx's converter turns MeanVarianceNormalization-9 into a function body the checker refuses.
    mvn = helper.make_node("MeanVarianceNormalization", ["logits"], ["normal"])
    model = old_opset_model(9, [mvn], [helper.make_tensor_value_info("normal", TP.FLOAT, ["T", "N", 5])])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, tmp_path / "old.onnx")
    result = ctcop_cli("export", "-o", str(tmp_path / "x.onnx"), "--attach", str(tmp_path / "old.onnx"))
    assert_refused(result, "default-domain opset 9")
    assert not (tmp_path / "x.onnx").exists()


def test_attach_refuses_a_future_opset(tmp_path) -> None:
    model = onnx_acoustic_model()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("", 99))
    onnx.save(model, tmp_path / "future.onnx")
    result = ctcop_cli("export", "-o", str(tmp_path / "x.onnx"), "--attach", str(tmp_path / "future.onnx"))
    assert_refused(result, f"default-domain opset 99 is newer than onnx {onnx.__version__} knows")
    assert not (tmp_path / "x.onnx").exists()


def test_attach_refuses_an_invalid_model_in_one_line(tmp_path) -> None:
    model = onnx_acoustic_model()
    model.graph.node[0].op_type = "NoSuchOp"
    onnx.save(model, tmp_path / "bad.onnx")
    result = ctcop_cli("export", "-o", str(tmp_path / "x.onnx"), "--attach", str(tmp_path / "bad.onnx"))
    assert_refused(result, "model: not a valid ONNX model")


@pytest.mark.parametrize(
    "args",
    [
        ["conformance", "--json", "{tmp}/no/such/dir/o.json"],
        ["conformance", "--json", ""],
        ["conformance", "--json", "{tmp}"],
        ["conformance", "--write-corpus", "{tmp}/file.txt"],
        ["conformance", "--write-corpus", ""],
        ["conformance", "--junit", "{tmp}"],
        ["conformance", "--junit", "{tmp}/no/such/dir/o.xml"],
        ["conformance", "--json", "{tmp}/o.json", "--junit", "{tmp}/o.json"],
        ["conformance", "--write-onnx-tests", "{tmp}/file.txt"],
        ["conformance-merge", "{tmp}/file.txt", "-o", "{tmp}"],
        ["conformance-merge", "{tmp}/file.txt", "-o", "{tmp}/no/such/dir/m.json"],
        ["eval", "{tmp}/ctc.xml", "--json", ""],
        ["eval", "{tmp}/ctc.xml", "--json", "{tmp}/no/such/dir/o.json"],
        ["export", "-o", ""],
        ["export", "-o", "{tmp}"],
        ["export", "--format", "ir", "-o", "{tmp}/no/such/dir/x.xml"],
        ["export", "--format", "ir", "-o", "{tmp}/x.onnx"],
        ["export", "--format", "ir", "-o", "/proc/x.xml"],
    ],
)
def test_output_paths_are_checked_before_any_work(tmp_path, args: list[str]) -> None:
    (tmp_path / "file.txt").write_text("x")
    save_ir(ir_model(dims=(4, 2, 3)), str(tmp_path / "ctc.xml"))
    result = ctcop_cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert_refused(result, ": ")
    assert result.stdout == ""  # nothing ran: no table, no "wrote"
    assert not (tmp_path / "no").exists()  # OpenVINO's serializer creates missing folders itself


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "-o", "{tmp}/x.onnx", "--dims", "T,N,\u00b2"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--dims", "\u0663,N,5"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--dims", "T,N,99999999999999999999"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--dims", "T,N,2147483648"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--dims", "T,N,a b"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--dims", ",,"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--dims", "T,N"], "dims: "),
        (["export", "-o", "{tmp}/x.onnx", "--opset", "\u00b2"], "--opset"),
        (["export", "-o", "{tmp}/x.onnx", "--opset", "99"], "opset: 99 is outside"),
        (["export", "--format", "ir", "-o", "{tmp}/x.xml", "--attach", "{tmp}/a.xml", "--logits-output", "\u00b2"], ""),
        (["export", "--format", "ir", "-o", "{tmp}/x.xml", "--attach", "{tmp}/a.xml", "--logits-output", ""], ""),
        (["eval", "{tmp}/ctc.xml", "--seed", "-1"], "--seed"),
        (["eval", "{tmp}/ctc.xml", "--seed", "4294967296"], "--seed"),
        (["eval", "{tmp}/ctc.xml", "--seed", "\u0663"], "--seed"),
        (["eval", "{tmp}/ctc.xml", "--layer", ""], "--layer"),
        (["eval", "{tmp}/ctc.xml", "--device", "CPU\nGPU"], "--device"),
        (["eval", "{tmp}/ctc.xml", "--device", "NOSUCHDEVICE"], "device: 'NOSUCHDEVICE' is not an OpenVINO device"),
        (["conformance", "--details", "-1"], "--details"),
        (["conformance", "--details", "99999999999999999999999"], "--details"),
        (["conformance", "--runtimes", ","], "--runtimes"),
        (["conformance", "--select", ""], "--select"),
        (["conformance", "--jobs", "0"], "--jobs"),
        (["conformance", "--jobs", "\u0663"], "--jobs"),
        (["conformance", "--timeout", "0"], "--timeout"),
        (["conformance", "--timeout", "-1"], "--timeout"),
        (["conformance", "--timeout", "nan"], "--timeout"),
        (["conformance", "--shard", "3/2"], "--shard"),
        (["conformance", "--shard", "0/2"], "--shard"),
        (["conformance", "--runtime-module", ""], "--runtime-module"),
        (["conformance", "--runtime-module", "nocolon"], "runtime_module: 'nocolon' is not MODULE:ATTRIBUTE"),
        (["conformance", "--expected-failures", "{tmp}/ctc.xml"], "expected_failures: "),
        (["conformance", "--expected-failures", "/dev/zero"], "not a regular file"),
        (["conformance", "--write-corpus", "{tmp}", "--write-ir-tests", "{tmp}/x"], "not allowed with argument"),
        (["conformance-merge", "{tmp}/ctc.xml", "-o", "{tmp}/m.json"], "reports: "),
    ],
)
def test_numbers_and_names_are_parsed_strictly(tmp_path, args: list[str], message: str) -> None:
    save_ir(ir_model(dims=(4, 2, 3)), str(tmp_path / "ctc.xml"))
    save_ir(openvino_acoustic_model(), str(tmp_path / "a.xml"))
    result = ctcop_cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert_refused(result, message)
    assert not (tmp_path / "x.onnx").exists() and not (tmp_path / "x.xml").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["export"],
        ["export", "-o", "x.onnx", "--format", "tflite"],
        ["export", "-o", "x.onnx", "--opset", "abc"],
        ["export", "-o", "x.onnx", "--no-such-option"],
        ["conformance", "--details"],
        ["nonsense"],
        ["example", "extra"],
        ["conformance", "--strict"],
        ["conformance", "--cases", "float32"],
    ],
)
def test_argparse_errors_are_one_line(args: list[str]) -> None:
    assert_refused(ctcop_cli(*args), "ctcop")


def test_help_still_works() -> None:
    for args in (["--help"], ["export", "--help"], ["conformance", "-h"]):
        result = ctcop_cli(*args)
        assert result.returncode == 0 and result.stderr == "" and "usage: ctcop" in result.stdout


def test_openvino_errors_are_collapsed_to_one_line(tmp_path) -> None:
    # OpenVINO's messages span lines: where it was raised, the failed check, then the reason.
    layer = '<layer id="0" type="Parameter"/>'
    (tmp_path / "layer.xml").write_text(f'<net name="x" version="11"><layers>{layer}</layers></net>')
    (tmp_path / "layer.bin").write_bytes(b"")
    with pytest.raises(InvalidInputError) as unreadable:
        load_ir(str(tmp_path / "layer.xml"))
    message = str(unreadable.value)
    assert "\n" not in message and "missing mandatory attribute" in message and "Exception from" not in message
    result = ctcop_cli("validate", str(tmp_path / "layer.xml"))
    assert_refused(result, "is missing mandatory attribute")
    with pytest.raises(InvalidInputError) as refused:
        save_ir(ir_model(), str(tmp_path / "x.onnx"))
    assert "\n" not in str(refused.value) and "must end in .xml" in str(refused.value)


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "directory"])
@pytest.mark.parametrize("option", ["attach_onnx", "attach_ir", "inputs", "eval"])
def test_input_files_must_be_regular_files(tmp_path, kind: str, option: str) -> None:
    path = {"dev_zero": "/dev/zero", "fifo": str(tmp_path / "in.onnx"), "directory": str(tmp_path / "in.onnx")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    save_ir(ir_model(dims=(4, 2, 3)), str(tmp_path / "ctc.xml"))
    args = {
        "attach_onnx": ["export", "-o", str(tmp_path / "x.onnx"), "--attach", path],
        "attach_ir": ["export", "--format", "ir", "-o", str(tmp_path / "x.xml"), "--attach", path],
        "inputs": ["eval", str(tmp_path / "ctc.xml"), "--inputs", path],
        "eval": ["eval", path],
    }[option]
    assert_refused(ctcop_cli(*args), "not a regular file")  # a FIFO read would hang: the hang guard fails it


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "-o", "{tmp}/x.onnx", "--attach", "{tmp}/a.onnx", "--dtype", "float64"], "dtype: --dtype is"),
        (["export", "-o", "{tmp}/x.onnx", "--attach", "{tmp}/a.onnx", "--dims", "1,2,5"], "dims: --dims is ignored"),
        (["export", "-o", "{tmp}/x.onnx", "--form", "custom"], "form: "),
        (["export", "--format", "ir", "-o", "{tmp}/x.xml", "--opset", "19"], "opset: "),
        (["export", "-o", "{tmp}/x.onnx", "--logits-output", "scores"], "logits_output: "),
        (["eval", "{tmp}/ctc.xml", "--inputs", "{tmp}/in.npz", "--seed", "3"], "seed: "),
        (["eval", "{tmp}/a.onnx", "--runtime", "onnxruntime", "--device", "GPU"], "device: "),
        (["conformance", "--write-corpus", "{tmp}/corpus", "--json", "{tmp}/o.json"], "json: "),
        (["conformance", "--write-corpus", "{tmp}/corpus", "--runtimes", "reference"], "runtimes: "),
        (["conformance", "--write-corpus", "{tmp}/corpus", "--jobs", "2"], "jobs: "),
        (["conformance", "--write-corpus", "{tmp}/corpus", "--junit", "{tmp}/o.xml"], "junit: "),
        (["conformance", "--write-ir-tests", "{tmp}/corpus", "--timeout", "3"], "timeout: "),
        (["conformance", "--write-corpus", "{tmp}/corpus", "--runtime-module", "a:b"], "runtime_module: "),
        (["conformance", "--write-corpus", "{tmp}/corpus", "--details", "3"], "details: "),
    ],
)
def test_options_a_command_would_ignore_are_refused(tmp_path, args: list[str], message: str) -> None:
    save_onnx(onnx_acoustic_model(), str(tmp_path / "a.onnx"))
    save_ir(ir_model(dims=(4, 2, 3)), str(tmp_path / "ctc.xml"))
    np.savez(tmp_path / "in.npz", x=np.zeros(1))
    result = ctcop_cli(*(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert_refused(result, message)
    assert not (tmp_path / "corpus").exists() and not (tmp_path / "x.onnx").exists()


def test_an_internal_error_is_one_line(monkeypatch, capsys) -> None:
    def broken(_: object) -> int:
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(example, "run", broken)
    code = cli.main(["example"])
    err = capsys.readouterr().err
    assert code not in (0, 2) and err == "ctcop: internal error: RuntimeError: first line\n"


@pytest.mark.parametrize("command", ["eval", "validate"])
def test_a_file_declaring_a_future_opset_is_refused_before_any_reader(tmp_path, command: str) -> None:
    """Opset 10**9 made `eval --runtime openvino` hang for minutes (OpenVINO's ONNX reader takes time
    in proportion to the declared opset) and `validate` accept the file (found by the file fuzz).
    Opset 10**15 would keep a reader busy for years: only a refusal before any reader ends
    within the hang guard, on any machine."""
    from ctcop.onnx import onnx_model

    model = onnx_model(dims=(8, 3, 5))
    next(op for op in model.opset_import if op.domain == "").version = 10**15
    onnx.save(model, tmp_path / "future.onnx")
    extra = ["--runtime", "openvino"] if command == "eval" else []
    result = ctcop_cli(command, str(tmp_path / "future.onnx"), *extra)
    assert_refused(result, "default-domain opset 1000000000000000 is newer than onnx")


SIGNAL_WHILE_STARTING = """
import os, signal, sys
import ctcop.console

class SignalDuringImport:  # sends the signal from inside the import of the command line module
    def find_spec(self, name, path=None, target=None):
        if name == "ctcop.cli":
            os.kill(os.getpid(), signal.{name})
        return None

sys.meta_path.insert(0, SignalDuringImport())
sys.exit(ctcop.console.main())
"""


@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_the_command_line_is_imported_is_one_line(name: str, code: int) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SIGNAL_WHILE_STARTING.replace("{name}", name), "defects"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == code, result.stderr
    assert result.stderr == f"ctcop: interrupted by {name} while starting; nothing was done\n"
    assert result.stdout == ""


def test_import_ctcop_console_loads_no_numpy() -> None:
    code = "import sys, ctcop.console; print('numpy' in sys.modules, 'ctcop.cli' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.split() == ["False", "False"], result.stderr
