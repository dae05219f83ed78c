"""The size of each smallest case that the conformance table and its HTML page show for the
registered defects met (spec 10.1): the logits' count that the case's manifest or recipe declares
(:func:`ctcop.conformance.classes.elements`), found without reading any case's arrays."""

from __future__ import annotations

import json

import pytest

from ctcop.cli.conformance import print_report
from ctcop.conformance import classes, corpus, html, report
from ctcop.conformance.result import Result
from ctcop.defects import predicates

RUNTIMES = [{"name": "openvino", "description": "native", "available": True, "reason": None}]


def not_read(*_: object) -> None:
    raise AssertionError("a case's arrays were read for its size")


def test_the_smallest_cases_sizes_are_the_declared_ones_and_no_array_is_read(monkeypatch, capsys) -> None:
    cases = {case.id: case for case in corpus.load_all()}
    smallest = min(cases, key=lambda case_id: (classes.elements(cases[case_id]), case_id))
    size = classes.elements(cases[smallest])
    results = [Result(case_id, "openvino", "xfail", "D1 ...", defect="D1") for case_id in cases]
    results.append(Result(smallest, "openvino", "xpass", "re-measure: D4 ...", defect="D4"))
    monkeypatch.setattr(classes, "facts", not_read)
    monkeypatch.setattr(predicates, "read", not_read)

    print_report(RUNTIMES, results, cases, "head", 0)
    table = capsys.readouterr().out
    assert f"openvino: D1  {len(cases):>4}  {smallest} [{size}]" in table
    assert f"openvino: D4  {1:>4}  {smallest} [{size}]" in table

    environment = {
        "versions": {},
        "machine": {},
        "selection": {"patterns": [], "shard": None, "cases": len(cases)},
        "settings": {"jobs": 1, "timeout_s": 120.0, "runs": 2, "expected_failures": None, "known_defects": True},
    }
    document = json.loads(report.document(RUNTIMES, results, environment, None))
    page = html.page(document, results, cases)
    assert page.count(f"<code>{smallest}</code> [{size}]") == 2


@pytest.mark.parametrize("case_id", ["spec/hand_worked/float32", "spec/logits_1e4/float32"])
def test_a_cases_declared_size_is_the_size_of_its_logits(case_id: str) -> None:
    case = next(case for case in corpus.load_all() if case.id == case_id)
    assert classes.elements(case) == case.inputs[case.logits_name].size == classes.facts(case).elements
