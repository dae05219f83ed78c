"""``ctcop bench``: ctcop, its exports and the installed frameworks' CTC losses timed, each
checked against :func:`ctcop.ctc_loss` first (:mod:`ctcop.bench`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from ..files import checked_output, write_atomically
from ..process.cpus import MAX_THREADS, usable_cpus
from . import arguments
from .signals import Interrupted, interruption, raise_dropped

if TYPE_CHECKING:
    from ..bench.results import Settings
    from ..bench.shapes import Shape
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser(
        "bench",
        help="time ctcop, its exports and the installed frameworks' CTC losses",
        description=_description(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="a reduced set of shapes and runs (well under a minute)")
    parser.add_argument("--json", metavar="PATH", help="write the results (schema ctcop-bench) to this file")
    parser.add_argument("--plot", metavar="PATH.png", help="plot time against N per shape (needs ctcop[bench])")
    parser.add_argument(
        "--implementations",
        type=arguments.text("implementation list"),
        metavar="A,B",
        help="comma-separated names, or all (default: every default one that is installed; see the legend)",
    )
    parser.add_argument(
        "--shapes", type=arguments.text("shape list"), metavar="A,B", help="only these shapes (listed above)"
    )
    parser.add_argument("--batches", type=arguments.batches, metavar="N,M", help="for every shape, instead of its own")
    parser.add_argument(
        "--threads",
        type=arguments.integer(1, MAX_THREADS),
        help="threads for every implementation (default: all cores)",
    )
    parser.add_argument(
        "--repeat", type=arguments.integer(1, 1000), help="timed runs per cell, at least (default 7, quick 3)"
    )
    parser.add_argument(
        "--warmup", type=arguments.integer(0, 100), help="untimed runs after the checked one (default 1)"
    )
    parser.add_argument(
        "--passes",
        type=arguments.integer(1, 20),
        help="passes over the sweep; a cell's time is the median of its passes' (default 3, quick 1)",
    )
    parser.add_argument(
        "--rounds",
        type=arguments.integer(1, 20),
        help="turns the columns of a shape and N take in each pass (default 3, quick 1; 1 above 64 MB of logits)",
    )
    parser.add_argument(
        "--min-time",
        type=arguments.seconds,
        metavar="SECONDS",
        help="more runs until they add up to this (0.1, quick 0.02)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak memory measurements")
    parser.set_defaults(run=run)


def _listed(shapes: Iterable[Shape]) -> str:
    return "; ".join(f"{s.name} ({s.title}, N={','.join(map(str, s.batches))})" for s in shapes)


def _description() -> str:
    from ..bench.implementations import IMPLEMENTATIONS
    from ..bench.shapes import FULL, QUICK

    names = ", ".join(name + ("" if i.default else " (not by default)") for name, i in IMPLEMENTATIONS.items())
    return (
        "Each implementation's losses are checked against ctcop.ctc_loss before it is timed; exit status 1\n"
        f"when one disagrees or fails.\nshapes: {_listed(FULL)}\nquick: {_listed(QUICK)}\nimplementations: {names}"
    )


def checked_settings(args: argparse.Namespace) -> Settings:
    """The run's settings, after checking the output paths, matplotlib for ``--plot`` and the
    names, before any work."""
    from ..bench import plot
    from ..bench import run as bench_run
    from ..bench.results import Settings
    from ..bench.timing import Protocol

    for option, suffix in (("json", ""), ("plot", ".png")):
        if getattr(args, option) is not None:
            checked_output(getattr(args, option), option, suffix)
    if args.json is not None and args.json == args.plot:
        raise InvalidInputError("plot", "--plot and --json name the same file")
    if args.plot is not None and plot.missing():
        raise InvalidInputError("plot", plot.missing() or "")
    quick = bool(args.quick)
    protocol = Protocol(
        threads=args.threads or usable_cpus(),
        repeat=args.repeat or (3 if quick else 7),
        warmup=1 if args.warmup is None else args.warmup,
        min_time_s=args.min_time or (0.02 if quick else 0.1),
        passes=args.passes or (1 if quick else 3),
        rounds=args.rounds or (1 if quick else 3),
    )
    shapes = bench_run.chosen_shapes(quick, args.shapes, args.batches)
    names = bench_run.implementation_names(args.implementations)
    return Settings(shapes, names, protocol, memory=not args.no_memory, quick=quick)


def run(args: argparse.Namespace) -> int:
    """Time ctcop, its exports and the installed frameworks' CTC losses; print the tables."""
    from ..bench import plot, table
    from ..bench import run as bench_run
    from ..bench.results import document

    settings = checked_settings(args)
    found = bench_run.start(settings)
    print("\n".join(table.head(found)), flush=True)
    bar = bench_run.progress(bench_run.total_steps(settings, found.timed_names()))
    interrupted: Interrupted | None = None
    try:
        bench_run.run(settings, found, lambda what: (bar.set_description_str(what, refresh=False), bar.update()))
        raise_dropped()
    except BaseException as error:
        interrupted = interruption(error)
        if interrupted is None:
            raise
    finally:
        bar.close()
    if interrupted is not None:
        found.interrupted_by = interrupted.name
    print("\n".join(table.body(found)))
    if args.json:
        write_atomically(args.json, json.dumps(document(found), indent=1) + "\n")
    if args.plot and found.cells:
        plot.write_plot(found, args.plot)
    if interrupted is not None:
        interrupted.report = args.json
        raise interrupted
    ok = all(cell.status == "ok" for cell in found.cells)
    return ExitCode.OK if ok else ExitCode.FAILURES
