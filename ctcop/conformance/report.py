"""The conformance report: the table ``ctcop conformance`` prints, its ``--json`` document
(schema :data:`SCHEMA`, :func:`document`), the environment it records, the merge of shard reports
and the progress line.

A row is a :class:`~.result.Result` (its fields of :data:`~.result.REPORTED`; the reader of
``ctcop conformance-merge`` makes Results of them again). +inf, -inf and NaN are the strings
"inf", "-inf", "nan". Results are in runtime order, then case id; an interrupted run holds the
cases whose two evaluations finished. A result fails the run unless :func:`accepted`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from .result import REPORTED, STATUSES, Result, from_dict, to_dict
from .sampling import recorded
from .shard import MergeError, check

SCHEMA = "ctcop-conformance-2"
ACCEPTED = ("pass", "skip", "xfail")
HEADINGS = {"nondeterministic": "nondet", "timeout": "timeout"}
LIBRARIES = ("ctcop", "numpy", "onnx", "onnxruntime", "openvino", "ml_dtypes")
FRAMEWORKS = ("torch", "tensorflow", "tensorflow-cpu", "tf-keras", "jax", "jaxlib", "optax", "flax")
ISA = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
    "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "neon", "asimd", "sve",
)  # fmt: skip


# -- environment ---------------------------------------------------------------------------------


def versions(runtimes: Sequence[Any] = ()) -> dict[str, str]:
    """Versions of ctcop's libraries, the peer frameworks and the distributions that provide the
    modules a runtime names in a ``modules`` attribute, where installed."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    names = list(LIBRARIES + FRAMEWORKS)
    modules = {m.split(".")[0] for r in runtimes for m in getattr(r, "modules", ()) or ()}
    if modules:
        providers = packages_distributions()
        names += [d for m in sorted(modules) for d in providers.get(m, [])]
    found: dict[str, str] = {}
    for name in names:
        canonical = re.sub(r"[-_.]+", "-", name).lower()
        if canonical in found:
            continue
        try:
            found[canonical] = version(name)
        except PackageNotFoundError:
            continue
    return found


def machine() -> dict[str, Any]:
    """The CPU's model name, the instruction-set flags of :data:`ISA` it has, and its cores."""
    cpu, flags = platform.processor() or platform.machine(), set[str]()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and cpu in ("", platform.machine(), platform.processor()):
                    cpu = value.strip()
                elif key.strip() in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"cpu": cpu, "isa": [flag for flag in ISA if flag in flags], "cores": os.cpu_count() or 1}


# -- the document --------------------------------------------------------------------------------


def summary(results: Sequence[Result], runtimes: Sequence[str]) -> dict[str, dict[str, int]]:
    counts = {name: dict.fromkeys(STATUSES, 0) for name in runtimes}
    for result in results:
        counts.setdefault(result.runtime, dict.fromkeys(STATUSES, 0))[result.status] += 1
    return counts


def dumps(body: Mapping[str, Any]) -> str:
    """The JSON text of a report ``body`` whose ``results`` are of :class:`~.result.Result` (written
    as rows: :func:`document`)."""
    rows = [{key: row[key] for key in REPORTED} for row in map(to_dict, body["results"])]
    return json.dumps({**body, "results": rows}, indent=1, allow_nan=False) + "\n"


def document(
    runtimes: Sequence[Mapping[str, Any]],
    results: Sequence[Result],
    environment: Mapping[str, Any],
    interrupted_by: str | None,
) -> str:
    """The ``--json`` text; ``environment`` holds ``versions``, ``machine``, ``selection`` and ``settings``.

    ``--json`` (``ctcop-conformance-2``)::

        {"schema": "ctcop-conformance-2", "complete": bool, "interrupted_by": null | "SIGINT" | "SIGTERM",
         "versions": {distribution: version},        # ctcop, numpy, onnx, onnxruntime, openvino, ml_dtypes,
                                                     # and each installed peer framework
         "machine": {"cpu": model name, "isa": [flags of interest], "cores": int},
         "selection": {"patterns": [TAG|GLOB...] ([] = the default: all but scale), "shard": "K/N" | null,
                       "cases": int, "merged": ["1/2", ...] (merged reports only),
                       "sampled": {runtime: {"rule", "cases": run, "not_run": int}} (the runtimes that
                       ran :mod:`.sampling`'s sample of the cases; {} when every runtime ran every case)},
         "settings": {"jobs": int, "timeout_s": float, "runs": 2, "expected_failures": path | null,
                      "known_defects": bool},
         "runtimes": [{"name", "description", "available": bool, "reason": null | why not}],
         "results": [{"case", "runtime", "status", "defect": null | "D1"..., "max_abs_err", "max_rel_err",
                      "message", "mismatch": null | {"kind", "sample", "got", "expected", ...},
                      "raised": null | {"type", "text"}, "death": null | "killed by SIGSEGV" ...}],
         "summary": {runtime: {status: count}}}

    A row is a :class:`~.result.Result` (its fields of :data:`~.result.REPORTED`; the reader of
    ``ctcop conformance-merge`` makes Results of them again): ``status`` is one of :data:`STATUSES`;
    ``defect`` the registered defect (:mod:`ctcop.defects`) that made it an xfail or, not reproduced,
    an xpass; ``max_abs_err`` / ``max_rel_err`` are the loss's (null when no loss was compared);
    ``mismatch`` the :class:`~ctcop.tolerance.Mismatch` of a value that departs (its fields, kinds:
    :data:`ctcop.tolerance.KINDS`); ``raised`` the exception the runtime raised; ``death`` how the
    worker died. +inf, -inf and NaN are the strings "inf", "-inf", "nan". Results are in runtime
    order, then case id; an interrupted run holds the cases whose two evaluations finished.
    """
    body = {
        "schema": SCHEMA,
        "complete": interrupted_by is None and bool(environment.get("complete", True)),
        "interrupted_by": interrupted_by,
        **{key: environment[key] for key in ("versions", "machine", "selection", "settings")},
        "runtimes": [dict(r) for r in runtimes],
        "results": list(results),
        "summary": summary(results, [r["name"] for r in runtimes if r["available"]]),
    }
    return dumps(body)


def _no_constant(token: str) -> float:
    raise ValueError(f"{token} is not JSON (a report writes non-finite numbers as strings)")


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"{token[:40]} is out of range for a number")
    return value


def read(path: str) -> Any:
    """The JSON document in ``path``, as a report is written: strict JSON (``NaN``, ``Infinity``
    refused); ``ValueError``, one line, for text that is not that, nested too deeply included."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _results(document: dict[str, Any], path: str, seen: dict[tuple[str, str], str]) -> list[Result]:
    """The results of a report (:func:`.result.from_dict`); ``MergeError``, one line, for rows that
    are not results of this report, or a case of a runtime that ``seen`` (the rows of the reports
    before it) already holds."""
    results, runtimes = document["results"], {r.get("name") for r in document["runtimes"] if isinstance(r, dict)}
    if not isinstance(results, list):
        raise MergeError(f"{path}: results is not a list")
    if not isinstance(document.get("complete"), bool) or type(document["selection"].get("cases")) is not int:
        raise MergeError(f"{path}: complete is not true/false or selection.cases is not a count")
    if document["selection"]["cases"] < 0:
        raise MergeError(f"{path}: selection.cases is negative")
    read: list[Result] = []
    for number, row in enumerate(results):
        try:
            result = from_dict(row)
        except ValueError as why:
            raise MergeError(f"{path}: result {number} {why}") from None
        if result.runtime not in runtimes:
            raise MergeError(
                f"{path}: result {number} is of runtime {result.runtime!r}, which the report does not list"
            )
        key = (result.runtime, result.case)
        if key in seen:
            raise MergeError(f"{path}: result {number} ({result.runtime} on {result.case}) is also in {seen[key]}")
        seen[key] = path
        read.append(result)
    return read


def _merged_samples(documents: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``selection.sampled`` of the merged report: each runtime's cases run and not run, summed
    (:func:`.shard.check` has seen that every report samples the same runtimes by the same rule)."""
    merged: dict[str, dict[str, Any]] = {}
    for document in documents:
        for name, part in recorded(document).items():
            total = merged.setdefault(name, {"rule": part.rule, "cases": 0, "not_run": 0})
            total["cases"] += part.cases
            total["not_run"] += part.not_run
    return merged


def merge(documents: Sequence[dict[str, Any]], paths: Sequence[str]) -> dict[str, Any]:
    """One report from the reports of shards (see :mod:`.shard` for what is refused), its
    ``results`` of :class:`~.result.Result` (:func:`dumps` writes it)."""
    shards, n = check(documents, paths, SCHEMA)
    seen: dict[tuple[str, str], str] = {}
    read = [result for d, path in zip(documents, paths, strict=True) for result in _results(d, path, seen)]
    first = documents[0]
    order = {r["name"]: i for i, r in enumerate(first["runtimes"])}
    results = sorted(read, key=lambda r: (order.get(r.runtime, len(order)), r.case))
    whole = len(shards) == n
    interrupted = next((d["interrupted_by"] for d in documents if d["interrupted_by"]), None)
    return {
        **first,
        "complete": whole and all(d["complete"] for d in documents),
        "interrupted_by": interrupted,
        "selection": {
            **first["selection"],
            "shard": None,
            "merged": shards,
            "cases": sum(d["selection"]["cases"] for d in documents),
            "sampled": _merged_samples(documents),
        },
        "results": results,
        "summary": summary(results, [r["name"] for r in first["runtimes"] if r["available"]]),
    }


def accepted(result: Result) -> bool:
    """A pass, a skip, an expected failure, or a registered defect that did not reproduce (an
    xpass with a ``defect``: re-measure); an xpass of the user's expected failures is a stale entry."""
    return result.status in ACCEPTED or (result.status == "xpass" and bool(result.defect))


def exit_code(results: Sequence[Result]) -> int:
    """0 when every result is :func:`accepted`, else 1."""
    return 0 if all(accepted(result) for result in results) else 1


# -- the table -----------------------------------------------------------------------------------


def counted(count: Any, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is 1: "1 case", "2 cases"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def format_table(runtimes: Sequence[Mapping[str, Any]], results: Sequence[Result]) -> list[str]:
    """Counts per runtime and status; a runtime that is not available is a row saying why."""
    counts = summary(results, [r["name"] for r in runtimes])
    width = max([len(r["name"]) for r in runtimes] + [7]) + 2
    heads = [HEADINGS.get(s, s) for s in STATUSES]
    lines = [f"{'runtime':<{width}}" + "".join(f"{h:>{max(len(h), 4) + 2}}" for h in heads)]
    for runtime in runtimes:
        name = runtime["name"]
        if not runtime["available"]:
            lines.append(f"{name:<{width}}  not installed: {runtime['reason']}")
            continue
        cells = "".join(f"{counts[name][s]:>{max(len(h), 4) + 2}}" for s, h in zip(STATUSES, heads, strict=True))
        lines.append(f"{name:<{width}}{cells}    {runtime['description']}")
    return lines


def format_sampled(sampled: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The line naming the runtimes that ran a sample of the cases (``selection.sampled``: per
    runtime its rule, cases run and not run); none when every runtime ran every case."""
    if not sampled:
        return []
    rules = sorted({str(part.get("rule")) for part in sampled.values()})
    counts = ", ".join(f"{name} {part.get('cases')} ({part.get('not_run')} not run)" for name, part in sampled.items())
    return [f"sampled ({'; '.join(rules)}; --all-cases runs every case): {counts}"]


def format_problems(results: Sequence[Result], runtimes: Sequence[str], details: int) -> list[str]:
    """The first ``details`` results per runtime that fail the run (not :func:`accepted`)."""
    lines: list[str] = []
    for name in runtimes:
        problems = [r for r in results if r.runtime == name and not accepted(r)]
        if problems and details > 0:
            lines += ["", f"{name}: {len(problems)} failing the run, first {min(details, len(problems))}:"]
            lines += [f"  [{r.status}] {r.case}: {r.message}" for r in problems[:details]]
    return lines


class Progress:
    """One line on a terminal, rewritten in place (``\\r``) at most ten times a second; nothing
    when ``stream`` is not a terminal."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total, self.done, self.started, self.shown = total, 0, time.monotonic(), 0.0

    def step(self, result: Result) -> None:
        self.done += 1
        now = time.monotonic()
        if not self.enabled or (now - self.shown < 0.1 and self.done < self.total):
            return
        self.shown = now
        share = self.done / max(self.total, 1)
        bar = "#" * int(share * 20)
        line = f"\r[{bar:<20}] {self.done}/{self.total} {now - self.started:5.0f} s  {result.runtime}  {result.case}"
        self.stream.write(line[:160] + "\033[K")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            self.stream.write("\r\033[K")
            self.stream.flush()
