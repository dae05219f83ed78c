"""The conformance results as JUnit XML (``--junit PATH``), the form CI systems read.

``<testsuites name="ctcop conformance">`` holds one ``<testsuite>`` per runtime (name = the
runtime) and in it one ``<testcase classname="ctcop.conformance.RUNTIME" name="CASE ID">`` per
case: ``fail``, ``xpass`` (of the user's expected failures) and ``nondeterministic`` carry a
``<failure type=STATUS>``; ``error``, ``crash`` and ``timeout`` an ``<error type=STATUS>``; ``skip``
and ``xfail`` a ``<skipped type=STATUS>`` (as pytest writes an xfail), and so does a registered
defect's ``xpass`` (re-measure, not a failure); a pass nothing. ``message`` holds the result's message.
``time`` is the seconds the case's two evaluations took (a suite's: the sum of its cases'); a
result that does not know it (``--from-json``: the JSON report does not record times) has none.
A runtime that is not available is a suite with one skipped testcase saying why.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from .result import Result

FAILURE = ("fail", "xpass", "nondeterministic")
ERROR = ("error", "crash", "timeout")
SKIPPED = ("skip", "xfail")


def _clean(text: str) -> str:
    """Text XML 1.0 can hold (control characters other than tab and newline removed)."""
    return "".join(c for c in text if c in "\t\n" or (ord(c) >= 32 and c not in "\ufffe\uffff"))


def _testcase(suite: ET.Element, runtime: str, result: Result) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"ctcop.conformance.{runtime}", name=result.case)
    if result.seconds is not None:
        case.set("time", f"{result.seconds:.3f}")
    status, message = result.status, _clean(result.message)
    if status == "xpass" and result.defect:
        ET.SubElement(case, "skipped", type=status, message=message[:1000] or status)
        return
    tag = "failure" if status in FAILURE else "error" if status in ERROR else "skipped" if status in SKIPPED else None
    if tag is not None:
        element = ET.SubElement(case, tag, type=status, message=message[:1000] or status)
        if tag != "skipped":
            element.text = message


def document(runtimes: Sequence[Mapping[str, Any]], results: Sequence[Result]) -> str:
    """The XML text for ``runtimes`` (``{"name", "available", "reason"}``) and ``results``."""
    root = ET.Element("testsuites", name="ctcop conformance")
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for runtime in runtimes:
        name = runtime["name"]
        mine = [r for r in results if r.runtime == name]
        suite = ET.SubElement(root, "testsuite", name=name)
        if not runtime["available"] and not mine:
            mine = [Result("available", name, "skip", f"not installed: {runtime['reason']}")]
        for result in mine:
            _testcase(suite, name, result)
        counts = {
            "tests": len(mine),
            "failures": sum(r.status in FAILURE and not r.defect for r in mine),
            "errors": sum(r.status in ERROR for r in mine),
            "skipped": sum(r.status in SKIPPED or bool(r.defect) for r in mine),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        times = [r.seconds for r in mine if r.seconds is not None]
        if times:
            suite.set("time", f"{sum(times):.3f}")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
