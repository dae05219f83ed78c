"""``ctcop conformance-merge``: the ``--json`` reports of conformance shards merged into the report
of the unsharded run, with its table."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..files import checked_input_file, checked_output, write_atomically
from . import arguments
from .conformance import print_report
from .output import one_line, show

if TYPE_CHECKING:
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("conformance-merge", help="merge the --json reports of conformance shards")
    parser.add_argument("reports", nargs="+", metavar="REPORT.json", help="--json reports of shards")
    parser.add_argument("-o", "--output", required=True, help="the merged report")
    parser.add_argument("--junit", metavar="PATH", help="also write the merged results as JUnit XML")
    parser.add_argument(
        "--details", type=arguments.integer(0, arguments.MAX_DETAILS), help="problems listed per runtime (default 5)"
    )
    parser.set_defaults(run=run)


def _merged(paths: list[str]) -> dict[str, Any]:
    """The merged report of the reports in ``paths``, each checked and read first."""
    from ..conformance import report, shard

    documents = []
    for path in paths:
        checked_input_file(path, "reports")
        try:
            documents.append(report.read(path))
        except (OSError, UnicodeError, ValueError) as error:
            raise InvalidInputError("reports", f"{path}: not a JSON report: {one_line(str(error))}") from None
    try:
        return report.merge(documents, paths)
    except shard.MergeError as error:
        raise InvalidInputError("reports", str(error)) from None
    except (KeyError, TypeError, AttributeError) as error:
        raise InvalidInputError("reports", f"not a conformance report ({error})") from None


def run(args: argparse.Namespace) -> int:
    """Merge the ``--json`` reports of shards into one."""
    from ..conformance import corpus, junit, report

    checked_output(args.output, "output")
    if args.junit is not None:
        checked_output(args.junit, "junit")
    merged = _merged(args.reports)
    write_atomically(args.output, report.dumps(merged), what="output")
    if args.junit:
        write_atomically(args.junit, junit.document(merged["runtimes"], merged["results"]), what="junit")
    cases = {case.id: case for case in corpus.load_all()}
    shards = ", ".join(merged["selection"]["merged"])
    head = f"CTCLoss-4 conformance, merged: {report.counted(merged['selection']['cases'], 'case')}, shards {shards}"
    print_report(merged["runtimes"], merged["results"], cases, head, args.details, merged["selection"].get("sampled"))
    show(f"wrote {args.output}")
    return report.exit_code(merged["results"])
