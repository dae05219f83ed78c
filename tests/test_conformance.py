"""The conformance suite: its comparison rule, crash isolation and report, as a user runs it."""

import json
import subprocess
import sys

import numpy as np
import pytest

from ctcop import conformance


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
    ],
)
def test_comparison_rule(got: list[float], expected: list[float], dtype: str, ok: bool) -> None:
    assert (conformance.compare(np.array(got), np.array(expected), dtype) is None) == ok


def test_corpus_covers_the_spec_edge_cases_in_both_types() -> None:
    names = [case.name for case in conformance.corpus()]
    assert len(names) == len(set(names)) == 196
    for edge in ("empty_targets", "infeasible_too_long", "zero_length_sequences", "single_class", "empty_batch"):
        assert f"{edge}/float32" in names and f"{edge}/float64" in names


def test_suite_survives_a_crashing_runtime_and_reports_it(tmp_path) -> None:
    out = tmp_path / "outcomes.json"
    command = [sys.executable, "-m", "ctcop", "conformance", "--runtimes", "reference,openvino", "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    assert "reference            196     0      0      0" in result.stdout
    outcomes = json.loads(out.read_text())
    assert all(o["status"] == "pass" for o in outcomes["reference"].values())
    native = outcomes["openvino"]
    assert native["empty_targets/float32"]["status"] == "crash"  # spec 12.2 D1
    assert native["infeasible_too_long/float32"]["status"] == "error"  # D2
    assert native["logits_1e4/float32"]["status"] == "fail"  # D3
    assert native["hand_worked/float32"]["status"] == "pass"
    assert len(native) == 196


def test_strict_mode_and_unknown_runtime() -> None:
    strict = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance", "--runtimes", "reference", "--strict"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert strict.returncode == 0
    unknown = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance", "--runtimes", "tvm"], capture_output=True, text=True, timeout=300
    )
    assert unknown.returncode == 2 and "runtimes: unknown or not installed: tvm" in unknown.stderr


def test_written_corpus_is_consumable_data(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ctcop", "conformance", "--write-corpus", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "wrote 196 cases" in result.stdout
    case = np.load(tmp_path / "hand_worked__float64.npz")
    assert case["expected"][0] == pytest.approx(-np.log(0.339), rel=1e-14)
    assert bool(case["merge_repeated"]) and not bool(case["preprocess_collapse_repeated"])
    assert case["inputs"].shape == (3, 1, 3) and case["labels"].tolist() == [[0, -1, -1]]
