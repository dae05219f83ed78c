"""What a bench run chose and measured, the machine it ran on, and its JSON report.

The report (schema ``ctcop-bench``, version :data:`SCHEMA_VERSION`) holds the machine (CPU model,
cores, platform), the settings (threads, protocol, shapes, implementations), the thread count
each library ended up with, the versions of the packages, the implementations with their
status (``timed`` or ``not installed``, with the reason), every cell (shape, N, implementation,
status ``ok``/``wrong``/``error``, the check's message, the median seconds over the passes and
each pass's median, the min/max seconds and the number of runs over all passes, the compilation
time where there was one, the first pass's first call and preparation: models built in the first
cell, inputs converted and laid out), the ratios per row, peak memory, the wall time, and
``interrupted_by`` (null, or the signal that cut the run short). Version 3: the rounds
(``settings.rounds``; version 2 timed a cell's columns one after another, version 1 had one
pass and no ``passes`` or ``pass_medians_s``).
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from ..process.frameworks import versions as installed_versions
from .implementations import IMPLEMENTATIONS
from .memory import METHOD, Memory
from .ratios import ratio_value, usable_ratios
from .shapes import Shape
from .timing import Cell, Protocol

SCHEMA = "ctcop-bench"
SCHEMA_VERSION = 3
PACKAGES = (
    "ctcop",
    "numpy",
    "numba",
    "onnx",
    "onnxruntime",
    "openvino",
    "torch",
    "tensorflow",
    "tensorflow-cpu",
    "jax",
    "jaxlib",
    "optax",
    "paddlepaddle",
)


@dataclass(frozen=True)
class Settings:
    """The shapes (each with its batch sizes), the implementations asked for (registry order),
    the timing protocol, whether to measure peak memory, and whether this is ``--quick``."""

    shapes: tuple[Shape, ...]
    names: tuple[str, ...]
    protocol: Protocol
    memory: bool = True
    quick: bool = False


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what ``platform`` knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine(cores: int) -> dict[str, Any]:
    """The CPU, its cores, the platform and the load average when the run started (other work
    on the machine shows in the timings)."""
    try:
        load: float | None = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        load = None
    return {
        "cpu": cpu_model(),
        "cores": cores,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "load_average_1min": load,
    }


def versions() -> dict[str, str]:
    """The installed versions of :data:`PACKAGES`."""
    return installed_versions(PACKAGES)


@dataclass
class Results:
    settings: Settings
    machine: dict[str, Any]
    versions: dict[str, str]
    missing: dict[str, str]  # implementation asked for -> why it is not installed
    cells: list[Cell] = field(default_factory=list)
    memory: list[Memory] = field(default_factory=list)
    threads: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    interrupted_by: str | None = None

    def timed_names(self) -> list[str]:
        return [name for name in self.settings.names if name not in self.missing]

    def shapes(self) -> list[Shape]:
        return [shape for shape in self.settings.shapes if any(c.shape.name == shape.name for c in self.cells)]

    def rows(self, shape_name: str) -> list[tuple[int, dict[str, Cell]]]:
        """(N, the cells of that row by implementation), in the order measured."""
        rows: dict[int, dict[str, Cell]] = {}
        for cell in self.cells:
            if cell.shape.name == shape_name:
                rows.setdefault(cell.batch, {})[cell.implementation] = cell
        return list(rows.items())


def _cell(cell: Cell) -> dict[str, Any]:
    shape = cell.shape
    entry: dict[str, Any] = {
        "shape": shape.name,
        "T": shape.frames,
        "L": shape.length,
        "C": shape.classes,
        "N": cell.batch,
        "implementation": cell.implementation,
        "status": cell.status,
        "message": cell.message,
    }
    empty: dict[str, Any] = {"median_s": None, "min_s": None, "max_s": None, "pass_medians_s": []}
    entry |= asdict(cell.timing) if cell.timing is not None else empty
    entry.setdefault("runs", 0)
    return entry | {"compile_s": cell.compile_s, "first_call_s": cell.first_s, "prepare_s": cell.prepare_s}


def _ratios(results: Results) -> list[dict[str, Any]]:
    found = []
    for shape in results.shapes():
        for batch, row in results.rows(shape.name):
            for ratio in usable_ratios(results.timed_names()):
                value = ratio_value(ratio, row)
                found.append({"shape": shape.name, "N": batch, "ratio": ratio.describe(), "value": value})
    return found


def _memory(item: Memory) -> dict[str, Any]:
    return {
        "implementation": item.implementation,
        "shape": item.shape.name,
        "N": item.batch,
        "logits_bytes": item.shape.logits_bytes(item.batch),
        "first_call_ratio": item.first,
        "later_calls_ratio": item.later,
        "error": item.error,
    }


def document(results: Results) -> dict[str, Any]:
    """The JSON report."""
    settings = results.settings
    implementations = [
        {
            "name": name,
            "column": IMPLEMENTATIONS[name].column,
            "label": IMPLEMENTATIONS[name].label,
            "gradient": IMPLEMENTATIONS[name].gradient,
            "status": "not installed" if name in results.missing else "timed",
            "reason": results.missing.get(name),
        }
        for name in settings.names
    ]
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "machine": results.machine,
        "settings": {
            "quick": settings.quick,
            **asdict(settings.protocol),
            "shapes": [asdict(shape) for shape in settings.shapes],
        },
        "threads": results.threads,
        "versions": results.versions,
        "implementations": implementations,
        "cells": [_cell(cell) for cell in results.cells],
        "ratios": _ratios(results),
        "memory": {"method": METHOD, "measurements": [_memory(item) for item in results.memory]},
        "wall_s": results.wall_s,
        "interrupted_by": results.interrupted_by,
    }
