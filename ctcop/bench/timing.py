"""One cell of the bench: an implementation's results checked against ctcop's, then its call timed.

**Check.** The first call's losses are compared with ``ctcop.ctc_loss`` of the same inputs
computed in float64 (the float32 logits widened exactly), by :func:`ctcop.tolerance.compare` at
the tolerance of the result's element type (float32: rtol 1e-5, atol 1e-4; float64: rtol 1e-9,
atol 1e-12); a gradient by the conformance suite's gradient rule
(:func:`ctcop.conformance.verdict.compare_grad`) against ``ctcop.ctc_loss_grad``. A cell that
fails is still timed and is marked wrong in the table.

**Timing.** In ``passes`` passes over the whole sweep (every shape, N and implementation in turn,
minutes apart): in each, the implementation prepared again, one call (checked in the first pass)
and ``warmup`` more, then at least ceil(``repeat`` / ``passes``) timed calls and more until they
add up to ``min_time_s`` / ``passes`` (at most :data:`MAX_RUNS`), with Python's garbage collector
paused. A pass's figure is the median of its runs; the cell's is the median of its passes'
figures, so that a burst of other work on a shared machine, which slows one block of calls,
moves one pass's figure and not the cell's. Min and max are over all runs.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

import ctcop

from ..conformance.verdict import compare_grad
from ..tolerance import compare
from .implementations import Implementation
from .prepared import Result
from .shapes import Inputs, Shape

MAX_RUNS = 1000


@dataclass(frozen=True)
class Timing:
    """The median over passes of each pass's median run, the fastest and slowest run, the runs
    in all, and each pass's median."""

    median_s: float
    min_s: float
    max_s: float
    runs: int
    pass_medians_s: tuple[float, ...] = ()

    def joined(self, other: Timing) -> Timing:
        """This cell's timing with another pass's."""
        medians = (*self.pass_medians_s, *other.pass_medians_s)
        return Timing(
            statistics.median(medians),
            min(self.min_s, other.min_s),
            max(self.max_s, other.max_s),
            self.runs + other.runs,
            medians,
        )


@dataclass
class Cell:
    """One implementation at one shape and batch size: ``status`` "ok", "wrong" (timed, but its
    check failed: ``message``) or "error" (it raised: ``message``; not timed); ``first_s`` the
    checked first call (in the first cell of an implementation: its JIT compilation, cache loads
    and thread pools' start)."""

    implementation: str
    shape: Shape
    batch: int
    status: str
    message: str | None = None
    timing: Timing | None = None
    compile_s: float | None = None
    first_s: float | None = None  # the checked call, before any warm-up
    prepare_s: float | None = None  # models built (first cell) and inputs laid out

    @property
    def median_s(self) -> float | None:
        return None if self.timing is None else self.timing.median_s

    def join(self, later: Cell) -> None:
        """Take in a later pass of the same cell: its timing, or its error."""
        same = (self.implementation, self.shape, self.batch) == (later.implementation, later.shape, later.batch)
        assert same, f"pass of {later.implementation} {later.shape.name} N={later.batch} joined to another cell"
        if later.status == "error":
            self.status, self.message, self.timing = later.status, later.message, None
        elif self.timing is not None and later.timing is not None:
            self.timing = self.timing.joined(later.timing)


@dataclass
class Reference:
    """ctcop's losses (and gradient, when asked for) of ``inputs``, computed in float64."""

    inputs: Inputs

    @cached_property
    def wide(self) -> np.ndarray:
        return self.inputs.logits.astype(np.float64)

    @cached_property
    def loss(self) -> np.ndarray:
        return ctcop.ctc_loss(self.wide, self.inputs.mask, self.inputs.labels)

    @cached_property
    def grad(self) -> np.ndarray:
        return ctcop.ctc_loss_grad(self.wide, self.inputs.mask, self.inputs.labels)[1]


def check(result: Result, reference: Reference) -> str | None:
    """None when ``result`` agrees with ctcop's; otherwise the first disagreement, in one line."""
    loss = np.asarray(result[0])
    problem = compare(loss, reference.loss, loss.dtype.name)
    if problem is not None:
        return f"loss at the {loss.dtype.name} tolerance: {problem}"
    if result[1] is None:
        return None
    grad = np.asarray(result[1])
    return compare_grad(grad, reference.grad, reference.loss, grad.dtype.name, 1)


def timed(call: Callable[[], Any], repeat: int, min_time_s: float) -> Timing:
    times: list[float] = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        while len(times) < MAX_RUNS and (len(times) < repeat or sum(times) < min_time_s):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
    finally:
        if enabled:
            gc.enable()
    median = statistics.median(times)
    return Timing(median, min(times), max(times), len(times), (median,))


@dataclass(frozen=True)
class Protocol:
    threads: int
    repeat: int
    warmup: int
    min_time_s: float
    passes: int = 1

    def per_pass(self) -> tuple[int, float]:
        """The timed runs (at least) and the time (s) of one pass."""
        return -(-self.repeat // self.passes), self.min_time_s / self.passes


def measure(
    implementation: Implementation,
    shape: Shape,
    batch: int,
    reference: Reference,
    protocol: Protocol,
    checked: bool = True,
) -> Cell:
    """Prepare, check (with ``checked``) and time one pass of ``implementation`` on
    ``reference.inputs``."""
    cell = Cell(implementation.name, shape, batch, "ok")
    try:
        start = time.perf_counter()
        prepared = implementation.prepare(reference.inputs, protocol.threads)
        cell.prepare_s = time.perf_counter() - start
        cell.compile_s = prepared.compile_s
        start = time.perf_counter()
        result = prepared.call()
        cell.first_s = time.perf_counter() - start
        if implementation.checked and checked:
            cell.message = check(result, reference)
            cell.status = "ok" if cell.message is None else "wrong"
        del result
        for _ in range(protocol.warmup):
            prepared.call()
        cell.timing = timed(prepared.call, *protocol.per_pass())
    except Exception as error:  # a library's failure is the cell's, not the bench's
        text = " ".join(str(error).split()) or type(error).__name__
        cell.status, cell.message, cell.timing = "error", f"{type(error).__name__}: {text[:300]}", None
    return cell
