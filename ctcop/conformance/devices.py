"""The rows of a run (spec 10.4): every chosen runtime at the run's precision, and every OpenVINO
runtime once per device, with what OpenVINO says of each device.

A device is refused in one line when OpenVINO does not have it here
(:func:`ctcop.openvino.files.checked_device`) or cannot compile a model for it. What a row's device
executes on and the precision its models compile at are read back from OpenVINO
(:func:`ctcop.openvino.precision.device_facts`): they decide its registry keys (:mod:`.rows`) and
the precision it is judged at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidInputError
from ..text import one_line
from .registry import Entry
from .rows import DECLARED, DEFAULT_DEVICE, REDUCED, Row


@dataclass(frozen=True)
class Facts:
    """What a run knows of a row: its registry ``keys``, the ``reduced`` precision it is judged at
    (spec 10.5; None: the declared type's rule, spec 10.2), its OpenVINO ``device`` facts, and the
    label of the Python environment it runs in ("": ctcop's own, :mod:`.environments`)."""

    keys: tuple[str, ...]
    reduced: str | None = None
    device: Mapping[str, Any] | None = None
    environment: str = ""


def is_openvino(entry: Entry) -> bool:
    """Whether ``entry`` is an available runtime that compiles for an OpenVINO device."""
    return entry.available is None and getattr(entry.runtime, "device", None) is not None


def _device_facts(device: str, precision: str) -> dict[str, Any]:
    from ..openvino import openvino_core
    from ..openvino.files import checked_device
    from ..openvino.precision import device_facts

    checked_device(device)
    try:
        return device_facts(openvino_core(), device, precision)
    except RuntimeError as error:
        raise InvalidInputError("device", f"{device!r} cannot compile a model here: {one_line(error)}") from None


def _judged_at(precision: str, facts: Mapping[str, Any] | None) -> str | None:
    """The reduced precision a row computes at: the one asked for, or for ``native`` the default
    of the device it executes on; None for float32 and wider."""
    if precision == "native" and facts is not None:
        defaults = [h["openvino_default_precision"] for h in facts["hardware"].values()]
        precision = next((p for p in defaults if p in REDUCED), DECLARED)
    return precision if precision in REDUCED else None


def rows(
    listed: Sequence[Entry], devices: Sequence[str], precision: str, strict: bool = True
) -> tuple[list[Entry], dict[str, Facts]]:
    """The entries of the run's rows and their :class:`Facts`, by row name: each OpenVINO
    runtime of ``listed`` on each of ``devices`` (none: CPU) at ``precision``, every other
    runtime once at ``precision``. InvalidInputError for a device that is not here, and
    (``strict``: the run has no other environment to run them) for ``devices`` without an
    OpenVINO runtime among ``listed``."""
    openvino = any(is_openvino(entry) for entry in listed)
    if devices and not openvino and strict:
        raise InvalidInputError("device", "--device applies to OpenVINO runtimes, and none is chosen")
    found = {device: _device_facts(device, precision) for device in (devices or [DEFAULT_DEVICE]) if openvino}
    entries: list[Entry] = []
    facts: dict[str, Facts] = {}
    for entry in listed:
        if not is_openvino(entry):
            row = Row(entry.name, precision=precision)
            facts[row.name] = Facts(row.registry_keys(), _judged_at(precision, None))
            entries.append(replace(entry, name=row.name))
            continue
        for device, known in found.items():
            row = Row(entry.name, device, precision)
            executes_on = ",".join(known["executes_on"])
            facts[row.name] = Facts(row.registry_keys(executes_on), _judged_at(precision, known), known)
            entries.append(replace(entry, name=row.name, runtime=entry.runtime.on(device, precision)))
    return entries, facts
