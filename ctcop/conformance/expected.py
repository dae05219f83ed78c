"""Expected failures (``ctcop conformance --expected-failures FILE``): known defects that a run
should report without failing.

The file is text or JSON. Text: one entry per line, ``RUNTIME CASE REASON...`` separated by
white space (the reason is the rest of the line), ``#`` starts a comment::

    # runtime    case                       reason
    openvino     spec/empty_targets/*       spec 12.2 D1: the kernel crashes on an empty target
    openvino*    float64                    spec 12.2 D4/D5: the CPU plugin computes float64 in float32

JSON: a list of ``{"runtime": GLOB, "case": PATTERN, "reason": TEXT}`` (or ``{"expected_failures":
[...]}``). ``RUNTIME`` is a glob over runtime names; ``CASE`` a glob over case ids or a tag, as
``--select`` reads it. A listed case that fails is ``xfail``; one that passes is ``xpass``, which
fails the run (:func:`apply`).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .result import Result

FAILURES = ("fail", "error", "crash", "timeout", "nondeterministic")
MAX_BYTES = 1 << 20
_RUNTIME_GLOB = re.compile(r"[a-z0-9._*?\[\]!-]{1,64}")


@dataclass(frozen=True)
class Expected:
    runtime: str
    case: str
    reason: str

    def matches(self, runtime: str, case: str, tags: Sequence[str]) -> bool:
        return fnmatch.fnmatchcase(runtime, self.runtime) and (
            self.case in tags or fnmatch.fnmatchcase(case, self.case)
        )


def _json_entries(document: Any) -> list[Expected]:
    if isinstance(document, dict):
        document = document.get("expected_failures")
    if not isinstance(document, list):
        raise ValueError('JSON must be a list of {runtime, case, reason} (or {"expected_failures": [...]})')
    entries = []
    for number, item in enumerate(document):
        fields = [item.get(k) if isinstance(item, dict) else None for k in ("runtime", "case", "reason")]
        if not all(isinstance(v, str) for v in fields[:2]) or not isinstance(fields[2], (str, type(None))):
            raise ValueError(f"entry {number}: needs string runtime and case (and reason)")
        if not fields[0] or not fields[1]:
            raise ValueError(f"entry {number}: runtime and case must not be empty")
        entries.append(_checked(Expected(fields[0], fields[1], fields[2] or ""), f"entry {number}"))
    return entries


def _checked(entry: Expected, where: str) -> Expected:
    if not _RUNTIME_GLOB.fullmatch(entry.runtime):
        raise ValueError(f"{where}: {entry.runtime!r} is not a runtime name or glob ([a-z0-9._-*?[]])")
    if not entry.case.isprintable() or any(c.isspace() for c in entry.case):
        raise ValueError(f"{where}: {entry.case!r} is not a case glob or tag")
    return entry


def _text_entries(text: str) -> list[Expected]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        parts = content.split(None, 2)
        if len(parts) < 2:
            raise ValueError(f"line {number}: needs RUNTIME CASE [REASON], got {content!r}")
        entries.append(_checked(Expected(parts[0], parts[1], parts[2] if len(parts) == 3 else ""), f"line {number}"))
    return entries


def parse(text: str) -> list[Expected]:
    """The entries of an expected-failures file (ValueError, one line, when it is malformed)."""
    if text.lstrip().startswith(("[", "{")):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not valid JSON: {error}") from None
        except RecursionError:
            raise ValueError("not valid JSON: nested too deeply") from None
        return _json_entries(document)
    return _text_entries(text)


def load(path: str) -> list[Expected]:
    with open(path, encoding="utf-8") as file:
        text = file.read(MAX_BYTES + 1)
    if len(text) > MAX_BYTES:
        raise ValueError(f"over {MAX_BYTES} characters")
    return parse(text)


def apply(result: Result, entries: Sequence[Expected], tags: Sequence[str]) -> Result:
    """``result`` with xfail or xpass for a listed case (the first entry that lists it gives the reason).
    A listed case that fails (fail, error, crash, timeout, nondeterministic) is ``xfail``; one that
    passes is ``xpass``, which fails the run: the entry is stale. Skips stay skips."""
    entry = next((e for e in entries if e.matches(result.runtime, result.case, tags)), None)
    if entry is None:
        return result
    reason = f" ({entry.reason})" if entry.reason else ""
    if result.status in FAILURES:
        return replace(result, status="xfail", message=f"expected failure{reason}: [{result.status}] {result.message}")
    if result.status == "pass":
        return replace(result, status="xpass", message=f"listed as an expected failure{reason} but passes")
    return result
