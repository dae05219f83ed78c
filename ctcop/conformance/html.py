"""The conformance report as one self-contained HTML page: ``ctcop conformance --html PATH`` (spec 10).

The page is rendered from the typed results (:class:`~.result.Result`: statuses, defect ids and
the classes of :mod:`.classes`; a message is shown, never read) and the rest of the report
(:mod:`.report`: selection, settings, runtimes, versions, machine). It holds, in order
(:func:`page`): whether the run passes and its selection and settings; the runtime x case-family
matrix (:func:`matrix`); the registered defects met and the failure classes of the rest; the
results that fail the run; the runtimes that did not run; the registry of defects (spec 10.1); the
library versions and the machine.

Self-contained: inline CSS, no script, no font, image or link outside the page. Every text that
comes from a runtime, a case or a report is escaped (:func:`html.escape`): it is untrusted.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..defects import Defect, registry
from . import classes, known
from .report import accepted, counted, exit_code, summary
from .result import STATUSES, Result
from .sampling import family

if TYPE_CHECKING:
    from .case import Case

WORST_FIRST = ("crash", "timeout", "error", "fail", "nondeterministic", "xpass", "xfail", "skip", "pass")
PROBLEMS_SHOWN = 100  # results failing the run listed per runtime
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
td.cell { font: 12px/1.2 monospace; white-space: nowrap; }
.pass { background: #c8e6c9; } .skip { background: #eeeeee; } .xfail { background: #ffe0b2; }
.xpass { background: #e1bee7; } .nondeterministic { background: #f8bbd0; }
.fail, .error, .timeout { background: #ef9a9a; } .crash { background: #e57373; }
.verdict-fails { color: #b71c1c; } .verdict-passes { color: #1b5e20; }
td code { word-break: break-all; }
"""


def _e(value: object) -> str:
    """``value``'s text, escaped for element content and attribute values."""
    return html.escape(str(value), quote=True)


def _row(cells: Iterable[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{cell}</{tag}>" for cell in cells) + "</tr>"


def _table(head: Sequence[str], rows: Iterable[Iterable[str]]) -> str:
    """A table of escaped ``head`` (none when empty) and of ``rows`` whose cells are HTML already."""
    heading = f"<thead>{_row(map(_e, head), 'th')}</thead>" if head else ""
    return f"<table>{heading}<tbody>{''.join(map(_row, rows))}</tbody></table>"


def _text(value: Any) -> str:
    """A report value as escaped text: a list joined, true and false yes and no, null a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return _e(", ".join(map(str, value)) if isinstance(value, list) else value)


def _pairs(title: str, values: Mapping[str, Any], anchor: str) -> str:
    rows = [[_e(key), _text(value)] for key, value in values.items()]
    return f'<h2 id="{anchor}">{_e(title)}</h2>' + _table([], rows)


def _selection(selection: Mapping[str, Any]) -> str:
    """The selection's pairs, then the runtimes that ran a sample (:mod:`.sampling`): cases run,
    cases not run and the rule, each."""
    shown = _pairs("Selection", {k: v for k, v in selection.items() if k != "sampled"}, "selection")
    sampled = selection.get("sampled") or {}
    if not sampled:
        return shown
    rows = [
        [f"<code>{_e(name)}</code>", _e(part.get("cases")), _e(part.get("not_run")), _e(part.get("rule"))]
        for name, part in sampled.items()
    ]
    table = _table(["runtime", "cases run", "cases not run", "sample"], rows)
    return shown + '<h2 id="sampled">Runtimes that ran a sample of the cases</h2>' + table


def worst(counts: Mapping[str, int]) -> str:
    """The first status of :data:`WORST_FIRST` that ``counts`` holds ("" for none)."""
    return next((status for status in WORST_FIRST if counts.get(status)), "")


def _cell(cell_id: str, counts: Mapping[str, int], data: Mapping[str, str]) -> str:
    status = worst(counts)
    attributes = {"id": cell_id, **data, "data-worst": status, **{f"data-{s}": str(counts[s]) for s in STATUSES}}
    text = "<br>".join(f"{counts[s]} {s}" for s in WORST_FIRST if counts[s])
    joined = " ".join(f'{key}="{_e(value)}"' for key, value in attributes.items())
    return f'<td class="cell {status}" {joined}>{text}</td>'


def matrix(results: Sequence[Result], runtimes: Sequence[str]) -> str:
    """The runtime x case-family table: a row per case family (:func:`family`) and a column per
    runtime that ran; each cell ``<td id="cell:RUNTIME:FAMILY" data-runtime data-family data-worst
    data-STATUS...>`` holds the count of each status of :data:`~.result.STATUSES` (``data-pass``,
    ``data-xfail``, ...) and is coloured by its worst status (:data:`WORST_FIRST`); the row
    ``id="total:RUNTIME"`` cells equal the report's ``summary``."""
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for result in results:
        row = counts.setdefault(family(result.case), {})
        row.setdefault(result.runtime, dict.fromkeys(STATUSES, 0))[result.status] += 1
    empty = dict.fromkeys(STATUSES, 0)
    rows = []
    for name in sorted(counts):
        cells = [
            _cell(
                f"cell:{runtime}:{name}",
                counts[name].get(runtime, empty),
                {"data-runtime": runtime, "data-family": name},
            )
            for runtime in runtimes
        ]
        rows.append(f"<tr><th><code>{_e(name)}</code></th>{''.join(cells)}</tr>")
    totals = summary(results, runtimes)
    total = [_cell(f"total:{r}", totals[r], {"data-runtime": r, "data-family": ""}) for r in runtimes]
    head = _row(["case family", *(f"<code>{_e(r)}</code>" for r in runtimes)], "th")
    return (
        f'<table id="matrix"><thead>{head}</thead><tbody>{"".join(rows)}</tbody>'
        f"<tfoot><tr><th>all</th>{''.join(total)}</tr></tfoot></table>"
    )


def _defect_link(defect_id: str) -> str:
    return f'<a href="#defect-{_e(defect_id)}">{_e(defect_id)}</a>'


def _defects_met(results: Sequence[Result], sizes: Mapping[str, int]) -> str:
    """The registered defects met (xfail), to re-measure and not shown this run (xpass), as
    :func:`.known.group` and :func:`.known.section` give them."""
    known_defects = registry()
    titles = {d.id: d.title for d in known_defects.defects}
    rows = [
        [
            _e(known.section(g, known_defects)),
            f"<code>{_e(g.runtime)}</code>",
            _defect_link(g.defect),
            str(g.count),
            f"<code>{_e(g.smallest)}</code> [{g.elements}]",
            _e(titles.get(g.defect, "not in this ctcop's registry")),
        ]
        for g in known.group(results, sizes)
    ]
    if not rows:
        return "<p>No registered defect met.</p>"
    return _table(["status", "runtime", "defect", "cases", "smallest case [logits]", "departure"], rows)


def _classes(results: Sequence[Result], cases: Mapping[str, Case]) -> str:
    """The failure classes of what no registered defect explains (:func:`.classes.group`)."""
    rows = [
        [
            f"<code>{_e(g.runtime)}</code>",
            _e(g.name),
            str(g.count),
            f"<code>{_e(g.smallest)}</code> [{g.elements}]",
            _e(g.where),
        ]
        for g in classes.group(results, cases)
    ]
    if not rows:
        return "<p>No failure outside the registered defects.</p>"
    return _table(["runtime", "class", "cases", "smallest case [logits]", "where documented"], rows)


def _problems(results: Sequence[Result], runtimes: Sequence[str]) -> str:
    """The results that fail the run (not :func:`.report.accepted`), at most :data:`PROBLEMS_SHOWN` a runtime."""
    rows = []
    for runtime in runtimes:
        failing = [r for r in results if r.runtime == runtime and not accepted(r)]
        rows += [
            [f"<code>{_e(runtime)}</code>", _e(r.status), f"<code>{_e(r.case)}</code>", _e(r.message)]
            for r in failing[:PROBLEMS_SHOWN]
        ]
        if len(failing) > PROBLEMS_SHOWN:
            rows.append([f"<code>{_e(runtime)}</code>", "", "", f"and {len(failing) - PROBLEMS_SHOWN} more"])
    if not rows:
        return "<p>None.</p>"
    return _table(["runtime", "status", "case", "message"], rows)


def _entry(entry: Defect, versions: Mapping[str, Any]) -> str:
    """A registry entry's facts; the library's version the report records beside the one measured."""
    recorded = next((versions[d] for d in entry.library.distributions if d in versions), "not installed")
    deliberate = " (deliberate)" if entry.kind == "deliberate" else ""
    rows = [
        ["departure", _e(entry.title + deliberate)],
        ["spec", _e(entry.spec)],
        ["library", _e(f"{entry.library.name}: measured on {entry.library.measured}, this report's {recorded}")],
        ["runtimes", _text(list(entry.runtimes))],
        ["smallest input", _e(entry.smallest)],
        ["correct value", _e(entry.correct)],
        ["ctcop's answer", _e(entry.ctcop)],
    ]
    return _table([], rows)


def _registry(results: Sequence[Result], versions: Mapping[str, Any]) -> str:
    """The registry's entries (spec 10.1) of the defect ids the results name, one section each."""
    named = sorted({r.defect for r in results if r.defect}, key=lambda d: int(d[1:]))
    entries = {d.id: d for d in registry().defects}
    sections = []
    for defect_id in named:
        entry = entries.get(defect_id)
        body = "<p>Not in this ctcop's registry.</p>" if entry is None else _entry(entry, versions)
        sections.append(f'<section id="defect-{_e(defect_id)}"><h3>{_e(defect_id)}</h3>{body}</section>')
    return "".join(sections) or "<p>The results name no registered defect.</p>"


def _runtimes(entries: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            f"<code>{_e(r['name'])}</code>",
            "yes" if r["available"] else "no",
            _text(r.get("version")),
            _e(r.get("description", "")),
            _text(r.get("reason")),
        ]
        for r in entries
    ]
    return _table(["runtime", "ran", "version", "description", "why not"], rows)


def _head(document: Mapping[str, Any], results: Sequence[Result]) -> str:
    passes = exit_code(results) == 0
    verdict = "passes: nothing but registered defects departs" if passes else "fails: a result departs unexplained"
    complete = (
        "complete" if document.get("complete") else f"incomplete (interrupted by {document.get('interrupted_by')})"
    )
    return (
        f'<h1>CTCLoss-4 conformance</h1><p id="verdict" class="verdict-{"passes" if passes else "fails"}">'
        f"The run {_e(verdict)}; {_e(complete)}; {counted(len(results), 'result')}.</p>"
    )


def page(document: Mapping[str, Any], results: Sequence[Result], cases: Mapping[str, Case]) -> str:
    """The HTML page of the report ``document`` (its ``selection``, ``settings``, ``runtimes``,
    ``versions``, ``machine``, ``complete``, ``interrupted_by``; its rows are ``results``);
    ``cases`` are the corpus's, by id (the sizes and facts of the smallest cases). In order: whether
    the run passes (:func:`.report.exit_code`), its selection (with the runtimes that ran a sample
    of it, :mod:`.sampling`: cases run and not run, the rule) and settings; :func:`matrix`; the
    registered defects met and to re-measure (:func:`.known.group`), each linking to its entry
    (``#defect-D1``) of the registry (spec 10.1) rendered further down, and the failure classes of
    the rest (:func:`.classes.group`) with their smallest cases; the results that fail the run, with
    their messages; the runtimes that did not run and why; the library versions and the machine."""
    ran = [r["name"] for r in document["runtimes"] if r["available"]]
    sizes = {case_id: classes.elements(case) for case_id, case in cases.items()}
    parts = [
        _head(document, results),
        _selection(document["selection"]),
        _pairs("Settings", document["settings"], "settings"),
        '<h2 id="results">Results</h2>',
        matrix(results, ran),
        '<h2 id="defects-met">Registered defects met</h2>',
        _defects_met(results, sizes),
        '<h2 id="classes">Failure classes</h2>',
        _classes(results, cases),
        '<h2 id="problems">Failing the run</h2>',
        _problems(results, ran),
        '<h2 id="runtimes">Runtimes</h2>',
        _runtimes(document["runtimes"]),
        '<h2 id="registry">Registered defects (ctcop/data/defects.json)</h2>',
        _registry(results, document["versions"]),
        _pairs("Versions", document["versions"], "versions"),
        _pairs("Machine", document["machine"], "machine"),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>CTCLoss-4 conformance</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )
