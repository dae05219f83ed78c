"""Text from untrusted sources (names in users' files, runtimes' messages) as a terminal and a
report can take it: control characters, lone surrogates and other unprintable characters escaped
as Python writes them (``\\x07``, ``\\ud800``), never written raw. Core module: standard library only."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped (a newline included)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _lines(value: object) -> list[str]:
    try:
        text = str(value)
    except Exception:
        return ["(no readable message)"]
    return [line.strip() for line in text.splitlines() if line.strip()]


def first_line(value: object) -> str:
    """The first line of what ``value`` (an exception, a message) says, printable; for an exception
    that says nothing, its type's name."""
    lines = _lines(value)
    if lines:
        return printable(lines[0])
    return type(value).__name__ if isinstance(value, BaseException) else ""


def described(error: BaseException) -> str:
    """``Type: first line`` of an exception (``Type`` alone when it says nothing)."""
    lines = _lines(error)
    return f"{type(error).__name__}: {printable(lines[0])}" if lines else type(error).__name__


def ends(value: object, limit: int = 300) -> str:
    """What ``value`` says as one printable line: a message of several lines keeps its first (what
    failed) and its last (often why), the middle elided."""
    lines = _lines(value) or [""]
    return one_line(lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}", limit)


def one_line(value: object, limit: int = 300) -> str:
    """``value``'s text as one printable line of at most ``limit`` characters: runs of white space
    become one space; a value whose ``str`` raises reads "(no readable message)"."""
    try:
        text = " ".join(str(value).split())
    except Exception:
        return "(no readable message)"
    return printable(text)[:limit]
