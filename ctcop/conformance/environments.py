"""Runtimes of another Python environment (spec 10.4): ``--runtime-python LABEL=PYTHON``.

A runtime team tests a release in a venv of its own (two OpenVINO releases cannot share one;
``onnxruntime-openvino`` replaces ``onnxruntime``). ctcop must be installed there, at the version
of the ctcop that runs the suite (``PYTHON -m pip install ctcop==VERSION``). The suite asks that
interpreter, in a worker of its own (:func:`describe`), for the rows its runtimes make at the
run's devices and precision, with their registry keys, OpenVINO's facts and the environment's
library versions; the rows are named ``runtime~LABEL...`` (:mod:`.rows`). Their evaluations run
in workers forked by a fork server of that interpreter, which speak the same protocol
(:mod:`.pool`). Nothing of the other environment is imported here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInputError
from ..process.workers import Failed, Lost, call
from ..text import one_line
from .devices import Facts
from .registry import Entry
from .rows import LABEL, parse

DESCRIBE = "ctcop.conformance.environments:describe"
CHECK_TIMEOUT_S = 60.0  # how long the other interpreter may take to import ctcop and say its version


@dataclass(frozen=True)
class Environment:
    """A Python environment of runtimes: its ``label`` in row names and its interpreter."""

    label: str
    python: str


def environment(given: str) -> Environment:
    """``LABEL=PYTHON`` read; ValueError, one line, for anything else."""
    label, equals, python = given.partition("=")
    if not equals or not LABEL.fullmatch(label) or not python:
        raise ValueError(f"{given!r} is not LABEL=PYTHON with a label of {LABEL.pattern}")
    return Environment(label, python)


@dataclass(frozen=True)
class Remote:
    """A runtime of another environment as this process lists it: it runs in that environment's
    workers only."""

    name: str
    description: str
    sampled: bool

    def run(self, case: Any) -> Any:
        raise RuntimeError(f"{self.name} runs in its own environment's workers")


def describe(request: Mapping[str, Any]) -> dict[str, Any]:
    """In the other environment: ctcop's and the libraries' versions, and the rows of the runtimes
    named (all when none) at ``devices`` and ``precision`` (:func:`.devices.rows`)."""
    import ctcop

    from . import devices, registry, report, sampling

    entries = registry.discover(request["modules"], probe_timeout_s=request["timeout"])
    names = request["names"]
    by_name = {entry.name: entry for entry in entries}
    chosen = [by_name[name] for name in names if name in by_name] if names else entries
    listed, facts = devices.rows(chosen, request["devices"], request["precision"], strict=False)
    described = []
    for entry in listed:
        found = facts.get(entry.name)
        described.append(
            {
                "name": entry.name,
                "description": entry.description,
                "available": entry.available,
                "origin": entry.origin,
                "version": entry.version,
                "sampled": sampling.is_sampled(entry.runtime),
                "keys": list(found.keys) if found else [entry.name],
                "reduced": found.reduced if found else None,
                "openvino": dict(found.device) if found and found.device else None,
            }
        )
    versions = report.versions([e.runtime for e in listed if e.runtime is not None])
    return {"ctcop": ctcop.__version__, "python": sys.version.split()[0], "versions": versions, "rows": described}


def _checked(env: Environment, timeout_s: float) -> None:
    """Refuse an interpreter that does not run or has another ctcop than this one, in one line."""
    import ctcop

    try:
        ran = subprocess.run(
            [env.python, "-c", "import sys; del sys.path[0]; import ctcop; print(ctcop.__version__)"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InvalidInputError(
            "runtime_python", f"{env.label}: {env.python} does not run: {one_line(error)}"
        ) from None
    if ran.returncode != 0:
        last = (ran.stderr.strip().splitlines() or ["no output"])[-1]
        raise InvalidInputError("runtime_python", f"{env.label}: {env.python} cannot import ctcop: {one_line(last)}")
    if ran.stdout.strip() != ctcop.__version__:
        found = one_line(ran.stdout.strip(), 80)
        raise InvalidInputError(
            "runtime_python", f"{env.label}: {env.python} has ctcop {found}, not {ctcop.__version__}: install this one"
        )


def rows(
    env: Environment,
    names: Sequence[str] | None,
    modules: Sequence[str],
    devices: Sequence[str],
    precision: str,
    timeout_s: float,
) -> tuple[list[Entry], dict[str, Facts], dict[str, Any]]:
    """The entries of ``env``'s rows (``Remote`` runtimes), their facts, and what the report
    records of the environment; InvalidInputError, one line, when it cannot say."""
    _checked(env, min(timeout_s, CHECK_TIMEOUT_S))
    request: dict[str, Any] = {"names": list(names or []), "modules": list(modules), "devices": list(devices)}
    request.update(precision=precision, timeout=timeout_s)
    try:
        found = call(DESCRIBE, request, timeout_s, python=env.python)
    except (Failed, Lost) as error:
        raise InvalidInputError(
            "runtime_python", f"{env.label}: listing its runtimes failed: {one_line(error)}"
        ) from None
    entries, facts = [], {}
    for row in found["rows"]:
        named = parse(row["name"])
        name = type(named)(named.runtime, named.device, named.precision, env.label).name
        runtime = Remote(name, row["description"], row["sampled"])
        entries.append(
            Entry(name, row["description"], row["available"], f"{env.label} {row['origin']}", runtime, row["version"])
        )
        facts[name] = Facts(tuple(row["keys"]), row["reduced"], row["openvino"], env.label)
    described = {"label": env.label, "python": env.python, "ctcop": found["ctcop"], "versions": found["versions"]}
    return entries, facts, {**described, "python_version": found["python"]}
