"""Failure classes: the table ``ctcop conformance`` prints after its counts.

Every result that is not a pass, a skip, an expected failure or a registered defect
(:mod:`.known`) is put into the first class of :data:`CLASSES` whose test it meets, from its
status, its message and facts of its case (element type, empty targets, logits beyond the
exponent's range, blank position). A class names the spec section it departs from, or the
registered upstream defect whose message it shows (an export's workaround that stopped working);
the failure itself is not a registered one. The table gives per runtime and class the number of
cases and the smallest case (fewest logits).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..defects import defect

if TYPE_CHECKING:
    from .corpus import CorpusCase

UNCLASSIFIED = ("pass", "skip", "xfail")
_SAMPLE = re.compile(r"sample \d+: got (\S+), expected (\S+)")
_EXCEPTION = re.compile(r"^(?:rejected: )?([A-Za-z_][\w.]*)(?::|$)")


@dataclass(frozen=True)
class Facts:
    """What the classes look at in a case (computed once per failing case)."""

    elements: int
    dtype: str
    expect: str
    empty_target: bool = False
    large_logits: bool = False
    blank_not_last: bool = False
    no_frames: bool = False
    infeasible: bool = False
    processed: bool = False  # preprocess_collapse_repeated or unique


def _logits_shape(case: CorpusCase) -> list[int]:
    generator = case.generator
    if generator is not None:
        return [int(generator[k]) for k in ("T", "N", "C")]
    entries = case.manifest.get("inputs") or [{"shape": []}]
    return [int(s) for s in entries[0]["shape"]]


def _arrays(case: CorpusCase) -> tuple[bool, bool, bool, bool]:
    """An empty target, a finite logit of magnitude at least where float32's exp overflows (the
    registry's evidence for D3), blank_index != C-1, a sample with no frames."""
    x = case.inputs
    if case.form == "spec":
        logits, labels = x["inputs"], np.asarray(x["labels"])
        empty = labels.ndim == 2 and bool(((labels == -1).all(axis=1)).any())
        no_frames = bool((np.asarray(x["sequence_mask"]).sum(axis=0) == 0).any())
        blank_moved = False
    else:
        logits, lengths = x["logits"], np.asarray(x["label_length"])
        empty = bool((lengths == 0).any())
        no_frames = bool((np.asarray(x["logit_length"]) == 0).any())
        blank = x.get("blank_index")
        blank_moved = blank is not None and int(np.asarray(blank).ravel()[0]) != logits.shape[-1] - 1
    values = np.asarray(logits, dtype=np.float64)
    finite = values[np.isfinite(values)]
    large = bool(finite.size and np.abs(finite).max() >= defect("D3").evidence["logit_at_least"])
    return empty, large, blank_moved, no_frames


def facts(case: CorpusCase) -> Facts:
    shape = _logits_shape(case)
    elements = int(np.prod(shape)) if shape else 0
    dtype, infeasible = case.tolerance or "?", "infeasible" in case.tags
    processed = bool(case.attributes.get("preprocess_collapse_repeated") or case.attributes.get("unique"))
    if case.generator is not None:
        return Facts(elements, dtype, case.expect, infeasible=infeasible, processed=processed)
    try:
        empty, large, blank_moved, no_frames = _arrays(case)
    except Exception:  # an invalid case's arrays may not even have the right ranks
        empty = large = blank_moved = no_frames = False
    return Facts(elements, dtype, case.expect, empty, large, blank_moved, no_frames, infeasible, processed)


def _got_expected(message: str) -> tuple[float, float] | None:
    found = _SAMPLE.search(message)
    if found is None:
        return None
    try:
        return float(found.group(1)), float(found.group(2))
    except ValueError:
        return None


def _saturated(r: Mapping[str, Any], f: Facts) -> bool:
    pair = _got_expected(r["message"])
    return pair is not None and pair[1] == np.inf and np.isfinite(pair[0]) and abs(pair[0]) >= 3e38


def _pair(test: Callable[[float, float], bool]) -> Callable[[Mapping[str, Any], Facts], bool]:
    def check(r: Mapping[str, Any], f: Facts) -> bool:
        pair = _got_expected(r["message"])
        return r["status"] == "fail" and pair is not None and test(*pair)

    return check


def _in_message(*texts: str) -> Callable[[Mapping[str, Any], Facts], bool]:
    return lambda r, f: any(text in r["message"] for text in texts)


def _status(status: str) -> Callable[[Mapping[str, Any], Facts], bool]:
    return lambda r, f: r["status"] == status


def _float64_in_float32(r: Mapping[str, Any], f: Facts) -> bool:
    """The first sample off is finite and off by float32's rounding (relative 1e-9 to 1e-3)."""
    pair = _got_expected(r["message"])
    if r["status"] != "fail" or f.dtype != "float64" or pair is None or not np.isfinite(pair).all():
        return False
    got, wanted = pair
    return abs(got - wanted) <= 1e-3 * max(abs(wanted), 1e-30)


def _length_error(r: Mapping[str, Any]) -> bool:
    words = ("label len", "label length", "longer", "too long", "not enough time")
    return r["status"] == "error" and any(word in r["message"].lower() for word in words)


@dataclass(frozen=True)
class Class:
    name: str
    where: str
    test: Callable[[Mapping[str, Any], Facts], bool]


CLASSES: tuple[Class, ...] = (
    Class("xpass: passes though listed as an expected failure", "", _status("xpass")),
    Class("nondeterministic: two runs differ", "", _status("nondeterministic")),
    Class("timeout", "", _status("timeout")),
    Class("crash on an empty target", "spec 4.4", lambda r, f: r["status"] == "crash" and f.empty_target),
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
    Class("GatherElements over more than 64 classes", "D14 (onnx.reference)", _in_message("at most 64 array")),
    Class("Scan over zero frames", "D13 (onnxruntime)", _in_message("dim0_offset")),
    Class("buffer reuse planned from declared dims", "D16 (onnxruntime)", _in_message("re-use buffer")),
    Class("accepts invalid input", "spec 3.1/3.3, 7.1/7.2", _in_message("accepted invalid input")),
    Class("gradient mismatch", "spec 5", lambda r, f: r["status"] == "fail" and r["message"].startswith("gradient")),
    Class(
        "+inf or NaN at large logits (no max subtracted)",
        "spec 4.2",
        lambda r, f: f.large_logits and _pair(lambda g, e: not abs(g) < 3e38 and np.isfinite(e))(r, f),
    ),
    Class("+inf saturated to a large finite value", "spec 6", lambda r, f: f.dtype == "float64" and _saturated(r, f)),
    Class("float64 computed in float32", "spec 6", _float64_in_float32),
    Class("blank_index != C-1", "spec 7", lambda r, f: f.blank_not_last and r["status"] in ("fail", "error")),
    Class(
        "wrong loss for a sample with no frames", "spec 3.2, 4.4", lambda r, f: r["status"] == "fail" and f.no_frames
    ),
    Class("wrong loss with collapse or unique", "spec 3.4, 7.3", lambda r, f: r["status"] == "fail" and f.processed),
    Class("+inf expected, finite got", "spec 4.4", _pair(lambda g, e: e == np.inf and np.isfinite(g))),
    Class("NaN expected, a number got", "spec 4.4", _pair(lambda g, e: bool(np.isnan(e)) and not np.isnan(g))),
    Class("NaN where a number is expected", "", _pair(lambda g, e: bool(np.isnan(g)) and not np.isnan(e))),
    Class("+inf where a finite loss is expected", "", _pair(lambda g, e: g == np.inf and np.isfinite(e))),
    Class("outside the tolerance", "spec 10", _status("fail")),
    Class("raises on valid input", "spec 6", lambda r, f: r["status"] == "error" and f.expect == "value"),
    Class("error", "", _status("error")),
)


def classify(result: Mapping[str, Any], case_facts: Facts) -> tuple[str, str]:
    """(class name, where documented) of a failing result."""
    for entry in CLASSES:
        if entry.test(result, case_facts):
            name = entry.name
            if name in ("crash", "crash on an empty target"):
                detail = re.search(r"\((killed by [A-Z0-9 ]+|exited with code -?\d+)\)", result["message"])
                name += f" ({detail.group(1)})" if detail else ""
            if name in ("error", "raises on valid input"):
                exception = _EXCEPTION.match(result["message"])
                name += f": {exception.group(1)}" if exception else ""
            return name, entry.where
    return result["status"], ""


@dataclass
class Group:
    runtime: str
    name: str
    where: str
    count: int
    smallest: str
    elements: int


def group(results: Sequence[Mapping[str, Any]], cases: Mapping[str, CorpusCase]) -> list[Group]:
    """The classes met, per runtime in the results' order, most cases first."""
    known: dict[str, Facts] = {}
    groups: dict[tuple[str, str], Group] = {}
    for result in results:
        if result["status"] in UNCLASSIFIED or result.get("defect"):
            continue
        case = cases.get(result["case"])
        if result["case"] not in known:
            known[result["case"]] = facts(case) if case is not None else Facts(0, "?", "value")
        f = known[result["case"]]
        name, where = classify(result, f)
        item = groups.setdefault(
            (result["runtime"], name), Group(result["runtime"], name, where, 0, result["case"], f.elements)
        )
        item.count += 1
        if (f.elements, result["case"]) < (item.elements, item.smallest):
            item.smallest, item.elements = result["case"], f.elements
    order = {runtime: i for i, runtime in enumerate(dict.fromkeys(r["runtime"] for r in results))}
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
