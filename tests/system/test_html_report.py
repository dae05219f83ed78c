"""The conformance report as one HTML page (``ctcop conformance --html``, ``--from-json``): well
formed, self-contained, every runtime's text escaped, and its matrix equal to the ``--json``
report's counts, as Python's parser and a headless Chromium read it.

The browser check needs Chromium (Debian: ``apt-get install -y chromium``): it skips where no
browser is installed, and fails in CI (``CI=true``), which installs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support.cli import ctcop_process

from ctcop.conformance import corpus, html, report
from ctcop.conformance.result import STATUSES, Result

VOID = {"meta", "br"}
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
HOSTILE_DESCRIPTION = "</title><script>alert('description')</script> & <b>bold</b>"
HOSTILE_TEXT = "<img src=//evil.example/x.png onerror=alert(1)> <a href='https://evil.example'>x</a> \"q\""
HOSTILE_MODULE = f"""
class Hostile:
    name = "hostile"
    description = {HOSTILE_DESCRIPTION!r}

    def run(self, case):
        raise RuntimeError({HOSTILE_TEXT!r})


RUNTIME = Hostile()
"""
SELECTED = "spec/hand_worked/float32,spec/empty_targets/*,invalid/mask_gap"


class Page(HTMLParser):
    """A page's elements, text and matrix cells; ``problems`` lists what is not well formed."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.problems: list[str] = []
        self.feed(text)
        self.close()
        self.content = "".join(self.text)
        if self.open:
            self.problems.append(f"left open: {self.open}")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.problems.append(f"</{tag}> closes nothing open")

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def cells(self, prefix: str) -> dict[str, dict[str, int]]:
        """The counts of the cells whose id starts with ``prefix`` ("cell:" or "total:"), by id."""
        return {
            attrs["id"]: {status: int(attrs[f"data-{status}"]) for status in STATUSES}
            for tag, attrs in self.elements
            if tag == "td" and attrs.get("id", "").startswith(prefix)
        }


def counts_of(document: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The cells the matrix must show, from the report's rows: by ``cell:RUNTIME:FAMILY``."""
    ran = [r["name"] for r in document["runtimes"] if r["available"]]
    families = {html.family(row["case"]) for row in document["results"]}
    found = Counter((row["runtime"], html.family(row["case"]), row["status"]) for row in document["results"])
    return {
        f"cell:{runtime}:{name}": {status: found[runtime, name, status] for status in STATUSES}
        for runtime in ran
        for name in families
    }


def check_matrix(page: Page, document: dict[str, Any]) -> None:
    assert page.cells("cell:") == counts_of(document)
    totals = {f"total:{runtime}": counts for runtime, counts in document["summary"].items()}
    assert page.cells("total:") == totals
    worst = {a["id"]: a["data-worst"] for tag, a in page.elements if tag == "td" and "data-worst" in a}
    assert all(worst[key] == html.worst(counts) for key, counts in page.cells("cell:").items())


def check_self_contained(page: Page) -> None:
    """No element that loads anything, and every link an anchor of the page."""
    assert not page.problems
    tags = {tag for tag, _ in page.elements}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base", "svg"}, tags
    anchors = {attrs["id"] for _, attrs in page.elements if "id" in attrs}
    for tag, attrs in page.elements:
        assert not {"src", "srcset", "action", "style", "background"} & set(attrs), (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if "href" in attrs:
            assert attrs["href"].startswith("#") and attrs["href"][1:] in anchors, attrs
    assert "url(" not in page.content and "@import" not in page.content


# -- the page, rendered from typed results ---------------------------------------------------------


def rendered(results: list[Result], runtimes: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The page and the parsed ``--json`` document of ``results``."""
    environment = {
        "versions": report.versions(),
        "machine": report.machine(),
        "selection": {"patterns": ["worked"], "shard": None, "cases": len({r.case for r in results})},
        "settings": {"jobs": 1, "timeout_s": 120.0, "runs": 2, "expected_failures": None, "known_defects": True},
    }
    document = json.loads(report.document(runtimes, results, environment, None))
    cases = {case.id: case for case in corpus.load_all() if case.id in {r.case for r in results}}
    return html.page(document, results, cases), document


RUNTIMES = [
    {"name": "reference", "description": "exact", "available": True, "reason": None},
    {"name": "openvino", "description": "native", "available": True, "reason": None},
    {"name": "torch", "description": "F.ctc_loss", "available": False, "reason": "torch is not installed"},
]
RESULTS = [
    Result("spec/empty_targets/float16", "reference", "pass"),
    Result("spec/empty_targets/float32", "reference", "pass"),
    Result("spec/hand_worked/float32", "reference", "pass"),
    Result("spec/empty_targets/float16", "openvino", "xfail", "D1 ...", defect="D1", death="killed by SIGSEGV"),
    Result("spec/empty_targets/float32", "openvino", "crash", "killed by SIGSEGV", death="killed by SIGSEGV"),
    Result("spec/hand_worked/float32", "openvino", "xpass", "re-measure: D4 ...", defect="D4"),
]


def test_a_family_is_the_case_id_without_its_element_types() -> None:
    assert html.family("spec/empty_targets/float32") == "spec/empty_targets"
    assert html.family("released/blank_absent/int32/bfloat16") == "released/blank_absent"
    assert html.family("invalid/released/lengths_shape") == "invalid/released/lengths_shape"
    assert html.family("float32") == "float32"
    assert set(html.WORST_FIRST) == set(STATUSES)
    assert html.worst({"pass": 3, "xfail": 1}) == "xfail" and html.worst({}) == ""


def test_the_page_is_well_formed_self_contained_and_its_matrix_is_the_reports() -> None:
    text, document = rendered(RESULTS, RUNTIMES)
    page = Page(text)
    check_self_contained(page)
    assert "http://" not in text and "https://" not in text
    check_matrix(page, document)
    assert page.cells("cell:")["cell:openvino:spec/empty_targets"]["crash"] == 1
    assert page.cells("total:").keys() == {"total:reference", "total:openvino"}  # torch did not run
    links = {attrs["href"] for tag, attrs in page.elements if tag == "a"}
    assert links == {"#defect-D1", "#defect-D4"}
    assert "torch is not installed" in page.content
    assert "crash on an empty target (killed by SIGSEGV)" in page.content  # the failure class


def test_the_defects_table_names_what_reproduced_what_to_re_measure_and_what_did_not_show_this_run() -> None:
    intermittent = Result("spec/no_frames/float32", "openvino", "xpass", "intermittent: D8 ...", defect="D8")
    text, _ = rendered([*RESULTS, intermittent], RUNTIMES)
    rows = re.findall(r"<tr><td>([a-z-]+)</td><td><code>openvino</code></td><td><a [^>]*>(D\d+)</a>", text)
    assert rows == [("xfail", "D1"), ("re-measure", "D4"), ("intermittent", "D8")]


# -- the command line ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("--from-json", "a.json", "--html", "b.html", "--select", "worked"),
        ("--from-json", "a.json", "--html", "b.html", "--runtimes", "reference"),
        ("--from-json", "a.json", "--html", "a.json"),
        ("--json", "a.json", "--html", "a.json"),
        ("--write-corpus", "out", "--html", "b.html"),
    ],
)
def test_options_a_rendering_would_ignore_or_clash_are_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "a.json").write_text("{}")
    result = ctcop_process("conformance", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert not (tmp_path / "b.html").exists()


def test_a_file_that_is_not_a_report_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"schema": "ctcop-conformance-2", "runtimes": "x"}')
    result = ctcop_process("conformance", "--from-json", "a.json", "--html", "b.html", cwd=tmp_path)
    assert result.returncode == 2 and "not a conformance report" in result.stderr, result.stderr


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the reference and a runtime whose description and messages are markup."""
    folder = tmp_path_factory.mktemp("html")
    (folder / "hostile.py").write_text(HOSTILE_MODULE)
    args = ("--runtimes", "reference,hostile", "--runtime-module", "hostile.py:RUNTIME", "--select", SELECTED)
    result = ctcop_process("conformance", *args, "--jobs", "2", "--json", "a.json", "--html", "a.html", cwd=folder)
    assert result.returncode == 1, result.stderr
    return folder


def test_a_runtimes_markup_is_text_and_a_report_renders_again_the_same(hostile_run: Path) -> None:
    text = (hostile_run / "a.html").read_text()
    document = json.loads((hostile_run / "a.json").read_text())
    page = Page(text)
    check_self_contained(page)
    check_matrix(page, document)
    assert HOSTILE_DESCRIPTION in page.content
    assert f"RuntimeError: {HOSTILE_TEXT}" in page.content
    assert "<script" not in text and "<img" not in text
    again = ctcop_process("conformance", "--from-json", "a.json", "--html", "b.html", cwd=hostile_run)
    assert again.returncode == 1, again.stderr
    assert (hostile_run / "b.html").read_text() == text


def browser() -> str:
    """The path of an installed Chromium; a skip where none is, a failure in CI (which installs one)."""
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is not None:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail(f"no headless browser ({', '.join(BROWSERS)}): CI installs one with apt-get install -y chromium")
    pytest.skip(f"no headless browser installed ({', '.join(BROWSERS)}; Debian: apt-get install -y chromium)")


def test_chromium_renders_the_page_and_reads_the_reports_matrix(hostile_run: Path) -> None:
    command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={hostile_run / 'profile'}"]
    url = (hostile_run / "a.html").as_uri()
    shot = hostile_run / "shot.png"
    subprocess.run([*command, f"--screenshot={shot}", "--window-size=1400,1000", url], capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    dom = subprocess.run([*command, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr
    page = Page(dom.stdout)
    check_matrix(page, json.loads((hostile_run / "a.json").read_text()))
    assert HOSTILE_DESCRIPTION in page.content and not any(tag in ("script", "img") for tag, _ in page.elements)


def test_the_runtimes_that_ran_a_sample_are_stated_with_their_counts_and_rule() -> None:
    text, document = rendered(RESULTS, RUNTIMES)
    assert 'id="sampled"' not in text  # every runtime ran every case
    sampled = {"openvino": {"rule": "one <case> per family", "cases": 3, "not_run": 5}}
    page = html.page({**document, "selection": {**document["selection"], "sampled": sampled}}, RESULTS, {})
    assert 'id="sampled"' in page and "<td>5</td>" in page and "one &lt;case&gt; per family" in page
