"""The bench as text: a head (CPU, threads, protocol, versions, legend), one table per [T, C]
shape with a row per batch size and a column per implementation (median milliseconds per batch)
followed by the ratio columns, then compilations, failed checks and peak memory."""

from __future__ import annotations

from collections.abc import Sequence

from .implementations import IMPLEMENTATIONS
from .memory import METHOD, Memory
from .ratios import ratio_value, usable_ratios
from .results import Results
from .timing import INTERLEAVE_MAX_BYTES, Cell, Protocol

WRONG = "!"  # after a time whose check failed


def milliseconds(seconds: float) -> str:
    """About three significant digits."""
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}" if ms >= 1 else f"{ms:.3f}"


def _cell_text(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if cell.status == "error" or cell.timing is None:
        return "error"
    return milliseconds(cell.timing.median_s) + (WRONG if cell.status == "wrong" else "")


def _widths(headers: Sequence[str]) -> list[int]:
    return [max(7, len(header)) for header in headers]


def _joined(texts: Sequence[str], widths: Sequence[int]) -> str:
    return " ".join(text.rjust(width) for text, width in zip(texts, widths, strict=True))


def shape_table(results: Results, shape_name: str, names: Sequence[str]) -> list[str]:
    """The rows of one shape: N, a median per implementation, then the ratios after a bar."""
    ratios = usable_ratios(names)
    columns = [IMPLEMENTATIONS[name].column for name in names]
    widths, ratio_widths = _widths(columns), _widths([r.column for r in ratios])
    bar = " |" if ratios else ""
    lines = [f"{'N':>5} {_joined(columns, widths)}{bar} {_joined([r.column for r in ratios], ratio_widths)}".rstrip()]
    for batch, row in results.rows(shape_name):
        times = [_cell_text(row.get(name)) for name in names]
        values = [ratio_value(ratio, row) for ratio in ratios]
        shown = ["-" if value is None else f"{value:.2f}" for value in values]
        lines.append(f"{batch:>5} {_joined(times, widths)}{bar} {_joined(shown, ratio_widths)}".rstrip())
    return lines


def head(results: Results) -> list[str]:
    """CPU, threads, protocol, versions, what is not installed, and the legend."""
    settings, machine = results.settings, results.machine
    protocol = settings.protocol
    load = machine.get("load_average_1min")
    lines = [
        f"ctcop bench{' --quick' if settings.quick else ''}: {machine['cpu']}, {machine['cores']} cores"
        f"{'' if load is None else f' (load average {load:.2f} at the start)'}; "
        f"{protocol.threads} thread(s) for every implementation",
        f"{_timing(protocol)}; milliseconds per batch; float32 logits, every frame active",
        "versions: " + ", ".join(f"{name} {version}" for name, version in results.versions.items()),
    ]
    if results.missing:
        lines.append("not installed: " + "; ".join(f"{name} ({why})" for name, why in results.missing.items()))
    lines.append("columns:")
    lines += [f"  {IMPLEMENTATIONS[name].column:<8} {IMPLEMENTATIONS[name].label}" for name in results.timed_names()]
    ratios = usable_ratios(results.timed_names())
    if ratios:
        lines.append("ratios: " + "; ".join(ratio.describe() for ratio in ratios))
    return lines


def _range(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f} s" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} s"


def tail(results: Results) -> list[str]:
    """Compilations, failed checks and errors, peak memory, wall time."""
    lines: list[str] = []
    compiles: dict[str, list[float]] = {}
    for cell in results.cells:
        if cell.compile_s is not None:
            compiles.setdefault(cell.implementation, []).append(cell.compile_s)
    if compiles:
        shown = [f"{IMPLEMENTATIONS[name].column} {_range(values)}" for name, values in compiles.items()]
        lines.append("compilation per shape and N, not in the times: " + ", ".join(shown))
    first: dict[str, float] = {}
    for cell in results.cells:
        if cell.first_s is not None:
            first.setdefault(cell.implementation, cell.first_s)
    if first:
        shown = [f"{IMPLEMENTATIONS[name].column} {seconds:.2f} s" for name, seconds in first.items()]
        lines.append("first call in this process (JIT, caches, thread pools; not in the times): " + ", ".join(shown))
    for cell in results.cells:
        if cell.status != "ok":
            what = "wrong result" if cell.status == "wrong" else "failed"
            lines.append(
                f"{WRONG} {IMPLEMENTATIONS[cell.implementation].column} {what} at {cell.shape.title} N={cell.batch}: "
                f"{cell.message}"
            )
    lines += memory_lines(results.memory)
    if results.interrupted_by:
        lines.append(
            f"interrupted by {results.interrupted_by}: the tables hold what finished (a cell, the passes it finished)"
        )
    lines.append(f"wall time {results.wall_s:.1f} s")
    return lines


def memory_lines(memory: Sequence[Memory]) -> list[str]:
    if not memory:
        return []
    lines = [f"peak memory above the inputs, in logits' bytes ({METHOD}):"]
    for item in memory:
        where = f"{IMPLEMENTATIONS[item.implementation].column:<8} {item.shape.title} N={item.batch}"
        size = f"logits {item.shape.logits_bytes(item.batch) / 1e6:.1f} MB"
        if item.error is not None:
            lines.append(f"  {where}: not measured: {item.error}")
        else:
            lines.append(f"  {where} ({size}): first call +{item.first:.2f}x, later calls +{item.later:.2f}x")
    return lines


def body(results: Results) -> list[str]:
    """The tables (one per shape) and the tail; :func:`head` comes before the run."""
    lines: list[str] = []
    names = results.timed_names()
    for shape in results.shapes():
        lines += ["", shape.title, *shape_table(results, shape.name, names)]
    return [*lines, "", *tail(results)]


def _timing(protocol: Protocol) -> str:
    """How a cell's time was taken (see :mod:`.timing`)."""
    runs, seconds = protocol.per_turn(1)
    passes = f"{protocol.passes} passes" if protocol.passes > 1 else "1 pass"
    return (
        f"median of {passes} over the sweep, each the median of at least {runs} runs (and {seconds:.3g} s)"
        f" per column, taken in {protocol.rounds} turn(s) with the row's other columns (1 above"
        f" {INTERLEAVE_MAX_BYTES >> 20} MB of logits), each turn after {protocol.warmup} untimed call(s)"
        " with this process's threads idle; the first call checked"
    )
