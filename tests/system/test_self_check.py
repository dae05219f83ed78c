"""``ctcop conformance --self-check``: the default corpus catches every mutant of the plain
implementation, the plain one passes every case, every numbered rule of spec sections 3-7 is
covered, the default run's sample keeps every mutant caught, and docs/conformance.md's map is the
run's."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.cli import assert_refused, ctcop_cli
from support.paths import ROOT

from ctcop.conformance import corpus, sampling
from ctcop.conformance.result import from_dict
from ctcop.conformance.selfcheck import MUTANTS, score

DOC = ROOT / "docs" / "conformance.md"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, score.Score]:
    """One self-check run on the default selection: what it printed, and its score from the report."""
    out = tmp_path_factory.mktemp("self-check") / "self-check.json"
    ran = ctcop_cli("conformance", "--self-check", "--json", str(out))
    results = [from_dict(row) for row in json.loads(out.read_text(encoding="utf-8"))["results"]]
    return ran, score.score(results)


def test_the_default_corpus_catches_every_mutant_and_the_plain_one_passes(run) -> None:
    ran, found = run
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(MUTANTS) >= 30
    assert found.missed == [] and found.plain_departures == []
    cases = len(corpus.select(corpus.load_all()))
    assert found.cases == cases
    assert f"{len(MUTANTS)} of {len(MUTANTS)} mutants caught" in ran.stdout
    assert f"passes {cases} of {cases} cases" in ran.stdout


def test_nan_and_minus_inf_in_an_active_frame_read_as_probability_zero_are_caught(run) -> None:
    _, found = run
    for bug, where in (("nan_as_zero_probability", "nan_in_active"), ("neg_inf_as_zero_probability", "neg_inf_in")):
        families = {sampling.family(case) for case in found.catching[bug]}
        assert any(where in name for name in families), (bug, families)
        assert any(name.startswith("released/") for name in families), (bug, families)


def test_every_numbered_rule_of_sections_3_to_7_has_a_caught_mutant(run) -> None:
    _, found = run
    spec = (ROOT / "spec" / "ctcloss4.md").read_text(encoding="utf-8")
    rules = set(re.findall(r"^\*\*([3-7]\.\d+)\b", spec, re.M)) | {"5", "6", "7"}
    assert {"3.1", "3.4", "4.5", "7.3"} <= rules
    covered = {
        part.strip() for bug, mutant in MUTANTS.items() if found.catching[bug] for part in mutant.rule.split(",")
    }
    assert rules <= covered, sorted(rules - covered)


def test_the_default_runs_sample_keeps_every_mutant_caught(run) -> None:
    """A sampled runtime runs one case per family, the cases tagged "sample" (and each of its
    defects' smallest case): those alone catch every mutant, and neither alone does."""
    _, found = run
    cases = corpus.select(corpus.load_all())
    sample = sampling.samples(cases, ["any"], [])["any"]
    representatives = sampling.representatives(case.id for case in cases)
    assert [bug for bug, ids in found.catching.items() if not sample & set(ids)] == []
    missed = sorted(bug for bug, ids in found.catching.items() if not representatives & set(ids))
    assert missed == ["overflow_saturates", "softmax_in_float32"]


def test_the_coverage_map_in_the_docs_is_this_runs(run) -> None:
    _, found = run
    text = DOC.read_text(encoding="utf-8")
    assert score.render_block(text, found) == text, "run the two commands of docs/conformance.md's self-check block"


def test_a_selection_that_misses_mutants_fails_and_names_them() -> None:
    ran = ctcop_cli("conformance", "--self-check", "--select", "spec/hand_worked/float64")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "missed: nan_as_zero_probability (rule 4.4" in ran.stdout
    assert "passes 1 of 1 cases" in ran.stdout


@pytest.mark.parametrize("option", [("--runtimes", "reference"), ("--no-known-defects",), ("--html", "x.html")])
def test_the_self_check_chooses_its_own_runtimes_and_reports(option: tuple[str, ...]) -> None:
    assert_refused(ctcop_cli("conformance", "--self-check", *option), "--self-check runs its own runtimes")
