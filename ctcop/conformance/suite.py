"""A conformance run from start to end, as ``ctcop conformance`` does it: the runtimes
(:mod:`.registry`), the cases (``corpus.select(corpus.load_all(), patterns)``, then the shard;
in the default run, the stated sample of :mod:`.sampling` for the runtimes it samples), the
runner (:mod:`.runner`), expected failures (:mod:`.expected`) and what the report records.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import defects
from . import corpus, devices, environments, expected, known, registry, report, rows, runner, sampling, shard
from .case import Case
from .result import Result
from .rows import DECLARED


class PlanError(ValueError):
    """A usage error found while planning (unknown runtime, empty selection, ...), one line;
    ``option`` is the option at fault."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass
class Plan:
    """What a run will do: ``listed`` runtimes (the chosen ones, available or not), the cases, the
    selection it came from, the expected failures, the known defects applied (None: the raw
    results), the ``--runtime-module`` specs the runtimes come from (a worker loads them again)
    and, for each runtime that runs a sample (:mod:`.sampling`), the ids of its cases."""

    listed: list[registry.Entry]
    cases: list[Case]
    patterns: list[str]
    shard: tuple[int, int] | None
    expected: list[expected.Expected] = field(default_factory=list)
    known: known.KnownDefects | None = None
    modules: list[str] = field(default_factory=list)
    sampled: dict[str, set[str]] = field(default_factory=dict)
    facts: dict[str, devices.Facts] = field(default_factory=dict)
    environments: dict[str, dict[str, Any]] = field(default_factory=dict)

    def runs(self, name: str) -> int:
        """How many cases runtime ``name`` evaluates."""
        return len(self.sampled[name]) if name in self.sampled else len(self.cases)

    def samples(self) -> dict[str, dict[str, Any]]:
        """The report's ``selection.sampled``: per runtime that runs a sample, the rule and its
        cases run and not run."""
        return {
            name: {"rule": sampling.RULE, "cases": len(ids), "not_run": len(self.cases) - len(ids)}
            for name, ids in self.sampled.items()
        }

    @property
    def runnable(self) -> dict[str, Any]:
        return {entry.name: entry.runtime for entry in self.listed if entry.available is None}

    def runtimes(self) -> list[dict[str, Any]]:
        """The report's ``runtimes``: each row's name, description, whether it ran and why not, its
        runtime's own version (null when it gives none) and, for a row that ran, its registry keys,
        the reduced precision it was judged at (null: none), its OpenVINO device's facts and the
        Python environment it ran in, when not ctcop's own (:mod:`.environments`)."""
        listed = []
        for e in self.listed:
            row = {
                "name": e.name,
                "description": e.description,
                "available": e.available is None,
                "reason": e.available,
                "version": e.version,
            }
            facts = self.facts.get(e.name)
            if facts is not None and e.available is None:
                row.update(registry_keys=list(facts.keys), judged_at=facts.reduced)
                if facts.device is not None:
                    row["openvino"] = dict(facts.device)
                if facts.environment:
                    row["environment"] = self.environments[facts.environment]
            listed.append(row)
        return listed

    @property
    def keys(self) -> dict[str, tuple[str, ...]]:
        """Each row's registry keys (:mod:`.rows`)."""
        return {name: facts.keys for name, facts in self.facts.items()}


def choose(entries: Sequence[registry.Entry], names: Sequence[str] | None, strict: bool = True) -> list[registry.Entry]:
    """The runtimes named (in that order; each must exist and be available), or every one. Not
    ``strict`` (another environment may have them): those named that are here, as they are."""
    if not names:
        return list(entries)
    known = {entry.name: entry for entry in entries}
    if not strict:
        return [known[name] for name in dict.fromkeys(names) if name in known]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise PlanError("runtimes", f"unknown runtime: {', '.join(unknown)}; have {', '.join(known)}")
    missing = [f"{n} ({known[n].available})" for n in names if known[n].available is not None]
    if missing:
        raise PlanError("runtimes", f"not installed: {'; '.join(missing)}")
    return [known[name] for name in dict.fromkeys(names)]


def _hint(cases: Sequence[Case], patterns: Sequence[str]) -> str:
    """For a selection that matches nothing: the tags, families and ids close to each pattern
    (:func:`difflib.get_close_matches`), and where the ids are listed."""
    names = {name for case in cases for name in (*case.tags, sampling.family(case.id), case.id)}
    close = [match for pattern in patterns for match in difflib.get_close_matches(pattern, sorted(names), n=5)]
    near = f"; did you mean {', '.join(dict.fromkeys(close))}?" if close else ""
    return f"{near} (ctcop conformance --list prints the case ids; tags and families select too)"


def select_cases(patterns: Sequence[str], shard_spec: tuple[int, int] | None, root: str | None = None) -> list[Any]:
    """The cases of ``patterns`` (tags, folders of ids or globs, :func:`corpus.select`; none: all
    but scale), then of the shard."""
    every = corpus.load_all(root)
    chosen = corpus.select(every, list(patterns) or None)
    if not chosen:
        where = ", ".join(patterns) or "the default selection"
        raise PlanError("select", f"{where} matches no case of the corpus{_hint(every, patterns)}")
    return shard.select(chosen, [case.id for case in chosen], shard_spec)


def _samples(
    listed: Sequence[registry.Entry], chosen: Sequence[Case], cases: Sequence[Case], keys: dict[str, tuple[str, ...]]
) -> dict[str, set[str]]:
    """The ids of ``cases`` (a shard of ``chosen``) that each sampled row of ``listed`` runs:
    :func:`.sampling.samples` of the whole selection ``chosen`` for the row's registry key of its
    device, so that shards merge."""
    names = {e.name: keys[e.name][-1] for e in listed if e.available is None and sampling.is_sampled(e.runtime)}
    ids = {case.id for case in cases}
    by_key = sampling.samples(chosen, list(dict.fromkeys(names.values())), defects.registry().defects)
    return {name: by_key[key] & ids for name, key in names.items()}


def make_plan(
    names: Sequence[str] | None,
    modules: Sequence[str],
    patterns: Sequence[str],
    shard_spec: tuple[int, int] | None,
    expected_failures: Sequence[expected.Expected] = (),
    known_defects: bool = True,
    probe_timeout_s: float = registry.PROBE_TIMEOUT_S,
    sample: bool = False,
    on_devices: Sequence[str] = (),
    precision: str = DECLARED,
    others: Sequence[environments.Environment] = (),
) -> Plan:
    """What a run will do; each runtime module is first loaded in a probe process that may take
    ``probe_timeout_s`` (:func:`registry.probe`). With ``sample``, the runtimes that
    :mod:`.sampling` samples run its sample of the cases. The rows (:mod:`.devices`): the OpenVINO
    runtimes on each of ``on_devices`` (none: CPU), every runtime at ``precision``, here and in
    each of the ``others`` environments (:mod:`.environments`)."""
    try:
        entries = registry.discover(modules, probe_timeout_s=probe_timeout_s)
    except registry.RegistryError as error:
        raise PlanError("runtime_module", str(error)) from None
    listed, facts = devices.rows(choose(entries, names, strict=not others), on_devices, precision, not others)
    pythons = {}
    for other in others:
        found, more, described = environments.rows(other, names, modules, on_devices, precision, probe_timeout_s)
        listed += found
        facts.update(more)
        pythons[other.label] = described
    ran = {rows.parse(entry.name).runtime for entry in listed if entry.available is None}
    missing = [name for name in names or [] if name not in ran]
    if others and missing:
        raise PlanError("runtimes", f"not installed in any environment: {', '.join(missing)}")
    keys = {name: row.keys for name, row in facts.items()}
    whole = select_cases(patterns, None)
    cases = shard.select(whole, [case.id for case in whole], shard_spec)
    applied = known.default(keys) if known_defects else None
    sampled = _samples(listed, whole, cases, keys) if sample else {}
    chosen = list(expected_failures)
    return Plan(listed, cases, list(patterns), shard_spec, chosen, applied, list(modules), sampled, facts, pythons)


def _openvino_precisions(plan: Plan) -> dict[str, Any]:
    """The CPU plugin's default and reduced precisions when an OpenVINO runtime is listed and runs."""
    if not any(entry.available is None and "openvino" in getattr(entry.runtime, "needs", ()) for entry in plan.listed):
        return {}
    from ..openvino import openvino_core
    from ..openvino.precision import device_precisions

    return device_precisions(openvino_core())


def environment(plan: Plan, settings: runner.Settings, expected_path: str | None) -> dict[str, Any]:
    """``versions``, ``machine``, ``selection`` and ``settings`` of the report."""
    shard_text = None if plan.shard is None else f"{plan.shard[0]}/{plan.shard[1]}"
    return {
        "versions": report.versions([e.runtime for e in plan.listed if e.runtime is not None]),
        "machine": {**report.machine(), **_openvino_precisions(plan)},
        "selection": {
            "patterns": plan.patterns,
            "shard": shard_text,
            "cases": len(plan.cases),
            "sampled": plan.samples(),
        },
        "settings": {
            "jobs": settings.jobs,
            "timeout_s": settings.timeout_s,
            "runs": runner.RUNS,
            "expected_failures": None if expected_path is None else os.path.abspath(expected_path),
            "known_defects": plan.known is not None,
        },
    }


def run(plan: Plan, settings: runner.Settings, into: list[Result], progress: Callable[[Result], None]) -> None:
    """Run the plan; results are appended to ``into`` as they come, so that an interruption leaves
    what finished there. The expected failures of the user's file apply first; the known defects
    apply to what they left unchanged."""
    tags: Mapping[str, Sequence[str]] = {case.id: case.tags for case in plan.cases}

    def on_result(result: Result) -> None:
        final = expected.apply(result, plan.expected, tags[result.case])
        if plan.known is not None and final.status == result.status:
            final = plan.known.apply(final, tags[result.case])
        into.append(final)
        progress(final)

    if plan.runnable:
        reduced = tuple((name, f.reduced) for name, f in plan.facts.items() if f.reduced and name in plan.runnable)
        pythons = tuple((label, described["python"]) for label, described in plan.environments.items())
        runtimes = runner.Runtimes(tuple(plan.runnable), tuple(plan.modules), reduced=reduced, pythons=pythons)
        # whether the registry decides verdicts or not, no case runs after one it knows to corrupt
        isolated = replace(settings, alone=settings.alone | known.process_corrupting(plan.keys))
        runner.run_cases(runtimes, plan.cases, isolated, on_result, plan.sampled)
    into[:] = runner.sort_results(into, [entry.name for entry in plan.listed])


def write_corpus(cases: Sequence[Case], folder: str) -> int:
    """Copy the folders of ``cases`` into ``folder`` (created; ids as paths, as in the package) with
    an ``index.json`` that lists them: a corpus tree that :func:`corpus.load_all` reads. The count."""
    source = corpus.default_root()
    index = json.loads((source / corpus.INDEX).read_text(encoding="utf-8"))
    os.makedirs(folder, exist_ok=True)
    for case in cases:
        shutil.copytree(case.stored_in(), os.path.join(folder, *case.id.split("/")), dirs_exist_ok=True)
    index["cases"] = sorted(case.id for case in cases)
    with open(os.path.join(folder, corpus.INDEX), "w", encoding="utf-8") as file:
        file.write(corpus.dumps(index))
    return len(cases)
