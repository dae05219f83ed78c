"""``ctcop conformance-diff``: two conformance reports compared per runtime and case (spec 10).

The end-to-end tests diff real reports of a runtime that is the reference
(tests/support/diff_runtimes.py) and of one of the same name whose loss is off on exactly one
case; the others build reports from typed results (:class:`ctcop.conformance.result.Result`) as
``ctcop conformance`` writes them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_invalid_input, ctcop_process, in_process
from support.diff_runtimes import SHIFTED_CASE
from support.paths import SUPPORT

from ctcop.conformance import corpus, diff, report
from ctcop.conformance.result import Raised, Result
from ctcop.tolerance import Mismatch

RUNTIMES = SUPPORT / "diff_runtimes.py"
HAND_WORKED = "spec/hand_worked/*"
CASES = {case.id: case for case in corpus.load_all()}


def body(results: list[Result], runtimes: tuple[str, ...] = ("probe",), **changed: Any) -> dict[str, Any]:
    """A report's body as ``ctcop conformance`` writes it."""
    return {
        "schema": report.SCHEMA,
        "complete": True,
        "interrupted_by": None,
        "versions": {"ctcop": "0.1.0", "openvino": "2026.4.1"},
        "machine": {"cpu": "a CPU", "isa": ["avx2", "avx512f"], "cores": 2},
        "selection": {"patterns": ["worked"], "shard": None, "cases": 4},
        "settings": {"jobs": 2, "timeout_s": 120.0, "runs": 2, "expected_failures": None, "known_defects": True},
        "runtimes": [{"name": n, "description": n, "available": True, "reason": None} for n in runtimes],
        "results": results,
        "summary": {},
        **changed,
    }


def loaded(results: list[Result], runtimes: tuple[str, ...] = ("probe",), **changed: Any) -> diff.Report:
    """The report of ``results`` written (:func:`report.dumps`) and read back as the command reads it."""
    return diff.load(json.loads(report.dumps(body(results, runtimes, **changed))))


def passed(case: str, runtime: str = "probe") -> Result:
    return Result(case, runtime, "pass")


def off(case: str, error: float) -> Result:
    """A loss ``error`` away from the expected 1.0."""
    return Result(case, "probe", "fail", mismatch=Mismatch("loss", sample=0, got=1.0 + error, expected=1.0))


def known(case: str, defect: str) -> Result:
    return replace(off(case, 1e-3), status="xfail", defect=defect)


F32, F64, F16, BF16 = (f"spec/hand_worked/{t}" for t in ("float32", "float64", "float16", "bfloat16"))
RAISED = Result("spec/empty_targets/float32", "probe", "error", raised=Raised("RuntimeError", "no"))
OLD = [
    passed(F32), off(F64, 1e-3), passed(F16), known(BF16, "D4"), off("spec/no_frames/float32", 1e-3),
    off("spec/random_00/float32", 1e-3), off("spec/random_04/float32", 1e-3), passed("spec/empty_batch/float32"),
    replace(RAISED, status="fail", raised=None, mismatch=Mismatch("loss", 0, 2.0, 1.0)), passed(F32, "gone"),
]  # fmt: skip
NEW = [
    off(F32, 0.5), passed(F64), known(F16, "D4"), known(BF16, "D5"), off("spec/no_frames/float32", 2e-3),
    off("spec/random_00/float32", 2e-2), off("spec/random_04/float32", 9e-3), RAISED,
    passed("spec/exactly_feasible/float32"), passed(F32, "added"),
]  # fmt: skip


def test_each_change_is_named_by_its_kind_regressions_first() -> None:
    found = diff.compare(loaded(OLD, ("probe", "gone")), loaded(NEW, ("probe", "added")), CASES)
    assert [(c.kind, c.runtime, c.case) for c in found.changes] == [
        ("regressed", "probe", F32),
        ("fixed", "probe", F64),
        ("status", "probe", "spec/empty_targets/float32"),  # fail -> error: both fail the run
        ("status", "probe", F16),  # pass -> xfail: both accepted
        ("class", "probe", BF16),
        ("error", "probe", "spec/random_00/float32"),  # 20-fold; 2-fold and 9-fold are the same failure
        ("runtime-added", "added", None),
        ("runtime-removed", "gone", None),
        ("case-added", "probe", "spec/exactly_feasible/float32"),
        ("case-removed", "probe", "spec/empty_batch/float32"),
    ]
    assert found.regressed and (found.cases, found.runtimes) == (10, 1)
    regressed, fixed = found.changes[:2]
    assert regressed.old == diff.Outcome("pass", None, None, None)
    assert regressed.new == diff.Outcome("fail", None, "outside the tolerance", 0.5)
    assert fixed.new == diff.Outcome("pass", None, None, None)
    assert found.changes[2].new == diff.Outcome("error", None, "raises on valid input: RuntimeError", None)
    assert (found.changes[4].old.defect, found.changes[4].new.defect) == ("D4", "D5")  # type: ignore[union-attr]


def test_the_same_report_is_no_change_and_the_reverse_of_a_regression_is_a_fix() -> None:
    same = diff.compare(loaded(OLD, ("probe", "gone")), loaded(OLD, ("probe", "gone")), CASES)
    assert same.changes == () and not same.regressed and same.environment == ()
    assert diff.format_diff(same, "a.json", "b.json", 20)[-1] == "no change"
    back = diff.compare(loaded([off(F32, 0.5)]), loaded([passed(F32)]), CASES)
    assert [(c.kind, c.case) for c in back.changes] == [("fixed", F32)] and not back.regressed


def test_the_environments_differences_head_the_comparison() -> None:
    newer = {
        "versions": {"ctcop": "0.1.0", "openvino": "2026.5.0", "torch": "2.14.1"},
        "machine": {
            "cpu": "another CPU",
            "isa": ["avx2", "avx512f", "avx512_bf16"],
            "cores": 2,
            "openvino_default_precision": "bf16",
        },
        "settings": {**body([])["settings"], "known_defects": False},
    }
    found = diff.compare(loaded([passed(F32)]), loaded([passed(F32)], **newer), CASES)
    assert [(d.what, d.old, d.new) for d in found.environment] == [
        ("versions.openvino", "2026.4.1", "2026.5.0"),
        ("versions.torch", None, "2.14.1"),
        ("machine.cpu", "a CPU", "another CPU"),
        ("machine.isa.avx512_bf16", None, "present"),
        ("machine.openvino_default_precision", None, '"bf16"'),
        ("settings.known_defects", "true", "false"),
    ]
    text = diff.format_diff(found, "a.json", "b.json", 20)
    assert "  versions.openvino: 2026.4.1 -> 2026.5.0" in text and text[-1] == "no change"


def test_different_selections_are_refused_unless_the_common_cases_are_asked_for() -> None:
    old = loaded([passed(F32), passed(F64)])
    new = loaded([off(F32, 0.5), passed(F16)], selection={"patterns": [F32, F16], "shard": None, "cases": 2})
    with pytest.raises(diff.SelectionError, match="old: worked; new: spec/hand_worked/float16, spec/hand_"):
        diff.compare(old, new, CASES)
    found = diff.compare(old, new, CASES, allow_different_selection=True)
    assert [(c.kind, c.case) for c in found.changes] == [("regressed", F32)] and found.cases == 1
    shard = loaded([passed(F32)], selection={"patterns": ["worked"], "shard": "1/2", "cases": 2})
    with pytest.raises(diff.SelectionError, match="new: worked, shard 1/2"):
        diff.compare(old, shard, CASES)
    same = loaded([passed(F32)], selection={"patterns": ["worked", "worked"], "shard": None, "cases": 1})
    assert diff.compare(old, same, CASES).old_selection == same.selection


def test_a_sampled_runtime_is_another_selection_compared_on_the_cases_it_ran() -> None:
    both = ("probe", "other")
    old = loaded([passed(F32), passed(F64), passed(F32, "other"), passed(F64, "other")], both)
    rule = {"rule": "a sample", "cases": 1, "not_run": 1}
    selection = {"patterns": ["worked"], "shard": None, "cases": 2, "sampled": {"probe": rule}}
    new = loaded(
        [passed(F64), passed(F32, "other"), replace(off(F64, 0.5), runtime="other")], both, selection=selection
    )
    with pytest.raises(diff.SelectionError, match="new: worked, sampled probe: a sample"):
        diff.compare(old, new, CASES)
    found = diff.compare(old, new, CASES, allow_different_selection=True)
    assert [(c.kind, c.runtime, c.case) for c in found.changes] == [("regressed", "other", F64)]


def test_the_text_is_short_and_the_json_holds_every_change() -> None:
    old = [passed(f"spec/random_{k:02d}/float32") for k in range(4)]
    found = diff.compare(loaded(old), loaded([off(r.case, 0.5) for r in old], complete=False), CASES)
    text = diff.format_diff(found, "a.json", "b.json", 2)
    assert text[1:] == [
        "  the new report is incomplete (interrupted, or shards missing)",
        "4 regressed",
        "",
        "Regressed: now failing the run (4):",
        "  probe  spec/random_00/float32: pass -> fail [outside the tolerance], error 0.5",
        "  probe  spec/random_01/float32: pass -> fail [outside the tolerance], error 0.5",
        "  ... 2 more (--json lists them all)",
    ]
    document = json.loads(diff.document(found, "a.json", "b.json"))
    assert document["schema"] == diff.DIFF_SCHEMA and document["regressed"] is True
    assert document["incomplete"] == ["new"] and document["counts"]["regressed"] == 4
    assert document["selection"] == {
        "old": {"patterns": ["worked"], "shard": None},
        "new": {"patterns": ["worked"], "shard": None},
        "same": True,
        "cases": 4,
        "runtimes": 1,
    }
    assert document["changes"][3] == {
        "kind": "regressed",
        "runtime": "probe",
        "case": "spec/random_03/float32",
        "old": {"status": "pass", "defect": None, "failure": None, "error": None},
        "new": {"status": "fail", "defect": None, "failure": "outside the tolerance", "error": 0.5},
    }


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1], "a JSON list, not a ctcop conformance report"),
        ({"results": []}, "schema None, not ctcop-conformance-2"),
        ({**body([]), "schema": "ctcop-conformance-1"}, "schema 'ctcop-conformance-1', not ctcop-conformance-2"),
        ({**body([]), "versions": {"onnx": 1}}, "versions is not an object of version texts"),
        ({**body([]), "machine": {"cpu": "x", "isa": [], "cores": True}}, "machine.cores is not a whole number"),
        ({**body([]), "machine": None}, "machine.cpu is not text"),
        ({**body([]), "selection": {"patterns": "worked"}}, "selection.patterns is not a list"),
        ({**body([]), "selection": {"patterns": [], "shard": 2}}, "selection.shard is not K/N or null"),
        ({**body([]), "settings": {"jobs": [2]}}, "settings is not an object of numbers"),
        ({**body([]), "complete": "yes"}, "complete is not true or false"),
        ({**body([]), "runtimes": [{"name": "Bad Name", "available": True}]}, "runtime 0 is not {name, available"),
        ({**body([]), "runtimes": body([], ("a", "a"))["runtimes"]}, "runtime 1 (a) is listed twice"),
        ({**body([]), "results": [{"case": "x"}]}, "result 0 is not {case, runtime, status, message}"),
        ({**body([]), "results": [{"case": "x", "runtime": "q", "status": "pass", "message": ""}]}, "result 0 is of q"),
    ],
)
def test_what_is_not_a_report_is_refused_in_one_line(document: Any, message: str) -> None:
    with pytest.raises(diff.ReportError) as refused:
        diff.load(json.loads(json.dumps(document)))
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_a_result_given_twice_is_refused() -> None:
    row = {"case": F32, "runtime": "probe", "status": "pass", "message": ""}
    with pytest.raises(
        diff.ReportError, match="result 1 \\(probe on spec/hand_worked/float32\\) is in the report twice"
    ):
        diff.load({**body([]), "results": [row, row]})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{", "old: {old}: not JSON: Expecting property name"),
        (b'{"schema": NaN}', "not JSON: NaN is not JSON"),
        (b"\xff\xfe", "not JSON: 'utf-8' codec can't decode"),
        (b'"report"', "a JSON str, not a ctcop conformance report"),
        (b'{"schema": "ctcop-conformance-2"}', "complete is not true or false"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON: nested too deeply"),
        (None, "bytes, over the limit of 67108864"),
    ],
)
def test_a_file_that_is_not_a_report_is_one_line_and_exit_2(
    tmp_path, capsys, content: bytes | None, message: str
) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    new.write_text(report.dumps(body([passed(F32)])))
    if content is None:  # a sparse file one byte over the limit: refused before it is read
        with open(old, "wb") as file:
            file.truncate(diff.MAX_REPORT_BYTES + 1)
    else:
        old.write_bytes(content)
    assert_invalid_input(in_process(capsys, "conformance-diff", old, new), message.format(old=old))


def test_paths_are_checked_before_anything_is_read(tmp_path, capsys) -> None:
    new = tmp_path / "new.json"
    new.write_text(report.dumps(body([passed(F32)])))
    assert_invalid_input(in_process(capsys, "conformance-diff", tmp_path, new), "is not a regular file")
    assert_invalid_input(in_process(capsys, "conformance-diff", tmp_path / "none.json", new), "old: cannot read")
    assert_invalid_input(
        in_process(capsys, "conformance-diff", new, new, "--json", new), "is an input file of this command"
    )
    assert_invalid_input(in_process(capsys, "conformance-diff", new, new, "--json", tmp_path), "json: ")


def test_the_command_exits_1_on_a_regression_and_writes_its_json(tmp_path, capsys) -> None:
    old, new, out = tmp_path / "old.json", tmp_path / "new.json", tmp_path / "diff.json"
    old.write_text(report.dumps(body([passed(F32), passed(F64)])))
    new.write_text(report.dumps(body([off(F32, 0.5), passed(F64)])))
    code, text, err = in_process(capsys, "conformance-diff", old, new, "--json", out)
    assert (code, err) == (1, "") and "  probe  spec/hand_worked/float32: pass -> fail" in text
    assert json.loads(out.read_text())["counts"]["regressed"] == 1
    assert in_process(capsys, "conformance-diff", new, old)[0] == 0
    assert in_process(capsys, "conformance-diff", old, old)[:2] == (
        0,
        f"CTCLoss-4 conformance diff: {old} -> {old} (2 cases, 1 runtime in both)\nno change\n",
    )


# -- real reports ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``ctcop conformance --json`` of the reference-like runtime ``probe`` on the hand-worked cases
    ("faithful"), of a ``probe`` off on one of them ("shifted"), and of the faithful one on that one
    alone ("fewer")."""
    folder = tmp_path_factory.mktemp("reports")
    runs = {"faithful": ("FAITHFUL", HAND_WORKED), "shifted": ("SHIFTED", HAND_WORKED), "fewer": ("FAITHFUL", F32)}
    paths = {}
    for name, (attribute, selected) in runs.items():
        paths[name] = folder / f"{name}.json"
        module = f"{RUNTIMES}:{attribute}"
        chosen = ("--runtimes", "probe", "--runtime-module", module, "--select", selected)
        result = ctcop_process("conformance", *chosen, "--json", paths[name])
        assert result.returncode == (1 if name == "shifted" else 0), result.stdout + result.stderr
    return paths


def test_the_one_result_a_runtime_changed_is_the_one_regression(reports: dict[str, Path], tmp_path) -> None:
    out = tmp_path / "diff.json"
    result = ctcop_process("conformance-diff", reports["faithful"], reports["shifted"], "--json", out)
    assert result.returncode == 1 and result.stderr == "", result.stdout + result.stderr
    assert result.stdout.splitlines()[1:] == [
        "1 regressed",
        "",
        "Regressed: now failing the run (1):",
        f"  probe  {SHIFTED_CASE}: pass -> fail [outside the tolerance], error 0.5",
    ]
    changes = json.loads(out.read_text())["changes"]
    assert [(c["kind"], c["runtime"], c["case"]) for c in changes] == [("regressed", "probe", SHIFTED_CASE)]
    fixed = ctcop_process("conformance-diff", reports["shifted"], reports["faithful"])
    assert (
        fixed.returncode == 0
        and f"  probe  {SHIFTED_CASE}: fail [outside the tolerance], error 0.5 -> pass" in fixed.stdout
    )


def test_two_runs_of_one_runtime_are_no_change(reports: dict[str, Path]) -> None:
    itself = ctcop_process("conformance-diff", reports["faithful"], reports["faithful"])
    assert itself.returncode == 0 and itself.stdout.splitlines()[-1] == "no change", itself.stdout + itself.stderr
    common = ("--allow-different-selection",)
    again = ctcop_process("conformance-diff", reports["faithful"], reports["fewer"], *common)
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "no change", again.stdout + again.stderr


def test_real_reports_of_different_selections_compare_their_common_cases_on_request(reports: dict[str, Path]) -> None:
    refused = ctcop_process("conformance-diff", reports["fewer"], reports["shifted"])
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert (
        "the reports select different cases (old: spec/hand_worked/float32; new: spec/hand_worked/*)" in refused.stderr
    )
    allowed = ctcop_process("conformance-diff", reports["fewer"], reports["shifted"], "--allow-different-selection")
    assert allowed.returncode == 1, allowed.stdout + allowed.stderr
    assert "(1 case, 1 runtime in both)" in allowed.stdout and "different selections" in allowed.stdout


def versioned(version: Any) -> diff.Report:
    """A report of ``probe`` passing F32, the runtime listed with its own ``version``."""
    document = body([passed(F32)])
    document["runtimes"] = [{**document["runtimes"][0], "version": version}]
    return diff.load(json.loads(report.dumps(document)))


def test_a_runtimes_own_version_heads_the_comparison_when_it_differs() -> None:
    old, new = versioned("1.2.3"), versioned("1.3.0")
    found = diff.compare(old, new, CASES)
    assert [(d.what, d.old, d.new) for d in found.environment] == [("runtimes.probe.version", "1.2.3", "1.3.0")]
    assert "  runtimes.probe.version: 1.2.3 -> 1.3.0" in diff.format_diff(found, "a.json", "b.json", 20)
    assert diff.compare(old, versioned("1.2.3"), CASES).environment == ()
    unversioned = diff.compare(old, versioned(None), CASES)
    assert [(d.what, d.old, d.new) for d in unversioned.environment] == [("runtimes.probe.version", "1.2.3", None)]
    with pytest.raises(diff.ReportError, match=r"runtime 0 \(probe\) has a version that is not text or null"):
        versioned(3)


def test_different_selections_with_no_case_in_common_compare_nothing_and_say_so(tmp_path, capsys) -> None:
    old = loaded([passed(F32)])
    new = loaded([passed(F64)], selection={"patterns": [F64], "shard": None, "cases": 1})
    with pytest.raises(diff.SelectionError, match="no runtime of both has a case in both: nothing was compared"):
        diff.compare(old, new, CASES, allow_different_selection=True)
    paths = tmp_path / "old.json", tmp_path / "new.json"
    paths[0].write_text(report.dumps(body([passed(F32)])))
    paths[1].write_text(report.dumps(body([passed(F64)], selection={"patterns": [F64], "shard": None, "cases": 1})))
    refused = in_process(capsys, "conformance-diff", *paths, "--allow-different-selection")
    assert_invalid_input(refused, "nothing was compared")


def test_the_report_records_a_runtimes_own_version(tmp_path, monkeypatch, capsys) -> None:
    """A runtime's ``version`` (protocol) is in the --json report's runtimes; one without has null."""
    module = tmp_path / "versioned.py"
    module.write_text(
        "from support.diff_runtimes import Shifted\n"
        "class Versioned(Shifted):\n"
        "    version = '1.2.3'\n"
        "RUNTIMES = [Versioned(name='versioned'), Shifted()]\n"
    )
    out = tmp_path / "report.json"
    chosen = ["--runtime-module", f"{module}:RUNTIMES", "--runtimes", "versioned,probe", "--select", F32]
    assert in_process(capsys, "conformance", *chosen, "--json", out)[0] == 0
    listed = {r["name"]: r["version"] for r in json.loads(out.read_text())["runtimes"]}
    assert listed == {"versioned": "1.2.3", "probe": None}
