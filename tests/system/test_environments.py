"""``ctcop conformance --runtime-python LABEL=PYTHON`` (spec 10.4): rows of another interpreter's
environment in one report, run by that interpreter's workers, compared with this one's by
``conformance-diff --rows``; an interpreter that cannot serve is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support.cli import assert_invalid_input, in_process

import ctcop


def venv(folder: Path, *paths: str) -> Path:
    """A venv without pip whose interpreter imports from ``paths`` (a .pth file): another
    interpreter, sys.prefix and environment, with ctcop importable."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "along.pth").write_text("\n".join(paths) + "\n")
    return python


@pytest.fixture(scope="module")
def other(tmp_path_factory) -> Path:
    here = [str(Path(ctcop.__file__).parents[1]), sysconfig.get_paths()["purelib"]]
    return venv(tmp_path_factory.mktemp("other"), *here)


def test_rows_of_another_environment_run_there_and_diff_against_this_ones(capsys, tmp_path, other) -> None:
    report = tmp_path / "report.json"
    args = ["--runtimes", "reference,openvino-ir", "--select", "spec/hand_worked", "--json", report]
    code, out, err = in_process(capsys, "conformance", *args, "--runtime-python", f"other={other}")
    assert code == 0, out + err
    document = json.loads(report.read_text())
    names = [r["name"] for r in document["runtimes"]]
    assert names == ["reference", "openvino-ir", "reference~other", "openvino-ir~other"]
    remote = document["runtimes"][2]
    assert remote["environment"]["python"] == str(other) and remote["environment"]["ctcop"] == ctcop.__version__
    assert remote["registry_keys"] == ["reference"]
    statuses = {(r["runtime"], r["case"]): r["status"] for r in document["results"]}
    assert statuses[("openvino-ir~other", "spec/hand_worked/float64")] == "xfail"  # D4, by the same registry
    assert len(statuses) == 16 and {s for s in statuses.values()} <= {"pass", "skip", "xfail"}
    pairs = ["--rows", "reference~other=reference", "--rows", "openvino-ir~other=openvino-ir"]
    code, out, err = in_process(capsys, "conformance-diff", report, report, *pairs)
    assert (code, out.splitlines()[-1]) == (0, "no change"), out + err
    assert "2 runtimes in both" in out


def test_an_interpreter_that_cannot_serve_is_refused_in_one_line(capsys, tmp_path) -> None:
    fake = tmp_path / "fake"
    (fake / "ctcop").mkdir(parents=True)
    (fake / "ctcop" / "__init__.py").write_text('__version__ = "0.0.1"\n')
    refused = {
        f"none={tmp_path / 'no-python'}": "does not run: ",
        f"bare={venv(tmp_path / 'bare')}": "cannot import ctcop: ModuleNotFoundError: No module named 'ctcop'",
        f"old={venv(tmp_path / 'old', str(fake))}": f"has ctcop 0.0.1, not {ctcop.__version__}: install this one",
    }
    for given, message in refused.items():
        result = in_process(capsys, "conformance", "--runtimes", "reference", "--runtime-python", given)
        assert_invalid_input(result, message)
        assert f"runtime_python: {given.split('=')[0]}: " in result[2]
