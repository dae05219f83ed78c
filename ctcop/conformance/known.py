"""Known defects applied to conformance results (spec 10): the registry of :mod:`ctcop.defects`.

A failing result is ``xfail`` with the defect's id when the defect lists its case for that
runtime (measured on the registry's versions), or when one of the defect's ``also`` selectors
(tags or case globs, where the defect may show on other CPUs) selects it, and its status is one
the defect was measured with. A listed case that passes is ``xpass`` with a re-measure note: a
registered defect that does not reproduce on the installed version is news to re-measure, not a
failure of the run (:func:`ctcop.conformance.report.accepted`); for a defect measured to vary
from run to run (``nondeterministic`` among its statuses) the note says it did not show this run,
and the report lists it apart: one run that passes is chance, not news. Anything else stays as it
is: an unregistered failure fails the run.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..defects import Defect, Registry, registry, remeasure_note
from .expected import FAILURES
from .result import Result


def _selects(selector: str, case: str, tags: Sequence[str]) -> bool:
    return selector in tags or fnmatch.fnmatchcase(case, selector)


@dataclass(frozen=True)
class KnownDefects:
    """The defects that apply to a run, indexed for lookup by registry key and case; ``keys``
    gives a row's registry keys (:mod:`.rows`; a row not there is its own key)."""

    listed: Mapping[tuple[str, str], Defect]
    scoped: Sequence[Defect]
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, defects: Sequence[Defect], keys: Mapping[str, tuple[str, ...]] | None = None) -> KnownDefects:
        listed: dict[tuple[str, str], Defect] = {}
        for defect in defects:
            for runtime, cases in defect.cases.items():
                for case in cases:
                    listed.setdefault((runtime, case), defect)
        return cls(listed, [d for d in defects if d.also], dict(keys or {}))

    def _listed(self, row: str, case: str) -> Defect | None:
        return next((self.listed[k, case] for k in self.keys.get(row, (row,)) if (k, case) in self.listed), None)

    def claim(self, runtime: str, case: str, tags: Sequence[str], status: str) -> Defect | None:
        """The defect that explains ``status`` of the row ``runtime`` on ``case``, or None."""
        listed = self._listed(runtime, case)
        if listed is not None and status in listed.statuses:
            return listed
        keys = self.keys.get(runtime, (runtime,))
        for defect in self.scoped:
            if (
                status in defect.statuses
                and any(fnmatch.fnmatchcase(key, r) for key in keys for r in defect.runtimes)
                and any(_selects(s, case, tags) for s in defect.also)
            ):
                return defect
        return None

    def apply(self, result: Result, tags: Sequence[str]) -> Result:
        """``result`` with ``xfail`` or ``xpass`` and ``defect`` set where the registry speaks."""
        runtime, case, status = result.runtime, result.case, result.status
        if status in FAILURES:
            defect = self.claim(runtime, case, tags, status)
            if defect is not None:
                return replace(
                    result, status="xfail", defect=defect.id, message=f"{defect.label} [{status}] {result.message}"
                )
        elif status == "pass" and (listed := self.listed.get((self.keys.get(runtime, (runtime,))[0], case))):
            # only the row's own key: a defect it inherits from its device may not show at another
            # precision's bound (spec 10.4), which is no news about the runtime
            return replace(result, status="xpass", defect=listed.id, message=remeasure_note(listed, case))
        return result


def default(keys: Mapping[str, tuple[str, ...]] | None = None) -> KnownDefects:
    """ctcop's registry as a :class:`KnownDefects` for rows of registry ``keys``."""
    return KnownDefects.of(registry().defects, keys)


def process_corrupting(keys: Mapping[str, tuple[str, ...]] | None = None) -> frozenset[tuple[str, str]]:
    """The (row, case) evaluations that ctcop's registry lists under a defect measured both to
    kill the process and to return in another run (``crash`` and ``nondeterministic``): the kernel
    does not always die of what it writes, so the runner ends the worker after each of them
    (:class:`.pool.Settings`). A defect that always kills needs no more than the worker's death.
    ``keys``: the rows' registry keys (a row not there, or none given, is its own key)."""
    corrupting = {
        (runtime, case)
        for defect in registry().defects
        if {"crash", "nondeterministic"} <= set(defect.statuses)
        for runtime, cases in defect.cases.items()
        for case in cases
    }
    by_key: dict[str, list[str]] = {}
    for row, row_keys in (keys or {}).items():
        for key in row_keys:
            by_key.setdefault(key, []).append(row)
    return frozenset((row, case) for key, case in corrupting for row in by_key.get(key, [key]))


@dataclass
class Group:
    runtime: str
    defect: str
    status: str
    count: int
    smallest: str
    elements: int


def group(results: Sequence[Result], elements: Mapping[str, int]) -> list[Group]:
    """The registered defects met (xfail) and not reproduced (xpass), per runtime in the results'
    order, then defect number; ``elements`` gives the logits' size of a case (the smallest shown)."""
    groups: dict[tuple[str, str, str], Group] = {}
    for result in results:
        defect = result.defect
        if not defect or result.status not in ("xfail", "xpass"):
            continue
        size = elements.get(result.case, 0)
        key = (result.runtime, defect, result.status)
        item = groups.setdefault(key, Group(*key, 0, result.case, size))
        item.count += 1
        if (size, result.case) < (item.elements, item.smallest):
            item.smallest, item.elements = result.case, size
    order = {runtime: i for i, runtime in enumerate(dict.fromkeys(r.runtime for r in results))}
    return sorted(groups.values(), key=lambda g: (g.status, order[g.runtime], int(g.defect[1:])))


def section(group: Group, known: Registry) -> str:
    """Where a group is listed: ``xfail``, ``re-measure``, or ``intermittent`` for the xpass of a
    defect that varies from run to run (:attr:`Defect.intermittent`: not news on its own)."""
    if group.status == "xfail":
        return "xfail"
    try:
        return "intermittent" if known[group.defect].intermittent else "re-measure"
    except KeyError:  # a merged report from another version of ctcop
        return "re-measure"


SECTIONS = (
    ("xfail", "Known defects (xfail; runtime: id, cases, smallest case [logits], departure):"),
    ("re-measure", "Re-measure (registered defects that did not reproduce on a listed case):"),
    ("intermittent", "Not shown this run (registered defects that vary from run to run):"),
)


def format_groups(groups: Sequence[Group]) -> list[str]:
    """The known-defect lines of the report: what reproduced, what to re-measure, and what did not
    show this run of a defect that varies from run to run."""
    lines: list[str] = []
    known = registry()
    placed = [(section(g, known), g) for g in groups]
    for name, heading in SECTIONS:
        chosen = [g for where, g in placed if where == name]
        if not chosen:
            continue
        width = max(len(f"{g.runtime}: {g.defect}") for g in chosen)
        lines += ["", heading]
        for g in chosen:
            label = f"{g.runtime}: {g.defect}"
            try:
                defect = known[g.defect]
            except KeyError:  # a merged report from another version of ctcop
                text = "not in this ctcop's registry"
            else:
                installed = defect.library.installed() or "?"
                where = f"{defect.library.name} {installed}, measured on {defect.library.measured}"
                text = defect.title if name == "xfail" else where
            lines.append(f"  {label:<{width}}  {g.count:>4}  {g.smallest} [{g.elements}]  {text}")
    return lines
