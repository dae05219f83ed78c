"""What the commands print: each line printable (a newline or an escape sequence in a name from a
user's file is escaped, :mod:`ctcop.text`), each message one line."""

from __future__ import annotations

from .. import text

MESSAGE_LIMIT = 4000  # characters of one message on stderr


def one_line(message: str) -> str:
    """``message`` as one printable line of at most ``MESSAGE_LIMIT`` characters."""
    return text.one_line(message, MESSAGE_LIMIT)


def show(*lines: str) -> None:
    """Print each of ``lines`` as one line, names from users' files made printable."""
    print("\n".join(text.printable(line) for line in lines))
