"""Two conformance reports compared (``ctcop conformance-diff OLD NEW``): per runtime and case, what
regressed, what was fixed and what changed (spec 10, 10.1).

A report is read as typed values (:func:`load`: its rows by :func:`.result.from_dict`, never from
their messages); anything that is not a ``ctcop conformance --json`` report of schema
:data:`.report.SCHEMA` is a :class:`ReportError` of one line. Reports of different selections
(``--select`` patterns, ``--shard``, the runtimes that ran a sample of the cases and its rule:
:func:`.sampling.recorded`) are a :class:`SelectionError` unless the comparison is asked to keep to
the cases both hold (for a runtime sampled in either report, the cases it ran in both).

A result fails the run unless :func:`.report.accepted`: the rule of ``ctcop conformance``'s exit
code. For a runtime and a case in both reports the :class:`Change`, if any, is the first of
:data:`KINDS` that applies (:func:`_kind`). A runtime or case in one report only is added or
removed; the differences of the environments head the comparison (:func:`_differences`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from ..text import one_line
from .classes import UNCLASSIFIED, Facts, classify, facts
from .report import SCHEMA, accepted, counted, read
from .result import Result, from_dict
from .rows import ROW
from .sampling import recorded

if TYPE_CHECKING:
    from .case import Case

DIFF_SCHEMA = "ctcop-conformance-diff-1"
# The largest report read: a default run of every runtime writes a few MB.
MAX_REPORT_BYTES = 64 << 20
# An error that moves by less than an order of magnitude counts as the same failure: what changes a
# computation (a precision, a kernel) moves it by orders (float64 computed in float32 is ~1e-8 off).
ERROR_FACTOR = 10.0
KINDS = {
    "regressed": "Regressed: now failing the run",
    "fixed": "Fixed: no longer failing the run",
    "status": "Status changed",
    "class": "Failure class or defect changed",
    "error": f"Error grown or shrunk more than {ERROR_FACTOR:g}-fold",
    "runtime-added": "Runtimes added",
    "runtime-removed": "Runtimes removed",
    "case-added": "Cases added",
    "case-removed": "Cases removed",
}
# The instruction sets on which OpenVINO's CPU plugin computes in bfloat16 by default (spec 12.2).
_SECTIONS = ("versions", "runtimes", "machine", "settings")
_WHAT = {dict: "an object", list: "a list", str: "text", int: "a whole number", bool: "true or false"}


class ReportError(ValueError):
    """A file that is not a conformance report (one line)."""


class SelectionError(ValueError):
    """Reports of different selections (one line)."""


@dataclass(frozen=True)
class Selection:
    """The cases a run chose: its ``--select`` patterns (sorted; none: all but scale), its shard,
    and the runtimes that ran a sample of them with the rule of each (name, rule: sorted by name)."""

    patterns: tuple[str, ...]
    shard: str | None
    sampled: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        chosen = ", ".join(self.patterns) or "all but scale"
        chosen = chosen if self.shard is None else f"{chosen}, shard {self.shard}"
        rules = ", ".join(f"{name}: {rule}" for name, rule in self.sampled)
        return chosen if not self.sampled else f"{chosen}, sampled {rules}"

    def as_dict(self) -> dict[str, Any]:
        """``{"patterns", "shard"}``, and ``"sampled"`` {runtime: rule} when runtimes ran a sample."""
        shown: dict[str, Any] = {"patterns": list(self.patterns), "shard": self.shard}
        return {**shown, "sampled": dict(self.sampled)} if self.sampled else shown

    @property
    def sampled_runtimes(self) -> set[str]:
        return {name for name, _ in self.sampled}


@dataclass(frozen=True)
class Report:
    """What the comparison reads of a report: whether it is ``complete``, its ``environment``
    (``"versions.openvino"``, ``"runtimes.my-ctc.version"`` (a runtime's own), ``"machine.cpu"``,
    ``"machine.isa.avx512_bf16"``, ``"machine.openvino_default_precision"``,
    ``"settings.known_defects"``, ...: values as text),
    its selection, the runtimes available (in its order) and the results by (runtime, case)."""

    complete: bool
    environment: Mapping[str, str]
    selection: Selection
    runtimes: tuple[str, ...]
    results: Mapping[tuple[str, str], Result]

    @property
    def cases(self) -> set[str]:
        return {case for _, case in self.results}


@dataclass(frozen=True)
class Outcome:
    """One side of a change: the status, the registered defect, the failure class
    (:func:`.classes.classify`; None for a result that :mod:`.classes` leaves alone) and the error
    of the mismatch (None where there is no finite one)."""

    status: str
    defect: str | None
    failure: str | None
    error: float | None


@dataclass(frozen=True)
class Change:
    """A ``kind`` of :data:`KINDS` for ``runtime`` on ``case`` (None for a whole runtime): its
    outcome in the old and in the new report (None where that report has none)."""

    kind: str
    runtime: str
    case: str | None = None
    old: Outcome | None = None
    new: Outcome | None = None


@dataclass(frozen=True)
class Difference:
    """An entry of the environments (:class:`Report`) that differs; None where a report lacks it."""

    what: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Diff:
    """The comparison: the selections, how many cases and runtimes both reports hold (of the cases
    both select), which report is incomplete ("old", "new"), the environment's differences and the
    changes, in the order of :data:`KINDS`, then runtime, then case."""

    old_selection: Selection
    new_selection: Selection
    cases: int
    runtimes: int
    incomplete: tuple[str, ...]
    environment: tuple[Difference, ...]
    changes: tuple[Change, ...]

    @property
    def regressed(self) -> bool:
        return any(change.kind == "regressed" for change in self.changes)

    def counts(self) -> dict[str, int]:
        """The number of changes of each kind of :data:`KINDS`."""
        return {kind: sum(change.kind == kind for change in self.changes) for kind in KINDS}


# -- reading -------------------------------------------------------------------------------------


def _part(document: Mapping[str, Any], path: str, kind: type) -> Any:
    """The value at dotted ``path`` of ``document``, of type ``kind``; ReportError otherwise."""
    value: Any = document
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ReportError(f"{path} is not {_WHAT[kind]}")
    return value


def _texts(document: Mapping[str, Any], path: str) -> list[str]:
    values: list[str] = _part(document, path, list)
    if not all(isinstance(value, str) for value in values):
        raise ReportError(f"{path} is not a list of text")
    return values


def _environment(document: Mapping[str, Any]) -> dict[str, str]:
    versions = _part(document, "versions", dict)
    if not all(isinstance(value, str) for value in versions.values()):
        raise ReportError("versions is not an object of version texts")
    cpu, cores = _part(document, "machine.cpu", str), _part(document, "machine.cores", int)
    machine = _part(document, "machine", dict)
    isa = _texts(document, "machine.isa")
    settings = _part(document, "settings", dict)
    if not all(isinstance(value, (str, int, float, bool, type(None))) for value in settings.values()):
        raise ReportError("settings is not an object of numbers, texts, true/false and null")
    return {
        **{f"versions.{name}": version for name, version in versions.items()},
        "machine.cpu": cpu,
        "machine.cores": str(cores),
        **{f"machine.isa.{flag}": "present" for flag in isa},
        **{f"machine.{key}": json.dumps(value) for key, value in machine.items() if key.startswith("openvino_")},
        **{f"settings.{name}": json.dumps(value) for name, value in settings.items()},
    }


def _selection(document: Mapping[str, Any]) -> Selection:
    patterns = _texts(document, "selection.patterns")
    shard = document["selection"].get("shard")
    if not isinstance(shard, (str, type(None))):
        raise ReportError("selection.shard is not K/N or null")
    try:
        sampled = recorded(document)
    except ValueError as error:
        raise ReportError(str(error)) from None
    rules = tuple(sorted((name, part.rule) for name, part in sampled.items()))
    return Selection(tuple(sorted(set(patterns))), shard, rules)


def _runtimes(document: Mapping[str, Any]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The runtimes a report lists as available, each listed once with a runtime's name, and the
    environment's entry ``runtimes.NAME.version`` of each runtime that gives its own version."""
    listed: list[str] = []
    available: list[str] = []
    versions: dict[str, str] = {}
    for number, entry in enumerate(_part(document, "runtimes", list)):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not (isinstance(name, str) and ROW.fullmatch(name) and isinstance(entry.get("available"), bool)):
            raise ReportError(f"runtime {number} is not {{name, available, ...}} with a runtime's name")
        if name in listed:
            raise ReportError(f"runtime {number} ({name}) is listed twice")
        version = entry.get("version")
        if not isinstance(version, (str, type(None))):
            raise ReportError(f"runtime {number} ({name}) has a version that is not text or null")
        listed.append(name)
        available += [name] if entry["available"] else []
        versions.update({} if version is None else {f"runtimes.{name}.version": version})
        versions.update(_environment_versions(name, entry.get("environment")))
    return tuple(available), versions


def _environment_versions(name: str, environment: Any) -> dict[str, str]:
    """``runtimes.NAME.versions.LIBRARY`` of a row of another Python environment (spec 10.4)."""
    found = environment.get("versions") if isinstance(environment, dict) else None
    if found is None:
        return {}
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise ReportError(f"runtime {name}'s environment has versions that are not an object of texts")
    return {f"runtimes.{name}.versions.{library}": version for library, version in found.items()}


def paired(old: Report, new: Report, pairs: Sequence[tuple[str, str]]) -> tuple[Report, Report]:
    """The two reports kept to the rows of ``pairs`` (old row, new row), the old rows named as
    the new ones, so that :func:`compare` compares each old row with its new row (two rows of one
    report: two releases in two environments, spec 10.4). Each side's environment is its
    report's, with the versions its rows' own environments recorded in place of the report's.
    SelectionError for a row a report does not have, or one named twice."""
    for index, side in ((0, "old"), (1, "new")):
        names = [pair[index] for pair in pairs]
        if len(set(names)) != len(names):
            raise SelectionError(f"--rows names a {side} row twice")
    return _kept(old, dict(pairs), "old"), _kept(new, {n: n for _, n in pairs}, "new")


def _kept(report: Report, rename: Mapping[str, str], side: str) -> Report:
    missing = [name for name in rename if name not in report.runtimes]
    if missing:
        raise SelectionError(f"the {side} report has no row {', '.join(missing)}; it has {', '.join(report.runtimes)}")
    environment = {key: value for key, value in report.environment.items() if not key.startswith("runtimes.")}
    for name, shown in rename.items():
        own = f"runtimes.{name}."
        for key, value in report.environment.items():
            if key.startswith(own + "versions."):
                environment["versions." + key[len(own + "versions.") :]] = value
            elif key == own + "version":
                environment[f"runtimes.{shown}.version"] = value
    sampled = tuple(sorted((rename[name], rule) for name, rule in report.selection.sampled if name in rename))
    return replace(
        report,
        environment=environment,
        selection=replace(report.selection, sampled=sampled),
        runtimes=tuple(rename[name] for name in report.runtimes if name in rename),
        results={(rename[r], c): replace(v, runtime=rename[r]) for (r, c), v in report.results.items() if r in rename},
    )


def _rows(document: Mapping[str, Any], runtimes: tuple[str, ...]) -> dict[tuple[str, str], Result]:
    """The results (:func:`.result.from_dict`), one per available runtime and case."""
    found: dict[tuple[str, str], Result] = {}
    for number, row in enumerate(_part(document, "results", list)):
        try:
            result = from_dict(row)
        except ValueError as why:
            raise ReportError(f"result {number} {why}") from None
        if result.runtime not in runtimes:
            raise ReportError(f"result {number} is of {result.runtime}, which the report does not list as available")
        if found.setdefault((result.runtime, result.case), result) is not result:
            raise ReportError(f"result {number} ({result.runtime} on {result.case}) is in the report twice")
    return found


def load(document: Any) -> Report:
    """The :class:`Report` of a ``ctcop conformance --json`` document (:data:`.report.SCHEMA`);
    ReportError, one line, saying what is wrong with anything else."""
    if not isinstance(document, dict):
        raise ReportError(f"a JSON {type(document).__name__}, not a ctcop conformance report")
    if document.get("schema") != SCHEMA:
        raise ReportError(f"schema {one_line(repr(document.get('schema')), 80)}, not {SCHEMA}")
    complete, environment, selection = _part(document, "complete", bool), _environment(document), _selection(document)
    runtimes, versions = _runtimes(document)
    return Report(complete, {**environment, **versions}, selection, runtimes, _rows(document, runtimes))


def read_report(path: str) -> Report:
    """The :class:`Report` in file ``path`` (strict JSON, :func:`.report.read`; the caller checks
    its size first); ReportError, one line, for a file that is not one."""
    try:
        document = read(path)
    except (OSError, UnicodeError, ValueError) as error:
        raise ReportError(f"not JSON: {one_line(error)}") from None
    return load(document)


# -- comparing -----------------------------------------------------------------------------------


def _error(result: Result) -> float | None:
    """|got - expected| of a loss or gradient mismatch whose values are finite."""
    found = result.mismatch
    if found is None or found.kind not in ("loss", "gradient"):
        return None
    error = abs(found.got - found.expected)
    return error if math.isfinite(error) else None


def _outcomes(cases: Mapping[str, Case]) -> Callable[[Result], Outcome]:
    """The :class:`Outcome` of a result; the facts of each case classified are computed once."""
    known: dict[str, Facts] = {}

    def outcome(result: Result) -> Outcome:
        failure = None
        if not (result.status in UNCLASSIFIED or result.defect):
            if result.case not in known:
                case = cases.get(result.case)
                known[result.case] = facts(case) if case is not None else Facts(0, "?", "value")
            failure = classify(result, known[result.case])[0]
        return Outcome(result.status, result.defect, failure, _error(result))

    return outcome


def _kind(old: Result, new: Result, before: Outcome, after: Outcome) -> str | None:
    """The kind of change from ``old`` to ``new``, the first of :data:`KINDS` that applies, None for
    none. A result is accepted by :func:`.report.accepted` (pass, skip, xfail, the xpass of a
    registered defect):

    - ``regressed``: accepted in OLD, failing the run in NEW (pass or xfail to fail, error, crash,
      timeout, nondeterministic; the xpass of a stale expected failure);
    - ``fixed``: failing the run in OLD, accepted in NEW;
    - ``status``: another status, both accepted or both failing (pass to xfail, fail to crash, ...);
    - ``class``: the same status, another failure class (:func:`.classes.classify`) or defect id;
    - ``error``: the same status and class, the error of the :class:`~ctcop.tolerance.Mismatch`
      (:func:`_error`) grown or shrunk by more than :data:`ERROR_FACTOR`."""
    if accepted(old) != accepted(new):
        return "fixed" if accepted(new) else "regressed"
    if before.status != after.status:
        return "status"
    if (before.failure, before.defect) != (after.failure, after.defect):
        return "class"
    if before.error is None or after.error is None:
        return None
    errors = sorted((before.error, after.error))
    return "error" if errors[1] > ERROR_FACTOR * errors[0] else None


def _changes(
    old: Report, new: Report, runtime: str, cases: set[str], outcome: Callable[[Result], Outcome]
) -> list[Change]:
    """The changes of ``runtime`` (in both reports) on ``cases``, in case order."""
    changes = []
    for case in sorted(cases):
        before, after = old.results.get((runtime, case)), new.results.get((runtime, case))
        if before is not None and after is not None:
            sides = outcome(before), outcome(after)
            kind = _kind(before, after, *sides)
            changes += [] if kind is None else [Change(kind, runtime, case, *sides)]
        elif before is not None:
            changes.append(Change("case-removed", runtime, case, old=outcome(before)))
        elif after is not None:
            changes.append(Change("case-added", runtime, case, new=outcome(after)))
    return changes


def _differences(old: Report, new: Report) -> tuple[Difference, ...]:
    """The environment entries that differ: library versions, the runtimes' own versions (a
    runtime's optional ``version``), the CPU, its instruction sets and OpenVINO's default and
    reduced CPU precisions as the reports recorded them (spec 12.2), the settings."""
    keys = sorted({*old.environment, *new.environment}, key=lambda key: (_SECTIONS.index(key.split(".")[0]), key))
    pairs = [(key, old.environment.get(key), new.environment.get(key)) for key in keys]
    return tuple(Difference(*pair) for pair in pairs if pair[1] != pair[2])


def _scope(old: Report, new: Report, runtime: str, common: set[str]) -> set[str]:
    """The cases of ``common`` both reports chose for ``runtime``: those it ran, in a report where
    it ran a sample of the cases."""
    scope = set(common)
    for report in (old, new):
        if runtime in report.selection.sampled_runtimes:
            scope &= {case for name, case in report.results if name == runtime}
    return scope


def compare(old: Report, new: Report, cases: Mapping[str, Case], allow_different_selection: bool = False) -> Diff:
    """What changed from ``old`` to ``new`` (``cases``: the corpus, for the failure classes).
    Reports of different selections are a SelectionError unless ``allow_different_selection``:
    then only the cases both hold are compared, and a SelectionError says so when no runtime of
    both reports has a case in both (nothing would be compared)."""
    same = old.selection == new.selection
    if not same and not allow_different_selection:
        raise SelectionError(
            f"the reports select different cases (old: {old.selection}; new: {new.selection}): "
            "--allow-different-selection compares the cases both hold"
        )
    common = old.cases & new.cases
    outcome = _outcomes(cases)
    changes: list[Change] = []
    compared = 0
    for runtime in dict.fromkeys([*old.runtimes, *new.runtimes]):
        if runtime not in old.runtimes or runtime not in new.runtimes:
            changes.append(Change("runtime-added" if runtime in new.runtimes else "runtime-removed", runtime))
            continue
        held = {case for name, case in [*old.results, *new.results] if name == runtime}
        scope = held if same else held & _scope(old, new, runtime, common)
        compared += sum((runtime, case) in old.results and (runtime, case) in new.results for case in scope)
        changes += _changes(old, new, runtime, scope, outcome)
    if not same and not compared:
        raise SelectionError(
            f"the reports select different cases (old: {old.selection}; new: {new.selection}) and no runtime of "
            "both has a case in both: nothing was compared"
        )
    order = list(KINDS)
    return Diff(
        old_selection=old.selection,
        new_selection=new.selection,
        cases=len(old.cases | new.cases if same else common),
        runtimes=len(set(old.runtimes) & set(new.runtimes)),
        incomplete=tuple(name for name, report in (("old", old), ("new", new)) if not report.complete),
        environment=_differences(old, new),
        changes=tuple(sorted(changes, key=lambda change: order.index(change.kind))),
    )


# -- writing -------------------------------------------------------------------------------------


def document(diff: Diff, old_path: str, new_path: str) -> str:
    """The ``--json`` text (schema :data:`DIFF_SCHEMA`; docs/conformance.md lists its fields)."""
    body = {
        "schema": DIFF_SCHEMA,
        "old": old_path,
        "new": new_path,
        "regressed": diff.regressed,
        "selection": {
            "old": diff.old_selection.as_dict(),
            "new": diff.new_selection.as_dict(),
            "same": diff.old_selection == diff.new_selection,
            "cases": diff.cases,
            "runtimes": diff.runtimes,
        },
        "incomplete": list(diff.incomplete),
        "environment": [asdict(difference) for difference in diff.environment],
        "counts": diff.counts(),
        "changes": [asdict(change) for change in diff.changes],
    }
    return json.dumps(body, indent=1, allow_nan=False) + "\n"


def _value(text: str | None) -> str:
    """An environment's entry as one line of at most 200 characters (a report's text is untrusted)."""
    return "absent" if text is None else one_line(text, 200)


def _side(outcome: Outcome | None) -> str:
    if outcome is None:
        return "absent"
    text = outcome.status if outcome.defect is None else f"{outcome.status} {outcome.defect}"
    text += "" if outcome.failure is None else f" [{outcome.failure}]"
    return text if outcome.error is None else f"{text}, error {outcome.error:.3g}"


def _line(change: Change) -> str:
    if change.case is None:
        return f"  {change.runtime}"
    return f"  {change.runtime}  {change.case}: {_side(change.old)} -> {_side(change.new)}"


def format_diff(diff: Diff, old_path: str, new_path: str, details: int) -> list[str]:
    """The text of ``ctcop conformance-diff``: the environment's differences, then the changes
    grouped by kind, regressions first, at most ``details`` of a kind listed."""
    held = f"{counted(diff.cases, 'case')}, {counted(diff.runtimes, 'runtime')} in both"
    lines = [f"CTCLoss-4 conformance diff: {old_path} -> {new_path} ({held})"]
    lines += [f"  {d.what}: {_value(d.old)} -> {_value(d.new)}" for d in diff.environment]
    if diff.old_selection != diff.new_selection:
        selections = f"old: {diff.old_selection}; new: {diff.new_selection}"
        lines.append(f"  different selections ({selections}): only the cases both hold are compared")
    lines += [f"  the {which} report is incomplete (interrupted, or shards missing)" for which in diff.incomplete]
    if not diff.changes:
        return [*lines, "no change"]
    lines.append(", ".join(f"{count} {kind}" for kind, count in diff.counts().items() if count))
    for kind, heading in KINDS.items():
        chosen = [change for change in diff.changes if change.kind == kind]
        if chosen:
            lines += ["", f"{heading} ({len(chosen)}):", *map(_line, chosen[:details])]
            lines += [f"  ... {len(chosen) - details} more (--json lists them all)"] if len(chosen) > details else []
    return lines
