"""The default run's stated sample for slow runtimes (spec 10).

A runtime whose ``sampled`` attribute is true (the peers whose evaluations cost seconds, and
OpenVINO's native kernel, whose registered crashes each cost a worker) runs, in the default run
(no ``--select``, no ``--runtimes``, no ``--all-cases``), the :data:`RULE` sample of the selected
cases instead of all of them: one case of each case family (:func:`family`: the id without its
element types; the family's case of the types earliest in :data:`ELEMENT_TYPES`), the cases
tagged "sample" (those that alone catch a mutant of the self-check, docs/conformance.md), and, for each
registered defect that lists cases of the runtime, the smallest of them (fewest logits, then id),
so that every registered defect the runtime has stays measured on its smallest case. The sample is drawn
from the whole selection, before ``--shard``, so shards merge into the unsharded report. The
report records the runtimes sampled, the rule and how many cases each ran and left out
(``selection.sampled``: :func:`recorded` reads it); every case a runtime runs is judged as in a run
of every case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..text import one_line
from .case import FLOAT_TYPES
from .classes import elements
from .rows import ROW

if TYPE_CHECKING:
    from ..defects import Defect
    from .case import Case

# The id parts a family leaves out, in the order its representative prefers them: float32, float64,
# the other floats of the corpus, then the index types.
_FIRST = ("float32", "float64")
ELEMENT_TYPES = (*_FIRST, *(kind for kind in FLOAT_TYPES if kind not in _FIRST), "int64", "int32")
RULE = "one case per family (float32 first), the cases tagged sample and the smallest case of each registered defect"
SAMPLE_TAG = "sample"  # a case every sample holds (ctcop.conformance.groups.IN_EVERY_SAMPLE)


def family(case_id: str) -> str:
    """The case family: the id without its element-type parts (``spec/empty_targets`` holds
    ``spec/empty_targets/float16`` ... ``/float64``)."""
    parts = case_id.split("/")
    while len(parts) > 1 and parts[-1] in ELEMENT_TYPES:
        parts.pop()
    return "/".join(parts)


def is_sampled(runtime: Any) -> bool:
    """Whether the default run samples ``runtime`` (its ``sampled`` attribute)."""
    return getattr(runtime, "sampled", False) is True


def _preference(case_id: str) -> tuple[tuple[int, ...], str]:
    kinds = case_id[len(family(case_id)) :].split("/")[1:]
    return tuple(ELEMENT_TYPES.index(kind) for kind in kinds), case_id


def representatives(case_ids: Iterable[str]) -> set[str]:
    """One case id per family: its element types earliest in :data:`ELEMENT_TYPES`, then the id."""
    chosen: dict[str, str] = {}
    for case_id in case_ids:
        name = family(case_id)
        if name not in chosen or _preference(case_id) < _preference(chosen[name]):
            chosen[name] = case_id
    return set(chosen.values())


def smallest_listed(runtime: str, defects: Sequence[Defect], sizes: Mapping[str, int]) -> set[str]:
    """For each defect listing cases of ``runtime`` among ``sizes``' cases, the smallest of them."""
    found = set()
    for defect in defects:
        listed = [case for case in defect.cases.get(runtime, ()) if case in sizes]
        if listed:
            found.add(min(listed, key=lambda case: (sizes[case], case)))
    return found


def samples(cases: Sequence[Case], runtimes: Iterable[str], defects: Sequence[Defect]) -> dict[str, set[str]]:
    """The ids of :data:`RULE`'s sample of ``cases`` for each of ``runtimes``: the representatives of
    the families, the same for every runtime, and each runtime's smallest case of each defect."""
    names = list(runtimes)
    if not names:
        return {}
    sizes = {case.id: elements(case) for case in cases}
    shared = representatives(sizes) | {case.id for case in cases if SAMPLE_TAG in case.tags}
    return {name: shared | smallest_listed(name, defects, sizes) for name in names}


def sample(cases: Sequence[Case], runtime: str, defects: Sequence[Defect]) -> set[str]:
    """The ids of :data:`RULE`'s sample of ``cases`` for ``runtime``."""
    return samples(cases, [runtime], defects)[runtime]


@dataclass(frozen=True)
class Sampled:
    """A runtime's entry of a report's ``selection.sampled``: the rule, the cases it ran and the
    cases it did not run."""

    rule: str
    cases: int
    not_run: int


def _sampled(name: str, part: Any) -> Sampled:
    """Runtime ``name``'s entry of ``selection.sampled`` (:func:`recorded`)."""
    if not ROW.fullmatch(name):
        raise ValueError(f"selection.sampled names {one_line(repr(name), 80)}, which is not a runtime's name")
    entry = part if isinstance(part, dict) else {}
    rule = entry.get("rule")
    counts = [n for n in (entry.get("cases"), entry.get("not_run")) if type(n) is int and n >= 0]
    if not (isinstance(rule, str) and rule.isprintable() and len(counts) == 2):
        raise ValueError(f"selection.sampled.{name} is not {{rule (printable text), cases, not_run (counts)}}")
    return Sampled(rule, *counts)


def recorded(document: Mapping[str, Any]) -> dict[str, Sampled]:
    """The runtimes that ran a sample of the cases and their :class:`Sampled` entries, as the
    report ``document`` records them (``selection.sampled``; none where it is absent or null);
    ValueError, one line, where it is not runtime -> {rule, cases, not_run} (spec 10). A report is
    untrusted input: ``ctcop conformance-merge`` and ``ctcop conformance-diff`` read it through this."""
    selection = document.get("selection")
    if not isinstance(selection, dict):
        raise ValueError("selection is not an object")
    sampled = selection.get("sampled")
    if sampled is None:
        return {}
    if not isinstance(sampled, dict):
        found = type(sampled).__name__
        raise ValueError(f"selection.sampled is a JSON {found}, not runtime -> {{rule, cases, not_run}}")
    return {name: _sampled(name, part) for name, part in sampled.items()}
