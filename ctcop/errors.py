"""The one exception type raised for invalid input (spec/ctcloss4.md, section "Validity")."""

from __future__ import annotations


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
