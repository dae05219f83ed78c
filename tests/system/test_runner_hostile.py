"""The conformance runner and its commands against runtimes, runtime modules and report files that
misbehave: a runtime that writes into its inputs, answers that are not arrays of numbers, a
runtime module that kills or hangs the process importing it, a runtime whose listing raises,
report files that are not what a run writes, and a signal while the final table is printed."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support.paths import SUPPORT

from ctcop.conformance import corpus, expected, registry, report, runner, shard, verdict
from ctcop.conformance.case import Case
from ctcop.conformance.result import Result

BAD_FILE = SUPPORT / "bad_runtimes.py"
RANDOM = "spec/random_1*/float32"  # 10 cases whose labels are padded with -1
HANG_S = 300


def fresh_case(case_id: str) -> Case:
    return corpus.load(corpus.case_folder(corpus.default_root(), case_id))


def module_runtimes(attr: str) -> list:
    return registry.load_module(f"{BAD_FILE}:{attr}")


def reference() -> object:
    return next(entry.runtime for entry in registry.discover(with_plugins=False) if entry.name == "reference")


def ctcop(*args: str, timeout: float = HANG_S, cwd: Path | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ctcop", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def one_line_usage_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.stderr
    return result.stderr


# -- a runtime's inputs are its own -----------------------------------------------------------------


def test_a_runtime_writing_into_its_inputs_changes_nothing_for_the_next() -> None:
    case = fresh_case("spec/random_10_nomerge/float32")
    assert (case.inputs["labels"] == -1).any()
    careless = verdict.judge(module_runtimes("HOSTILE")[0], case)
    assert careless.status == "error" and "read-only" in careless.message, careless
    assert (case.inputs["labels"] == -1).any()  # the case is as it was
    assert verdict.judge(reference(), case).status == "pass"


def test_what_a_runtime_is_handed_is_fresh_and_read_only() -> None:
    case = fresh_case("spec/random_10_nomerge/float32")
    first, second = case.handed(), case.handed()
    assert first.inputs is not second.inputs and first.inputs is not case.inputs
    for name, array in first.inputs.items():
        assert not array.flags.writeable
        assert not np.shares_memory(array, case.inputs[name])
        with pytest.raises(ValueError, match="read-only"):
            array[...] = 0
    first.inputs.pop("labels")
    assert "labels" in second.inputs and "labels" in case.inputs
    assert first.id == case.id and first.attributes == case.attributes


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_mutating_runtime_leaves_the_others_passing_whatever_the_jobs(tmp_path, jobs: str) -> None:
    out = tmp_path / "out.json"
    runtimes = "careless,reference,onnxruntime"
    result = ctcop("conformance", "--runtime-module", f"{BAD_FILE}:HOSTILE", "--runtimes", runtimes,
                   "--select", RANDOM, "--jobs", jobs, "--json", str(out))  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    summary = json.loads(out.read_text())["summary"]
    assert summary["reference"]["pass"] == 10 and summary["onnxruntime"]["pass"] == 10, summary
    assert summary["careless"]["error"] == 10, summary


# -- answers that are not arrays of numbers -------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "said"),
    [
        (0, "is not an array: RuntimeError: Can't call numpy() on Tensor that requires grad"),
        (1, "KeyboardInterrupt"),
        (2, "SystemExit: 3"),
        (3, "element type object, not a real number type"),
    ],
)
def test_a_misanswering_runtime_is_an_error_that_says_why(index: int, said: str) -> None:
    runtime = module_runtimes("MISANSWERING")[index]
    # a KeyboardInterrupt or a SystemExit is no clean rejection of an invalid case either
    for case_id in ("spec/hand_worked/float64", *(["invalid/label_at_least_c"] if index in (1, 2) else [])):
        got = verdict.judge(runtime, fresh_case(case_id))
        assert got.status == "error" and said in got.message, (case_id, got)


class Answers:
    """A runtime that answers ``value`` whatever the case."""

    name, description = "answers", "answers one fixed value"

    def __init__(self, value: object) -> None:
        self.value = value

    def run(self, case: object) -> object:
        return self.value


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (None, "not a valid answer: there is no loss (None)"),
        (np.full(1, 1.08 + 0j), "not a valid answer: the loss has element type complex128, not a real number type"),
    ],
)
def test_no_loss_or_a_complex_loss_is_an_error_that_says_why(value: object, said: str) -> None:
    got = verdict.judge(Answers(value), fresh_case("spec/hand_worked/float64"))
    assert (got.status, got.message) == ("error", said)


def test_misanswering_runtimes_are_errors_in_the_workers_not_crashes() -> None:
    names = tuple(r.name for r in module_runtimes("MISANSWERING"))
    results: list[Result] = []
    cases = [fresh_case("spec/hand_worked/float64")]
    runtimes = runner.Runtimes(names, (f"{BAD_FILE}:MISANSWERING",))
    runner.run_cases(runtimes, cases, runner.Settings(jobs=2, timeout_s=HANG_S), results.append)
    assert {r.runtime: r.status for r in results} == dict.fromkeys(names, "error"), results


# -- runtime modules are loaded in a probe process first -------------------------------------------

KILLERS = {
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "killed by SIGSEGV"),
    "exit": ("import os\nos._exit(7)\n", "exited with code 7"),
    "hang": ("import threading\nthreading.Event().wait()\n", "did not finish within 3 s"),
    "sys-exit": ("import sys\nsys.exit(4)\n", "SystemExit: 4"),
}


@pytest.mark.parametrize("kind", sorted(KILLERS))
def test_a_runtime_module_that_kills_its_importer_is_refused(tmp_path, kind: str) -> None:
    source, said = KILLERS[kind]
    path = tmp_path / f"{kind.replace('-', '_')}.py"
    path.write_text(source + "RUNTIMES = []\n")
    with pytest.raises(registry.RegistryError, match=said):  # a short limit only where it is the point
        registry.probe(f"{path}:RUNTIMES", timeout_s=3 if kind == "hang" else 120)


@pytest.mark.parametrize("kind", ["segfault", "exit", "sys-exit"])
def test_an_entry_point_that_kills_its_importer_is_listed_broken(tmp_path, monkeypatch, kind: str) -> None:
    source, said = KILLERS[kind]
    module = f"ctcop_killer_{kind.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(source + "RUNTIMES = []\n")
    info = tmp_path / "ctcop_killer_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctcop-killer-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[ctcop.runtimes]\nkiller = {module}:RUNTIMES\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entries = {entry.name: entry for entry in registry.discover(probe_timeout_s=60)}
    assert module not in sys.modules  # never imported here: it would have taken this process along
    assert entries["killer"].available is not None and said in entries["killer"].available
    assert entries["reference"].available is None


def test_a_runtime_module_that_loads_passes_the_probe() -> None:
    registry.probe(f"{BAD_FILE}:BAD", timeout_s=HANG_S)
    with pytest.raises(registry.RegistryError, match="has no attribute"):
        registry.probe(f"{BAD_FILE}:NOTHING", timeout_s=HANG_S)


@pytest.mark.parametrize("kind", ["segfault", "exit", "hang"])
def test_conformance_with_a_killing_runtime_module_is_a_usage_error(tmp_path, kind: str) -> None:
    source, said = KILLERS[kind]
    path = tmp_path / "killer.py"
    path.write_text(source + "RUNTIMES = []\n")
    limit = "3" if kind == "hang" else "120"  # a short limit only where it is the point
    result = ctcop("conformance", "--runtime-module", f"{path}:RUNTIMES", "--runtimes", "reference",
                   "--select", "spec/hand_worked/float64", "--timeout", limit)  # fmt: skip
    assert said in one_line_usage_error(result)


# -- a runtime whose listing raises -----------------------------------------------------------------


def test_a_runtime_whose_description_or_availability_raises_is_listed_unavailable() -> None:
    entries = {e.name: e for e in registry.discover([f"{BAD_FILE}:BROKEN_LISTING"], with_plugins=False)}
    assert "RuntimeError: no description today" in str(entries["broken-description"].available)
    assert "SystemExit: 3" in str(entries["exiting-available"].available)


def test_conformance_lists_a_runtime_whose_listing_raises(tmp_path) -> None:
    out = tmp_path / "out.json"
    result = ctcop("conformance", "--runtime-module", f"{BAD_FILE}:BROKEN_LISTING", "--runtimes", "reference",
                   "--select", "spec/hand_worked/float64", "--json", str(out))  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


# -- files that are not what a run writes ----------------------------------------------------------

DEEP = "[" * 200_000 + "]" * 200_000


def test_deeply_nested_expected_failures_are_one_line() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        expected.parse(DEEP)


def shard_report(shard_text: str) -> dict:
    return {
        "schema": report.SCHEMA, "complete": True, "interrupted_by": None, "versions": {}, "machine": {"isa": []},
        "selection": {"patterns": [], "shard": shard_text, "cases": 0},
        "settings": {}, "runtimes": [], "results": [], "summary": {},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (DEEP, "nested too deeply"),
        (json.dumps(shard_report("1/2")).replace('"cases": 0', '"cases": NaN'), "NaN is not JSON"),
        (json.dumps(shard_report("1/2")).replace('"cases": 0', '"cases": 1e999'), "out of range"),
    ],
)
def test_report_files_are_strict_json(tmp_path, text: str, said: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=said):
        report.read(str(path))


def test_a_report_of_shard_5_of_2_is_refused() -> None:
    with pytest.raises(shard.MergeError, match="5/2"):
        report.merge([shard_report("5/2"), shard_report("1/2")], ["a.json", "b.json"])
    with pytest.raises(shard.MergeError, match="not K/N"):
        report.merge([shard_report(5), shard_report("1/2")], ["a.json", "b.json"])  # type: ignore[arg-type]
    broken = shard_report("2/2") | {"results": [{"case": "x", "runtime": "y", "status": "great", "message": ""}]}
    with pytest.raises(shard.MergeError, match="known status"):
        report.merge([shard_report("1/2"), broken], ["a.json", "b.json"])


def row(case: str, runtime: str = "reference", **fields: object) -> dict:
    return {"case": case, "runtime": runtime, "status": "pass", "message": "", "max_abs_err": 0.0,
            "max_rel_err": 0.0, "defect": None, **fields}  # fmt: skip


def with_rows(shard_text: str, *rows: dict, **changes: object) -> dict:
    runtimes = [{"name": "reference", "description": "", "available": True, "reason": None}]
    document = shard_report(shard_text) | {"runtimes": runtimes, "results": list(rows)}
    document["selection"] = document["selection"] | {"cases": len(rows)}
    return document | changes


def test_merged_text_is_printable_and_capped() -> None:
    second = with_rows("2/2", row("c2", status="skip", message="no \ud800 \x1b[31m here " + "x" * 10**6))
    merged = report.merge([with_rows("1/2", row("c1")), second], ["a.json", "b.json"])
    message = merged["results"][1].message
    assert message.startswith("no \\ud800 \\x1b[31m here xxx") and len(message) == 2000


@pytest.mark.parametrize(
    ("second", "said"),
    [
        (with_rows("2/2", row("c1")), "(reference on c1) is also in a.json"),
        (with_rows("2/2", row("c2"), row("c2")), "(reference on c2) is also in b.json"),
        (with_rows("2/2", row("c2", runtime="ghost")), "runtime 'ghost', which the report does not list"),
        (with_rows("2/2", row("c2", max_abs_err=[1])), "errors that are not numbers"),
        (with_rows("2/2", row("c2", max_rel_err=10**400)), "errors that are not numbers"),
        (with_rows("2/2", row("c2", defect=7)), "a defect that is not an id"),
        (with_rows("2/2", row("c2", status="xfail", defect="Dx")), "a defect that is not an id"),
        (with_rows("2/2", row("c2", status="xpass", defect="D" + "9" * 5000)), "a defect that is not an id"),
        (with_rows("2/2", row("c2", runtime="ref\ud800")), "a runtime that is not a row's name"),
        (
            with_rows("2/2", row("c2"), runtimes=[{"name": "reference", "available": True, "reason": None}]),
            "runtime 0 is not {name, description, available, reason}",
        ),
        (with_rows("2/2", row("c2", mismatch={"kind": "loss", "got": [1]})), "a mismatch that is not one"),
        (with_rows("2/2", row("c2", mismatch={"kind": "guess"})), "a mismatch that is not one"),
        (with_rows("2/2", row("c2", raised={"type": 3, "text": ""})), "a raised that is not {type, text}"),
        (with_rows("2/2", row("c2"), complete="yes"), "complete is not true/false"),
        (with_rows("2/2", row("c2")) | {"selection": {"patterns": [], "shard": "2/2", "cases": -5}}, "negative"),
    ],
)
def test_merge_refuses_reports_whose_rows_do_not_add_up(second: dict, said: str) -> None:
    first = with_rows("1/2", row("c1"))
    report.merge([first, with_rows("2/2", row("c2"))], ["a.json", "b.json"])  # the consistent pair merges
    with pytest.raises(shard.MergeError, match=re.escape(said)):
        report.merge([first, second], ["a.json", "b.json"])


@pytest.mark.parametrize("kind", ["deep", "nan", "shard"])
def test_conformance_merge_refuses_hostile_reports_in_one_line(tmp_path, kind: str) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(shard_report("1/2")))
    second.write_text(
        {
            "deep": DEEP,
            "nan": json.dumps(shard_report("2/2")).replace('"cases": 0', '"cases": NaN'),
            "shard": json.dumps(shard_report("5/2")),
        }[kind]
    )
    out = tmp_path / "merged.json"
    one_line_usage_error(ctcop("conformance-merge", str(first), str(second), "-o", str(out)))
    assert not out.exists()
    (tmp_path / "e.txt").write_text(DEEP)
    result = ctcop("conformance", "--expected-failures", str(tmp_path / "e.txt"), "--runtimes", "reference")
    assert "nested too deeply" in one_line_usage_error(result)


# -- the reports are written before the table -------------------------------------------------------


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is already full: whoever writes to it blocks until it is read."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        while True:
            os.write(write, b"x" * 4096)
    except BlockingIOError:
        pass
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write, b"x")
    os.set_blocking(write, True)
    flags = fcntl.fcntl(write, fcntl.F_GETFL)
    assert not flags & os.O_NONBLOCK
    return read, write


def test_sigterm_while_the_table_blocks_keeps_the_finished_reports(tmp_path) -> None:
    out, junit = tmp_path / "out.json", tmp_path / "out.xml"
    read, write = full_pipe()
    command = [sys.executable, "-m", "ctcop", "conformance", "--runtimes", "reference", "--select",
               "spec/hand_worked/*", "--jobs", "1", "--json", str(out), "--junit", str(junit)]  # fmt: skip
    environment = os.environ | {"PYTHONUNBUFFERED": "1"}  # each print is a write(), blocked at once
    process = subprocess.Popen(command, stdout=write, stderr=subprocess.PIPE, text=True, env=environment)
    os.close(write)
    try:
        deadline = time.monotonic() + HANG_S
        while not (out.exists() and junit.exists()):  # the table is what blocks, on the full pipe
            assert process.poll() is None and time.monotonic() < deadline, "no report written"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        with os.fdopen(read, "rb") as drain:  # let it finish writing and exit
            drain.read()
        process.wait(timeout=HANG_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    stderr = process.stderr.read()
    assert process.returncode == 143 and stderr == f"ctcop: interrupted by SIGTERM; report in {out}\n", stderr
    document = json.loads(out.read_text())
    assert document["complete"] is True and document["summary"]["reference"]["pass"] == len(document["results"]) > 0
    assert junit.read_text().startswith("<?xml")


UNPRINTABLE = """
class Surrogate:
    name, description = "surrogate", "says d \\ud800 in its description"

    def run(self, case):
        raise ValueError("m \\ud800 and a bell \\a")


class Unreadable(Exception):
    def __str__(self):
        raise RuntimeError("no")


class Mute:
    name, description = "mute", "raises an exception whose message cannot be read"

    def run(self, case):
        raise Unreadable()


class Chatty:
    name, description = "chatty", "raises an exception of several lines"

    def run(self, case):
        raise ValueError("compiling the model failed\\n  at node 7\\n\\nbecause the kernel is missing")


RUNTIMES = [Surrogate(), Mute(), Chatty()]
"""


def test_runtime_text_is_one_printable_line_and_an_unreadable_message_is_an_error(tmp_path: Path) -> None:
    module = tmp_path / "unprintable.py"
    module.write_text(UNPRINTABLE)
    out = tmp_path / "report.json"
    result = ctcop(
        "conformance", "--runtime-module", f"{module}:RUNTIMES", "--runtimes", "surrogate,mute,chatty",
        "--select", "spec/hand_worked/float32", "--json", str(out), "--junit", str(tmp_path / "junit.xml"),
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr  # two errors, no internal error
    assert "says d \\ud800 in its description" in result.stdout
    rows = {r["runtime"]: r for r in json.loads(out.read_text())["results"]}
    assert (rows["surrogate"]["status"], rows["surrogate"]["message"]) == (
        "error", "ValueError: m \\ud800 and a bell \\x07"
    )  # fmt: skip
    assert (rows["mute"]["status"], rows["mute"]["message"]) == ("error", "Unreadable: (no readable message)")
    assert rows["chatty"]["message"] == "ValueError: compiling the model failed ... because the kernel is missing"


# -- a runtime that corrupts its worker costs its own rows only -----------------------------------

CORRUPTING = """
import os

import numpy as np

import ctcop
from ctcop.conformance.protocol import Unsupported


def reference(case):
    if case.form != "spec":
        raise Unsupported("the spec's form only")
    x = case.inputs
    return ctcop.ctc_loss(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)


class Forker:
    name, description = "forker", "forks inside run: two processes answer"

    def run(self, case):
        os.fork()
        return reference(case)


class Raising:
    name, description = "raising", "sets numpy's error state to raise, and the recursion limit low"

    def run(self, case):
        np.seterr(all="raise")
        return reference(case)


class Writer:
    name, description = "writer", "writes a line to every descriptor it has"

    def run(self, case):
        for fd in range(3, 256):
            try:
                os.write(fd, b'{"id": 1, "answer": null}\\n')
            except OSError:
                pass
        return reference(case)


class Broadcast:
    name, description = "broadcast", "answers a broadcast view of 2^40 losses"

    def run(self, case):
        return np.broadcast_to(np.float64(1.0), (2**40,))


RUNTIMES = [Forker(), Raising(), Writer(), Broadcast()]
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_runtime_that_corrupts_its_worker_leaves_the_others_alone(tmp_path: Path, jobs: str) -> None:
    module = tmp_path / "corrupting.py"
    module.write_text(CORRUPTING)
    out = tmp_path / "report.json"
    result = ctcop(
        "conformance", "--runtime-module", f"{module}:RUNTIMES", "--runtimes",
        "forker,reference,raising,onnxruntime,writer,broadcast",
        "--select", "spec/random_0[0-2]*/float32", "--jobs", jobs, "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 1 and "internal error" not in result.stderr, result.stdout + result.stderr
    summary = json.loads(out.read_text())["summary"]
    for innocent in ("reference", "onnxruntime", "raising"):
        assert summary[innocent]["pass"] == 3, summary
    assert summary["broadcast"]["fail"] == 3, summary
    assert summary["writer"]["pass"] == 0, summary
