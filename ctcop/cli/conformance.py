"""``ctcop conformance``: the installed runtimes measured against the reference on the bundled
corpus (spec 10), the selected cases written out (``--write-corpus``, ``--write-onnx-tests``,
``--write-ir-tests``) or their ids listed (``--list``) instead, or the reports of an earlier
``--json`` report rendered again (``--from-json REPORT.json --html PAGE.html``)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..conformance.rows import DECLARED, PRECISIONS
from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from ..files import checked_input_file, checked_output, checked_output_folder, write_atomically
from ..process.cpus import usable_cpus
from . import arguments
from .output import one_line, show
from .signals import Interrupted, interruption, raise_dropped

if TYPE_CHECKING:
    from ..conformance.case import Case
    from ..conformance.expected import Expected
    from ..conformance.result import Result
    from ..conformance.runner import Settings
    from ..conformance.suite import Plan
    from .arguments import Commands

_WRITERS = ("write_corpus", "write_onnx_tests", "write_ir_tests")
_RUN_ONLY = [
    "runtimes", "runtime_module", "jobs", "timeout", "json", "junit", "html", "from_json", "expected_failures",
    "no_known_defects", "details", "all_cases", "device", "precision", "runtime_python",
]  # fmt: skip
# What a run decides and a report rendered again cannot change: the report records it.
_MEASURING = [
    "runtimes", "runtime_module", "select", "shard", "jobs", "timeout", "json", "expected_failures", "no_known_defects",
    "all_cases", "device", "precision", "runtime_python",
]  # fmt: skip
_DEVICE = (
    "an OpenVINO device for the OpenVINO runtimes: CPU (default), GPU, GPU.1, NPU, AUTO:..., HETERO:..., BATCH:...; "
    "repeatable, a row per device (a value is one device: commas belong to a virtual device's list)"
)
_PRECISION = (
    "what the rows compute and are judged at: declared (default: the logits' type, spec 13), native (the device's "
    "default), or the OpenVINO hint f32, bf16 or f16; bf16 and f16 are judged by spec 10.5's bound"
)
_SELF_CHECK = (
    "measure the corpus instead: run a plain implementation of the spec and its mutants, each one rule broken, on "
    "the selected cases; print which mutants the cases catch (exit 0 when they catch every one)"
)
_SECTIONS = ("selection", "settings", "versions", "machine")  # of a report, each an object
_REPORTS = ("json", "junit", "html")


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("conformance", help="measure installed runtimes against the reference")
    runs = parser.add_argument_group("what runs")
    runs.add_argument(
        "--runtimes", type=arguments.runtime_names, help="comma-separated runtime names (default: every one)"
    )
    runs.add_argument(
        "--runtime-module",
        action="append",
        type=arguments.text("MODULE:ATTRIBUTE"),
        metavar="MOD:ATTR",
        help="add the runtimes of pkg.mod:attr or path/file.py:attr (a runtime, a list, or a callable; repeatable)",
    )
    runs.add_argument(
        "--select",
        action="append",
        type=arguments.text("case selection"),
        metavar="TAG|GLOB",
        help="cases by tag, family or id glob, e.g. float32, spec/hand_worked, 'spec/empty_*' (repeatable, comma "
        "lists; default: all but scale)",
    )
    runs.add_argument(
        "--list", action="store_true", help="run nothing: print the ids of the selected cases, one per line"
    )
    runs.add_argument("--all-cases", action="store_true", help="no sample: every runtime runs every case")
    _add_rows(runs)
    runs.add_argument("--shard", type=arguments.shard, metavar="K/N", help="only shard K of N of the selected cases")
    runs.add_argument(
        "--jobs", type=arguments.integer(1, arguments.MAX_JOBS), help="worker processes (default: the CPUs)"
    )
    runs.add_argument(
        "--timeout",
        type=arguments.seconds,
        metavar="SECONDS",
        help="per evaluation and per --runtime-module load (default 120)",
    )
    runs.add_argument("--expected-failures", metavar="FILE", help="known failures: xfail, or xpass when they pass")
    runs.add_argument("--self-check", action="store_true", help=_SELF_CHECK)
    runs.add_argument(
        "--no-known-defects",
        action="store_true",
        help="do not apply ctcop's registry of known defects (ctcop defects): every failure counts",
    )
    out = parser.add_argument_group("reports")
    details = arguments.integer(0, arguments.MAX_DETAILS)
    out.add_argument("--details", type=details, help="problems listed per runtime (default 5)")
    out.add_argument("--json", help="write the report (schema ctcop-conformance-2) to this file")
    out.add_argument("--junit", metavar="PATH", help="write JUnit XML (a testsuite per runtime) to this file")
    out.add_argument(
        "--html", metavar="PATH", help="write the report as one self-contained HTML page (matrix, defects, classes)"
    )
    out.add_argument(
        "--from-json",
        metavar="REPORT.json",
        help="run nothing: render the --html and --junit reports and the table of this --json report",
    )
    _add_writers(parser)
    parser.set_defaults(run=run)


def _add_rows(runs: argparse._ArgumentGroup) -> None:
    """The options that make rows of the runtimes (spec 10.4): devices, precision, environments."""
    device = arguments.pattern("OpenVINO device", arguments.DEVICE)
    runs.add_argument("--device", action="append", type=device, metavar="DEV", help=_DEVICE)
    runs.add_argument("--precision", choices=PRECISIONS, help=_PRECISION)
    runs.add_argument(
        "--runtime-python",
        action="append",
        type=_environment,
        metavar="LABEL=PYTHON",
        help="also run the runtimes of another Python environment (its interpreter; ctcop of this version installed "
        "there), as rows named runtime~LABEL (repeatable)",
    )


def _add_writers(parser: argparse.ArgumentParser) -> None:
    """The options that write the selected cases out instead of running them."""
    writers = parser.add_mutually_exclusive_group()
    writers.add_argument("--write-corpus", metavar="DIR", help="copy the selected cases' corpus tree, run nothing")
    writers.add_argument("--write-onnx-tests", metavar="DIR", help="write the selected cases as ONNX backend tests")
    writers.add_argument("--write-ir-tests", metavar="DIR", help="write the selected cases as OpenVINO IR tests")
    parser.add_argument(
        "--onnx-tests-form",
        choices=("inlined", "function"),
        help="--write-onnx-tests: inlined (default: standard operators only, run by onnx's backend test "
        "runner as it is) or function (the ai.ctcop node and its model-local function)",
    )


def _environment(given: str) -> Any:
    from ..conformance.environments import environment

    try:
        return environment(given)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _writing(args: argparse.Namespace) -> str | None:
    return next((name for name in _WRITERS if getattr(args, name) is not None), None)


def _check_reports(args: argparse.Namespace) -> None:
    """Refuse a report's output path that cannot be written or that another option names."""
    named = {"from-json": args.from_json}
    for option in _REPORTS:
        path = getattr(args, option)
        if path is None:
            continue
        checked_output(path, option)
        other = next((name for name, given in named.items() if given == path), None)
        if other is not None:
            raise InvalidInputError(option, f"--{option} and --{other} name the same file")
        named[option] = path


def _checked(args: argparse.Namespace) -> list[Expected]:
    """Refuse what cannot work before any: output paths, then input files, then options the
    command would ignore. The expected failures, read."""
    writer = _writing(args)
    if args.onnx_tests_form is not None and writer != "write_onnx_tests":
        raise InvalidInputError("onnx_tests_form", "--onnx-tests-form is ignored without --write-onnx-tests")
    if args.list:
        arguments.refuse_ignored(args, [*_RUN_ONLY, *_WRITERS], "with --list (it lists cases, it runs nothing)")
        return []
    if writer is not None:
        flag = "--" + writer.replace("_", "-")
        arguments.refuse_ignored(args, _RUN_ONLY, f"with {flag} (it writes cases, it runs nothing)")
        target = getattr(args, writer)
        checked_output_folder(target, writer)
        if os.path.isdir(target) and os.listdir(target):
            raise InvalidInputError(writer, f"{target!r} is not empty")
        return []
    if args.from_json is not None:
        arguments.refuse_ignored(args, _MEASURING, "with --from-json (it renders a report, it runs nothing)")
    _check_reports(args)
    if args.expected_failures is None:
        return []
    from ..conformance import expected

    checked_input_file(args.expected_failures, "expected_failures", limit=expected.MAX_BYTES)
    try:
        return expected.load(args.expected_failures)
    except (OSError, UnicodeError, ValueError) as error:
        raise InvalidInputError("expected_failures", f"{args.expected_failures}: {error}") from None


def _selection(args: argparse.Namespace) -> list[str]:
    return [part for given in args.select or [] for part in given.split(",") if part]


def _plan(args: argparse.Namespace, expected_failures: list[Expected]) -> Plan:
    from ..conformance import registry, suite

    try:
        return suite.make_plan(
            args.runtimes,
            args.runtime_module or [],
            _selection(args),
            args.shard,
            expected_failures,
            known_defects=not args.no_known_defects,
            probe_timeout_s=args.timeout or registry.PROBE_TIMEOUT_S,
            sample=not (args.all_cases or args.select or args.runtimes),
            on_devices=list(dict.fromkeys(args.device or [])),
            precision=args.precision or DECLARED,
            others=args.runtime_python or [],
        )
    except suite.PlanError as error:
        raise InvalidInputError(error.option, str(error)) from None


def _selected_cases(args: argparse.Namespace) -> list[Case]:
    from ..conformance import suite

    try:
        return list(suite.select_cases(_selection(args), args.shard))
    except suite.PlanError as error:
        raise InvalidInputError(error.option, str(error)) from None


def _write(args: argparse.Namespace, writer: str) -> int:
    """``--write-corpus`` (a copy of the selected part of the corpus tree) or a test writer."""
    from ..conformance import suite, writers

    write = {
        "write_corpus": suite.write_corpus,
        "write_onnx_tests": writers.write_onnx_tests,
        "write_ir_tests": writers.write_ir_tests,
    }[writer]
    folder = getattr(args, writer)
    cases = _selected_cases(args)
    form = {"write_onnx_tests": {"model_form": args.onnx_tests_form or "inlined"}}.get(writer, {})
    try:
        count = write(cases, folder, **form)
    except OSError as error:
        raise InvalidInputError(writer, f"cannot write {folder!r}: {error.strerror or error}") from None
    from ..conformance.report import counted

    show(f"wrote {counted(count, 'case')} to {folder}")
    return ExitCode.OK


def print_report(
    runtimes: Sequence[Mapping[str, Any]],
    results: Sequence[Result],
    cases: Mapping[str, Case],
    head: str,
    details: int | None,
    sampled: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """The table, the problems (``details`` per runtime, default 5), the known defects and the
    classes of the failing cases, under ``head`` and the runtimes that ran a sample (``sampled``,
    the report's ``selection.sampled``)."""
    from ..conformance import classes, known, report

    names = [runtime["name"] for runtime in runtimes]
    lines = [head, *report.format_sampled(sampled or {}), "", *report.format_table(runtimes, results)]
    lines += report.format_problems(results, names, 5 if details is None else details)
    sizes = {case_id: classes.elements(case) for case_id, case in cases.items()}
    lines += known.format_groups(known.group(results, sizes))
    lines += classes.format_classes(classes.group(results, cases))
    show(*lines)


def _page(document: Mapping[str, Any], results: Sequence[Result], cases: Sequence[Case]) -> str:
    from ..conformance import html

    return html.page(document, results, {case.id: case for case in cases})


def _report_results(document: Any) -> list[Result]:
    """The rows of a ``--json`` report as results; ValueError, one line, for a document that is
    not a report as ``ctcop conformance`` writes it."""
    from ..conformance import report
    from ..conformance.result import from_dict

    if not isinstance(document, dict) or document.get("schema") != report.SCHEMA:
        raise ValueError(f"not a {report.SCHEMA} report")
    runtimes = document.get("runtimes")
    if not isinstance(runtimes, list) or not all(
        isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("available"), bool)
        for r in runtimes
    ):
        raise ValueError("runtimes is not a list of {name, description, available, reason}")
    if not all(isinstance(document.get(key), dict) for key in _SECTIONS) or not isinstance(
        document.get("results"), list
    ):
        raise ValueError(f"{', '.join(_SECTIONS)} are not objects or results is not a list")
    ran = {r["name"] for r in runtimes if r["available"]}
    results = []
    for number, row in enumerate(document["results"]):
        try:
            results.append(from_dict(row))
        except ValueError as error:
            raise ValueError(f"result {number} {error}") from None
        if results[-1].runtime not in ran:
            raise ValueError(f"result {number} is of a runtime the report does not list as run")
    return results


def _render(args: argparse.Namespace) -> int:
    """``--from-json``: the ``--junit`` and ``--html`` reports and the table of a ``--json``
    report, nothing run; exit code as the run's."""
    from ..conformance import corpus, junit, report

    path = args.from_json
    checked_input_file(path, "from_json")
    try:
        document = report.read(path)
        results = _report_results(document)
    except (OSError, UnicodeError, ValueError) as error:
        raise InvalidInputError("from_json", f"{path}: not a conformance report: {one_line(str(error))}") from None
    cases = corpus.load_all()
    if args.junit:
        write_atomically(args.junit, junit.document(document["runtimes"], results), what="junit")
    if args.html:
        write_atomically(args.html, _page(document, results, cases), what="html")
    head = f"CTCLoss-4 conformance, from {path}: {report.counted(document['selection'].get('cases'), 'case')}"
    sampled = document["selection"].get("sampled") or {}
    print_report(document["runtimes"], results, {case.id: case for case in cases}, head, args.details, sampled)
    return report.exit_code(results)


def _head(args: argparse.Namespace, plan: Plan, settings: Settings) -> str:
    from ..conformance.report import counted

    selection = ", ".join(_selection(args)) or "all but scale"
    return (
        f"CTCLoss-4 conformance: {counted(len(plan.cases), 'case')} ({selection}"
        f"{'' if args.shard is None else f', shard {args.shard[0]}/{args.shard[1]}'}), "
        f"each evaluated twice per runtime, {counted(settings.jobs, 'job')}"
    )


def _measured(plan: Plan, settings: Settings, results: list[Result]) -> Interrupted | None:
    """Run the plan into ``results``; the interruption that cut it short, if one did (``results``
    then hold what finished, in the report's order)."""
    from ..conformance import report, runner, suite

    progress = report.Progress(sum(plan.runs(name) for name in plan.runnable))
    try:
        suite.run(plan, settings, results, progress.step)
        raise_dropped()
    except BaseException as error:
        interrupted = interruption(error)
        if interrupted is None:
            raise
        results[:] = runner.sort_results(results, [entry.name for entry in plan.listed])
        return interrupted
    finally:
        progress.close()
    return None


def run(args: argparse.Namespace) -> int:
    """Measure the installed runtimes against the reference on the bundled corpus."""
    expected_failures = _checked(args)
    writer = _writing(args)
    if args.list:
        show(*(case.id for case in _selected_cases(args)))
        return ExitCode.OK
    if writer is not None:
        return _write(args, writer)
    if args.from_json is not None:
        return _render(args)
    if args.self_check:
        return _self_check(args)
    from ..conformance import junit, report, runner, suite

    plan = _plan(args, expected_failures)
    settings = runner.Settings(jobs=args.jobs or usable_cpus(), timeout_s=args.timeout or runner.DEFAULT_TIMEOUT_S)
    environment = suite.environment(plan, settings, args.expected_failures)
    runtimes = plan.runtimes()
    results: list[Result] = []
    interrupted = _measured(plan, settings, results)
    name = None if interrupted is None else interrupted.name
    # The reports first: printing may block on a full pipe, and a signal meanwhile must not cost them.
    written = False
    try:
        document = report.document(runtimes, results, environment, name)
        if args.json:
            write_atomically(args.json, document)
        if args.junit:
            write_atomically(args.junit, junit.document(runtimes, results), what="junit")
        if args.html:
            write_atomically(args.html, _page(json.loads(document), results, plan.cases), what="html")
        written = True
        head = _head(args, plan, settings)
        print_report(runtimes, results, {case.id: case for case in plan.cases}, head, args.details, plan.samples())
        raise_dropped()
    except BaseException as error:
        if interrupted is None and (interrupted := interruption(error)) is not None:
            interrupted.finished = written
        if interrupted is None:
            raise
    if interrupted is not None:
        interrupted.report = args.json if written else None
        raise interrupted
    return report.exit_code(results)


# What --self-check chooses itself, or cannot combine with.
_NOT_WITH_SELF_CHECK = [
    "runtimes",
    "runtime_python",
    "runtime_module",
    "expected_failures",
    "no_known_defects",
    "junit",
    "html",
    "all_cases",
]


def _self_check(args: argparse.Namespace) -> int:
    """``--self-check``: the plain implementation and its mutants (:mod:`ctcop.conformance.selfcheck`)
    through the ordinary runner, the registry of known defects not applied; the score printed."""
    from ..conformance import report, runner, suite
    from ..conformance.selfcheck import score

    given = next((name for name in _NOT_WITH_SELF_CHECK if getattr(args, name)), None)
    if given is not None:
        option = "--" + given.replace("_", "-")
        raise InvalidInputError("self_check", f"--self-check runs its own runtimes and reports: it takes no {option}")
    args.runtimes, args.runtime_module, args.no_known_defects = score.names(), [score.MODULE], True
    plan = _plan(args, [])
    settings = runner.Settings(jobs=args.jobs or usable_cpus(), timeout_s=args.timeout or runner.DEFAULT_TIMEOUT_S)
    results: list[Result] = []
    interrupted = _measured(plan, settings, results)
    if interrupted is not None:
        raise interrupted
    if args.json:
        environment = suite.environment(plan, settings, None)
        write_atomically(args.json, report.document(plan.runtimes(), results, environment, None))
    found = score.score(results)
    print(score.summary(found))
    return ExitCode.OK if found.ok else ExitCode.FAILURES
