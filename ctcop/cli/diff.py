"""``ctcop conformance-diff OLD NEW``: two ``ctcop conformance --json`` reports compared, per runtime
and case (:mod:`ctcop.conformance.diff`); exit 1 when a result regressed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from ..files import checked_input_file, checked_output, refuse_overwriting_inputs, write_atomically
from . import arguments
from .output import show

if TYPE_CHECKING:
    from ..conformance.diff import Report
    from .arguments import Commands

DEFAULT_DETAILS = 20


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser(
        "conformance-diff", help="compare two conformance --json reports: regressions, fixes, changes"
    )
    parser.add_argument("old", metavar="OLD.json", help="the earlier report")
    parser.add_argument("new", metavar="NEW.json", help="the later report")
    parser.add_argument("--json", metavar="OUT", help="also write the comparison as JSON to this file")
    parser.add_argument(
        "--allow-different-selection",
        action="store_true",
        help="compare reports of different --select/--shard on the cases both hold",
    )
    parser.add_argument(
        "--rows",
        action="append",
        type=_pair,
        metavar="OLD_ROW=NEW_ROW",
        help="compare row OLD_ROW of OLD.json with row NEW_ROW of NEW.json, and no other rows (repeatable; one "
        "report may be both, e.g. openvino-ir~ov2025=openvino-ir)",
    )
    parser.add_argument(
        "--details",
        type=arguments.integer(0, arguments.MAX_DETAILS),
        help=f"changes listed per kind (default {DEFAULT_DETAILS})",
    )
    parser.set_defaults(run=run)


def _pair(given: str) -> tuple[str, str]:
    from ..conformance.rows import ROW

    old, equals, new = given.partition("=")
    if not (equals and ROW.fullmatch(old) and ROW.fullmatch(new)):
        raise argparse.ArgumentTypeError(f"{given!r} is not OLD_ROW=NEW_ROW (row names)")
    return old, new


def _report(path: str, what: str) -> Report:
    """The report in ``path``, checked (a regular file within the size limit) and read."""
    from ..conformance import diff

    checked_input_file(path, what, limit=diff.MAX_REPORT_BYTES)
    try:
        return diff.read_report(path)
    except diff.ReportError as error:
        raise InvalidInputError(what, f"{path}: {error}") from None


def run(args: argparse.Namespace) -> int:
    """Compare two conformance reports."""
    if args.json is not None:
        checked_output(args.json, "json")
        refuse_overwriting_inputs(args.json, "json", [args.old, args.new])
    old, new = _report(args.old, "old"), _report(args.new, "new")
    from ..conformance import corpus, diff

    cases = {case.id: case for case in corpus.load_all()}
    try:
        if args.rows:
            old, new = diff.paired(old, new, args.rows)
        found = diff.compare(old, new, cases, args.allow_different_selection)
    except diff.SelectionError as error:
        raise InvalidInputError("new", str(error)) from None
    if args.json is not None:
        write_atomically(args.json, diff.document(found, args.old, args.new))
    details = DEFAULT_DETAILS if args.details is None else args.details
    show(*diff.format_diff(found, args.old, args.new, details))
    return ExitCode.FAILURES if found.regressed else ExitCode.OK
