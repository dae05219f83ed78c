"""The pytest plugin (``ctcop.conformance.pytest_plugin``) as a runtime team runs it: a child
pytest given ``--ctcop-runtime`` (pytester), its outcomes, and its JUnit XML against the one
``ctcop conformance --junit`` writes for the same runtimes and cases."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PLUGIN = ("-p", "ctcop.conformance.pytest_plugin", "-p", "no:cacheprovider")
HAND_WORKED = "spec/hand_worked"  # 4 cases, one per element type
RUNTIMES = '''
import fnmatch

import numpy as np

from ctcop import ctc_loss
from ctcop.conformance.protocol import Unsupported


class Odd:
    """The reference on spec-form cases, except: 1.0 added to the loss of the cases ``wrong``
    matches, an exception for those of ``raises``, unsupported those of ``unsupported``."""

    description = "the reference, wrong on some cases"

    def __init__(self, name, wrong="", raises="", unsupported=""):
        self.name, self.wrong, self.raises, self.unsupported = name, wrong, raises, unsupported

    def run(self, case):
        if fnmatch.fnmatchcase(case.id, self.unsupported):
            raise Unsupported("not this element type")
        if fnmatch.fnmatchcase(case.id, self.raises):
            raise RuntimeError("no kernel for this element type")
        x = case.inputs
        loss = ctc_loss(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)
        return loss + np.asarray(1.0 if fnmatch.fnmatchcase(case.id, self.wrong) else 0.0, loss.dtype)


WRONG = Odd("wrong", wrong="*/float32")
ODD = Odd("odd", wrong="*/float32", raises="*/float16", unsupported="*/bfloat16")
'''
# D4 registered for runtime "wrong" on two cases: float32, where it is wrong (xfail), and float64,
# where it is not (a registered defect that did not reproduce: re-measure).
REGISTRY = """
from dataclasses import replace

from ctcop.conformance import known

_REGISTRY = known.registry()
_D4 = replace(
    _REGISTRY["D4"],
    runtimes=("wrong",),
    cases={"wrong": ("spec/hand_worked/float32", "spec/hand_worked/float64")},
)
known.registry = lambda: replace(_REGISTRY, defects=(_D4,))
"""


@pytest.fixture(autouse=True)
def by_option_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child pytest loads the plugin by ``-p`` and no plugin by entry point: once ctcop's
    ``pytest11`` entry point is installed, ``-p`` of the module would register it a second time."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def runtimes(pytester: pytest.Pytester) -> pytest.Pytester:
    """A folder with the runtime module ``odd.py``."""
    pytester.makepyfile(odd=RUNTIMES)
    return pytester


def run_plugin(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, "-rA", "--ctcop-jobs", "2", *args, timeout=300)


def lines(result: pytest.RunResult, outcome: str) -> list[str]:
    """The node ids of the short summary's lines of ``outcome`` (PASSED, FAILED, ERROR, XFAIL)."""
    return sorted(line.split()[1] for line in result.outlines if line.startswith(f"{outcome} "))


def node(runtime: str, case: str) -> str:
    return f"ctcop::test_ctcop[{runtime}-{case}]"


def outcomes(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """A JUnit file's counts (its top element's) and each testcase's outcome (failure, error,
    skipped or pass) by the plugin's test name: ``test_ctcop[RUNTIME-CASE]``, which is how
    ``ctcop conformance --junit``'s testcase of class ``ctcop.conformance.RUNTIME`` is named."""
    root = ET.parse(path).getroot()
    top = root if "tests" in root.attrib else root.find("testsuite")
    assert top is not None
    counts = {key: top.attrib[key] for key in ("tests", "failures", "errors", "skipped")}
    kinds = {}
    for case in root.iter("testcase"):
        runtime = case.attrib["classname"].removeprefix("ctcop.conformance.")
        name = case.attrib["name"] if runtime == "ctcop" else f"test_ctcop[{runtime}-{case.attrib['name']}]"
        tags = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        kinds[name] = tags[0] if tags else "pass"
    return counts, kinds


def test_the_reference_passes_every_item(pytester: pytest.Pytester) -> None:
    result = run_plugin(pytester, "--ctcop-runtime", "reference", "--ctcop-select", HAND_WORKED)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    types = ("bfloat16", "float16", "float32", "float64")
    assert lines(result, "PASSED") == [node("reference", f"{HAND_WORKED}/{t}") for t in types]


def test_exactly_the_cases_a_runtime_gets_wrong_fail(runtimes: pytest.Pytester) -> None:
    chosen = f"{HAND_WORKED},spec/empty_targets"
    result = run_plugin(runtimes, "--ctcop-runtime", "odd.py:WRONG", "--ctcop-select", chosen, "-k", "not bfloat16")
    assert result.ret == 1
    result.assert_outcomes(passed=4, failed=2, deselected=2)
    wrong = [node("wrong", f"{family}/float32") for family in (HAND_WORKED, "spec/empty_targets")]
    assert lines(result, "FAILED") == sorted(wrong)
    result.stdout.fnmatch_lines([f"[[]fail[]] {HAND_WORKED}/float32 on wrong: sample 0: got 2.08*, expected 1.08*"])


def compare_junit(pytester: pytest.Pytester, named: str, module: str, *python: str) -> dict[str, str]:
    """Run the plugin on the runtimes ``named`` but the last, which ``module`` holds, and ``ctcop
    conformance --runtimes NAMED --runtime-module MODULE`` (started as ``python``) on the
    hand-worked cases; their JUnit counts and outcomes, equal, and the counts."""
    given = [*named.split(",")[:-1], module]
    options = [item for name in given for item in ("--ctcop-runtime", name)]
    plugin = run_plugin(pytester, *options, "--ctcop-select", HAND_WORKED, f"--junitxml={pytester.path / 'p.xml'}")
    command = [sys.executable, *python, "conformance", "--runtimes", named, "--runtime-module", module]
    command += ["--select", HAND_WORKED, "--jobs", "2", "--junit", "c.xml"]
    ctcop = subprocess.run(command, cwd=pytester.path, capture_output=True, text=True, timeout=300)
    assert plugin.ret == ctcop.returncode, plugin.stdout.str() + ctcop.stdout + ctcop.stderr
    found = outcomes(pytester.path / "p.xml")
    assert found == outcomes(pytester.path / "c.xml")
    return found[0]


def test_junit_counts_equal_ctcops_own(runtimes: pytest.Pytester) -> None:
    counts = compare_junit(runtimes, "reference,openvino-ir,odd", "odd:ODD", "-m", "ctcop")
    assert all(int(counts[key]) > 0 for key in ("failures", "errors", "skipped")), counts


def test_a_registered_defect_is_xfail_and_one_not_reproduced_is_a_re_measure_skip(runtimes: pytest.Pytester) -> None:
    runtimes.makepyfile(registered=REGISTRY, conftest="import registered")
    result = run_plugin(runtimes, "--ctcop-runtime", "odd.py:WRONG", "--ctcop-select", HAND_WORKED)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2, skipped=1, xfailed=1)
    assert lines(result, "XFAIL") == [node("wrong", f"{HAND_WORKED}/float32")]
    result.stdout.fnmatch_lines(
        [
            "*ctcop: registered defects to re-measure*",
            f"re-measure: D4 no longer reproduces in {HAND_WORKED}/float64 on openvino *",
            f"SKIPPED [[]1[]] *{HAND_WORKED}/float64: re-measure: D4 no longer reproduces in {HAND_WORKED}/float64 *",
        ]
    )
    patched = ("-c", "import registered, runpy; runpy.run_module('ctcop', run_name='__main__')")
    assert compare_junit(runtimes, "wrong", "odd.py:WRONG", *patched)["skipped"] == "2"


def test_without_a_runtime_the_plugin_adds_nothing_and_loads_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys

        def test_nothing_loaded():
            loaded = sorted(m for m in sys.modules if m.startswith("ctcop.") or m == "numpy")
            assert loaded == ["ctcop.conformance", "ctcop.conformance.pytest_plugin", "ctcop.errors"]
        """
    )
    result = pytester.runpytest_subprocess(*PLUGIN, "-rA", "--ctcop-select", HAND_WORKED, "--ctcop-jobs", "1")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=1)
    assert not any("ctcop::" in line for line in result.outlines)


def test_usage_errors_name_the_option(pytester: pytest.Pytester) -> None:
    unknown = run_plugin(pytester, "--ctcop-runtime", "no-such-runtime")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*--ctcop-runtime: unknown runtime: no-such-runtime; have reference, *"])
    nothing = run_plugin(pytester, "--ctcop-runtime", "reference", "--ctcop-select", "spec/no_such_family")
    assert nothing.ret == pytest.ExitCode.USAGE_ERROR
    nothing.stderr.fnmatch_lines(["*--ctcop-select: spec/no_such_family matches no case of the corpus*"])
    device = run_plugin(pytester, "--ctcop-runtime", "reference", "--ctcop-device", "CPU")
    assert device.ret == pytest.ExitCode.USAGE_ERROR
    device.stderr.fnmatch_lines(["*--ctcop-device: --device applies to OpenVINO runtimes, and none is chosen*"])
