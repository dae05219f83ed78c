"""What a self-check run measured: which cases catch each mutant, and whether the plain
implementation passes every case; rendered as the score and as the coverage map of
docs/conformance.md.

A mutant is caught when at least one case gives it a ``fail``, an ``error``, a ``crash``, a
``timeout`` or a ``nondeterministic`` result. The plain implementation must pass every case (or skip
none: it implements both forms).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..result import Result
from ..sampling import family
from .mutants import MUTANTS

CAUGHT = ("fail", "error", "crash", "timeout", "nondeterministic")
MODULE = "ctcop.conformance.selfcheck:RUNTIMES"
PLAIN = "plain"
SHOWN = 4  # catching case families named per mutant in the map


def mutant_name(bug: str) -> str:
    return f"mutant-{bug}"


def names() -> list[str]:
    """The runtimes of a self-check run: the plain implementation, then every mutant."""
    return [PLAIN, *(mutant_name(bug) for bug in MUTANTS)]


@dataclass(frozen=True)
class Score:
    """``catching`` maps each mutant to the ids of the cases that catch it; ``plain_departures``
    lists the cases the plain implementation did not pass; ``cases`` is how many cases ran."""

    catching: dict[str, list[str]]
    plain_departures: list[str]
    cases: int

    @property
    def missed(self) -> list[str]:
        return [bug for bug, ids in self.catching.items() if not ids]

    @property
    def ok(self) -> bool:
        return not self.missed and not self.plain_departures


def score(results: Sequence[Result]) -> Score:
    """The score of a run of :data:`MODULE`'s runtimes."""
    catching: dict[str, list[str]] = {bug: [] for bug in MUTANTS}
    by_name = {mutant_name(bug): bug for bug in MUTANTS}
    departures, cases = [], set()
    for result in results:
        cases.add(result.case)
        if result.runtime == PLAIN and result.status != "pass":
            departures.append(f"{result.case} ({result.status})")
        elif result.runtime in by_name and result.status in CAUGHT:
            catching[by_name[result.runtime]].append(result.case)
    return Score({bug: sorted(ids) for bug, ids in catching.items()}, sorted(departures), len(cases))


def summary(found: Score) -> str:
    """The score in a few lines: counts, then each mutant missed and each case the plain one failed."""
    caught = len(MUTANTS) - len(found.missed)
    passed = found.cases - len(found.plain_departures)
    lines = [
        f"self-check: {caught} of {len(MUTANTS)} mutants caught by the corpus; "
        f"the plain implementation passes {passed} of {found.cases} cases"
    ]
    lines += [f"  missed: {bug} (rule {MUTANTS[bug].rule}: {MUTANTS[bug].what})" for bug in found.missed]
    lines += [f"  plain departs: {case}" for case in found.plain_departures]
    return "\n".join(lines)


def _section_key(rule: str) -> tuple[int, ...]:
    first = rule.split(",")[0].strip()
    return tuple(int(part) for part in first.split("."))


def coverage_map(found: Score) -> str:
    """The markdown table of docs/conformance.md: each mutant under its rule, with the number of
    cases that catch it and the first families among them."""
    rows = ["| rule | mutant | what it breaks | cases that catch it |", "|---|---|---|---|"]
    for bug, mutant in sorted(MUTANTS.items(), key=lambda item: (_section_key(item[1].rule), item[0])):
        ids = found.catching[bug]
        families = list(dict.fromkeys(family(case) for case in ids))
        named = ", ".join(f"`{name}`" for name in families[:SHOWN]) + (", ..." if len(families) > SHOWN else "")
        caught = f"{len(ids)}: {named or 'none'}"
        if mutant.varies:  # its catching cases change from run to run: only whether any does is stable
            caught = "some, which vary from run to run" if ids else "none"
        seen = f" ({mutant.seen})" if mutant.seen else ""
        rows.append(f"| {mutant.rule} | `{bug}` | {mutant.what}{seen} | {caught} |")
    return "\n".join(rows)


_BLOCK = re.compile(r"(<!-- self-check -->\n).*?(<!-- /self-check -->)", re.S)


def render_block(text: str, found: Score) -> str:
    """``text`` with its ``<!-- self-check -->`` ... ``<!-- /self-check -->`` block holding the
    coverage map of ``found`` (ValueError when it has no such block)."""
    if not _BLOCK.search(text):
        raise ValueError("no <!-- self-check --> ... <!-- /self-check --> block")
    return _BLOCK.sub(lambda match: f"{match.group(1)}{coverage_map(found)}\n{match.group(2)}", text)
