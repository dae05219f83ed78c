"""A report's ``selection.sampled`` (the runtimes that ran the default run's sample, spec 10) is
untrusted input: ``ctcop conformance-merge`` and ``ctcop conformance-diff`` read it through one
reader (:func:`ctcop.conformance.sampling.recorded`) and refuse what is not one in one line of its
own, before comparing reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctcop import cli
from ctcop.conformance import diff, report, sampling, shard

PART = {"rule": "a sample", "cases": 1, "not_run": 2}
NOT_AN_ENTRY = "selection.sampled.probe is not {rule (printable text), cases, not_run (counts)}"
MALFORMED = [
    ({"x": 1}, "selection.sampled.x is not {rule (printable text), cases, not_run (counts)}"),
    ({"probe": None}, NOT_AN_ENTRY),
    ({"probe": {**PART, "rule": 5}}, NOT_AN_ENTRY),
    ({"probe": {**PART, "rule": "a \x1b[31m sample"}}, NOT_AN_ENTRY),
    ({"probe": {**PART, "cases": -1}}, NOT_AN_ENTRY),
    ({"probe": {**PART, "not_run": True}}, NOT_AN_ENTRY),
    ({"probe": {"rule": "a sample", "cases": 1}}, NOT_AN_ENTRY),
    ({"Bad Name": PART}, "selection.sampled names 'Bad Name', which is not a runtime's name"),
    (["probe"], "selection.sampled is a JSON list, not runtime -> {rule, cases, not_run}"),
    ("probe", "selection.sampled is a JSON str, not runtime -> {rule, cases, not_run}"),
]


def shard_report(shard_text: str, sampled: Any = None) -> dict[str, Any]:
    """The report of one shard of probe's run of one case, as ``ctcop conformance --json`` writes it."""
    return {
        "schema": report.SCHEMA, "complete": True, "interrupted_by": None,
        "versions": {"ctcop": "0.1.0"}, "machine": {"cpu": "a CPU", "isa": [], "cores": 2},
        "selection": {"patterns": [], "shard": shard_text, "cases": 3, "sampled": sampled},
        "settings": {"jobs": 1, "timeout_s": 60.0, "runs": 2, "expected_failures": None, "known_defects": True},
        "runtimes": [{"name": "probe", "description": "probe", "available": True, "reason": None}],
        "results": [{"case": f"c{shard_text[0]}", "runtime": "probe", "status": "pass", "message": ""}],
        "summary": {},
    }  # fmt: skip


def test_the_record_is_read_as_typed_entries() -> None:
    assert sampling.recorded(shard_report("1/2", {"probe": PART})) == {"probe": sampling.Sampled("a sample", 1, 2)}
    assert sampling.recorded(shard_report("1/2")) == {} == sampling.recorded({"selection": {}})
    with pytest.raises(ValueError, match=r"^selection is not an object$"):
        sampling.recorded({"selection": 5})


@pytest.mark.parametrize(("sampled", "message"), MALFORMED)
def test_merge_refuses_a_malformed_record_in_its_own_words(sampled: Any, message: str) -> None:
    first = shard_report("1/2")
    for documents in ([first, shard_report("2/2", sampled)], [shard_report("2/2", sampled), first]):
        with pytest.raises(shard.MergeError) as refused:
            report.merge(documents, ["a.json", "b.json"])
        where = "b.json" if documents[0] is first else "a.json"
        assert str(refused.value) == f"{where}: {message}"


@pytest.mark.parametrize(("sampled", "message"), MALFORMED)
def test_diff_refuses_a_malformed_record_in_its_own_words(sampled: Any, message: str) -> None:
    with pytest.raises(diff.ReportError) as refused:
        diff.load(shard_report("1/2", sampled))
    assert str(refused.value) == message


def test_shards_sampled_by_one_rule_merge_their_counts_and_other_rules_are_refused() -> None:
    merged = report.merge([shard_report("1/2", {"probe": PART}), shard_report("2/2", {"probe": PART})], ["a", "b"])
    assert merged["selection"]["sampled"] == {"probe": {"rule": "a sample", "cases": 2, "not_run": 4}}
    other = shard_report("2/2", {"probe": {**PART, "rule": "another"}})
    with pytest.raises(shard.MergeError, match="b: sampled runtimes differ from a's"):
        report.merge([shard_report("1/2", {"probe": PART}), other], ["a", "b"])


def test_the_diff_json_holds_each_sampled_runtimes_rule() -> None:
    old, new = diff.load(shard_report("1/1")), diff.load(shard_report("1/1", {"probe": PART}))
    assert new.selection.sampled == (("probe", "a sample"),) and str(new.selection) == (
        "all but scale, shard 1/1, sampled probe: a sample"
    )
    found = diff.compare(old, new, {}, allow_different_selection=True)
    assert json.loads(diff.document(found, "a", "b"))["selection"]["new"]["sampled"] == {"probe": "a sample"}


@pytest.mark.parametrize("command", ["conformance-merge", "conformance-diff"])
def test_the_commands_refuse_a_malformed_record_in_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    good, bad = tmp_path / "a.json", tmp_path / "b.json"
    good.write_text(json.dumps(shard_report("1/2")))
    bad.write_text(json.dumps(shard_report("2/2", {"x": 1})))
    output = ["-o", str(tmp_path / "merged.json")] if command == "conformance-merge" else []
    code = cli.main([command, str(good), str(bad), *output])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("ctcop: invalid input: "), err
    assert f"{bad}: {MALFORMED[0][1]}" in err and "attribute" not in err
    assert not (tmp_path / "merged.json").exists()
