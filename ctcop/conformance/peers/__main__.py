"""``python -m ctcop.conformance.peers [--peers a,b] [--cases PATTERN ...] [--details] [--json FILE]``

Runs every installed peer (or the chosen ones) over the corpus selection (default: every case
but the scale ones), each peer in a worker subprocess that reports one JSON line per case, so a
framework that kills its process costs one case (a ``crash``) and a fresh worker resumes after
it. Prints per peer the pass / fail / error / skip / crash counts, the framework's import time
and the time of the cases; ``--details`` lists every case that did not pass.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from .. import corpus
from . import PEERS
from .common import attempt, judge

VERDICTS = ("pass", "fail", "error", "skip", "crash")


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def work(name: str, patterns: list[str], start: int) -> None:
    """The worker: load the framework, then judge the chosen cases from index ``start`` on."""
    peer = PEERS[name]
    cases = corpus.select(corpus.load_all(), patterns or None)
    began = time.perf_counter()
    peer.load()
    emit({"load": time.perf_counter() - began})
    for index in range(start, len(cases)):
        began = time.perf_counter()
        verdict, detail = judge(cases[index], attempt(peer, cases[index]))
        seconds = time.perf_counter() - began
        emit({"index": index, "id": cases[index].id, "verdict": verdict, "detail": detail, "seconds": seconds})


def measure(name: str, patterns: list[str], count: int) -> dict[str, Any]:
    """Every chosen case through peer ``name``, a fresh worker after each crash."""
    results: list[dict[str, Any]] = []
    loads: list[float] = []
    start = 0
    while start < count:
        command = [sys.executable, "-m", "ctcop.conformance.peers", "--worker", name, "--start", str(start)]
        with tempfile.TemporaryFile("w+") as errors:
            process = subprocess.Popen(
                [*command, *(["--cases", *patterns] if patterns else [])],
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
            assert process.stdout is not None
            for line in process.stdout:
                record = json.loads(line)
                if "load" in record:
                    loads.append(record["load"])
                else:
                    results.append(record)
                    start = record["index"] + 1
            code = process.wait()
            errors.seek(0)
            last = (errors.read().strip().splitlines() or [""])[-1][:200]
        if start < count:
            why = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}: {last}"
            results.append({"index": start, "verdict": "crash", "detail": f"worker {why}", "seconds": 0})
            start += 1
    return {"peer": name, "load_seconds": loads, "cases": results}


def table(reports: list[dict[str, Any]], ids: list[str], details: bool) -> str:
    lines = [f"{'peer':15}" + "".join(f"{v:>7}" for v in VERDICTS) + "   import s   cases s"]
    for report in reports:
        counts = Counter(r["verdict"] for r in report["cases"])
        load = min(report["load_seconds"], default=0.0)
        spent = sum(r["seconds"] for r in report["cases"])
        cells = "".join(f"{counts[v]:7}" for v in VERDICTS)
        lines.append(f"{report['peer']:15}{cells}{load:11.1f}{spent:10.1f}")
    for report in reports if details else []:
        for r in report["cases"]:
            if r["verdict"] != "pass":
                lines.append(f"{report['peer']:15} {r['verdict']:6} {ids[r['index']]}: {r['detail']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctcop.conformance.peers", description=__doc__)
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated peer names")
    parser.add_argument("--cases", nargs="*", default=[], help="tags or id globs (default: all but scale)")
    parser.add_argument("--details", action="store_true", help="list every case that did not pass")
    parser.add_argument("--json", help="write every outcome to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        work(args.worker, args.cases, args.start)
        return 0
    ids = [case.id for case in corpus.select(corpus.load_all(), args.cases or None)]
    reports = []
    for name in args.peers.split(","):
        reason = PEERS[name].available()
        if reason is not None:
            print(f"{name}: not installed ({reason})")
            continue
        reports.append(measure(name, args.cases, len(ids)))
    print(table(reports, ids, args.details))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump({"cases": ids, "peers": reports}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
