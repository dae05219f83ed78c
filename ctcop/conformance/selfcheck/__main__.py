"""``python -m ctcop.conformance.selfcheck REPORT.json [DOC.md]``: the score of a ``ctcop conformance
--self-check --json REPORT.json`` run; with DOC.md, its ``<!-- self-check -->`` block rewritten with
the coverage map (docs/conformance.md holds one)."""

from __future__ import annotations

import json
import sys

from ..result import from_dict
from .score import render_block, score, summary


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as file:
        found = score([from_dict(row) for row in json.load(file)["results"]])
    print(summary(found))
    if len(argv) == 2:
        with open(argv[1], encoding="utf-8") as file:
            text = file.read()
        rendered = render_block(text, found)
        if rendered != text:
            with open(argv[1], "w", encoding="utf-8") as file:
                file.write(rendered)
            print(f"updated {argv[1]}")
    return 0 if found.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
