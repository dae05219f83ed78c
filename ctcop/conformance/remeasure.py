"""Re-measuring the registry of known defects against a raw report (spec 10.1).

``python -m ctcop.conformance.remeasure RAW.json [--registry PATH] [--write]`` reads a report of
``ctcop conformance --no-known-defects --json RAW.json`` made with newer upstream releases and
says, per registered defect, which of its listed cases no longer fail (they are dropped; those of
a defect that varies from run to run are kept, since one run cannot show it gone), which
libraries' versions changed (the registry takes the report's), and which failures no entry
covers (new behaviour: a person gives each one an id, or finds a regression). With ``--write``
the registry file is rewritten; the pins in ``.ci/constraints.txt`` and the generated tables
(``python -m ctcop.defects docs/defects.md spec/ctcloss4.md``) are the maintainer's next steps.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from typing import Any

from ..defects import parse
from . import corpus, rows
from .expected import FAILURES
from .known import KnownDefects
from .report import counted
from .result import Result, from_dict


def remeasure(registry: dict[str, Any], report: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The registry document updated from the raw ``report``, and the lines that say what changed."""
    if report.get("settings", {}).get("known_defects", False):
        raise ValueError("the report has the registry applied: run ctcop conformance --no-known-defects")
    results = [_result(row, number) for number, row in enumerate(report["results"])]
    keys = row_keys(report)
    status = {(keys.get(r.runtime, (r.runtime,))[0], r.case): r.status for r in results}
    updated, lines = json.loads(json.dumps(registry)), []
    versions = report.get("versions", {})
    for name, library in updated["libraries"].items():
        found = next((versions[d] for d in map(_canonical, library["distributions"]) if d in versions), None)
        if found is not None and found != library["measured"]:
            lines.append(f"{name}: measured on {library['measured']}, now {found}")
            library["measured"] = found
    intermittent = {defect.id for defect in parse(registry).defects if defect.intermittent}
    for entry in updated["defects"]:
        for runtime, cases in entry.get("cases", {}).items():
            kept = [c for c in cases if status.get((runtime, c), "fail") in FAILURES]
            gone = sorted(set(cases) - set(kept))
            if gone and entry["id"] in intermittent:
                lines.append(
                    f"{entry['id']} {runtime}: did not show on {counted(len(gone), 'case')} this run, kept "
                    f"(it varies from run to run): {', '.join(gone[:5])}"
                )
            elif gone:
                fixed = f"no longer fails {counted(len(gone), 'case')}: {', '.join(gone[:5])}"
                lines.append(f"{entry['id']} {runtime}: {fixed}")
                entry["cases"][runtime] = kept
    lines += _new_devices(updated, results, keys)
    known = KnownDefects.of(list(parse(updated).defects), keys)
    tags = {case.id: case.tags for case in corpus.load_all()}
    for result in results:
        claimed = known.apply(result, tags.get(result.case, ())).status != result.status
        if result.status in FAILURES and not claimed:
            lines.append(f"unregistered: {result.runtime} {result.case} [{result.status}] {result.message}")
    return updated, lines


def row_keys(report: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each row's registry keys as the report records them (spec 10.4; a row without: its name)."""
    listed = [r for r in report.get("runtimes", []) if isinstance(r, dict) and isinstance(r.get("name"), str)]
    return {r["name"]: tuple(map(str, r.get("registry_keys") or [r["name"]])) for r in listed}


def _new_devices(updated: dict[str, Any], results: Sequence[Result], keys: dict[str, tuple[str, ...]]) -> list[str]:
    """For the rows whose device no entry lists yet (spec 10.4): each failing case goes under the
    row's key into the entry that lists it for the same runtime on the CPU with that status."""
    listed = {key for entry in updated["defects"] for key in entry.get("cases", {})}
    added: dict[tuple[str, str], int] = {}
    for result in results:
        key = keys.get(result.runtime, (result.runtime,))[0]
        cpu = rows.Row(rows.parse(key).runtime, precision=rows.parse(key).precision).name
        if key in listed or key == cpu or result.status not in FAILURES:
            continue
        for entry in updated["defects"]:
            if result.case in entry.get("cases", {}).get(cpu, ()) and result.status in entry["statuses"]:
                entry["cases"].setdefault(key, []).append(result.case)
                if key not in entry["runtimes"]:
                    entry["runtimes"].append(key)
                added[entry["id"], key] = added.get((entry["id"], key), 0) + 1
                break
    return [
        f"{d} {key}: {counted(n, 'case')} added (a new device; they fail as on the CPU)"
        for (d, key), n in added.items()
    ]


def _result(row: Any, number: int) -> Result:
    try:
        return from_dict(row)
    except ValueError as why:
        raise ValueError(f"result {number} {why}") from None


def _canonical(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctcop.conformance.remeasure", description=__doc__)
    parser.add_argument("report", help="a --json report of ctcop conformance --no-known-defects")
    parser.add_argument("--registry", help="the registry file (default: the package's defects.json)")
    parser.add_argument("--write", action="store_true", help="rewrite the registry file")
    args = parser.parse_args(argv)
    path = args.registry or str(resources.files("ctcop").joinpath("data", "defects.json"))
    with open(path, encoding="utf-8") as file:
        registry = json.load(file)
    with open(args.report, encoding="utf-8") as file:
        report = json.load(file)
    try:
        updated, lines = remeasure(registry, report)
    except ValueError as error:
        print(f"remeasure: {error}", file=sys.stderr)
        return 2
    print("\n".join(lines) or "the registry matches the report")
    if args.write:
        with open(path, "w", encoding="utf-8") as file:
            file.write(json.dumps(updated, indent=1) + "\n")
        print(f"wrote {path}")
    return 1 if any(line.startswith("unregistered:") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
