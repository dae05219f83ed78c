"""Outcomes of the conformance suite per runtime, and the table ``ctcop conformance`` prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

STATUSES = ("pass", "fail", "error", "crash")


@dataclass
class RuntimeReport:
    """Outcome of one runtime over the corpus: case name -> {"status", "detail"}."""

    runtime: str
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes.values() if o["status"] == status)

    def problems(self) -> Iterator[tuple[str, dict[str, str]]]:
        return ((name, o) for name, o in self.outcomes.items() if o["status"] != "pass")


def format_report(reports: list[RuntimeReport], total: int, details: int = 5) -> str:
    """A table of counts per runtime, then the first ``details`` problems of each runtime."""
    lines = [f"CTCLoss-4 conformance: {total} cases (worked examples, edge cases, random; float32 and float64)", ""]
    widths = (6, 6, 7, 7)
    lines.append(f"{'runtime':<18}" + "".join(f"{s:>{w}}" for s, w in zip(STATUSES, widths, strict=True)))
    for report in reports:
        counts = [report.count(s) for s in STATUSES]
        lines.append(f"{report.runtime:<18}" + "".join(f"{c:>{w}}" for c, w in zip(counts, widths, strict=True)))
    for report in reports:
        problems = list(report.problems())
        if problems and details > 0:
            lines += ["", f"{report.runtime}: {len(problems)} problem(s), first {min(details, len(problems))}:"]
            lines += [f"  [{o['status']}] {name}: {o['detail']}" for name, o in problems[:details]]
    return "\n".join(lines)


def document(reports: list[RuntimeReport], chosen: list[str], total: int, interrupted_by: str | None) -> str:
    """The ``--json`` document: ``{"complete", "interrupted_by", "cases", "chosen", "runtimes":
    {runtime: {case: {"status", "detail"}}}}``. An interrupted run (``interrupted_by`` a signal
    name) holds what finished: the runtimes begun, each with the cases that finished."""
    body = {
        "complete": interrupted_by is None,
        "interrupted_by": interrupted_by,
        "cases": total,
        "chosen": chosen,
        "runtimes": {report.runtime: report.outcomes for report in reports},
    }
    return json.dumps(body, indent=1)
