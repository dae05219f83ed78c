"""``ctcop example``: the worked examples of spec section 9, evaluated."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..examples import worked_examples
from ..exit_codes import ExitCode
from ..reference import ctc_loss

if TYPE_CHECKING:
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("example", help="evaluate the spec's worked examples")
    parser.set_defaults(run=run)


def run(_: argparse.Namespace) -> int:
    """Evaluate the worked examples of spec/ctcloss4.md section 9 and print them."""
    for example in worked_examples():
        loss = ctc_loss(example.inputs, example.sequence_mask, example.labels, **example.attributes)
        print(f"spec {example.section} {example.name} [{example.attributes.label()}]:")
        print(f"  ctcop loss {loss[0]:.16g}   by hand {example.closed_form} = {example.expected:.16g}")
    return ExitCode.OK
