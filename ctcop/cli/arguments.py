"""The command line's arguments: a parser whose usage errors are one line and exit 2, strict
argument types (numbers are ASCII digits within bounds, names match their pattern or are
printable), and the refusal of an option the chosen command would ignore."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from ..conformance import rows
from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from .output import one_line

if TYPE_CHECKING:
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

MAX_SEED = 2**32 - 1
MAX_DETAILS = 1_000_000
MAX_JOBS = 1024
MAX_TIMEOUT_S = 86400
DEVICE = rows.DEVICE
_DIGITS = re.compile(r"[0-9]{1,30}")
_NUMBER = re.compile(r"-?[0-9]{1,30}")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_RUNTIME = rows.NAME
_SECONDS = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?")


class Parser(argparse.ArgumentParser):
    """argparse's usage errors as one line (no usage block), exit 2; ``--help`` is unchanged."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.USAGE, f"ctcop: invalid usage: {self.prog}: {one_line(message)} (see {self.prog} --help)\n")


def integer(low: int, high: int) -> Callable[[str], int]:
    """A whole number in [``low``, ``high``], in ASCII digits."""

    def parse(given: str) -> int:
        if not _DIGITS.fullmatch(given) or not low <= int(given) <= high:
            raise argparse.ArgumentTypeError(f"{given!r} is not a whole number in [{low}, {high}] (ASCII digits)")
        return int(given)

    return parse


def pattern(what: str, allowed: re.Pattern[str]) -> Callable[[str], str]:
    """A name that ``allowed`` matches in full."""

    def parse(given: str) -> str:
        if not allowed.fullmatch(given):
            raise argparse.ArgumentTypeError(f"{given!r} is not a valid {what}")
        return given

    return parse


def text(what: str) -> Callable[[str], str]:
    """A non-empty name or glob of printable characters, at most 4096 of them."""

    def parse(given: str) -> str:
        if not given or len(given) > 4096 or not given.isprintable():
            raise argparse.ArgumentTypeError(f"{given!r} is not a valid {what} (non-empty, printable)")
        return given

    return parse


def runtime_names(given: str) -> list[str]:
    """A comma-separated list of runtime names."""
    names = given.split(",")
    if not all(_RUNTIME.fullmatch(name) for name in names):
        raise argparse.ArgumentTypeError(f"{given!r} is not a comma-separated list of runtime names")
    return names


def seconds(given: str) -> float:
    """A number of seconds in (0, ``MAX_TIMEOUT_S``], in ASCII digits and at most one point."""
    if not _SECONDS.fullmatch(given) or not 0 < float(given) <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{given!r} is not a number of seconds in (0, {MAX_TIMEOUT_S}] (ASCII digits)")
    return float(given)


def shard(given: str) -> tuple[int, int]:
    """``K/N``: shard K of N (:func:`ctcop.conformance.shard.parse`)."""
    from ..conformance.shard import parse

    try:
        return parse(given)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def batches(given: str) -> list[int]:
    """``N,M``: batch sizes (:func:`ctcop.bench.run.batch_sizes`)."""
    from ..bench.run import batch_sizes

    try:
        return batch_sizes(given)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def dims(given: str) -> tuple[int | str, ...]:
    """``T,N,C``: each an integer (ASCII digits; bounds checked by the exporter options) or an ASCII name."""
    parts = [part.strip() for part in given.split(",")]
    if len(parts) != 3:
        raise InvalidInputError("dims", f"{given!r} must give T,N,C (three comma-separated values)")
    found: list[int | str] = []
    for symbol, part in zip("TNC", parts, strict=True):
        if _NUMBER.fullmatch(part):
            found.append(int(part))
        elif _SYMBOL.fullmatch(part):
            found.append(part)
        else:
            raise InvalidInputError("dims", f"{symbol} = {part!r} is neither a number (ASCII digits) nor a name")
    return tuple(found)


def refuse_ignored(args: argparse.Namespace, options: Sequence[str], why: str) -> None:
    """Refuse each of ``options`` that was given: the command would ignore it ``why``."""
    for option in options:
        if getattr(args, option) not in (None, False):
            raise InvalidInputError(option, f"--{option.replace('_', '-')} is ignored {why}: leave it out")
