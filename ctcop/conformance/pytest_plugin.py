"""ctcop's conformance suite as pytest tests: one line in a runtime team's CI,

    pytest --ctcop-runtime mypkg.ctc:RUNTIME [--ctcop-select TAG|GLOB ...] [--ctcop-device DEV ...]

measures the runtime against the reference on the bundled corpus as ``ctcop conformance --runtimes
... --runtime-module ... --select ...`` does, and reports each (row, case) as one test
``ctcop::test_ctcop[ROW-CASE]``. ``--ctcop-runtime`` (repeatable) takes a runtime's name
(``reference``, ``onnxruntime``, ``openvino-ir``, a peer's or an entry point's) or a
``pkg.mod:attr`` / ``path/file.py:attr`` spec, whose runtimes all run; ``--ctcop-select``
(repeatable, comma lists), ``--ctcop-device`` (repeatable: a row per device for the OpenVINO
runtimes), ``--ctcop-no-known-defects`` and ``--ctcop-jobs N`` mean what ``--select``,
``--device``, ``--no-known-defects`` and ``--jobs`` mean. Every selected case runs on every
runtime (no sample, as with ``--runtimes``). Without ``--ctcop-runtime`` the plugin adds nothing:
no item, no fixture, no hook but reading its options, and no import beyond this module's packages.

The items are appended in ``pytest_collection_modifyitems`` (tryfirst, so that ``-k``, ``-m``,
``--deselect``, ``--lf`` and conftest hooks see them) under a synthetic collector ``ctcop``: they
come from no file, so a file-collection hook would need a file to hang them on, and they must exist
whatever paths pytest is given. Before the first of them is set up, the plan runs once through
ctcop's crash-isolated runner (``suite.run``), for the items left after deselection; a run that
raised raises again for every item.

Each item reports its :class:`~ctcop.conformance.result.Result` so that ``pytest --junitxml``
counts what ``ctcop conformance --junit`` counts (tests, failures, errors, skipped): ``pass``
passes; ``skip`` is marked skip with its reason; ``xfail`` (a registered defect) is marked
``xfail(strict=True, reason=the defect)`` and fails: an XFAIL; a registered defect that did not
reproduce (an ``xpass`` with a defect: news to re-measure, which ctcop's run accepts) is marked
skip with its "re-measure: ..." note, as ctcop's JUnit has it, and the terminal summary lists the
notes again; ``fail`` and ``nondeterministic`` fail; ``error``, ``crash`` and ``timeout`` fail in
setup (a JUnit error). A failure is one line: the status, the case, the row and the result's
message (the value got and expected, where there is one).

The plan runs in the process that runs the items: under pytest-xdist every worker would run all
of it, so give ``-n 0`` (or ``-p no:xdist``).
"""

from __future__ import annotations

import argparse
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .result import Result
    from .suite import Plan

NAME = "test_ctcop"
_OPTIONS = {
    "runtimes": "--ctcop-runtime",
    "runtime_module": "--ctcop-runtime",
    "select": "--ctcop-select",
    "device": "--ctcop-device",
}
_ERRORS = ("error", "crash", "timeout")


def _jobs(given: str) -> int:
    """``--ctcop-jobs``: a whole number of at least 1, in ASCII digits."""
    if not (given.isascii() and given.isdigit()) or int(given) < 1:
        raise argparse.ArgumentTypeError(f"{given!r} is not a whole number of at least 1")
    return int(given)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ctcop", "ctcop conformance (CTCLoss-4 runtimes against the reference)")
    group.addoption(
        "--ctcop-runtime",
        action="append",
        default=[],
        metavar="NAME|MOD:ATTR",
        help="measure this runtime: a name (reference, onnxruntime, openvino-ir, ...) or pkg.mod:attr or "
        "path/file.py:attr (repeatable); without it the plugin does nothing",
    )
    group.addoption(
        "--ctcop-select",
        action="append",
        default=[],
        metavar="TAG|GLOB",
        help="cases by tag, family or id glob, as ctcop conformance --select (repeatable, comma lists)",
    )
    group.addoption(
        "--ctcop-device",
        action="append",
        default=[],
        metavar="DEV",
        help="an OpenVINO device for the OpenVINO runtimes, as ctcop conformance --device (repeatable: a row "
        "per device; default CPU)",
    )
    group.addoption(
        "--ctcop-no-known-defects", action="store_true", help="do not apply ctcop's registry of known defects"
    )
    group.addoption("--ctcop-jobs", type=_jobs, metavar="N", help="worker processes (default: the CPUs)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("ctcop_runtime"):
        config.pluginmanager.register(Plugin(config), "ctcop-conformance")


def _names(spec: str) -> list[str]:
    """The names of the runtimes of module ``spec``, loaded as ctcop loads it: in a probe process
    first (:func:`.registry.probe`)."""
    from . import registry

    registry.probe(spec)
    return [str(runtime.name) for runtime in registry.load_module(spec)]


def _plan(config: pytest.Config) -> Plan:
    """The plan of the options: the runtimes named, then those of the module specs."""
    from ..errors import InvalidInputError
    from . import registry, suite

    given: list[str] = config.getoption("ctcop_runtime")
    specs = [value for value in given if ":" in value]
    patterns = [part for value in config.getoption("ctcop_select") for part in value.split(",") if part]
    try:
        names = [value for value in given if ":" not in value] + [name for spec in specs for name in _names(spec)]
        return suite.make_plan(
            names,
            specs,
            patterns,
            None,
            known_defects=not config.getoption("ctcop_no_known_defects"),
            on_devices=list(dict.fromkeys(config.getoption("ctcop_device"))),
        )
    except registry.RegistryError as error:
        raise pytest.UsageError(f"--ctcop-runtime: {error}") from None
    except suite.PlanError as error:
        raise pytest.UsageError(f"{_OPTIONS.get(error.option, error.option)}: {error}") from None
    except InvalidInputError as error:
        raise pytest.UsageError(f"{_OPTIONS.get(error.name, error.name)}: {error.rule}") from None


class Conformance(pytest.Collector):
    """The items of a plan, and the results of its one run."""

    def __init__(self, *, plan: Plan, jobs: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan, self.jobs = plan, jobs
        self.results: dict[tuple[str, str], Result] = {}
        self.failed: Exception | None = None

    def collect(self) -> list[pytest.Item]:
        return [
            CaseItem.from_parent(
                self, name=f"{NAME}[{name}-{case.id}]", runtime=name, case=case.id, folder=case.stored_in()
            )
            for name in self.plan.runnable
            for case in self.plan.cases
        ]

    def result(self, item: CaseItem) -> Result:
        """``item``'s result; the first call runs the plan (a run that raised raises again)."""
        if self.failed is not None:
            raise self.failed
        if not self.results:
            try:
                self.results = self._run()
            except Exception as error:
                self.failed = error
                raise
        return self.results[item.runtime, item.case]

    def _run(self) -> dict[tuple[str, str], Result]:
        """The plan run once, for the items of the session left after deselection."""
        from ..process.cpus import usable_cpus
        from . import runner, suite

        chosen = [item for item in self.session.items if isinstance(item, CaseItem) and item.parent is self]
        only = {name: {item.case for item in chosen if item.runtime == name} for name in self.plan.runnable}
        results: list[Result] = []
        suite.run(replace(self.plan, sampled=only), runner.Settings(jobs=self.jobs or usable_cpus()), results, _ignore)
        return {(result.runtime, result.case): result for result in results}

    def remeasure(self) -> list[str]:
        """The notes of the registered defects that did not reproduce."""
        return [r.message for r in self.results.values() if r.status == "xpass" and r.defect]


def _ignore(result: Result) -> None:
    """No progress shown: pytest reports each result as its item."""


class CaseItem(pytest.Item):
    """One row (a runtime, on a device) on one case, reporting the result of the collector's run;
    ``folder`` is the case's in the corpus."""

    def __init__(self, *, runtime: str, case: str, folder: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.runtime, self.case, self.folder = runtime, case, folder
        self.result: Result | None = None

    def judge(self, result: Result) -> None:
        """Keep ``result``; mark a skip, a registered defect not reproduced and an xfail as such,
        before pytest's skipping plugin reads the marks."""
        from ..defects import defect

        self.result = result
        if result.status == "skip" or (result.status == "xpass" and result.defect):
            self.add_marker(pytest.mark.skip(reason=result.message or result.status))
        elif result.status == "xfail":
            self.add_marker(pytest.mark.xfail(strict=True, reason=defect(str(result.defect)).label))

    def setup(self) -> None:
        assert self.result is not None
        if self.result.status in _ERRORS:
            pytest.fail(self._line(self.result), pytrace=False)

    def runtest(self) -> None:
        assert self.result is not None
        if self.result.status != "pass":
            pytest.fail(self._line(self.result), pytrace=False)

    def reportinfo(self) -> tuple[Path, int, str]:
        """The case's folder, where a skip's reason is shown (the item's ``path`` stays the
        session's: conftest files are looked up there)."""
        return self.folder, 0, self.name

    def _line(self, result: Result) -> str:
        return f"[{result.status}] {result.case} on {result.runtime}: {result.message or result.status}"


class Plugin:
    """The hooks of a session given ``--ctcop-runtime``."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.conformance: Conformance | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, items: list[pytest.Item]) -> None:
        jobs: int | None = self.config.getoption("ctcop_jobs")
        plan = _plan(self.config)
        self.conformance = Conformance.from_parent(session, name="ctcop", nodeid="ctcop", plan=plan, jobs=jobs)
        found = self.conformance.collect()
        session.ihook.pytest_collectreport(report=pytest.CollectReport("ctcop", "passed", None, [*found]))
        items.extend(found)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        if isinstance(item, CaseItem) and isinstance(item.parent, Conformance):
            item.judge(item.parent.result(item))
        return (yield)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        notes = self.conformance.remeasure() if self.conformance is not None else []
        if notes:
            terminalreporter.section("ctcop: registered defects to re-measure")
            for note in notes:
                terminalreporter.write_line(note)
