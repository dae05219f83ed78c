"""The conformance runner as a user runs it: runtimes from ``--runtime-module``, two
evaluations per case in crash-isolated workers, timeouts, expected failures, JUnit XML, shards and
their merge; and the pieces it is made of (combining two runs, the rejection rule, the gradient
rule, the expected-failures format, the shard split, the failure classes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.paths import SUPPORT

from ctcop.conformance import classes, corpus, expected, junit, known, registry, report, runner, shard, suite, verdict
from ctcop.conformance.protocol import Outcome
from ctcop.conformance.result import REPORTED, Raised, Result, from_dict, to_dict
from ctcop.core.precompile import precompile
from ctcop.tolerance import Mismatch, allowance, describe

BAD_FILE = SUPPORT / "bad_runtimes.py"
BAD = f"{BAD_FILE}:BAD"
SMALL = "spec/hand_worked/*,spec/empty_targets/*"  # 8 cases, 4 of them with an empty target
WRONG = "reference,blank-off-by-one,probabilities,abort,bad-gradient"
CASES = {case.id: case for case in corpus.load_all()}


def conformance(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "ctcop", "conformance", "--runtime-module", BAD, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def statuses(document: dict) -> dict[tuple[str, str], str]:
    return {(r["runtime"], r["case"]): r["status"] for r in document["results"]}


def test_the_reference_passes_every_case_of_both_forms(tmp_path) -> None:
    out = tmp_path / "reference.json"
    result = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance", "--runtimes", "reference", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    document = load(out)
    chosen = corpus.select(corpus.load_all())
    assert document["schema"] == "ctcop-conformance-2" and document["complete"] is True
    assert document["summary"]["reference"]["pass"] == len(chosen) == document["selection"]["cases"]
    assert {CASES[r["case"]].form for r in document["results"]} == {"spec", "released"}
    assert {CASES[r["case"]].expect for r in document["results"]} == {"value", "reject"}
    assert all(r["status"] == "pass" for r in document["results"])


def test_wrong_and_crashing_runtimes_are_caught_alike_for_any_number_of_jobs(tmp_path) -> None:
    documents = []
    for jobs in ("1", "2", "3"):
        out = tmp_path / f"jobs{jobs}.json"
        result = conformance("--runtimes", WRONG, "--select", SMALL, "--jobs", jobs, "--json", str(out))
        assert_wrong_and_crashing_caught(result, out)
        documents.append(load(out))
    assert documents[0]["results"] == documents[1]["results"] == documents[2]["results"]
    assert documents[0]["summary"] == documents[2]["summary"]


def assert_wrong_and_crashing_caught(result: subprocess.CompletedProcess, out: Path) -> None:
    assert result.returncode == 1, result.stderr
    got = statuses(load(out))
    empty = [case for case in CASES if case.startswith("spec/empty_targets/")]
    assert len(got) == 5 * 8
    assert all(got["reference", case] == "pass" for case in empty)
    assert all(got["blank-off-by-one", case] == "fail" for case in empty)
    assert all(got["probabilities", case] == "fail" for (runtime, case) in got if runtime == "probabilities")
    assert all(got["abort", case] == "crash" for case in empty)
    assert all(got["abort", case] == "pass" for (runtime, case) in got if runtime == "abort" and case not in empty)
    assert got["bad-gradient", "spec/hand_worked/float64"] == "fail"
    messages = {(r["runtime"], r["case"]): r["message"] for r in load(out)["results"]}
    assert "killed by SIGABRT" in messages["abort", "spec/empty_targets/float32"]
    assert messages["bad-gradient", "spec/hand_worked/float64"].startswith("gradient at")
    assert "np.float" not in out.read_text()
    assert "crash on an empty target (killed by SIGABRT)" in result.stdout  # the failure classes


def test_a_runtime_that_answers_noise_is_nondeterministic(tmp_path) -> None:
    out = tmp_path / "noise.json"
    result = conformance("--runtimes", "noise", "--select", "spec/hand_worked/*", "--json", str(out))
    assert result.returncode == 1
    document = load(out)
    assert {r["status"] for r in document["results"]} == {"nondeterministic"}
    assert all("run 1 gave" in r["message"] and "run 2 gave" in r["message"] for r in document["results"])


def test_a_runtime_that_does_not_answer_times_out_and_is_replaced(tmp_path) -> None:
    # sleepy never answers; the reference answers well within the timeout even on a loaded
    # machine. Six workers take sleepy's six evaluations (three cases, twice) at once, so the run
    # lasts about one timeout; each worker that timed out is replaced and the reference still passes.
    precompile()  # the reference's kernels in numba's cache: its workers load them, not compile them
    out = tmp_path / "sleepy.json"
    result = conformance(
        "--runtimes", "sleepy,reference", "--select", "spec/hand_worked/float*", "--timeout", "30", "--jobs", "6",
        "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    results = load(out)["results"]
    by_runtime = {name: {r["case"]: r for r in results if r["runtime"] == name} for name in ("sleepy", "reference")}
    assert {"spec/hand_worked/float32", "spec/hand_worked/float64"} <= set(by_runtime["sleepy"])
    assert set(by_runtime["sleepy"]) == set(by_runtime["reference"])
    assert {r["status"] for r in by_runtime["sleepy"].values()} == {"timeout"}
    assert {r["status"] for r in by_runtime["reference"].values()} == {"pass"}
    assert all(r["message"].startswith("no answer within 30 s") for r in by_runtime["sleepy"].values()), results


def test_expected_failures_give_xfail_and_xpass(tmp_path) -> None:
    listed = tmp_path / "known.txt"
    listed.write_text("# runtime case reason\nabort  spec/empty_targets/*  aborts on empty targets\n")
    out = tmp_path / "x.json"
    result = conformance(
        "--runtimes", "abort", "--select", SMALL, "--expected-failures", str(listed), "--json", str(out)
    )
    assert result.returncode == 0, result.stdout
    got = load(out)
    assert got["summary"]["abort"]["xfail"] == 4 and got["summary"]["abort"]["pass"] == 4
    assert all("aborts on empty targets" in r["message"] for r in got["results"] if r["status"] == "xfail")
    listed.write_text(json.dumps([{"runtime": "a*", "case": "float64", "reason": "stale"}]))
    stale = conformance(
        "--runtimes", "abort", "--select", SMALL, "--expected-failures", str(listed), "--json", str(out)
    )
    assert stale.returncode == 1
    got = statuses(load(out))
    assert got["abort", "spec/hand_worked/float64"] == "xpass" and got["abort", "spec/empty_targets/float64"] == "xfail"


def test_junit_xml_parses_with_the_right_counts(tmp_path) -> None:
    xml_path, out = tmp_path / "junit.xml", tmp_path / "r.json"
    runtimes = "reference,probabilities,abort"
    result = conformance("--runtimes", runtimes, "--select", SMALL, "--junit", str(xml_path), "--json", str(out))
    assert result.returncode == 1
    root = ET.parse(xml_path).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "24"
    suites = {suite.get("name"): suite for suite in root.findall("testsuite")}
    assert list(suites) == ["reference", "probabilities", "abort"]
    assert (suites["reference"].get("tests"), suites["reference"].get("failures")) == ("8", "0")
    assert suites["probabilities"].get("failures") == "8" and suites["abort"].get("errors") == "4"
    crashed = suites["abort"].findall("testcase/error")
    assert len(crashed) == 4 and all(e.get("type") == "crash" for e in crashed)
    names = [case.get("name") for case in suites["reference"].findall("testcase")]
    assert names == sorted(c for c in CASES if c.startswith(("spec/hand_worked/", "spec/empty_targets/")))


def test_shards_merge_into_the_unsharded_report(tmp_path) -> None:
    args = ("--runtimes", "reference,abort,probabilities", "--select", "spec/hand_worked/*,spec/empty_*", "--jobs", "1")
    for name, extra in (("all", ()), ("one", ("--shard", "1/2")), ("two", ("--shard", "2/2"))):
        conformance(*args, *extra, "--json", str(tmp_path / f"{name}.json"))
    whole, one, two = (load(tmp_path / f"{n}.json") for n in ("all", "one", "two"))
    assert {r["case"] for r in one["results"]}.isdisjoint({r["case"] for r in two["results"]})
    merged_path = tmp_path / "merged.json"
    merge = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance-merge", str(tmp_path / "two.json"), str(tmp_path / "one.json"),
         "-o", str(merged_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert merge.returncode == 1, merge.stderr  # abort crashes, probabilities fails
    merged = load(merged_path)
    assert merged["results"] == whole["results"] and merged["summary"] == whole["summary"]
    assert merged["complete"] is True and merged["selection"]["merged"] == ["1/2", "2/2"]
    for broken, message in (({"schema": "ctcop-conformance-1"}, "schema"), ({"versions": {"numpy": "0"}}, "versions")):
        (tmp_path / "bad.json").write_text(json.dumps(one | broken))
        refused = subprocess.run(
            [sys.executable, "-m", "ctcop", "conformance-merge", str(tmp_path / "bad.json"), str(tmp_path / "two.json"),
             "-o", str(tmp_path / "m2.json")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert refused.returncode == 2 and message in refused.stderr and refused.stderr.count("\n") == 1
    again = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance-merge", str(tmp_path / "one.json"), str(tmp_path / "one.json"),
         "-o", str(tmp_path / "m3.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 2 and "shard 1/2 is also in" in again.stderr


def test_runtimes_that_are_not_installed_are_listed_not_run() -> None:
    plan = suite.make_plan(None, [BAD], ["spec/hand_worked/float64"], None)
    listed = {r["name"]: r for r in plan.runtimes()}
    assert listed["not-installed"] == {
        "name": "not-installed",
        "description": "a runtime whose library is missing",
        "available": False,
        "reason": "nosuchlib not installed",
        "version": None,
    }
    assert "not-installed" not in plan.runnable and "abort" in plan.runnable
    table = report.format_table(plan.runtimes(), [])
    assert re.search(r"^not-installed +not installed: nosuchlib not installed$", "\n".join(table), re.M)
    refused = conformance("--runtimes", "not-installed")
    assert refused.returncode == 2 and "not installed: not-installed (nosuchlib not installed)" in refused.stderr


# -- the pieces ----------------------------------------------------------------------------------


def value(loss: list[str], bits: str = "a", grad: str = "") -> Result:
    return Result("c", "r", "pass", "", max_abs_err=0.0, max_rel_err=0.0, answer="value", loss=tuple(loss),
                  loss_bits=bits, grad_bits=grad)  # fmt: skip


def test_two_runs_are_combined_bit_for_bit() -> None:
    assert runner.combine(value(["1.5"]), value(["1.5"])).status == "pass"
    differ = runner.combine(value(["1.5", "nan"]), value(["1.5000001", "nan"], bits="b"))
    assert differ.status == "nondeterministic"
    assert differ.message.startswith("sample 0: run 1 gave 1.5, run 2 gave 1.5000001")
    grads = runner.combine(value(["1.5"], grad="x"), value(["1.5"], grad="y"))
    assert grads.status == "nondeterministic" and "gradient differs" in grads.message
    crash = Result("c", "r", "crash", "the worker process died (killed by SIGSEGV)", death="killed by SIGSEGV",
                   answer="crash")  # fmt: skip
    assert runner.combine(crash, crash).status == "crash"
    assert runner.combine(crash, value(["1"])).status == "nondeterministic"
    late = Result("c", "r", "timeout", "no answer within 5 s", answer="timeout")
    assert runner.combine(value(["1"]), late) == Result(
        "c", "r", "timeout", "no answer within 5 s (run 2)", max_abs_err=None, max_rel_err=None
    )


def judged() -> list[Result]:
    """Results of every kind a run makes, from the verdict and the pool."""
    case, bad = CASES["spec/hand_worked/float64"], CASES["invalid/label_is_blank"]
    loss, grad = case.expected_loss, case.expected_grad
    return [
        verdict.judge(Answer(Outcome(loss, grad)), case, "r"),
        verdict.judge(Answer(loss * 2), case, "r"),
        verdict.judge(Answer(np.full_like(loss, np.inf)), case, "r"),
        verdict.judge(Answer(Outcome(loss, grad + 1e-6)), case, "r"),
        verdict.judge(Answer(np.array([1.0, np.nan])), bad, "r"),
        verdict.judge(Answer(ValueError("no\nreally")), case, "r"),
        verdict.judge(Answer(None), case, "r"),
        Result(case.id, "r", "crash", "the worker process died (killed by SIGSEGV)", death="killed by SIGSEGV"),
    ]


def test_a_result_is_judged_from_fields_and_survives_json() -> None:
    results = judged()
    assert [r.status for r in results] == ["pass", "fail", "fail", "fail", "fail", "error", "error", "crash"]
    assert [r.mismatch.kind if r.mismatch else None for r in results] == [
        None, "loss", "loss", "gradient", "accepted-invalid-input", None, None, None
    ]  # fmt: skip
    assert results[2].max_abs_err == results[2].max_rel_err == np.inf
    assert (
        results[5].raised == Raised("ValueError", "no ... really") and results[5].message == "ValueError: no ... really"
    )
    for result in results:
        assert from_dict(json.loads(json.dumps(to_dict(result), allow_nan=False))) == result
    written = json.loads(report.dumps({"results": results}))["results"]
    assert [list(row) for row in written] == [list(REPORTED)] * len(results)
    assert [from_dict(row) for row in written] == [
        replace(r, answer="", loss=(), loss_bits="", grad_bits="") for r in results
    ]


def test_nan_bits_are_one_nan_and_signed_zeros_differ() -> None:
    a = np.array([np.nan, 1.0], np.float32)
    b = np.array([-np.nan, 1.0], np.float32)
    assert verdict.bits(a) == verdict.bits(b)
    assert verdict.bits(np.array([0.0])) != verdict.bits(np.array([-0.0]))
    assert verdict.bits(np.array([1.0], np.float32)) != verdict.bits(np.array([1.0], np.float64))


class Answer:
    name, description = "answer", "returns what it is given"

    def __init__(self, value: object) -> None:
        self.value = value

    def run(self, case: object) -> object:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_a_case_to_reject_passes_on_an_exception_or_nan_for_its_offending_samples() -> None:
    per_sample = CASES["invalid/label_is_blank"]  # labels[0, 1] is the blank: sample 0 offends
    assert verdict.offending(per_sample).tolist() == [True, False]
    assert verdict.judge(Answer(ValueError("no")), per_sample).status == "pass"
    assert verdict.judge(Answer(np.array([np.nan, 2.0])), per_sample).status == "pass"
    accepted = verdict.judge(Answer(np.array([1.0, np.nan])), per_sample)
    assert accepted.status == "fail" and "accepted invalid input (rule 3.3" in accepted.message
    assert accepted.mismatch == Mismatch("accepted-invalid-input", sample=0, got=1.0)
    batch = CASES["invalid/labels_shape"]  # a shape: every sample
    assert verdict.offending(batch) is None
    assert verdict.judge(Answer(np.array([np.nan, np.nan])), batch).status == "pass"
    assert verdict.judge(Answer(np.array([np.nan, 1.0])), batch).status == "fail"
    released = CASES["invalid/released/label_length_negative"]  # label_length[1]
    assert verdict.offending(released).tolist() == [False, True]
    assert verdict.judge(Answer(np.array([3.0, np.nan])), released).status == "pass"
    every = CASES["invalid/released/label_is_blank_in_prefix"]  # blank 1: both label rows hold it
    assert verdict.offending(every) is None
    assert verdict.judge(Answer(np.array([np.nan, 3.0])), every).status == "fail"


def test_value_cases_compare_the_loss_then_the_gradient() -> None:
    case = CASES["spec/hand_worked/float64"]
    loss, grad = case.expected_loss, case.expected_grad
    assert verdict.judge(Answer(Outcome(loss, grad)), case).status == "pass"
    assert verdict.judge(Answer(ValueError("x")), case).status == "error"
    off = verdict.judge(Answer(Outcome(loss, grad + 1e-6)), case)
    assert off.status == "fail" and off.message.startswith("gradient")
    assert off.mismatch is not None and off.mismatch.kind == "gradient" and off.mismatch.off == off.mismatch.entries
    wrong = verdict.judge(Answer(loss * (1 + 1e-6)), case)
    assert wrong.status == "fail"
    bound = float(allowance(loss, loss, "float64")[0])
    assert wrong.mismatch == Mismatch(
        "loss", sample=0, got=float(loss[0] * (1 + 1e-6)), expected=float(loss[0]), allowed=bound
    )


def test_the_gradient_rule_scales_with_each_samples_loss() -> None:
    # |got - expected| <= eps(dtype) |expected| + 32 eps(wide) max(1, |loss_i|)
    e32, e64 = 2.0**-23, 2.0**-52
    one = np.array([1.0])
    assert verdict.compare_grad([0.5 + 30 * e32], [0.5], one, "float32", 0) is None
    assert verdict.compare_grad([0.5 + 1e-4], [0.5], one, "float32", 0) is not None  # short: 1e-4 is wrong
    assert verdict.compare_grad([[0.5 + 2.4e-4]], [[0.5]], [604.0], "float32", 0) is None  # T = 150, loss 604
    assert verdict.compare_grad([0.5 + 1e-8], [0.5], one, "float64", 0) is not None
    assert verdict.compare_grad([0.5 + 30 * e64], [0.5], one, "float64", 0) is None
    assert verdict.compare_grad([0.5 + 32 * e32], [0.5], one, "bfloat16", 0) is None  # float32 computation
    assert verdict.compare_grad([0.5 + 2 * 2.0**-7], [0.5], one, "bfloat16", 0) is not None
    # the sample axis picks each entry's loss: axis 1 of [T, N, C], axis 0 of [N, T, C]
    spec = np.zeros((1, 2, 1))
    spec[0, 1, 0] = 1e-3
    assert verdict.compare_grad(spec, np.zeros((1, 2, 1)), [1.0, 1000.0], "float32", 1) is None
    assert verdict.compare_grad(spec, np.zeros((1, 2, 1)), [1000.0, 1.0], "float32", 1) is not None
    assert verdict.compare_grad(spec.transpose(1, 0, 2), np.zeros((2, 1, 1)), [1.0, 1000.0], "float32", 0) is None
    # NaN exactly where the reference has NaN; a non-finite expected loss has the scale 1
    assert verdict.compare_grad([0.5, np.nan], [0.5, np.nan], [3.0, np.nan], "float32", 0) is None
    assert verdict.compare_grad([1.0], [np.nan], one, "float64", 0) is not None
    assert verdict.compare_grad([np.nan], [1.0], one, "float64", 0) is not None
    assert verdict.compare_grad([1e-4], [0.0], [np.inf], "float32", 0) is not None
    assert "shape" in (verdict.compare_grad(np.zeros((2, 1)), np.zeros((1, 2)), [0.0], "float32", 0) or "")


def test_expected_failures_format() -> None:
    entries = expected.parse("openvino  spec/empty_* crashes (D1)  # comment\n\n# only a comment\nx* float64\n")
    assert entries == [
        expected.Expected("openvino", "spec/empty_*", "crashes (D1)"),
        expected.Expected("x*", "float64", ""),
    ]
    assert entries[1].matches("xyz", "spec/a/float32", ["float64"])
    assert expected.parse('[{"runtime": "a", "case": "b"}]') == [expected.Expected("a", "b", "")]
    for bad in ("justone\n", "[{}]", "{", '{"expected_failures": 3}'):
        with pytest.raises(ValueError):
            expected.parse(bad)
    failing = Result("spec/empty_x", "openvino", "crash", "died")
    assert expected.apply(failing, entries, []).status == "xfail"
    assert expected.apply(replace(failing, status="pass"), entries, []).status == "xpass"
    assert expected.apply(replace(failing, status="skip"), entries, []).status == "skip"


def test_shards_partition_the_selection() -> None:
    ids = [f"case{i:02d}" for i in range(11)][::-1]
    parts = [shard.select(ids, ids, (k, 3)) for k in (1, 2, 3)]
    assert sorted(i for part in parts for i in part) == sorted(ids) and len(parts[0]) == 4
    assert parts[0] == [i for i in ids if int(i[4:]) % 3 == 0]
    for bad in ("0/2", "3/2", "1/0", "a/b", "1/2/3", "\u0663/4"):
        with pytest.raises(ValueError):
            shard.parse(bad)


def failed(found: Mismatch) -> Result:
    return Result("c", "r", "fail", describe(found), mismatch=found)


def test_failure_classes_name_the_spec_section_not_a_registered_id() -> None:
    # An unregistered failure is classified by what it departs from; the registry alone gives ids.
    facts = classes.facts(CASES["spec/empty_targets/float32"])
    crash = Result("c", "r", "crash", "the worker process died (killed by SIGSEGV)", death="killed by SIGSEGV")
    assert classes.classify(crash, facts) == ("crash on an empty target (killed by SIGSEGV)", "spec 4.4")
    float64 = classes.facts(CASES["spec/hand_worked/float64"])
    d4 = failed(Mismatch("loss", sample=0, got=1.0900000095367432, expected=1.0900000000000001))
    assert classes.classify(d4, float64) == ("float64 computed in float32", "spec 6")
    d5 = failed(Mismatch("loss", sample=1, got=3.4028234663852886e38, expected=np.inf))
    assert classes.classify(d5, float64) == ("+inf saturated to a large finite value", "spec 6")
    big = classes.facts(CASES["spec/logits_1e4/float32"])
    unshifted = failed(Mismatch("loss", sample=0, got=np.inf, expected=3.5))
    assert classes.classify(unshifted, big) == ("+inf or NaN at large logits (no max subtracted)", "spec 4.2")
    groups = classes.group(
        [replace(crash, case="spec/empty_targets/float32"), replace(crash, case="spec/empty_targets/float16")], CASES
    )
    assert [(g.count, g.smallest) for g in groups] == [(2, "spec/empty_targets/float16")]


def test_runtime_modules_take_objects_lists_and_callables(tmp_path) -> None:
    path = BAD_FILE
    assert [r.name for r in registry.load_module(f"{path}:make")] == ["noise"]
    assert [r.name for r in registry.load_module(f"{path}:BAD")][:2] == ["blank-off-by-one", "probabilities"]
    assert [r.name for r in registry.load_module(f"{path}:Noise")] == ["noise"]  # a class: called
    for spec, message in ((f"{path}:nothing", "AttributeError"), ("no_such_module_x:y", "ModuleNotFoundError"),
                          ("nocolon", "MODULE:ATTRIBUTE"), (f"{path}:np", "not a runtime")):  # fmt: skip
        with pytest.raises(registry.RegistryError, match=message):
            registry.load_module(spec)
    names = [entry.name for entry in registry.discover()]
    assert names[:2] == ["reference", "onnxruntime"] and len(names) == len(set(names))


def test_junit_document_maps_every_status() -> None:
    results = [Result(f"c/{s}", "r", s, f"m\x00{s}") for s in
               ("pass", "fail", "error", "crash", "timeout", "skip", "xfail", "xpass", "nondeterministic")]  # fmt: skip
    root = ET.fromstring(junit.document([{"name": "r", "available": True, "reason": None}], results))
    suite = root.find("testsuite")
    assert suite is not None
    assert [suite.get(k) for k in ("tests", "failures", "errors", "skipped")] == ["9", "3", "3", "2"]


def test_workers_are_reaped(tmp_path) -> None:
    before = set(os.listdir("/proc"))
    seen: list[Result] = []
    cases = [CASES["spec/hand_worked/float64"], CASES["spec/empty_targets/float32"]]
    runner.run_cases(runner.Runtimes(("abort",), (BAD,)), cases, runner.Settings(jobs=2), seen.append)
    assert sorted((r.case, r.status) for r in seen) == [
        ("spec/empty_targets/float32", "crash"),
        ("spec/hand_worked/float64", "pass"),
    ]
    assert not [pid for pid in set(os.listdir("/proc")) - before if parent(pid) == os.getpid()]


def parent(pid: str) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_entry_points_of_the_group_are_runtimes(tmp_path, monkeypatch) -> None:
    info = tmp_path / "ctcop_fake_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctcop-fake-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[ctcop.runtimes]\nnoisy = support.bad_runtimes:make\nbroken = no_such_plugin_x:y\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    entries = {entry.name: entry for entry in registry.discover()}
    assert entries["noise"].available is None and entries["noise"].origin.startswith("entry point noisy")
    assert entries["broken"].available is not None and "ModuleNotFoundError" in entries["broken"].available
    with pytest.raises(registry.RegistryError, match="runtime 'noise' comes from both"):
        registry.discover([f"{BAD_FILE}:make"])


def test_a_worker_finds_its_runtime_by_name_without_asking_the_others() -> None:
    from ctcop.conformance.peers import PEERS
    from ctcop.conformance.runtimes import RUNTIMES

    assert registry.find("reference") is RUNTIMES["reference"]
    assert registry.find("torch") is PEERS["torch"]
    found = registry.find("blank-off-by-one", [BAD], with_plugins=False)
    assert found.name == "blank-off-by-one" and callable(found.run)


def test_the_workers_of_a_run_share_each_exported_model_through_the_runs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx")
    from ctcop.attributes import Attributes
    from ctcop.conformance import runtimes

    key = ("float32", "bool", "int64", Attributes.of({"preprocess_collapse_repeated": False, "merge_repeated": True}))
    monkeypatch.setenv(runtimes.MODELS_VARIABLE, str(tmp_path))
    built = runtimes._model_bytes.__wrapped__(key)
    (stored,) = tmp_path.iterdir()
    assert stored.read_bytes() == built == runtimes._built(key)
    stored.write_bytes(b"as another worker of the run left it")
    assert runtimes._model_bytes.__wrapped__(key) == b"as another worker of the run left it"


def test_an_evaluation_known_to_corrupt_its_worker_runs_alone() -> None:
    corrupter, later = "spec/empty_targets/float32", "spec/hand_worked/float64"
    cases = [CASES[corrupter], CASES[later]]
    runtimes = runner.Runtimes(("corrupting",), (BAD,))
    for alone, status in ((frozenset(), "fail"), (frozenset({("corrupting", corrupter)}), "pass")):
        seen: list[Result] = []
        runner.run_cases(runtimes, cases, runner.Settings(jobs=1, alone=alone), seen.append)
        assert {r.case: r.status for r in seen} == {corrupter: "pass", later: status}


def test_the_registrys_process_corrupting_defects_run_alone(monkeypatch) -> None:
    alone = known.process_corrupting()
    assert ("openvino", "spec/random_06_nomerge/float32") in alone  # D1: an empty target
    assert ("warpctc", "released/logit_length_short/int32/float32") in alone  # D45
    assert ("warpctc", "released/empty_targets/int32/float32") not in alone  # D46 always kills
    assert not any(runtime == "torch" for runtime, _ in alone)  # torch's defects return numbers
    corrupter, later = "spec/empty_targets/float32", "spec/hand_worked/float64"
    monkeypatch.setattr(known, "process_corrupting", lambda keys=None: frozenset({("corrupting", corrupter)}))
    plan = suite.make_plan(["corrupting"], [BAD], [corrupter, later], None)
    seen: list[Result] = []
    suite.run(plan, runner.Settings(jobs=1), seen, lambda result: None)
    assert {r.case: r.status for r in seen} == {corrupter: "pass", later: "pass"}


def test_a_runtime_file_imports_the_modules_beside_it(tmp_path, monkeypatch) -> None:
    """``--runtime-module path/file.py:ATTR`` imports a module of the file's folder when it loads
    (in the probe, here and in each worker) and when its runtime runs (a lazy import in run)."""
    from ctcop import cli

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "beside_at_load.py").write_text("from ctcop import ctc_loss as LOSS\n")
    (folder / "beside_at_run.py").write_text("NAME = 'beside'\n")
    (folder / "runtime.py").write_text(
        "from beside_at_load import LOSS\n"
        "class Beside:\n"
        "    description = 'the reference through a module beside the file'\n"
        "    @property\n"
        "    def name(self):\n"
        "        import beside_at_run\n"
        "        return beside_at_run.NAME\n"
        "    def run(self, case):\n"
        "        import beside_at_run  # noqa: F401\n"
        "        x = case.inputs\n"
        "        return LOSS(x['inputs'], x['sequence_mask'], x['labels'], **case.attributes)\n"
        "RUNTIME = Beside()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # what loading the file adds goes with the test
    out = tmp_path / "report.json"
    chosen = "spec/hand_worked/float32,spec/empty_targets/float64"
    options = ["--runtime-module", "mine/runtime.py:RUNTIME", "--runtimes", "beside", "--select", chosen]
    code = cli.main(["conformance", *options, "--json", str(out)])
    assert code == 0
    assert statuses(load(out)) == {
        ("beside", "spec/empty_targets/float64"): "pass",
        ("beside", "spec/hand_worked/float32"): "pass",
    }
    assert str(folder) in sys.path


def test_junit_records_each_cases_time() -> None:
    """A testcase's time is its result's seconds; a suite's the sum; unknown (read back from a
    report), none; the two evaluations of a case add up."""
    available = [{"name": "r", "available": True, "reason": None}]
    timed = [Result("c/a", "r", "pass", seconds=0.25), Result("c/b", "r", "fail", "m", seconds=1.5)]
    root = ET.fromstring(junit.document(available, timed))
    assert [case.get("time") for case in root.iter("testcase")] == ["0.250", "1.500"]
    assert root.find("testsuite").get("time") == "1.750"  # type: ignore[union-attr]
    untimed = ET.fromstring(junit.document(available, [Result("c", "r", "pass")]))
    assert [case.get("time") for case in untimed.iter("testcase")] == [None]
    first, second = Result("c", "r", "pass", seconds=0.5), Result("c", "r", "pass", seconds=0.75)
    assert runner.combine(first, second).seconds == 1.25
    assert runner.combine(first, replace(second, seconds=None)).seconds is None


def test_the_pool_times_each_evaluation() -> None:
    seen: list[Result] = []
    case = CASES["spec/hand_worked/float64"]
    started = time.monotonic()
    runner.run_cases(runner.Runtimes(("reference",)), [case], runner.Settings(), seen.append)
    (measured,) = seen
    assert measured.status == "pass" and measured.seconds is not None
    assert 0 < measured.seconds < time.monotonic() - started
