"""The bench's driver: the settings chosen on the command line, checked before any work, and the
run itself: in each pass, for each shape and N, the inputs and ctcop's reference results, then
the installed implementations (checked in the first pass) timed in turns (all in this process,
with one thread count; see :mod:`.timing`); then peak memory in child processes. Results are
kept as they come, a row at a time, so that an interruption leaves what finished."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidInputError
from ..process.cpus import usable_cpus
from . import memory, results, shapes, threads
from .implementations import IMPLEMENTATIONS, Implementation, default_names
from .results import Results, Settings
from .timing import Reference, measure

MAX_BATCH = 65536
# Peak memory is measured at the largest N up to MEMORY_BATCH of each shape whose logits then
# fill at least MEMORY_MIN_BYTES (smaller ones measure the allocator, not the implementation).
MEMORY_BATCH = 64
MEMORY_MIN_BYTES = 16 << 20
MEMORY_IMPLEMENTATIONS = ("ctcop", "ctcop-grad", "onnxruntime", "onnxruntime-no-arena")
QUICK_MEMORY_IMPLEMENTATIONS = ("onnxruntime", "onnxruntime-no-arena")


def implementation_names(text: str | None) -> tuple[str, ...]:
    """The implementations a ``--implementations`` value names ("all": every one; default: the
    default ones), in the registry's order."""
    if text is None:
        return tuple(default_names())
    asked = [part.strip() for part in text.split(",") if part.strip()]
    if asked == ["all"]:
        return tuple(IMPLEMENTATIONS)
    unknown = [name for name in asked if name not in IMPLEMENTATIONS]
    if unknown or not asked:
        what = f"unknown {unknown[0]!r}" if unknown else "empty list"
        raise InvalidInputError("implementations", f"{what}; have all, {', '.join(IMPLEMENTATIONS)}")
    return tuple(name for name in IMPLEMENTATIONS if name in asked)


def chosen_shapes(quick: bool, names: str | None, batches: Sequence[int] | None) -> tuple[shapes.Shape, ...]:
    """The shapes of the full or quick set, those named by ``--shapes``, at ``--batches`` if given."""
    available = shapes.QUICK if quick else shapes.FULL
    chosen = list(available)
    if names is not None:
        asked = [part.strip() for part in names.split(",") if part.strip()]
        known = {shape.name: shape for shape in available}
        unknown = [name for name in asked if name not in known]
        if unknown or not asked:
            what = f"unknown {unknown[0]!r}" if unknown else "empty list"
            raise InvalidInputError("shapes", f"{what}; have {', '.join(known)}")
        chosen = [shape for shape in available if shape.name in asked]
    if batches is not None:
        chosen = [shape.with_batches(tuple(sorted(set(batches)))) for shape in chosen]
    return tuple(chosen)


def batch_sizes(text: str) -> list[int]:
    """``--batches``: comma-separated whole numbers in [1, MAX_BATCH]."""
    parts = text.split(",")
    if not all(part.isascii() and part.isdigit() and len(part) <= 6 and 1 <= int(part) <= MAX_BATCH for part in parts):
        raise ValueError(f"{text!r} is not a comma-separated list of batch sizes in [1, {MAX_BATCH}]")
    return [int(part) for part in parts]


def start(settings: Settings) -> Results:
    """The results to fill: the machine, versions and which implementations are not installed.
    Sets every library's thread count that must be set before it starts."""
    threads.before_imports(settings.protocol.threads)
    missing = {name: why for name in settings.names if (why := IMPLEMENTATIONS[name].missing()) is not None}
    return Results(settings, results.machine(usable_cpus()), results.versions(), missing)


def _measured(name: str, timed: Sequence[str]) -> bool:
    """Whether ``name``'s memory is measured: timed, or the arena-less twin of the timed onnxruntime."""
    return name in timed or (name == "onnxruntime-no-arena" and "onnxruntime" in timed)


def memory_plan(settings: Settings, timed: Sequence[str]) -> list[tuple[str, shapes.Shape, int]]:
    if not settings.memory or memory.available() is not None:
        return []
    names = QUICK_MEMORY_IMPLEMENTATIONS if settings.quick else MEMORY_IMPLEMENTATIONS
    plan = []
    for shape in settings.shapes:
        batches = [batch for batch in shape.batches if batch <= MEMORY_BATCH]
        if batches and shape.logits_bytes(max(batches)) >= MEMORY_MIN_BYTES:
            plan += [(name, shape, max(batches)) for name in names if _measured(name, timed)]
    return [(name, shape, batch) for name, shape, batch in plan if IMPLEMENTATIONS[name].missing() is None]


def total_steps(settings: Settings, timed: Sequence[str]) -> int:
    cells = sum(len(shape.batches) for shape in settings.shapes) * len(timed) * settings.protocol.passes
    return cells + len(memory_plan(settings, timed))


def _announcer(step: Callable[[str], Any], cell: str, where: str) -> Callable[[Implementation], Any]:
    """``step`` with what a column's measurement of ``cell`` is."""
    return lambda implementation: step(f"{cell}{implementation.column}{where}")


def run(settings: Settings, found: Results, step: Callable[[str], Any]) -> None:
    """Measure every cell in each pass (see :mod:`.timing`), then peak memory; ``step(what)`` is
    called before each measurement. The first pass appends the cells, the later ones join them."""
    started = time.perf_counter()
    timed = [IMPLEMENTATIONS[name] for name in found.timed_names()]
    passes = settings.protocol.passes
    try:
        for index in range(passes):
            cells = iter(list(found.cells))
            where = f" (pass {index + 1} of {passes})" if passes > 1 else ""
            for shape in settings.shapes:
                for batch in shape.batches:
                    reference = Reference(shapes.draw(shape, batch))
                    announce = _announcer(step, f"{shape.name} N={batch} ", where)
                    measured = measure(timed, shape, batch, reference, settings.protocol, index == 0, announce)
                    for cell in measured:
                        if index == 0:
                            found.cells.append(cell)
                        else:
                            next(cells).join(cell)
                    del reference
        for name, shape, batch in memory_plan(settings, found.timed_names()):
            step(f"memory {IMPLEMENTATIONS[name].column} {shape.name} N={batch}")
            found.memory.append(memory.measure(name, shape, batch, settings.protocol.threads))
    finally:
        found.threads = threads.report(settings.protocol.threads)
        found.wall_s = time.perf_counter() - started


def progress(total: int) -> Any:
    """A tqdm bar on stderr when it is a terminal (disabled otherwise)."""
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, disable=not sys.stderr.isatty(), unit="cell", leave=False)
