"""Failure classes: the table ``ctcop conformance`` prints after its counts.

Every result that is not a pass, a skip, an expected failure or a registered defect
(:mod:`.known`) is put into the first class of :data:`CLASSES` whose test it meets, from the
fields of its :class:`~.result.Result` (its status, its :class:`~ctcop.tolerance.Mismatch`, what
the runtime raised, how the worker died; never its message) and facts of its case (element type,
tags, attributes, and what :mod:`ctcop.defects.predicates` reads in its arrays). Where a class is the
symptom of a registered defect (an empty target, D1; logits beyond the exponent's range, D3;
float64 computed in float32, D4; +inf saturated, D5) it asks that defect's predicate. A class
names the spec section it departs from, or the registered upstream defect whose message it shows
(an export's workaround that stopped working); the failure itself is not a registered one. The table gives per
runtime and class the number of cases and the smallest case (fewest logits).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..defects import predicates
from .result import Result

if TYPE_CHECKING:
    from .case import Case

UNCLASSIFIED = ("pass", "skip", "xfail")


@dataclass(frozen=True)
class Facts:
    """What the classes look at in a case (computed once per failing case): its size, element
    type and expectation, its tags and attributes, and the facts of its arrays that
    :mod:`ctcop.defects.predicates` reads (None for a generated case or arrays of the wrong ranks)."""

    elements: int
    dtype: str
    expect: str
    infeasible: bool = False
    processed: bool = False  # preprocess_collapse_repeated or unique
    inputs: predicates.Inputs | None = None

    def shows(self, predicate: predicates.Predicate, failure: predicates.Failure) -> bool:
        """Whether a registered defect's ``predicate`` holds on the case's arrays for ``failure``."""
        return self.inputs is not None and predicate(self.inputs, failure) is not None


def _logits_shape(case: Case) -> list[int]:
    generator = case.generator
    if generator is not None:
        return [int(generator[k]) for k in ("T", "N", "C")]
    entries = case.declared() or [{"shape": []}]
    return [int(s) for s in entries[0]["shape"]]


def elements(case: Case) -> int:
    """The number of logits of ``case`` (from its manifest or recipe: nothing is read)."""
    shape = _logits_shape(case)
    return int(np.prod(shape)) if shape else 0


def facts(case: Case) -> Facts:
    dtype, infeasible = case.tolerance or "?", "infeasible" in case.tags
    processed = bool(case.attributes.get("preprocess_collapse_repeated") or case.attributes.get("unique"))
    inputs = None
    if case.generator is None:
        try:
            inputs = predicates.read(case.inputs, case.attributes, case.tolerance)
        except (ValueError, IndexError, KeyError):  # an invalid case's arrays may not even have the right ranks
            inputs = None
    return Facts(elements(case), dtype, case.expect, infeasible, processed, inputs)


Test = Callable[[Result, Facts], bool]


def _loss_pair(r: Result) -> tuple[float, float] | None:
    """(got, expected) of the first sample whose loss is off (a ``"loss"`` mismatch), or None."""
    found = r.mismatch
    return (found.got, found.expected) if found is not None and found.kind == "loss" else None


def _loss_shows(predicate: predicates.Predicate) -> Test:
    """A loss off (a ``"loss"`` mismatch) as the registered defect of ``predicate`` makes it."""
    return lambda r, f: (
        r.status == "fail" and _loss_pair(r) is not None and f.shows(predicate, predicates.Failure("fail", r.mismatch))
    )


def _pair(test: Callable[[float, float], bool]) -> Test:
    def check(r: Result, f: Facts) -> bool:
        pair = _loss_pair(r)
        return r.status == "fail" and pair is not None and test(*pair)

    return check


def _mismatch(*kinds: str) -> Test:
    return lambda r, f: r.status == "fail" and r.mismatch is not None and r.mismatch.kind in kinds


def _raised_saying(*texts: str) -> Test:
    """The runtime raised an exception whose own message holds one of ``texts`` (an upstream
    library's words: ctcop's messages are never read)."""
    return lambda r, f: r.raised is not None and any(text in r.raised.text for text in texts)


def _status(status: str) -> Test:
    return lambda r, f: r.status == status


def _length_error(r: Result) -> bool:
    words = ("label len", "label length", "longer", "too long", "not enough time")
    return r.status == "error" and r.raised is not None and any(word in r.raised.text.lower() for word in words)


@dataclass(frozen=True)
class Class:
    name: str
    where: str
    test: Test


CLASSES: tuple[Class, ...] = (
    Class("xpass: passes though listed as an expected failure", "", _status("xpass")),
    Class("nondeterministic: two runs differ", "", _status("nondeterministic")),
    Class("timeout", "", _status("timeout")),
    Class(
        "crash on an empty target",
        "spec 4.4",
        lambda r, f: r.status == "crash" and f.shows(predicates.empty_target, predicates.Failure("crash")),
    ),
    Class("crash", "", _status("crash")),
    Class(
        "raises on a target longer than its frames (+inf expected)",
        "spec 4.4",
        lambda r, f: f.infeasible and _length_error(r),
    ),
    Class(
        "target length checked before collapse/unique",
        "spec 3.4, 7.3",
        lambda r, f: f.processed and _length_error(r),
    ),
    Class("GatherElements over more than 64 classes", "D14 (onnx.reference)", _raised_saying("at most 64 array")),
    Class("Scan over zero frames", "D13 (onnxruntime)", _raised_saying("dim0_offset")),
    Class("buffer reuse planned from declared dims", "D16 (onnxruntime)", _raised_saying("re-use buffer")),
    Class("accepts invalid input", "spec 3.1/3.3, 7.1/7.2", _mismatch("accepted-invalid-input")),
    Class("gradient mismatch", "spec 5", _mismatch("gradient", "gradient-shape")),
    Class("+inf or NaN at large logits (no max subtracted)", "spec 4.2", _loss_shows(predicates.exponent_out_of_range)),
    Class("+inf saturated to a large finite value", "spec 6", _loss_shows(predicates.saturated_infinity)),
    Class("float64 computed in float32", "spec 6", _loss_shows(predicates.float64_in_float32)),
    Class(
        "blank_index != C-1",
        "spec 7",
        lambda r, f: r.status in ("fail", "error") and f.inputs is not None and f.inputs.blank_moved,
    ),
    Class(
        "wrong loss for a sample with no frames",
        "spec 3.2, 4.4",
        lambda r, f: r.status == "fail" and f.inputs is not None and bool((f.inputs.frames == 0).any()),
    ),
    Class("wrong loss with collapse or unique", "spec 3.4, 7.3", lambda r, f: r.status == "fail" and f.processed),
    Class("+inf expected, finite got", "spec 4.4", _pair(lambda g, e: e == np.inf and np.isfinite(g))),
    Class("NaN expected, a number got", "spec 4.4", _pair(lambda g, e: bool(np.isnan(e)) and not np.isnan(g))),
    Class("NaN where a number is expected", "", _pair(lambda g, e: bool(np.isnan(g)) and not np.isnan(e))),
    Class("+inf where a finite loss is expected", "", _pair(lambda g, e: g == np.inf and np.isfinite(e))),
    Class("outside the tolerance", "spec 10", _status("fail")),
    Class("raises on valid input", "spec 6", lambda r, f: r.status == "error" and f.expect == "value"),
    Class("error", "", _status("error")),
)


def classify(result: Result, case_facts: Facts) -> tuple[str, str]:
    """(class name, where documented) of a failing result: a crash names how the worker died, an
    error the type of what the runtime raised."""
    for entry in CLASSES:
        if entry.test(result, case_facts):
            name = entry.name
            if name in ("crash", "crash on an empty target") and result.death:
                name += f" ({result.death})"
            if name in ("error", "raises on valid input") and result.raised is not None:
                name += f": {result.raised.type}"
            return name, entry.where
    return result.status, ""


@dataclass
class Group:
    runtime: str
    name: str
    where: str
    count: int
    smallest: str
    elements: int


def group(results: Sequence[Result], cases: Mapping[str, Case]) -> list[Group]:
    """The classes met, per runtime in the results' order, most cases first."""
    known: dict[str, Facts] = {}
    groups: dict[tuple[str, str], Group] = {}
    for result in results:
        if result.status in UNCLASSIFIED or result.defect:
            continue
        case = cases.get(result.case)
        if result.case not in known:
            known[result.case] = facts(case) if case is not None else Facts(0, "?", "value")
        f = known[result.case]
        name, where = classify(result, f)
        item = groups.setdefault((result.runtime, name), Group(result.runtime, name, where, 0, result.case, f.elements))
        item.count += 1
        if (f.elements, result.case) < (item.elements, item.smallest):
            item.smallest, item.elements = result.case, f.elements
    order = {runtime: i for i, runtime in enumerate(dict.fromkeys(r.runtime for r in results))}
    return sorted(groups.values(), key=lambda g: (order[g.runtime], -g.count, g.name))


def format_classes(groups: Sequence[Group]) -> list[str]:
    if not groups:
        return []
    width = max(len(f"{g.runtime}: {g.name}") for g in groups)
    lines = ["", "Failure classes (runtime: class, cases, smallest case [logits], where documented):"]
    for g in groups:
        label = f"{g.runtime}: {g.name}"
        lines.append(f"  {label:<{width}}  {g.count:>4}  {g.smallest} [{g.elements}]  {g.where}".rstrip())
    return lines
