"""Text from untrusted sources (names in users' files, runtimes' messages) as a terminal and a
report can take it: control characters, lone surrogates and other unprintable characters escaped
as Python writes them (``\\x07``, ``\\ud800``), never written raw. Core module: standard library only."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped (a newline included)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def one_line(value: object, limit: int = 300) -> str:
    """``value``'s text as one printable line of at most ``limit`` characters: runs of white space
    become one space; a value whose ``str`` raises reads "(no readable message)"."""
    try:
        text = " ".join(str(value).split())
    except Exception:
        return "(no readable message)"
    return printable(text)[:limit]
