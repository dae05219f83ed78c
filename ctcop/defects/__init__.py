"""The registry of known departures from the spec: one entry per defect of a runtime ctcop
measures, and per deliberate behaviour of a framework peer (data: ``ctcop/data/defects.json``).

Each entry has one id (``D1``, ``D2``, ...; one numbering for every runtime), the library it
belongs to, the conformance runtimes it shows in, the spec section it departs from, a one-line
title, and what was measured: the corpus cases it fails (``cases``, on the versions the
registry's ``libraries`` table names) and with which statuses, plus selectors (``also``) where it
may show on other CPUs. ``ctcop conformance`` applies the registry by default (spec 10), ``ctcop
eval`` names its causes from it (spec 13), and the spec's and the docs' defect tables are
rendered from it (:func:`markdown`); the tests check each defect against the installed version
(:func:`remeasure_note` when a newer release no longer shows it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

SCHEMA = "ctcop-defects-1"
KINDS = ("defect", "deliberate")
STATUSES = ("fail", "error", "crash", "timeout", "nondeterministic")


@dataclass(frozen=True)
class Library:
    """A library defects belong to: the distributions that provide it (the first installed one
    gives the version) and the version the registry was measured on."""

    name: str
    distributions: tuple[str, ...]
    measured: str

    def installed(self) -> str | None:
        """The installed version, or None when no distribution of the library is installed."""
        return _installed(self.distributions)


@cache
def _installed(distributions: tuple[str, ...]) -> str | None:
    """The version of the first of ``distributions`` that is installed (read once per process:
    reports ask it for every defect group)."""
    from importlib.metadata import PackageNotFoundError, version

    for distribution in distributions:
        try:
            return version(distribution)
        except PackageNotFoundError:
            continue
    return None


@dataclass(frozen=True)
class Defect:
    """One registered departure (the fields of an entry of ``defects.json``)."""

    id: str
    library: Library
    kind: str
    spec: str
    title: str
    runtimes: tuple[str, ...] = ()
    statuses: tuple[str, ...] = STATUSES
    cases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    also: tuple[str, ...] = ()
    smallest: str = ""
    correct: str = ""
    ctcop: str = ""
    evidence: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``D1 (spec 12.2): title`` — how reports name the defect."""
        deliberate = ", deliberate" if self.kind == "deliberate" else ""
        return f"{self.id} (spec {self.spec}{deliberate}): {self.title}"

    @property
    def intermittent(self) -> bool:
        """Whether one run may not show it on a listed case: it was measured there as
        ``nondeterministic`` (two runs of one case differed), so a run can pass by chance and
        says nothing about whether the installed release fixed it."""
        return bool(self.cases) and "nondeterministic" in self.statuses


@dataclass(frozen=True)
class Registry:
    libraries: dict[str, Library]
    defects: tuple[Defect, ...]

    def __getitem__(self, defect_id: str) -> Defect:
        for defect in self.defects:
            if defect.id == defect_id:
                return defect
        raise KeyError(defect_id)

    def of_library(self, library: str) -> list[Defect]:
        return [d for d in self.defects if d.library.name == library]


def _strings(entry: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    values = entry.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"{where}: {key} must be a list of non-empty strings")
    return tuple(values)


def _cases(entry: dict[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    cases = entry.get("cases", {})
    if not isinstance(cases, dict) or not set(cases) <= set(entry.get("runtimes", [])):
        raise ValueError(f"{where}: cases must map runtimes of the entry to lists of case ids")
    return {runtime: _strings(cases, runtime, where) for runtime in cases}


def parse(document: Any) -> Registry:
    """The registry in ``document`` (the parsed JSON); ValueError naming the entry at fault."""
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document")
    libraries = {
        name: Library(name, tuple(item["distributions"]), str(item["measured"]))
        for name, item in document["libraries"].items()
    }
    defects, seen = [], set()
    for number, entry in enumerate(document["defects"]):
        where = f"defect {entry.get('id', number)}"
        if entry.get("id") in seen or not str(entry.get("id", "")).startswith("D"):
            raise ValueError(f"{where}: ids are unique, D followed by a number")
        if entry.get("library") not in libraries or entry.get("kind") not in KINDS:
            raise ValueError(f"{where}: library must be one of {sorted(libraries)}, kind one of {KINDS}")
        statuses = _strings(entry, "statuses", where) or STATUSES
        if not set(statuses) <= set(STATUSES):
            raise ValueError(f"{where}: statuses must be among {STATUSES}")
        seen.add(entry["id"])
        defects.append(
            Defect(
                id=entry["id"],
                library=libraries[entry["library"]],
                kind=entry["kind"],
                spec=str(entry["spec"]),
                title=str(entry["title"]),
                runtimes=_strings(entry, "runtimes", where),
                statuses=statuses,
                cases=_cases(entry, where),
                also=_strings(entry, "also", where),
                smallest=str(entry.get("smallest", "")),
                correct=str(entry.get("correct", "")),
                ctcop=str(entry.get("ctcop", "")),
                evidence={str(k): float(v) for k, v in entry.get("evidence", {}).items()},
            )
        )
    return Registry(libraries, tuple(defects))


@lru_cache(maxsize=1)
def registry() -> Registry:
    """ctcop's registry (package data, read once)."""
    text = resources.files("ctcop").joinpath("data", "defects.json").read_text(encoding="utf-8")
    return parse(json.loads(text))


def defect(defect_id: str) -> Defect:
    """The registered defect ``defect_id`` (KeyError when there is none)."""
    return registry()[defect_id]


def remeasure_note(entry: Defect, where: str = "") -> str:
    """What to say when ``entry`` does not reproduce: ``re-measure: D3 no longer reproduces on
    openvino 2026.5.0 (measured on 2026.4.1)``; ``where`` names the case or test. For an
    intermittent entry (:attr:`Defect.intermittent`) one run is not evidence: ``intermittent: D8
    did not show in CASE this run on openvino 2026.4.1 (it varies from run to run; measured on
    2026.4.1)``."""
    installed = entry.library.installed() or "an unknown version"
    at = f" in {where}" if where else ""
    if entry.intermittent:
        return (
            f"intermittent: {entry.id} did not show{at} this run on {entry.library.name} {installed} "
            f"(it varies from run to run; measured on {entry.library.measured})"
        )
    return (
        f"re-measure: {entry.id} no longer reproduces{at} on {entry.library.name} {installed} "
        f"(measured on {entry.library.measured})"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "—"


def markdown(entries: list[Defect]) -> str:
    """The table the spec and docs show for ``entries`` (generated; a test keeps them equal)."""
    head = "| id | library | runtimes | spec | departure | smallest input | correct value | ctcop's answer |"
    lines = [head, "|---" * 8 + "|"]
    for e in entries:
        kind = " (deliberate)" if e.kind == "deliberate" else ""
        runtimes = ", ".join(f"`{r}`" for r in e.runtimes)
        lines.append(
            f"| {e.id} | {e.library.name} {e.library.measured} | {_cell(runtimes)} | {e.spec} | "
            f"{_cell(e.title)}{kind} | {_cell(e.smallest)} | {_cell(e.correct)} | {_cell(e.ctcop)} |"
        )
    return "\n".join(lines)


_BLOCK = re.compile(r"(<!-- defects: ([a-z0-9_,-]+) -->\n).*?(<!-- /defects -->)", re.S)


def render_blocks(text: str) -> str:
    """``text`` with each ``<!-- defects: LIB[,LIB...] -->`` ... ``<!-- /defects -->`` block filled
    with :func:`markdown` of those libraries' defects (``all`` for every one)."""

    def fill(found: re.Match[str]) -> str:
        names = found.group(2).split(",")
        entries = [d for d in registry().defects if "all" in names or d.library.name in names]
        return f"{found.group(1)}{markdown(entries)}\n{found.group(3)}"

    return _BLOCK.sub(fill, text)


def main(paths: list[str]) -> int:
    """``python -m ctcop.defects FILE...``: rewrite the defect blocks of the files in place."""
    for path in paths:
        with open(path, encoding="utf-8") as file:
            text = file.read()
        rendered = render_blocks(text)
        if rendered != text:
            with open(path, "w", encoding="utf-8") as file:
                file.write(rendered)
            print(f"updated {path}")
    return 0
