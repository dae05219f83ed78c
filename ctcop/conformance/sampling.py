"""The default run's stated sample for slow runtimes (spec 10).

A runtime whose ``sampled`` attribute is true (the peers whose evaluations cost seconds, and
OpenVINO's native kernel, whose registered crashes each cost a worker) runs, in the default run
(no ``--select``, no ``--runtimes``, no ``--all-cases``), the :data:`RULE` sample of the selected
cases instead of all of them: one case of each case family (:func:`family`: the id without its
element types; the family's case of the first type of :data:`PREFERRED`), and, for each registered
defect that lists cases of the runtime, the smallest of them (fewest logits, then id), so that
every registered defect the runtime has stays measured on its smallest case. The sample is drawn
from the whole selection, before ``--shard``, so shards merge into the unsharded report. The
report records the runtimes sampled, the rule and how many cases each ran and left out
(``selection.sampled``); every case a runtime runs is judged as in a run of every case.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .case import FLOAT_TYPES
from .classes import elements

if TYPE_CHECKING:
    from ..defects import Defect
    from .case import Case

ELEMENT_TYPES = (*FLOAT_TYPES, "int32", "int64")  # the id parts a family leaves out
PREFERRED = ("float32", "float64", "float16", "bfloat16", "int64", "int32")  # a family's representative
RULE = "one case per family (float32 first) and the smallest case of each registered defect"


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
    return tuple(PREFERRED.index(kind) for kind in kinds), case_id


def representatives(case_ids: Iterable[str]) -> set[str]:
    """One case id per family: its element types first in :data:`PREFERRED`, then the id."""
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


def sample(cases: Sequence[Case], runtime: str, defects: Sequence[Defect]) -> set[str]:
    """The ids of :data:`RULE`'s sample of ``cases`` for ``runtime``."""
    sizes = {case.id: elements(case) for case in cases}
    return representatives(sizes) | smallest_listed(runtime, defects, sizes)
