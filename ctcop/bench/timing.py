"""One cell of the bench: an implementation's results checked against ctcop's, then its call timed.

**Check** (:func:`check`): the first call's losses against ``ctcop.ctc_loss`` of the same inputs
in float64, at the tolerance of the result's element type; a gradient by the conformance suite's
gradient rule. A cell that fails is still timed and is marked wrong in the table.

**Timing** (:func:`measure`, :func:`_turn`): ``passes`` passes over the whole sweep; in each pass
the columns of one shape and N take turns, ``rounds`` times (once above
:data:`INTERLEAVE_MAX_BYTES`), each turn after :func:`settle` and with Python's garbage collector
paused. A pass's figure is the median of its runs over all turns, the cell's the median of its
passes' figures; min and max are over all runs. The columns of a row are thus timed in the same
stretches of the machine's time, so that a burst of other work falls on all of them alike.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

import ctcop

from ..conformance.verdict import compare_grad
from ..tolerance import compare
from .implementations import Implementation
from .prepared import Prepared, Result
from .shapes import Inputs, Shape

MAX_RUNS = 1000
# Cells whose float32 logits are larger are timed one column after another (one turn each).
INTERLEAVE_MAX_BYTES = 64 << 20
# settle(): slices of this length until one in which the process used less than SETTLE_IDLE of
# one core, for at most SETTLE_MAX_S.
SETTLE_SLICE_S = 0.005
SETTLE_IDLE = 0.1
SETTLE_MAX_S = 0.2


@dataclass(frozen=True)
class Timing:
    """The median over passes of each pass's median run, the fastest and slowest run, the runs
    in all, and each pass's median."""

    median_s: float
    min_s: float
    max_s: float
    runs: int
    pass_medians_s: tuple[float, ...] = ()

    @staticmethod
    def of(times: Sequence[float]) -> Timing:
        """One pass's timing: the median of its runs (at least one)."""
        median = statistics.median(times)
        return Timing(median, min(times), max(times), len(times), (median,))

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
    """None when ``result`` agrees with ctcop's; otherwise the first disagreement, in one line.

    The losses are compared with ``reference.loss`` (``ctcop.ctc_loss`` of the same inputs in float64,
    the float32 logits widened exactly) by :func:`ctcop.tolerance.compare` at the tolerance of the
    result's element type (float32: rtol 1e-5, atol 1e-4; float64: rtol 1e-9, atol 1e-12); a gradient
    by :func:`ctcop.conformance.verdict.compare_grad` against ``ctcop.ctc_loss_grad``."""
    loss = np.asarray(result[0])
    problem = compare(loss, reference.loss, loss.dtype.name)
    if problem is not None:
        return f"loss at the {loss.dtype.name} tolerance: {problem}"
    if result[1] is None:
        return None
    grad = np.asarray(result[1])
    return compare_grad(grad, reference.grad, reference.loss, grad.dtype.name, 1)


def settle() -> float:
    """Wait until the threads of this process are idle: the thread pools that a library's call
    leaves spinning, which take cores from whatever runs next and slow the next column's calls.
    Returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < SETTLE_MAX_S:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(SETTLE_SLICE_S)
        if time.process_time() - cpu < SETTLE_IDLE * (time.perf_counter() - wall):
            break
    return time.perf_counter() - start


def timed(call: Callable[[], Any], repeat: int, min_time_s: float) -> list[float]:
    """The seconds of at least ``repeat`` calls, more until they add up to ``min_time_s``."""
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
    return times


@dataclass(frozen=True)
class Protocol:
    threads: int
    repeat: int
    warmup: int
    min_time_s: float
    passes: int = 1
    rounds: int = 1

    def cell_rounds(self, shape: Shape, batch: int) -> int:
        """The turns each column of a cell takes: one where its logits exceed INTERLEAVE_MAX_BYTES."""
        return self.rounds if shape.logits_bytes(batch) <= INTERLEAVE_MAX_BYTES else 1

    def per_turn(self, rounds: int) -> tuple[int, float]:
        """The timed runs (at least) and the time (s) of one turn in a cell of ``rounds`` turns."""
        blocks = self.passes * rounds
        return -(-self.repeat // blocks), self.min_time_s / blocks


@dataclass
class _Column:
    """A column of one pass of a cell: its cell, its prepared call (None before its first turn
    and after an error) and its timed runs so far."""

    implementation: Implementation
    cell: Cell
    prepared: Prepared | None = None
    times: list[float] = field(default_factory=list)


def _prepare(column: _Column, inputs: Inputs, threads: int) -> Prepared:
    """The column's prepared call, its preparation and compilation times kept in its cell."""
    start = time.perf_counter()
    prepared = column.implementation.prepare(inputs, threads)
    column.cell.prepare_s, column.cell.compile_s = time.perf_counter() - start, prepared.compile_s
    return prepared


def _first_call(column: _Column, prepared: Prepared, reference: Reference, checked: bool) -> None:
    """The column's first call, timed as ``first_s`` and, with ``checked``, checked against
    ``reference``."""
    start = time.perf_counter()
    result = prepared.call()
    column.cell.first_s = time.perf_counter() - start
    if column.implementation.checked and checked:
        column.cell.message = check(result, reference)
        column.cell.status = "ok" if column.cell.message is None else "wrong"


def _turn(column: _Column, reference: Reference, protocol: Protocol, rounds: int, checked: bool) -> None:
    """One turn of a column: prepared and its first call made in its first turn; an exception makes
    the cell an error. A turn sets again the settings its library shares with others in the
    process (:attr:`.prepared.Prepared.turn`), leaves the process's threads idle (:func:`settle`),
    makes the checked call (first turn of the first pass), ``warmup`` untimed calls, then at least
    ceil(``repeat`` / (``passes`` * rounds)) timed calls and more until they add up to
    ``min_time_s`` / (``passes`` * rounds) (at most :data:`MAX_RUNS`), the garbage collector paused."""
    try:
        prepared, first = column.prepared, column.prepared is None
        if prepared is None:
            prepared = column.prepared = _prepare(column, reference.inputs, protocol.threads)
        elif prepared.turn is not None:
            prepared.turn()
        settle()
        if first:
            _first_call(column, prepared, reference, checked)
        for _ in range(protocol.warmup):
            prepared.call()
        column.times += timed(prepared.call, *protocol.per_turn(rounds))
    except Exception as error:  # a library's failure is the cell's, not the bench's
        text = " ".join(str(error).split()) or type(error).__name__
        column.cell.status, column.cell.message = "error", f"{type(error).__name__}: {text[:300]}"
        column.prepared = None


def measure(
    implementations: Sequence[Implementation],
    shape: Shape,
    batch: int,
    reference: Reference,
    protocol: Protocol,
    checked: bool = True,
    step: Callable[[Implementation], Any] = lambda _: None,
) -> list[Cell]:
    """One pass of a cell: prepare, check (with ``checked``) and time each of ``implementations``
    on ``reference.inputs``, the columns taking turns (:func:`_turn`) ``rounds`` times, once where
    the logits exceed :data:`INTERLEAVE_MAX_BYTES` (every column's prepared inputs are held while
    they take turns); ``step`` is called before a column's first turn. Returns a cell per
    implementation."""
    columns = [
        _Column(implementation, Cell(implementation.name, shape, batch, "ok")) for implementation in implementations
    ]
    rounds = protocol.cell_rounds(shape, batch)
    for index in range(rounds):
        for column in columns:
            if column.cell.status == "error":
                continue
            if index == 0:
                step(column.implementation)
            _turn(column, reference, protocol, rounds, checked)
            if rounds == 1:
                column.prepared = None  # nothing is held from one column to the next
    for column in columns:
        column.cell.timing = Timing.of(column.times) if column.cell.status != "error" else None
    return [column.cell for column in columns]
