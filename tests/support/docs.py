"""The fenced blocks of the README and of docs/*.md, for the tests that run them."""

import re
from pathlib import Path

from support.paths import ROOT

BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(path: Path) -> list[tuple[str, str]]:
    """The fenced blocks of a markdown file: (language, text), in order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(path.read_text(encoding="utf-8"))]


def docs_blocks() -> dict[tuple[str, str], str]:
    """Each block of docs/*.md by (file name, the first 50 characters of its first line)."""
    found = {}
    for path in sorted((ROOT / "docs").glob("*.md")):
        for _, text in blocks(path):
            found[(path.name, text.splitlines()[0][:50])] = text
    return found
