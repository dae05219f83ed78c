"""The one exception type raised for invalid input (spec/ctcloss4.md, section "Validity")."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class InvalidInputError(ValueError):
    """An input violates a rule of the CTCLoss-4 specification or of a ctcop API.

    ``name`` is the offending input, ``index`` the offending position (empty when the whole
    input is at fault) and ``rule`` the violated rule, in words.
    """

    def __init__(self, name: str, rule: str, index: tuple[int, ...] | str = ()) -> None:
        self.name = name
        self.rule = rule
        self.index = index
        if isinstance(index, str):
            where = index
        elif index:
            where = "[" + ", ".join(str(int(i)) for i in index) + "]"
        else:
            where = ""
        super().__init__(f"{name}{where}: {rule}")


def refusing_memory_errors(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A public function whose inputs need more memory than the process can allocate raises
    :class:`InvalidInputError` naming ``name``, not numpy's ``MemoryError``: the size check of
    :func:`ctcop.canonical.check_size` refuses most such inputs before anything is allocated, and
    this covers what it cannot see (a limit set after it looked, another thread's allocations)."""

    def wrap(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def refusing(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return function(*args, **kwargs)
            except MemoryError as error:
                raise InvalidInputError(name, f"needs more memory than this process could allocate ({error})") from None

        return refusing

    return wrap
