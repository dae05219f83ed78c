"""The registry applied to conformance results (spec 10.1), the JUnit and exit-code rules for
registered defects, and the generated defect tables of the spec and the docs."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from support.paths import ROOT

from ctcop import defects
from ctcop.conformance import expected, junit, known, remeasure, report
from ctcop.conformance.result import Result, to_dict

DOCUMENT = {
    "schema": defects.SCHEMA,
    "libraries": {"rt": {"distributions": ["no-such-distribution"], "measured": "1.0"}},
    "defects": [
        {
            "id": "D1",
            "library": "rt",
            "kind": "defect",
            "spec": "4.4",
            "title": "crashes on an empty target",
            "runtimes": ["rt"],
            "statuses": ["crash"],
            "cases": {"rt": ["spec/empty/float32", "spec/empty/float64"]},
        },
        {
            "id": "D2",
            "library": "rt",
            "kind": "deliberate",
            "spec": "6",
            "title": "float64 in float32",
            "runtimes": ["rt*"],
            "statuses": ["fail"],
            "also": ["float64"],
        },
        {
            "id": "D3",
            "library": "rt",
            "kind": "defect",
            "spec": "4.4",
            "title": "returns uninitialised memory without frames",
            "runtimes": ["rt"],
            "statuses": ["fail", "nondeterministic"],
            "cases": {"rt": ["spec/no_frames/float32", "spec/no_frames/float64"]},
        },
    ],
}


def result(case: str, status: str, runtime: str = "rt") -> Result:
    return Result(case, runtime, status, "sample 0: got 1, expected 2")


@pytest.fixture
def registered() -> known.KnownDefects:
    return known.KnownDefects.of(list(defects.parse(DOCUMENT).defects))


def test_a_listed_failure_with_a_measured_status_is_xfail_with_its_id(registered: known.KnownDefects) -> None:
    got = registered.apply(result("spec/empty/float32", "crash"), ["float32"])
    assert (got.status, got.defect) == ("xfail", "D1")
    assert got.message == "D1 (spec 4.4): crashes on an empty target [crash] sample 0: got 1, expected 2"
    assert report.exit_code([got]) == 0


def test_another_status_or_an_unlisted_case_or_runtime_still_fails(registered: known.KnownDefects) -> None:
    for unexplained in [
        result("spec/empty/float32", "fail"),  # D1 was measured as a crash
        result("spec/other/float32", "crash"),  # not a listed case, not float64
        result("spec/empty/float32", "crash", runtime="other"),
    ]:
        got = registered.apply(unexplained, ["float32"])
        assert got == unexplained and got.defect is None
        assert report.exit_code([got]) == 1


def test_also_selectors_cover_a_case_without_making_its_pass_an_xpass(registered: known.KnownDefects) -> None:
    got = registered.apply(result("spec/any/float64", "fail", runtime="rt-ir"), ["float64", "spec"])
    assert (got.status, got.defect) == ("xfail", "D2")
    assert "(spec 6, deliberate)" in got.message
    passed = result("spec/any/float64", "pass")
    assert registered.apply(passed, ["float64"]) == passed


def test_a_listed_case_that_passes_is_a_re_measure_xpass_that_does_not_fail_the_run(
    registered: known.KnownDefects,
) -> None:
    got = registered.apply(result("spec/empty/float64", "pass"), ["float64"])
    assert (got.status, got.defect) == ("xpass", "D1")
    assert got.message == (
        "re-measure: D1 no longer reproduces in spec/empty/float64 on rt an unknown version (measured on 1.0)"
    )
    assert report.accepted(got) and report.exit_code([got]) == 0
    stale = expected.apply(result("spec/empty/float64", "pass"), expected.parse("rt spec/empty/* why"), [])
    assert stale.status == "xpass" and not report.accepted(stale) and report.exit_code([stale]) == 1


def test_junit_counts_a_registered_xpass_as_skipped_and_a_stale_one_as_a_failure(
    registered: known.KnownDefects,
) -> None:
    remeasure = registered.apply(result("spec/empty/float64", "pass"), ["float64"])
    stale = replace(result("spec/x/float32", "xpass"), message="listed as an expected failure but passes")
    xml = ET.fromstring(junit.document([{"name": "rt", "available": True, "reason": None}], [remeasure, stale]))
    suite = xml.find("testsuite")
    assert suite is not None and (suite.get("failures"), suite.get("skipped")) == ("1", "1")


def test_known_groups_list_xfail_and_re_measure_separately(registered: known.KnownDefects) -> None:
    results = [
        registered.apply(result("spec/empty/float32", "crash"), []),
        registered.apply(result("spec/empty/float64", "pass"), []),
    ]
    groups = known.group(results, {"spec/empty/float32": 6, "spec/empty/float64": 6})
    assert [(g.runtime, g.defect, g.status, g.count) for g in groups] == [
        ("rt", "D1", "xfail", 1),
        ("rt", "D1", "xpass", 1),
    ]


def test_a_defect_that_varies_from_run_to_run_is_listed_apart_when_a_run_does_not_show_it(
    registered: known.KnownDefects, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = defects.parse(DOCUMENT)
    assert [d.intermittent for d in entries.defects] == [False, False, True]
    got = registered.apply(result("spec/no_frames/float32", "pass"), ["float32"])
    assert (got.status, got.defect) == ("xpass", "D3")
    assert got.message == (
        "intermittent: D3 did not show in spec/no_frames/float32 this run on rt an unknown version "
        "(it varies from run to run; measured on 1.0)"
    )
    assert report.accepted(got) and report.exit_code([got]) == 0
    shown = registered.apply(result("spec/no_frames/float64", "nondeterministic"), ["float64"])
    assert (shown.status, shown.defect) == ("xfail", "D3")
    gone = registered.apply(result("spec/empty/float64", "pass"), ["float64"])
    sizes = {"spec/no_frames/float32": 0, "spec/empty/float64": 6}
    monkeypatch.setattr(known, "registry", lambda: entries)
    lines = known.format_groups(known.group([got, gone, shown], sizes))
    assert [" ".join(line.split()) for line in lines] == [
        "",
        "Known defects (xfail; runtime: id, cases, smallest case [logits], departure):",
        "rt: D3 1 spec/no_frames/float64 [0] returns uninitialised memory without frames",
        "",
        "Re-measure (registered defects that did not reproduce on a listed case):",
        "rt: D1 1 spec/empty/float64 [6] rt ?, measured on 1.0",
        "",
        "Not shown this run (registered defects that vary from run to run):",
        "rt: D3 1 spec/no_frames/float32 [0] rt ?, measured on 1.0",
    ]


def test_remeasure_keeps_the_cases_of_a_defect_that_varies_from_run_to_run() -> None:
    raw = {
        "settings": {"known_defects": False},
        "versions": {},
        "results": [
            to_dict(result("spec/no_frames/float32", "pass")),
            to_dict(result("spec/no_frames/float64", "fail")),
            to_dict(result("spec/empty/float64", "pass")),
        ],
    }
    updated, lines = remeasure.remeasure(DOCUMENT, raw)
    assert updated["defects"][2]["cases"] == {"rt": ["spec/no_frames/float32", "spec/no_frames/float64"]}
    assert updated["defects"][0]["cases"] == {"rt": ["spec/empty/float32"]}
    assert lines == [
        "D1 rt: no longer fails 1 case: spec/empty/float64",
        "D3 rt: did not show on 1 case this run, kept (it varies from run to run): spec/no_frames/float32",
    ]


def test_the_registry_refuses_malformed_entries() -> None:
    for broken, message in [
        ({**DOCUMENT, "schema": "other"}, "not a ctcop-defects-1"),
        ({**DOCUMENT, "defects": [DOCUMENT["defects"][0], DOCUMENT["defects"][0]]}, "unique"),
        ({**DOCUMENT, "defects": [{**DOCUMENT["defects"][0], "statuses": ["pass"]}]}, "statuses"),
        ({**DOCUMENT, "defects": [{**DOCUMENT["defects"][0], "cases": {"elsewhere": ["x"]}}]}, "cases must map"),
        ({**DOCUMENT, "defects": [{**DOCUMENT["defects"][0], "library": "nope"}]}, "library must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            defects.parse(broken)


def test_the_defect_catalogue_is_rendered_from_the_registry() -> None:
    path = "docs/defects.md"
    text = (ROOT / path).read_text(encoding="utf-8")
    assert "<!-- defects: " in text
    assert defects.render_blocks(text) == text, f"run: python -m ctcop.defects {path}"


def test_the_command_the_failure_names_renders_the_catalogue(tmp_path) -> None:
    """``python -m ctcop.defects FILE``, the command the test above names, fills emptied blocks back."""
    text = (ROOT / "docs/defects.md").read_text(encoding="utf-8")
    emptied = re.sub(r"(<!-- defects: [^>]*-->\n).*?(<!-- /defects -->)", r"\1\2", text, flags=re.S)
    assert emptied != text
    copy = tmp_path / "defects.md"
    copy.write_text(emptied, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "ctcop.defects", str(copy)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert copy.read_text(encoding="utf-8") == text


def test_every_registered_id_appears_in_the_rendered_docs() -> None:
    text = (ROOT / "docs/defects.md").read_text(encoding="utf-8")
    assert all(f"| {d.id} |" in text for d in defects.registry().defects)


def test_remeasure_drops_cases_that_pass_takes_new_versions_and_lists_unregistered_failures() -> None:
    raw = {
        "settings": {"known_defects": False},
        "versions": {"no-such-distribution": "2.0"},
        "results": [
            to_dict(result("spec/empty/float32", "crash")),
            to_dict(result("spec/empty/float64", "pass")),
            to_dict(result("spec/hand_worked/float64", "fail", runtime="rt-ir")),  # D2 by its float64 selector
            to_dict(result("spec/hand_worked/float32", "fail")),
        ],
    }
    updated, lines = remeasure.remeasure(DOCUMENT, raw)
    assert updated["libraries"]["rt"]["measured"] == "2.0"
    assert updated["defects"][0]["cases"] == {"rt": ["spec/empty/float32"]}
    assert DOCUMENT["defects"][0]["cases"] == {"rt": ["spec/empty/float32", "spec/empty/float64"]}  # a copy
    assert lines == [
        "rt: measured on 1.0, now 2.0",
        "D1 rt: no longer fails 1 case: spec/empty/float64",
        "unregistered: rt spec/hand_worked/float32 [fail] sample 0: got 1, expected 2",
    ]
    with pytest.raises(ValueError, match="--no-known-defects"):
        remeasure.remeasure(DOCUMENT, {**raw, "settings": {"known_defects": True}})


def test_ctcop_defects_lists_every_entry_with_measured_and_installed_versions() -> None:
    result = subprocess.run([sys.executable, "-m", "ctcop", "defects"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    registry = defects.registry()
    for library in registry.libraries.values():
        installed = library.installed()
        state = "not installed" if installed is None else f"installed {installed}"
        assert any(line.startswith(f"{library.name} (measured on {library.measured}, {state}") for line in lines)
    listed = [line.split()[0] for line in lines if line.startswith("  D")]
    assert listed == [d.id for lib in registry.libraries for d in registry.of_library(lib)]
    assert sorted(listed, key=lambda i: int(i[1:])) == [f"D{k}" for k in range(1, len(registry.defects) + 1)]
    table = subprocess.run(
        [sys.executable, "-m", "ctcop", "defects", "--markdown"], capture_output=True, text=True, timeout=300
    )
    assert table.stdout.strip() == defects.markdown(list(registry.defects))


def test_a_defect_id_this_registry_does_not_know_is_shown_not_fatal() -> None:
    # A report merged from another version of ctcop may name ids this registry lacks.
    stranger = replace(result("spec/x/float32", "xfail"), defect="D999")
    lines = known.format_groups(known.group([stranger], {}))
    assert " ".join(lines[-1].split()) == "rt: D999 1 spec/x/float32 [0] not in this ctcop's registry"
