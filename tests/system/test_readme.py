"""The README's examples, run as a new user runs them: every Python block executed and every
command of every shell block run (``ctcop ...`` in-process, :func:`ctcop.cli.main`, in a folder of
its own that holds the user files a block names: ``asr.onnx``, ``asr.xml``, ``asr_ctc.xml``,
``batch.npz``); the install and test commands are not run but checked against ``.ci/run``, which
installs the same packages and runs the README's test command. The docs' blocks: :data:`DOCS`
says of each block of ``docs/*.md`` whether a test here runs it or why not, and every block must
be listed there. Nothing here touches the network."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.docs import blocks, docs_blocks
from support.paths import ROOT

import ctcop
from ctcop import cli

README = ROOT / "README.md"
INSTALL, SUITE, CTCOP = "install", "test suite", "ctcop"
N, T, FEATURES, C = 3, 8, 6, 5


def commands(script: str) -> list[list[str]]:
    """The commands of a shell script: each line split as the shell splits it (comments dropped,
    quotes removed), then at ``&&`` and ``;``."""
    found: list[list[str]] = []
    for line in script.replace("\\\n", " ").splitlines():  # a line continued by a backslash is one
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&")
        lexer.whitespace_split, lexer.commenters = True, "#"
        command: list[str] = []
        for token in [*lexer, ";"]:
            if token in ("&&", ";"):
                found += [command] if command else []
                command = []
            else:
                command.append(token)
    return found


def kind(command: list[str]) -> str:
    """What a shell command of the docs is: an install, the test suite, or a ``ctcop`` command."""
    if command[:2] == ["pip", "install"]:
        return INSTALL
    if command[:3] == ["python", "-m", "pytest"]:
        return SUITE
    assert command[0] == "ctcop", f"a shell command the README's test does not know: {shlex.join(command)}"
    return CTCOP


def readme_block(language: str, containing: str) -> str:
    """The README's one block of ``language`` whose text contains ``containing``."""
    found = [text for lang, text in blocks(README) if lang == language and containing in text]
    assert len(found) == 1, (language, containing, len(found))
    return found[0]


def ctcop_commands(script: str) -> list[list[str]]:
    return [command for command in commands(script) if kind(command) == CTCOP]


def run_ctcop(command: list[str]) -> tuple[int, str]:
    """``ctcop ...`` in this process: its exit code and what it printed (stdout and stderr)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = cli.main(command[1:])
    return code, printed.getvalue()


def run_all(script: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Run every ``ctcop`` command of ``script`` in ``folder``; each must exit 0. What each printed."""
    monkeypatch.chdir(folder)
    printed = {}
    for command in ctcop_commands(script):
        code, text = run_ctcop(command)
        assert code == 0, f"{shlex.join(command)} exited {code}:\n{text}"
        printed[shlex.join(command)] = text
    return printed


def execute(source: str, folder: Path, monkeypatch: pytest.MonkeyPatch, **given: Any) -> tuple[dict[str, Any], str]:
    """Execute a Python block in ``folder`` with ``given`` defined: its names and what it printed."""
    monkeypatch.chdir(folder)
    namespace: dict[str, Any] = {"__name__": "__readme__", **given}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "README block", "exec"), namespace)
    return namespace, printed.getvalue()


# -- the user files the blocks name ----------------------------------------------------------------


def native_ir(path: Path) -> None:
    """features [N, T, 6] -> MatMul -> logits [N, T, 5] -> OpenVINO's native CTCLoss-4 (opset4),
    as a user's IR holds it (the layer that ``ctcop guard`` replaces and ``ctcop eval`` checks)."""
    import openvino
    import openvino.opset4 as opset4
    import openvino.opset15 as ops

    features = ops.parameter([N, T, FEATURES], np.float32, name="features")
    lengths = [ops.parameter([N], np.int32, name=name) for name in ("logit_length", "label_length")]
    labels = ops.parameter([N, T], np.int32, name="labels")
    parameters = [features, lengths[0], labels, lengths[1]]
    for node in parameters:
        node.output(0).get_tensor().set_names({node.get_friendly_name()})
    weights = np.random.default_rng(3).normal(size=(FEATURES, C)).astype(np.float32)
    logits = ops.matmul(features, ops.constant(weights), False, False)
    loss = opset4.ctc_loss(logits, lengths[0], labels, lengths[1])
    loss.set_friendly_name("ctc_loss_0")
    model = openvino.Model([ops.result(loss)], parameters, "acoustic")
    openvino.save_model(model, str(path), compress_to_fp16=False)


def batch() -> dict[str, np.ndarray]:
    """Inputs of :func:`native_ir` that every implementation computes alike: feasible, non-empty
    targets (OpenVINO's kernel crashes on an empty one, D1)."""
    rng = np.random.default_rng(4)
    return {
        "features": rng.normal(size=(N, T, FEATURES)).astype(np.float32),
        "logit_length": np.array([8, 6, 7], np.int32),
        "labels": rng.integers(0, C - 1, size=(N, T)).astype(np.int32),
        "label_length": np.array([3, 2, 1], np.int32),
    }


def user_files(folder: Path) -> None:
    """The files the README's shell blocks name, as a user would have them."""
    import onnx
    from support.models import onnx_acoustic_model

    onnx.save(onnx_acoustic_model(), str(folder / "asr.onnx"))
    native_ir(folder / "asr.xml")
    native_ir(folder / "asr_ctc.xml")
    np.savez(folder / "batch.npz", **batch())


# -- the README ------------------------------------------------------------------------------------


def test_every_readme_block_is_run_or_checked() -> None:
    """The README holds Python and shell blocks only, and each shell command is one this file
    knows (an install, the test suite, a ``ctcop`` command): a new kind of block fails here."""
    found = blocks(README)
    assert [lang for lang, _ in found] == ["sh", "python", "sh", "python", "sh"]
    kinds = [kind(command) for lang, text in found if lang == "sh" for command in commands(text)]
    assert kinds.count(INSTALL) == 3 and kinds.count(SUITE) == 1 and kinds.count(CTCOP) == 8


def pip_packages(command: list[str]) -> list[str]:
    """What a ``pip install`` command installs, its options left out (``-c FILE`` with its file),
    ``--no-deps`` kept: it changes what is installed."""
    found, rest = [], command[2:]
    while rest:
        word = rest.pop(0)
        if word in ("-c", "--constraint"):
            rest.pop(0)
        elif word == "--no-deps" or not word.startswith("-"):
            found.append(word)
    return found


def test_the_install_and_test_commands_are_the_ones_ci_runs() -> None:
    """.ci/run greps the README's first ``pip install .*pytest`` line and runs it, with CI's
    constraints in PIP_CONSTRAINT; that line's installs are the ones CI makes."""
    script = readme_block("sh", "pip install")
    test_line = next(line for line in README.read_text().splitlines() if re.match(r"^pip install .*pytest", line))
    assert test_line in script.splitlines()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 -E '^pip install .*pytest' README.md" in ci and 'eval "$test_command"' in ci
    ci_installs = [
        (command[0], pip_packages(command[2:]))
        for command in commands(ci)
        if command[1:4] == ["-m", "pip", "install"] and "--upgrade" not in command
    ]
    readme_installs = [pip_packages(command) for command in commands(script) if kind(command) == INSTALL]
    assert readme_installs[0] == ["."]  # the user's install: the package without extras
    # .ci/run installs nothing of its own but the venv of onnxruntime's OpenVINO provider (it
    # replaces onnxruntime): the README's test command installs, at CI's pinned versions
    ortov = ".venv-ortov/bin/python"
    assert [python for python, _ in ci_installs] == [ortov, ortov]
    assert "onnxruntime-openvino" in ci_installs[0][1] and ci_installs[1][1] == ["--no-deps", "."]
    assert 'export PIP_CONSTRAINT="$PWD/.ci/constraints.txt"' in ci
    assert readme_installs[1:] == [[".[test]"], ["--no-deps", "paddlepaddle", "httpx", "httpcore"]]
    assert [kind(command) for command in commands(test_line)] == [INSTALL, INSTALL, SUITE]


def test_the_main_job_runs(tmp_path, monkeypatch) -> None:
    """The README's main job, ``ctcop conformance`` on every installed runtime: exit 0."""
    (main_job,) = ctcop_commands(readme_block("sh", "pip install"))
    assert main_job == ["ctcop", "conformance"]
    printed = run_all(shlex.join(main_job), tmp_path, monkeypatch)
    assert "reference" in printed["ctcop conformance"]


def test_the_reference_example_prints_the_loss(tmp_path, monkeypatch) -> None:
    """The first example runs and ends by printing the loss, equal in both forms of the op."""
    namespace, printed = execute(readme_block("python", "ctcop.ctc_loss("), tmp_path, monkeypatch)
    loss = namespace["loss"]
    assert loss.shape == (2,) and loss.dtype == np.float32 and np.all(np.isfinite(loss)) and np.all(loss > 0)
    np.testing.assert_array_equal(namespace["ov"], loss)
    assert namespace["grad"].shape == (50, 2, 28) and namespace["best"].shape == (2, 50)
    assert printed == f"{loss} {loss}\n"
    assert f"# {loss} twice" in readme_block("python", "ctcop.ctc_loss(")  # the comment shows what it prints


def test_the_export_block_writes_every_file(tmp_path, monkeypatch) -> None:
    """Each ``ctcop export`` and ``ctcop guard`` of the README, on a user's ``asr.onnx`` and
    ``asr.xml``: exit 0 and the file it names written."""
    import onnx
    import openvino

    user_files(tmp_path)
    script = readme_block("sh", "ctcop export")
    run_all(script, tmp_path, monkeypatch)
    written = [command[command.index("-o") + 1] for command in ctcop_commands(script)]
    assert written == ["ctc.onnx", "train.onnx", "ctc.xml", "ov.xml", "asr_guarded.xml"]
    for name in written:
        if name.endswith(".onnx"):
            onnx.checker.check_model(onnx.load(str(tmp_path / name)), full_check=True)
        else:
            assert openvino.Core().read_model(str(tmp_path / name)).get_results()
    trained = onnx.load(str(tmp_path / "train.onnx"))
    assert {i.name for i in trained.graph.input} >= {"features", "sequence_mask", "labels"}


def test_the_torch_example_exports(tmp_path, monkeypatch) -> None:
    """The PyTorch block, with a small model whose forward calls ``F.ctc_loss`` and a batch for it:
    the ONNX model it writes computes PyTorch's loss."""
    import onnxruntime
    from support.torch_models import CONFIGS, LossModel
    from support.torch_models import batch as torch_batch

    model = LossModel(CONFIGS[:1]).eval()
    given = torch_batch(seed=1, n=3, frames=10, concatenated=False)
    names = dict(zip(("features", "targets", "input_lengths", "target_lengths"), given.tensors(), strict=True))
    execute(readme_block("python", "ctcop.torch"), tmp_path, monkeypatch, model=model, **names)
    session = onnxruntime.InferenceSession(str(tmp_path / "asr.onnx"), providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in session.get_inputs()], given.arrays(), strict=True))
    (expected,) = model(*given.tensors())
    np.testing.assert_allclose(session.run(None, feeds)[0], expected.detach().numpy(), rtol=1e-5)


def test_the_command_line_block_runs(tmp_path, monkeypatch) -> None:
    """The README's ``ctcop conformance`` (OpenVINO's native kernel on the released form, its
    registered defects xfail) and ``ctcop eval`` (a user's IR on inputs of a ``batch.npz``)."""
    import json

    user_files(tmp_path)
    printed = run_all(readme_block("sh", "ctcop eval"), tmp_path, monkeypatch)
    report = json.loads((tmp_path / "ov.json").read_text())
    assert [r["name"] for r in report["runtimes"]] == ["openvino"] and report["complete"] is True
    assert report["summary"]["openvino"]["pass"] > 0 and (tmp_path / "ov.xml").read_text().startswith("<?xml")
    evaluated = json.loads((tmp_path / "out.json").read_text())
    assert "ctc_loss_0" in json.dumps(evaluated) and "ctc_loss_0" in printed[shlex.join(["ctcop", "eval",
        "asr_ctc.xml", "--inputs", "batch.npz", "--json", "out.json"])]  # fmt: skip


# -- the docs --------------------------------------------------------------------------------------

RUN = "run here"
# Each block of docs/*.md, by its file and the first 50 characters of its first line: RUN (a test
# below runs it) or why it is not run.
DOCS: dict[tuple[str, str], str] = {
    ("bench.md", 'pip install ".[bench,peers]"    # matplotlib for -'):
        "an install",
    ("bench.md", "ctcop bench: AMD EPYC, 2 cores (load average 0.91 "):
        "output measured on another machine, not a command",
    ("bench.md", "first call                       T, N, C  cache em"):
        "output of benchmarks/first_call.py measured on another machine, not a command",
    ("conformance.md", "ctcop conformance --runtimes openvino --select rel"):
        "whole conformance runs, minutes each: the README's block runs the first line, "
        "tests/system/test_conformance.py, "
        "test_runner.py and test_conformance_diff.py the options on small selections",
    ("conformance.md", "import numpy as np"): RUN,
    ("conformance.md", "ctcop conformance --self-check --json selfcheck.js"):
        "the self-check, a minute: tests/system/test_self_check.py runs it and holds the map to it",
    ("conformance.md", "runtime            pass  fail  error  crash  timeo"):
        "output of a run with every peer installed, not a command",
    ("conformance.md", "ctcop conformance --runtimes openvino --json old.j"):
        "two OpenVINO releases and an install: tests/system/test_conformance_diff.py compares such reports",
    ("conformance.md", "CTCLoss-4 conformance diff: old.json -> new.json ("):
        "output, not a command",
    ("conformance.md", "jobs:"): "a GitHub Actions workflow, for a runtime team's CI",
    ("defects.md", "import numpy as np"):
        "D58's model: tests/unit/test_onnx_openvino_ep.py runs it on onnxruntime, OpenVINO and the provider",
    ("eval.md", "$ ctcop validate asr_ctc.xml            # list the"):
        "a session on the user's models (asr_ctc.xml, guarded.xml, shifted.xml, wide.xml) on an AVX-512-BF16 "
        "CPU; tests/system/test_eval.py and tests/unit/test_eval_stages.py run those verdicts",
    ("export.md", "ctcop export -o ctc.onnx --dtype float32 --dims T,"): RUN,
    ("export.md", "from ctcop.onnx import attach_onnx, load_onnx, onn"): RUN,
    ("export.md", "ctcop export --format ir -o ctc.xml --dims T,N,28 "):
        RUN,
    ("export.md", "from ctcop.openvino import attach_openvino, ir_mod"): RUN,
    ("export.md", "import ctcop, ctcop.torch, openvino"):
        "needs the user's PyTorch model and batch: the README's PyTorch block runs export_onnx, "
        "tests/integration/torch/test_torch_export.py the rest",
    ("export.md", 'n, t = torch.export.Dim("N"), torch.export.Dim("T"'):
        "a fragment on the user's model and args: tests/integration/torch/test_torch_export.py exports "
        "with dynamic_shapes",
    ("export.md", "class WithLoss(torch.nn.Module):"):
        "needs the user's Hugging Face *ForCTC model: tests/integration/torch/test_hf_export.py exports "
        "ones built from configs",
    ("tensorflow.md", "import openvino as ov"):
        "needs the user's SavedModel: tests/integration/tf/test_tf_bridge.py converts one",
    ("tensorflow.md", "import keras, tensorflow as tf"):
        "a fragment (S, T, C and ov from the block before): tests/integration/tf/test_tf_bridge.py runs it whole",
    ("tensorflow.md", "import tf2onnx"):
        "a fragment (loss_function and spec are the user's): tests/integration/tf/test_tf2onnx.py runs it whole",
    ("testing.md", "python -m pytest -q                      # every t"):
        "the test suite's own commands: this test runs inside the first one",
    ("testing.md", "python -m venv /tmp/newer && . /tmp/newer/bin/acti"):
        "installs the newest releases from the network and runs the whole test suite",
}  # fmt: skip


def test_every_docs_block_is_listed() -> None:
    """Each block of docs/*.md is in :data:`DOCS` (run here, or why not), and DOCS lists no other."""
    assert set(docs_blocks()) == set(DOCS)


def docs_block(name: str, start: str) -> str:
    """The block of ``docs/NAME`` whose first line starts with ``start``, one that DOCS marks run."""
    (key,) = [key for key in docs_blocks() if key[0] == name and key[1].startswith(start[:50])]
    assert DOCS[key] == RUN
    return docs_blocks()[key]


def test_the_runtime_protocol_example_runs(tmp_path, monkeypatch) -> None:
    """docs/conformance.md's third-party runtime, its ``my_kernel`` the reference on frame counts:
    it passes a spec case and skips a released one, as the suite judges them."""
    from ctcop.conformance import corpus, verdict

    def my_kernel(inputs: np.ndarray, lengths: np.ndarray, labels: np.ndarray, **attributes: bool) -> np.ndarray:
        mask = (np.arange(inputs.shape[0])[:, None] < lengths[None, :]).astype(np.int32)
        return ctcop.ctc_loss(inputs, mask, labels, **attributes)

    namespace, _ = execute(docs_block("conformance.md", "import numpy as np"), tmp_path, monkeypatch,
                           my_kernel=my_kernel)  # fmt: skip
    runtime = namespace["RUNTIME"]
    cases = {case.id: case for case in corpus.load_all()}
    chosen = ("spec/hand_worked/float32", "spec/interior_pads/float64", "released/blank_absent/int32/float32")
    judged = [verdict.judge(runtime, cases[case_id], runtime.name).status for case_id in chosen]
    assert judged == ["pass", "pass", "skip"]


def test_the_export_docs_blocks_run(tmp_path, monkeypatch) -> None:
    """docs/export.md's shell blocks on a user's ``asr.onnx`` and ``asr.xml`` (an acoustic model
    with a ``logits`` output), then its Python blocks on the files they wrote."""
    import onnx
    import openvino
    from support.models import onnx_acoustic_model, openvino_acoustic_model

    onnx.save(onnx_acoustic_model(), str(tmp_path / "asr.onnx"))
    openvino.save_model(openvino_acoustic_model(), str(tmp_path / "asr.xml"))
    for first in (
        "ctcop export -o ctc.onnx --dtype float32 --dims T,N,28            # the op alone",
        "ctcop export --format ir -o ctc.xml --dims T,N,28                 # stock operators only (native CTC",
    ):
        run_all(docs_block("export.md", first), tmp_path, monkeypatch)
    assert all((tmp_path / name).is_file() for name in ("asr_train.onnx", "ctc_custom.xml", "train.xml"))
    onnx_names, _ = execute(docs_block("export.md", "from ctcop.onnx import"), tmp_path, monkeypatch)
    assert {i.name for i in onnx_names["trainable"].graph.input} >= {"features", "sequence_mask", "labels"}
    assert onnx_names["compiled"].outputs
    ir_names, _ = execute(docs_block("export.md", "from ctcop.openvino import"), tmp_path, monkeypatch,
                          ov_model=openvino_acoustic_model())  # fmt: skip
    assert len(ir_names["with_loss"].get_parameters()) == 3 and (tmp_path / "ctc.xml").is_file()
