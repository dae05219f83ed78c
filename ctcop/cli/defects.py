"""``ctcop defects``: the registry of known runtime defects (:mod:`ctcop.defects`, spec 10) that
``conformance`` and ``eval`` apply."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..defects import markdown, registry
from ..exit_codes import ExitCode

if TYPE_CHECKING:
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("defects", help="the registry of known runtime defects conformance and eval apply")
    parser.add_argument("--markdown", action="store_true", help="the table the spec and docs show")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The registry of known defects: one line each, or the spec's tables."""
    known = registry()
    if args.markdown:
        print(markdown(list(known.defects)))
        return ExitCode.OK
    for library in known.libraries.values():
        installed = library.installed()
        state = "not installed" if installed is None else f"installed {installed}"
        if installed is not None and installed != library.measured:
            state += ": re-measure"
        print(f"{library.name} (measured on {library.measured}, {state})")
        for entry in known.of_library(library.name):
            kind = " (deliberate)" if entry.kind == "deliberate" else ""
            print(f"  {entry.id:<4} {','.join(entry.runtimes) or '-'}: {entry.title}{kind}")
    return ExitCode.OK
