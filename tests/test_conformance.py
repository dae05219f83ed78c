"""The conformance suite: its comparison rule, crash isolation and report, as a user runs it."""

import json
import subprocess
import sys

import numpy as np
import pytest

from ctcop.conformance import runner
from ctcop.tolerance import compare, max_errors, tolerance

CORPUS_SIZE = len(runner.corpus())


def ctcop_cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ctcop", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("got", "expected", "dtype", "ok"),
    [
        ([1.0, np.inf, np.nan], [1.0, np.inf, np.nan], "float32", True),
        ([1.000009], [1.0], "float32", True),
        ([1.0002], [1.0], "float32", False),
        ([100.002], [100.0], "float32", False),
        ([5e-5], [0.0], "float32", True),
        ([1.0 + 2e-9], [1.0], "float64", False),
        ([3.4028235e38], [np.inf], "float64", False),
        ([np.inf], [np.nan], "float32", False),
        ([1.0], [np.nan], "float32", False),
        ([1.0, 2.0], [1.0], "float32", False),
        ([1.0009], [1.0], "float16", True),
        ([1.02], [1.0], "float16", False),
    ],
)
def test_comparison_rule(got: list[float], expected: list[float], dtype: str, ok: bool) -> None:
    assert (compare(np.array(got), np.array(expected), dtype) is None) == ok


def test_tolerances_come_from_the_schema() -> None:
    assert (tolerance("float32").rtol, tolerance("float32").atol) == (1e-5, 1e-4)
    assert (tolerance("float64").rtol, tolerance("float64").atol) == (1e-9, 1e-12)


def test_corpus_covers_the_spec_edge_cases_in_both_types() -> None:
    names = [case.name for case in runner.corpus()]
    assert len(names) == len(set(names)) == CORPUS_SIZE
    assert len(runner.corpus("*/float32")) == len(runner.corpus("*/float64")) == CORPUS_SIZE // 2
    for edge in ("empty_targets", "infeasible_too_long", "zero_length_sequences", "single_class", "empty_batch"):
        assert f"{edge}/float32" in names and f"{edge}/float64" in names


def test_suite_survives_a_crashing_runtime_and_reports_it(tmp_path) -> None:
    out = tmp_path / "outcomes.json"
    result = ctcop_cli("conformance", "--runtimes", "reference,openvino", "--json", str(out), timeout=900)
    assert result.returncode == 0, result.stderr
    assert f"reference{CORPUS_SIZE:>15}     0      0      0" in result.stdout
    document = json.loads(out.read_text())
    assert document["complete"] is True and document["interrupted_by"] is None
    assert document["cases"] == CORPUS_SIZE and document["chosen"] == ["reference", "openvino"]
    outcomes = document["runtimes"]
    assert all(o["status"] == "pass" for o in outcomes["reference"].values())
    native = outcomes["openvino"]
    assert native["empty_targets/float32"]["status"] == "crash"  # spec 12.2 D1
    assert native["infeasible_too_long/float32"]["status"] == "error"  # D2
    assert native["logits_1e4/float32"]["status"] == "fail"  # D3
    assert native["hand_worked/float32"]["status"] == "pass"
    assert len(native) == CORPUS_SIZE


def test_strict_mode_exit_codes() -> None:
    assert ctcop_cli("conformance", "--runtimes", "reference", "--strict").returncode == 0
    failing = ctcop_cli("conformance", "--runtimes", "openvino", "--cases", "logits_1e4/float32", "--strict")
    assert failing.returncode == 1, failing.stderr
    assert "openvino" in failing.stdout and "[fail] logits_1e4/float32" in failing.stdout
    lenient = ctcop_cli("conformance", "--runtimes", "openvino", "--cases", "logits_1e4/float32")
    assert lenient.returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runtimes", "tvm"], "runtimes: unknown or not installed: tvm"),
        (["--cases", "no_such_case*"], "cases: 'no_such_case*' matches no case of the corpus"),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    result = ctcop_cli("conformance", *args)
    assert result.returncode == 2 and message in result.stderr


def test_written_corpus_is_consumable_data(tmp_path) -> None:
    result = ctcop_cli("conformance", "--write-corpus", str(tmp_path))
    assert result.returncode == 0 and f"wrote {CORPUS_SIZE} cases" in result.stdout
    assert len(list(tmp_path.glob("*.npz"))) == CORPUS_SIZE
    case = np.load(tmp_path / "hand_worked__float64.npz")
    assert case["expected"][0] == pytest.approx(-np.log(0.339), rel=1e-14)
    assert bool(case["merge_repeated"]) and not bool(case["preprocess_collapse_repeated"])
    assert case["inputs"].shape == (3, 1, 3) and case["labels"].tolist() == [[0, -1, -1]]


def test_max_errors_treat_special_values_as_the_comparison_does() -> None:
    assert max_errors([1.0, np.inf, np.nan], [1.0, np.inf, np.nan]) == (0.0, 0.0)
    assert max_errors([2.0, 1.0], [1.0, 4.0]) == (3.0, 1.0)
    assert max_errors([np.inf, 1.0], [3.0, 1.0]) == (np.inf, np.inf)
