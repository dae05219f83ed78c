"""The conformance suite: every installed runtime against the reference on the bundled corpus.

The corpus is :func:`corpus` (the edge cases of spec 4.4 and seeded random cases, float32 and
float64). Each runtime runs in a worker subprocess that reports one JSON line per case, so a
runtime that kills its process (OpenVINO's kernel on an empty target, spec 12.2 D1) costs one
case, recorded as a crash, and a fresh worker resumes after it. A case passes when the runtime's
loss equals the reference at the element type's tolerance (relative 1e-5 / absolute 1e-4 for
float32, relative 1e-9 for float64) with +inf and NaN exactly where the reference has them.
No allowance is made for any runtime: what differs is reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cases import Case, edge_cases, random_cases
from .reference import ctc_loss

TOLERANCE = {"float32": (1e-5, 1e-4), "float64": (1e-9, 1e-12)}
DTYPES = ("float32", "float64")


def corpus() -> list[Case]:
    """The bundled corpus, in a fixed order (workers rebuild it and refer to cases by index)."""
    # The second random set has up to 300 classes: the ONNX export gathers emissions one way up to
    # 32 classes and another way above (spec 11.2).
    base = edge_cases() + random_cases(seed=2026, count=60) + random_cases(seed=2027, count=8, max_c=300)
    return [
        Case(f"{case.name}/{dtype}", case.inputs.astype(dtype), case.sequence_mask, case.labels, case.attributes)
        for dtype in DTYPES
        for case in base
    ]


def compare(got: np.ndarray, expected: np.ndarray, dtype: str) -> str | None:
    """None when ``got`` conforms; otherwise what is wrong, in one line."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    rtol, atol = TOLERANCE[dtype]
    expected = expected.astype(np.float64)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        same_special = (np.isnan(g) and np.isnan(e)) or (np.isinf(e) and g == e)
        close = np.isfinite(e) and np.isfinite(g) and abs(g - e) <= atol + rtol * abs(e)
        if not (same_special or close):
            return f"sample {i}: got {g!r}, expected {e!r}"
    return None


def _evaluate(runtime: Any, case: Case) -> dict[str, Any]:
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
    import os

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


def worker(runtime_name: str, start: int) -> None:
    """Evaluate cases from ``start`` on with one runtime, one JSON line per case on stdout."""
    from .runtimes import RUNTIMES

    runtime = RUNTIMES[runtime_name]
    for index, case in enumerate(corpus()):
        if index >= start:
            print(json.dumps({"index": index, **_evaluate(runtime, case)}), flush=True)


@dataclass
class RuntimeReport:
    """Outcome of one runtime over the corpus."""

    runtime: str
    outcomes: dict[str, dict[str, str]] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes.values() if o["status"] == status)

    def problems(self) -> Iterator[tuple[str, dict[str, str]]]:
        return ((name, o) for name, o in self.outcomes.items() if o["status"] != "pass")


def run_runtime(runtime_name: str, names: list[str], timeout_s: float = 600.0) -> RuntimeReport:
    """Run one runtime over the corpus in worker subprocesses, surviving crashes."""
    report = RuntimeReport(runtime_name)
    start = 0
    while start < len(names):
        command = [sys.executable, "-m", "ctcop.conformance", runtime_name, str(start)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
            stdout, code = result.stdout, result.returncode
        except subprocess.TimeoutExpired as expired:
            out = expired.stdout or b""
            stdout, code = out.decode() if isinstance(out, bytes) else out, None
        last = start - 1
        for line in stdout.splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                last = record["index"]
                report.outcomes[names[last]] = {"status": record["status"], "detail": record["detail"]}
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


def format_report(reports: list[RuntimeReport], total: int, details: int = 5) -> str:
    """A table of counts per runtime, then the first ``details`` problems of each runtime."""
    lines = [f"CTCLoss-4 conformance: {total} cases (edge cases of spec 4.4 and random, float32 and float64)", ""]
    lines.append(f"{'runtime':<18}{'pass':>6}{'fail':>6}{'error':>7}{'crash':>7}")
    for report in reports:
        counts = [report.count(s) for s in ("pass", "fail", "error", "crash")]
        lines.append(f"{report.runtime:<18}" + "".join(f"{c:>{w}}" for c, w in zip(counts, (6, 6, 7, 7), strict=True)))
    for report in reports:
        problems = list(report.problems())
        if problems and details > 0:
            lines += ["", f"{report.runtime}: {len(problems)} problem(s), first {min(details, len(problems))}:"]
            lines += [f"  [{o['status']}] {name}: {o['detail']}" for name, o in problems[:details]]
    return "\n".join(lines)


if __name__ == "__main__":  # worker entry point: python -m ctcop.conformance RUNTIME START
    worker(sys.argv[1], int(sys.argv[2]))
