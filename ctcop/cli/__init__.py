"""The ``ctcop`` command line.

Error policy: every refusal, argparse's usage errors included, is exactly one line on stderr and
exit code 2, before any work is done (a usage error names its command: ``ctcop eval:
unrecognized arguments: --foo``): output paths are checked first (not empty, not a directory
or other non-regular file, in an existing folder that a file can be created in), then input files
(regular files within the size limits), numbers (ASCII digits within bounds) and names; an option
that the chosen command would ignore is refused. A bug of ctcop is one line ``internal error``
and exit 3. SIGINT and SIGTERM end the command with one line on stderr and exit 130 / 143;
``conformance`` and ``eval`` first write a JSON report of what finished, marked incomplete. Every
JSON report is written atomically (a temporary file in the same folder, then renamed). ``ctcop``
with no arguments prints this help on stdout and exits 2 (no command: nothing done).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import __version__
from ..exit_codes import ExitCode
from . import bench, conformance, defects, diff, evaluate, example, export, guard, merge, validate
from .arguments import Parser
from .failures import failure
from .signals import interruptible

__all__ = ["build_parser", "main"]

# In the order ``ctcop --help`` lists them.
_COMMANDS = (example, conformance, merge, diff, export, guard, evaluate, bench, defects, validate)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of ``parser``'s commands, by name."""
    found = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; each command's ``run`` is the parsed namespace's ``run``, and
    a command without a description of its own is described by its one-line help."""
    parser = Parser(prog="ctcop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ctcop {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command.add_parser(commands)
    for listed in commands._choices_actions:
        sub = commands.choices[listed.dest]
        if sub.description is None and listed.help:
            sub.description = listed.help[0].upper() + listed.help[1:] + "."
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed; arguments no option takes are refused by the command they were given to
    (its name in the one line, ``ctcop eval: unrecognized arguments: --foo``)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        _commands(parser).get(getattr(args, "command", None) or "", parser).error(
            f"unrecognized arguments: {' '.join(extra)}"
        )
    return args


def _run(argv: Sequence[str] | None) -> int:
    """Parse and run; every failure mode becomes one line on stderr and an exit code; no
    arguments, the help and exit 2."""
    try:
        given = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser()
        if not given:
            parser.print_help(sys.stdout)
            return ExitCode.USAGE
        args = parse(parser, given)
        code = int(args.run(args))
        if sys.stdout is not None:  # None when the process started with its stdout closed
            sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BaseException as error:
        return int(failure(error))


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ctcop`` entry point: SIGINT and SIGTERM raise :class:`.signals.Interrupted` while it
    runs; once one has, both stay ignored after it returns (the process is ending with that
    signal's code)."""
    with interruptible():
        return _run(argv)
