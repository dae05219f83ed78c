"""The conformance suite on the data corpus: its comparison rule, crash isolation, report and exit
codes, as a user runs it (the runner's own options: tests/system/test_runner.py)."""

import json
import re

import ml_dtypes
import numpy as np
import pytest
from support.cli import ctcop_process, in_process

from ctcop.conformance import corpus
from ctcop.defects import defect
from ctcop.tolerance import Mismatch, compare, describe, max_errors, mismatch, tolerance

DTYPES = ("float16", "bfloat16", "float32", "float64")


@pytest.mark.parametrize(
    ("got", "expected", "dtype", "ok"),
    [
        ([1.0, np.inf, np.nan], [1.0, np.inf, np.nan], "float32", True),
        # float32 at 1: eps 2**-23 for the roundings + 32 eps for a float32 computation
        ([1.0 + 33 * 2.0**-23], [1.0], "float32", True),
        ([1.0 + 34 * 2.0**-23], [1.0], "float32", False),
        ([100.00039], [100.0], "float32", True),  # 3300 eps = 3.93e-4 at 100
        ([100.0004], [100.0], "float32", False),
        ([3e-6], [0.0], "float32", True),  # 32 eps = 3.8e-6 at 0: max(1, |loss|)
        ([5e-6], [0.0], "float32", False),
        ([1.0 + 7e-15], [1.0], "float64", True),  # 33 eps(float64) = 7.3e-15
        ([1.0 + 2e-14], [1.0], "float64", False),
        ([3.4028235e38], [np.inf], "float64", False),
        ([np.inf], [np.nan], "float32", False),
        ([1.0], [np.nan], "float32", False),
        ([1.0, 2.0], [1.0], "float32", False),
        ([1.0 + 2.0**-10], [1.0], "float16", True),  # one float16 ulp: both sides rounded once
        ([1.0 + 2 * 2.0**-10], [1.0], "float16", False),
        ([1.078125 + 2.0**-7], [1.078125], "bfloat16", True),  # one bfloat16 ulp at 1.078
        ([1.078125 + 2 * 2.0**-7], [1.078125], "bfloat16", False),
        ([1.0], [1.078125], "bfloat16", False),  # a constant: spec/hand_worked/bfloat16's value
    ],
)
def test_comparison_rule(got: list[float], expected: list[float], dtype: str, ok: bool) -> None:
    assert (compare(np.array(got), np.array(expected), dtype) is None) == ok


def test_a_disagreement_is_a_mismatch_and_its_line_is_rendered_from_it() -> None:
    found = mismatch([1.0, 2.5], [1.0, 2.0], "float32")
    assert found == Mismatch("loss", sample=1, got=2.5, expected=2.0, allowed=66 * 2.0**-23)  # 2 eps + 32 eps 2
    line = "sample 1: got 2.5, expected 2.0 (allowed 7.87e-06)"
    assert compare([1.0, 2.5], [1.0, 2.0], "float32") == describe(found) == line
    shape = mismatch([1.0, 2.0], [1.0], "float32")
    assert shape is not None and (shape.kind, shape.shape, shape.expected_shape) == ("shape", (2,), (1,))
    assert describe(shape) == "shape (2,), expected (1,)"
    assert mismatch([1.0, np.nan], [1.0, np.nan], "float32") is None
    with pytest.raises(ValueError, match="not one of shape, loss"):
        Mismatch("wrong")


def test_tolerances_come_from_the_schema_and_the_element_types_epsilons() -> None:
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        limit = tolerance(dtype)
        wide = "float64" if dtype == "float64" else "float32"
        assert (limit.eps, limit.wide_eps, limit.units) == (float(ml_dtypes.finfo(dtype).eps), np.finfo(wide).eps, 32)
        assert (limit.rtol, limit.atol) == (limit.eps + 32 * limit.wide_eps, 32 * limit.wide_eps)


def test_the_default_selection_is_the_data_corpus_less_the_scale_cases() -> None:
    everything = corpus.load_all()
    chosen = corpus.select(everything)
    assert len(chosen) == len(everything) - sum("scale" in case.tags for case in everything)
    assert {case.form for case in chosen} == {"spec", "released"}
    names = {case.id for case in chosen}
    for edge in ("empty_targets", "infeasible_too_long", "zero_length_sequences", "single_class", "empty_batch"):
        assert {f"spec/{edge}/{dtype}" for dtype in DTYPES} <= names, edge


CHOSEN = "spec/empty_targets/*,spec/infeasible_too_long/*,spec/logits_1e4/*,spec/hand_worked/*"


def test_suite_survives_a_crashing_runtime_and_reports_it(tmp_path) -> None:
    out = tmp_path / "outcomes.json"
    args = ("conformance", "--runtimes", "reference,openvino", "--select", CHOSEN, "--json", str(out))
    result = ctcop_process(*args, "--no-known-defects")
    assert result.returncode == 1, result.stderr
    assert re.search(r"^reference +16( +0){8} ", result.stdout, re.MULTILINE), result.stdout
    document = json.loads(out.read_text())
    assert document["complete"] is True and document["interrupted_by"] is None
    assert [r["name"] for r in document["runtimes"]] == ["reference", "openvino"]
    outcomes = {(r["runtime"], r["case"]): r for r in document["results"]}
    assert all(o["status"] == "pass" for (runtime, _), o in outcomes.items() if runtime == "reference")
    empty = outcomes["openvino", "spec/empty_targets/float32"]  # spec 12.2 D1: a crash, or wrong losses
    assert empty["status"] in defect("D1").statuses, empty
    assert outcomes["openvino", "spec/infeasible_too_long/float32"]["status"] == "error"  # D2
    assert outcomes["openvino", "spec/logits_1e4/float32"]["status"] == "fail"  # D3
    assert outcomes["openvino", "spec/hand_worked/float32"]["status"] == "pass"
    assert len(outcomes) == 2 * 16
    assert document["settings"]["known_defects"] is False and all(r["defect"] is None for r in document["results"])
    if empty["status"] == "crash":
        assert "openvino: crash on an empty target (killed by SIG" in result.stdout
    assert "Known defects" not in result.stdout


def test_registered_defects_are_xfail_with_their_id_and_the_run_passes(tmp_path) -> None:
    # The same run with the registry applied (the default): every openvino failure above is a
    # registered defect, so the run exits 0 and the table counts them as xfail with their ids.
    out = tmp_path / "outcomes.json"
    result = ctcop_process("conformance", "--runtimes", "reference,openvino", "--select", CHOSEN, "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(out.read_text())
    outcomes = {(r["runtime"], r["case"]): r for r in document["results"]}
    for case_id, defect_id, statuses in [
        ("spec/empty_targets/float32", "D1", defect("D1").statuses),
        ("spec/infeasible_too_long/float32", "D2", ("error",)),
        ("spec/logits_1e4/float32", "D3", ("fail",)),
        ("spec/hand_worked/float64", "D4", ("fail",)),
    ]:
        outcome = outcomes["openvino", case_id]
        assert (outcome["status"], outcome["defect"]) == ("xfail", defect_id), outcome
        assert outcome["message"].startswith(f"{defect_id} (spec ")
        assert any(f"[{status}]" in outcome["message"] for status in statuses), outcome
    passed = outcomes["openvino", "spec/hand_worked/float32"]
    assert (passed["status"], passed["defect"]) == ("pass", None)
    assert document["settings"]["known_defects"] is True
    assert re.search(r"^openvino +3 +0 +0 +0 +0 +0 +13 +0 +0 ", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^  openvino: D1 +4  spec/empty_targets/", result.stdout, re.MULTILINE), result.stdout
    assert "Failure classes" not in result.stdout


def test_exit_codes(tmp_path) -> None:
    assert ctcop_process("conformance", "--runtimes", "reference", "--select", "hand_worked").returncode == 0
    chosen = ("--runtimes", "openvino", "--select", "spec/logits_1e4/float32")
    assert ctcop_process("conformance", *chosen).returncode == 0  # D3, registered
    failing = ctcop_process("conformance", *chosen, "--no-known-defects")
    assert failing.returncode == 1, failing.stderr
    assert "[fail] spec/logits_1e4/float32" in failing.stdout
    known = tmp_path / "known.txt"
    known.write_text("openvino spec/logits_1e4/* spec 12.2 D3\n")
    listed = ctcop_process("conformance", *chosen, "--no-known-defects", "--expected-failures", str(known))
    assert listed.returncode == 0, listed.stdout + listed.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runtimes", "tvm"], "runtimes: unknown runtime: tvm; have reference, onnxruntime"),
        (["--select", "no_such_case*"], "select: no_such_case* matches no case of the corpus"),
        (["--runtime-module", "no_such_module:x"], "runtime_module: no_such_module:x: ModuleNotFoundError"),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = ctcop_process("conformance", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_written_corpus_is_a_corpus_tree(tmp_path) -> None:
    folder = tmp_path / "corpus"
    result = ctcop_process("conformance", "--write-corpus", str(folder), "--select", "hand_worked,invalid")
    copied = corpus.load_all(folder)
    assert result.returncode == 0 and f"wrote {len(copied)} cases" in result.stdout
    original = {case.id: case for case in corpus.select(corpus.load_all(), ["hand_worked", "invalid"])}
    assert [case.id for case in copied] == sorted(original)
    for case in copied:
        assert corpus.read_manifest(case.stored_in()) == corpus.read_manifest(original[case.id].stored_in())
        for name, array in case.inputs.items():
            assert np.array_equal(array, original[case.id].inputs[name])
    hand = corpus.load(folder / "spec" / "hand_worked" / "float64")
    assert hand.expected_loss is not None and hand.expected_loss[0] == pytest.approx(-np.log(0.339), rel=1e-14)
    again = ctcop_process("conformance", "--write-corpus", str(folder))
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_max_errors_treat_special_values_as_the_comparison_does() -> None:
    assert max_errors([1.0, np.inf, np.nan], [1.0, np.inf, np.nan]) == (0.0, 0.0)
    assert max_errors([2.0, 1.0], [1.0, 4.0]) == (3.0, 1.0)
    assert max_errors([np.inf, 1.0], [3.0, 1.0]) == (np.inf, np.inf)


def test_openvino_adapters_run_the_read_only_inputs_they_are_handed(tmp_path) -> None:
    # Runtimes get read-only copies of a case's arrays; OpenVINO's shared-memory input path refuses
    # a read-only scalar (blank_index), so ctcop's adapters must copy theirs in.
    out = tmp_path / "blank.json"
    chosen = ("--select", "released/blank_first/int32/float32", "--no-known-defects")
    result = ctcop_process("conformance", "--runtimes", "openvino,openvino-onnx", *chosen, "--json", str(out))
    statuses = {r["runtime"]: r["status"] for r in json.loads(out.read_text())["results"]}
    assert statuses["openvino-onnx"] == "pass", result.stdout
    assert statuses["openvino"] in defect("D1").statuses, result.stdout  # an empty target


def test_the_default_run_samples_the_slow_runtimes_by_a_stated_rule() -> None:
    from ctcop.conformance import runner, sampling, suite
    from ctcop.defects import registry

    assert sampling.family("released/blank_absent/int32/bfloat16") == "released/blank_absent"
    assert sampling.representatives(
        ["a/x/float16", "a/x/float64", "a/x/float32", "b/y/int64/float64", "b/y/int32/float64"]
    ) == {
        "a/x/float32",
        "b/y/int64/float64",
    }
    chosen = corpus.select(corpus.load_all())
    picked = sampling.sample(chosen, "openvino", registry().defects)
    assert {sampling.family(c.id) for c in chosen} == {sampling.family(i) for i in picked}
    assert "spec/random_30_nomerge/float32" in picked  # D1's smallest case
    plan = suite.make_plan(["reference", "openvino"], [], [], None, sample=True)
    assert set(plan.sampled) == {"openvino"} and plan.runs("reference") == len(chosen)
    part = plan.samples()["openvino"]
    assert (part["cases"], part["not_run"], part["rule"]) == (len(picked), len(chosen) - len(picked), sampling.RULE)
    shards = [suite.make_plan(["openvino"], [], [], (k, 2), sample=True).sampled["openvino"] for k in (1, 2)]
    assert shards[0] | shards[1] == picked and not shards[0] & shards[1]
    assert not suite.make_plan(["openvino"], [], [], None).sampled
    tasks = runner.tasks_for(["reference", "openvino"], ["a", "b"], {"openvino": {"b"}})
    assert [(t.runtime, t.case, t.run) for t in tasks] == [
        ("reference", "a", 0), ("reference", "a", 1), ("reference", "b", 0), ("reference", "b", 1),
        ("openvino", "b", 0), ("openvino", "b", 1),
    ]  # fmt: skip


def test_list_prints_the_selected_case_ids(capsys) -> None:
    """``--list``: the ids --select (and --shard) choose, one per line, in corpus order; exit 0."""
    every = corpus.load_all()
    code, out, err = in_process(capsys, "conformance", "--list")
    assert (code, err) == (0, "") and out.splitlines() == [case.id for case in corpus.select(every)]
    assert len(out.splitlines()) == 423
    family = in_process(capsys, "conformance", "--list", "--select", "spec/hand_worked")
    assert family == (0, "".join(f"spec/hand_worked/{t}\n" for t in sorted(DTYPES)), "")
    halves = [in_process(capsys, "conformance", "--list", "--select", "hand_worked", "--shard", f"{k}/2")[1]
              for k in (1, 2)]  # fmt: skip
    tagged = [case.id for case in every if "hand_worked" in case.tags]
    assert sorted((halves[0] + halves[1]).split()) == sorted(tagged) and len(tagged) == 12
    code, out, err = in_process(capsys, "conformance", "--list", "--json", "x.json")
    assert code == 2 and out == "" and "--json is ignored with --list" in err


def test_a_family_or_a_folder_of_ids_selects_the_cases_under_it() -> None:
    every = corpus.load_all()
    ids = [case.id for case in corpus.select(every, ["released/blank_first/int32", "spec/no_frames/"])]
    assert ids and all(i.startswith(("released/blank_first/int32/", "spec/no_frames/")) for i in ids)
    assert {i.rsplit("/", 1)[0] for i in ids} == {"released/blank_first/int32", "spec/no_frames"}
    assert corpus.select(every, ["spec/hand_work"]) == []  # a folder is a whole part of the id
    tag = {case.id for case in corpus.select(every, ["hand_worked"])}
    assert {case.id for case in corpus.select(every, ["spec/hand_worked"])} < tag  # the tag: spec 9's examples
    assert all("hand_worked" in case.tags for case in every if case.id.startswith("spec/hand_worked/"))
    assert not any("worked" in case.tags for case in every)


def test_a_selection_that_matches_nothing_suggests_close_names(capsys) -> None:
    code, out, err = in_process(capsys, "conformance", "--list", "--select", "hand_workd,spec/empty_target")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "hand_workd, spec/empty_target matches no case of the corpus; did you mean hand_worked," in err
    assert "spec/empty_targets" in err and "ctcop conformance --list prints the case ids" in err
    code, _, err = in_process(capsys, "conformance", "--list", "--select", "zzzzqqq")
    assert code == 2 and "did you mean" not in err and "--list prints the case ids" in err


class _Constant:
    """A runtime that answers 1.0 for every sample, whatever the case."""

    name = "constant"

    def run(self, case):
        n = (case.inputs["inputs"].shape[1]) if case.form == "spec" else case.inputs["logits"].shape[0]
        return np.ones(n, dtype=np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_constant_fails_every_hand_worked_case_and_the_bound_is_recorded(dtype: str) -> None:
    from ctcop.conformance.verdict import judge

    (case,) = corpus.select(corpus.load_all(), [f"spec/hand_worked/{dtype}"])
    result = judge(_Constant(), case, "constant")
    expected = float(np.asarray(case.expected_loss, dtype=np.float64)[0])
    limit = tolerance(dtype)
    assert result.status == "fail" and result.mismatch is not None
    assert result.mismatch.allowed == limit.eps * abs(expected) + 32 * limit.wide_eps * max(1.0, abs(expected))
    # the reference is within its own bound of the exact value: a correct answer passes
    assert judge(type("Exact", (), {"run": lambda self, c: c.expected_loss})(), case, "exact").status == "pass"
