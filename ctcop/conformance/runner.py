"""The conformance runner: every chosen runtime against the reference on the bundled corpus.

The corpus is :func:`corpus` (the worked examples, the edge cases of spec 4.4 and seeded random
cases, float32 and float64). Each runtime runs in a worker subprocess that reports one JSON line
per case, so a runtime that kills its process (OpenVINO's kernel on an empty target, spec 12.2
D1) costs one case, recorded as a crash, and a fresh worker resumes after it. A case passes when
the runtime's loss agrees with the reference by :func:`ctcop.tolerance.compare`. No allowance is
made for any runtime: what differs is reported.
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..reference import ctc_loss
from ..tolerance import compare
from .cases import Case, edge_cases, random_cases
from .report import RuntimeReport

DTYPES = ("float32", "float64")


def corpus(pattern: str = "*") -> list[Case]:
    """The bundled corpus, in a fixed order, less the cases whose names do not match the glob
    ``pattern`` (workers rebuild it and refer to cases by index)."""
    # The second random set has up to 300 classes: the ONNX export gathers emissions one way up to
    # 32 classes and another way above (spec 11.2).
    base = edge_cases() + random_cases(seed=2026, count=60) + random_cases(seed=2027, count=8, max_c=300)
    cases = [
        Case(f"{case.name}/{dtype}", case.inputs.astype(dtype), case.sequence_mask, case.labels, case.attributes)
        for dtype in DTYPES
        for case in base
    ]
    return [case for case in cases if fnmatch.fnmatchcase(case.name, pattern)]


def evaluate(runtime: Any, case: Case) -> dict[str, Any]:
    """One case through one runtime: ``{"status": pass | fail | error, "detail": ...}``."""
    expected = ctc_loss(case.inputs, case.sequence_mask, case.labels, **case.attributes)
    try:
        got = runtime(case.inputs, case.sequence_mask, case.labels, **case.attributes)
    except Exception as error:  # a runtime's failure is a finding, whatever its type
        lines = str(error).strip().splitlines() or [type(error).__name__]
        return {"status": "error", "detail": f"{type(error).__name__}: {lines[-1][:200]}"}
    problem = compare(got, expected, case.inputs.dtype.name)
    return {"status": "fail" if problem else "pass", "detail": problem or ""}


def write_corpus(folder: str) -> int:
    """Write every corpus case as ``<folder>/<name>.npz`` (``inputs``, ``sequence_mask``,
    ``labels``, the two attributes as 0-d bools, and the reference ``expected`` loss), for runtimes
    that ctcop has no adapter for. Returns the number of files written."""
    os.makedirs(folder, exist_ok=True)
    cases = corpus()
    for case in cases:
        expected = ctc_loss(case.inputs, case.sequence_mask, case.labels, **case.attributes)
        arrays: dict[str, Any] = {
            "inputs": case.inputs,
            "sequence_mask": case.sequence_mask,
            "labels": case.labels,
            "expected": expected,
            **{name: np.array(value) for name, value in case.attributes.items()},
        }
        np.savez(os.path.join(folder, case.name.replace("/", "__") + ".npz"), **arrays)
    return len(cases)


def worker(runtime_name: str, start: int, pattern: str) -> None:
    """Evaluate the selected cases from ``start`` on with one runtime, one JSON line per case."""
    from .runtimes import RUNTIMES

    runtime = RUNTIMES[runtime_name]
    for index, case in enumerate(corpus(pattern)):
        if index >= start:
            print(json.dumps({"index": index, **evaluate(runtime, case)}), flush=True)


def _run_worker(command: list[str], timeout_s: float, on_line: Callable[[str], None]) -> int | None:
    """Run one worker, handing each line it prints to ``on_line`` as it comes; its exit code, or
    None when it was killed for running over ``timeout_s``. However this ends (an interruption
    raised in the parent included), the worker is killed if still running and reaped."""
    expired = threading.Event()
    with subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as process:

        def expire() -> None:
            expired.set()
            process.kill()

        timer = threading.Timer(timeout_s, expire)
        timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                on_line(line)
            code = process.wait()
        finally:
            timer.cancel()
            if process.poll() is None:
                process.kill()
            process.wait()
    return None if expired.is_set() else code


def run_runtime(
    runtime_name: str, pattern: str = "*", timeout_s: float = 600.0, into: RuntimeReport | None = None
) -> RuntimeReport:
    """Run one runtime over the selected cases in worker subprocesses, surviving crashes. Outcomes
    go into ``into`` (a new report by default) as each case finishes, so that a caller interrupted
    meanwhile still holds what finished."""
    names = [case.name for case in corpus(pattern)]
    report = RuntimeReport(runtime_name) if into is None else into
    start = 0
    while start < len(names):
        command = [sys.executable, "-m", "ctcop.conformance", runtime_name, str(start), pattern]
        last = start - 1

        def record(line: str) -> None:
            nonlocal last
            if line.startswith("{"):
                outcome = json.loads(line)
                last = outcome["index"]
                report.outcomes[names[last]] = {"status": outcome["status"], "detail": outcome["detail"]}

        code = _run_worker(command, timeout_s, record)
        if code == 0 and last == len(names) - 1:
            break
        dead = last + 1
        if dead < len(names):
            why = "timed out" if code is None else f"worker exited with code {code}"
            report.outcomes[names[dead]] = {"status": "crash", "detail": why}
        start = dead + 1
    return report


def available_runtimes() -> list[str]:
    """Runtime adapters whose libraries import here (the reference is always there)."""
    from .runtimes import RUNTIMES

    needs = {"onnxruntime": "onnxruntime", "onnx-reference": "onnx.reference"}
    names = []
    for name in RUNTIMES:
        module = needs.get(name, "openvino" if name.startswith("openvino") else "numpy")
        try:
            __import__(module)
        except ImportError:
            continue
        names.append(name)
    return names
