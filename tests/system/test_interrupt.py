"""SIGINT and SIGTERM during ``ctcop conformance`` and ``ctcop eval``, as a
user sends them: a valid partial JSON report marked incomplete, one line on stderr, exit 130 / 143,
and no worker process left behind."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable

import numpy as np
import pytest
from support.eval_files import inputs_npz, released_ir


def children(pid: int, running: str = "") -> list[int]:
    """Processes whose parent is ``pid`` (read from /proc), only those whose command line holds
    ``running`` when given."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and running in command_line(int(entry)):
            found.append(int(entry))
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


HANG_S = 600  # a guard against a hang only: nothing here judges speed

# ``ctcop`` with one line more on stdout, "first result", once ``conformance`` has its first
# result: the moment to interrupt, seen rather than guessed.
ANNOUNCING = """
import sys

from ctcop import cli
from ctcop.conformance import report

step = report.Progress.step


def announced(self: report.Progress, result: object) -> None:
    step(self, result)
    if self.done == 1:
        print("first result", flush=True)


report.Progress.step = announced
sys.exit(cli.main(sys.argv[1:]))
"""


def first_result(process: subprocess.Popen) -> None:
    """Wait until ``process`` (run from ANNOUNCING) has its first result."""
    assert process.stdout is not None
    guard = threading.Timer(HANG_S, process.kill)
    guard.start()
    try:
        line = process.stdout.readline()
    finally:
        guard.cancel()
    assert line == "first result\n", (line, process.communicate())


def worker_started(worker: str) -> Callable[[subprocess.Popen], None]:
    """Waits until ``process`` has a child whose command line holds ``worker``."""

    def wait(process: subprocess.Popen) -> None:
        deadline = time.monotonic() + HANG_S
        while not children(process.pid, worker):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no worker process started"
            time.sleep(0.05)

    return wait


def interrupt(
    command: list[str], signum: int, ready: Callable[[subprocess.Popen], None]
) -> tuple[subprocess.CompletedProcess, list[int]]:
    """Start ``python COMMAND``, wait until ``ready(process)`` returns, send ``signum``; returns
    the finished process and its children just before the signal."""
    process = subprocess.Popen([sys.executable, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready(process)
    except BaseException:
        process.kill()
        process.communicate()
        raise
    workers = children(process.pid)
    assert process.poll() is None, "finished before the signal"
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=HANG_S)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), workers


def assert_interrupted(result: subprocess.CompletedProcess, workers: list[int], name: str, report: str) -> dict:
    assert result.returncode == {"SIGINT": 130, "SIGTERM": 143}[name], result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"interrupted by {name}" in result.stderr and report in result.stderr
    # ctcop kills and reaps its workers before it exits: none is left the moment it has exited
    assert not [pid for pid in workers if alive(pid)], "a worker process outlived ctcop"
    with open(report, encoding="utf-8") as file:
        document = json.load(file)
    assert document["complete"] is False and document["interrupted_by"] == name
    assert not [name for name in os.listdir(os.path.dirname(report)) if name.startswith(".")]  # no temp file left
    return document


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_conformance_interrupted_writes_a_partial_report(tmp_path, signum: int, name: str) -> None:
    # The workers are ctcop's own child processes; the signal goes once the first result is in.
    report = str(tmp_path / "out.json")
    junit = str(tmp_path / "out.xml")
    args = ["-c", ANNOUNCING, "conformance", "--json", report, "--junit", junit, "--jobs", "2"]
    result, workers = interrupt(args, signum, first_result)
    assert workers
    document = assert_interrupted(result, workers, name, report)
    statuses = [r["status"] for r in document["results"]]
    assert statuses and set(statuses) <= {"pass", "fail", "error", "crash", "timeout", "skip", "nondeterministic"}
    available = [r for r in document["runtimes"] if r["available"]]
    assert len(statuses) < document["selection"]["cases"] * len(available)
    # what was finished before the signal is there: the reference's cases all ran first
    assert all(r["status"] == "pass" for r in document["results"] if r["runtime"] == "reference")
    counted = {runtime: sum(counts.values()) for runtime, counts in document["summary"].items()}
    assert counted == {r["name"]: sum(x["runtime"] == r["name"] for x in document["results"]) for r in available}
    # JUnit: one testcase per result, plus one skipped testcase per runtime that is not installed
    unavailable = len(document["runtimes"]) - len(available)
    assert ET.parse(junit).getroot().get("tests") == str(len(statuses) + unavailable)


def test_conformance_report_is_complete_when_not_interrupted(tmp_path) -> None:
    report = tmp_path / "out.json"
    result = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance", "--runtimes", "reference", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(report.read_text())
    assert document["complete"] is True and document["interrupted_by"] is None
    assert len(document["results"]) == document["selection"]["cases"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_eval_interrupted_writes_a_partial_report(tmp_path, signum: int, name: str) -> None:
    released_ir(tmp_path / "model.xml", layers=2)
    inputs_npz(tmp_path / "inputs.npz")
    report = str(tmp_path / "out" / "eval.json")
    os.mkdir(tmp_path / "out")
    args = ["eval", str(tmp_path / "model.xml"), "--inputs", str(tmp_path / "inputs.npz"), "--json", report]
    result, workers = interrupt(["-m", "ctcop", *args], signum, worker_started("ctcop.layers.worker"))
    document = assert_interrupted(result, workers, name, report)
    assert isinstance(document["layers"], list) and len(document["layers"]) < 2
    assert np.all([layer["verdict"] for layer in document["layers"]])


def loaded(pid: int, library: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as file:
            return library in file.read()
    except OSError:
        return False


def test_eval_interrupted_while_loading_the_model_still_reports(tmp_path) -> None:
    # Early on the parent is inside OpenVINO, which turns the exception the signal raises in a
    # Python callback (ctcop's extensions) into its own RuntimeError: still an interruption, not
    # an invalid model. The signal goes as soon as the parent has loaded OpenVINO's library.
    released_ir(tmp_path / "model.xml")
    report = tmp_path / "eval.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "ctcop", "eval", str(tmp_path / "model.xml"), "--json", str(report), "--seed", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + HANG_S
    while not loaded(process.pid, "libopenvino"):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=HANG_S)
    assert process.returncode == 130 and stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    document = json.loads(report.read_text())
    assert document["complete"] is False and document["interrupted_by"] == "SIGINT"


# ``ctcop`` as ANNOUNCING runs it, and a SIGTERM sent once ``main`` has returned, while the
# interpreter is ending (where a second signal lands when it comes a moment after the first).
TERMINATED_WHILE_ENDING = ANNOUNCING.replace(
    "sys.exit(cli.main(sys.argv[1:]))",
    "import os, signal\ncode = cli.main(sys.argv[1:])\nos.kill(os.getpid(), signal.SIGTERM)\nsys.exit(code)",
)


def test_a_second_signal_while_ending_keeps_the_first_signals_exit_code(tmp_path) -> None:
    report = str(tmp_path / "out.json")
    args = ["-c", TERMINATED_WHILE_ENDING, "conformance", "--json", report, "--jobs", "2"]
    result, workers = interrupt(args, signal.SIGINT, first_result)
    assert_interrupted(result, workers, "SIGINT", report)


def test_a_signal_whose_exception_a_ctypes_callback_drops_still_interrupts() -> None:
    # llvmlite calls back into Python while numba compiles; an exception raised there (the signal
    # handler's) is printed and dropped by ctypes, and the work goes on: the command must still
    # end as interrupted. libc's qsort stands in for llvmlite, its comparison sending SIGTERM.
    program = """
import ctypes, os, signal
from ctcop.cli import signals
compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
    lambda a, b: os.kill(os.getpid(), signal.SIGTERM) or 0)
values = (ctypes.c_int * 2)(2, 1)
with signals.interruptible():
    ctypes.CDLL(None).qsort(values, 2, ctypes.sizeof(ctypes.c_int), compare)
    try:
        signals.raise_dropped()
    except signals.Interrupted as interrupted:
        print("after the callback:", interrupted.name)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Exception ignored on calling ctypes callback function" in done.stderr
    assert done.stdout == "after the callback: SIGTERM\n"


# ``ctcop`` with a ctypes callback that sends SIGTERM (its exception dropped, as llvmlite's while
# numba compiles) once the function named by argv[1] has returned: the measuring or the table.
DROPPED_AFTER = """
import ctypes, os, signal, sys

from ctcop import cli
from ctcop.cli import conformance
from ctcop.conformance import suite


def dropping(function):
    def call(*args):
        done = function(*args)
        compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
            lambda a, b: os.kill(os.getpid(), signal.SIGTERM) or 0)
        ctypes.CDLL(None).qsort((ctypes.c_int * 2)(2, 1), 2, ctypes.sizeof(ctypes.c_int), compare)
        return done

    return call


module = {"run": suite, "show": conformance}[sys.argv[1]]
setattr(module, sys.argv[1], dropping(getattr(module, sys.argv[1])))
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize(("after", "kind", "complete"), [("run", "partial report", False), ("show", "report", True)])
def test_conformance_ends_interrupted_by_a_signal_a_callback_dropped(tmp_path, after: str, kind: str, complete: bool):
    report = tmp_path / "out.json"
    args = ["conformance", "--runtimes", "reference", "--select", "spec/hand_worked/float32", "--json", str(report)]
    done = subprocess.run(
        [sys.executable, "-c", DROPPED_AFTER, after, *args], capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 143, done.stderr
    assert "Exception ignored on calling ctypes callback function" in done.stderr
    assert done.stderr.endswith(f"ctcop: interrupted by SIGTERM; {kind} in {report}\n"), done.stderr
    document = json.loads(report.read_text())
    assert document["complete"] is complete and document["interrupted_by"] == (None if complete else "SIGTERM")
    assert document["summary"]["reference"]["pass"] == len(document["results"]) == 1
