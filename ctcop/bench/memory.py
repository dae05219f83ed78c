"""Peak memory of an implementation's call, relative to the bytes of its float32 logits.

Method (:mod:`ctcop.process.memory_probe`): a fresh worker process draws the inputs, calls the
implementation once on one sample of the same [T, C] (so that JIT compilation and one-time
set-up are not counted), prepares it for the inputs (model built, inputs laid out, as for
timing) and collects garbage; its resident set size then is the baseline. The peak resident size
is reset, the call runs, and the peak minus the baseline is the first call's memory; the peak is
reset again and two more calls run: their peak minus the same baseline is what later calls hold
(allocator pools and arenas kept from the first call included). Linux only (elsewhere
:func:`measure` answers why not). The result of the call (the [N] losses, or the [T, N, C]
gradient of ``ctcop-grad``) is part of its memory.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from ..process import memory_probe
from ..process.workers import Failed, Lost
from .shapes import Shape

METHOD = (
    "peak RSS (VmHWM, reset by /proc/self/clear_refs) above the RSS before the call, "
    "in a fresh child process, after a call on one sample"
)
CHILD = "ctcop.bench.memory:child"


@dataclass(frozen=True)
class Memory:
    """What ``implementation`` held at ``shape`` and ``batch``, as multiples of the logits' bytes."""

    implementation: str
    shape: Shape
    batch: int
    first: float | None = None
    later: float | None = None
    error: str | None = None


def child(request: dict[str, Any]) -> dict[str, Any]:
    """In the worker: prepare, then measure the first call and two later ones (bytes)."""
    from . import implementations, threads
    from .shapes import draw

    threads.before_imports(request["threads"])
    shape = Shape(request["shape"], request["frames"], request["length"], request["classes"], (request["batch"],))
    inputs = draw(shape, request["batch"])
    implementation = implementations.IMPLEMENTATIONS[request["implementation"]]
    implementation.prepare(draw(shape, 1), request["threads"]).call()  # JIT compilation and set-up
    prepared = implementation.prepare(inputs, request["threads"])
    gc.collect()
    baseline = memory_probe.resident()
    first = memory_probe.peak(prepared.call, 1, baseline)
    later = memory_probe.peak(prepared.call, 2, baseline)
    return {"first": first, "later": later, "logits_bytes": inputs.logits.nbytes}


def available() -> str | None:
    """None when peak resident memory can be measured here, else why not."""
    return memory_probe.available()


def measure(implementation: str, shape: Shape, batch: int, threads: int) -> Memory:
    """Run :func:`child` in a fresh worker process and read its answer."""
    why = available()
    if why is not None:
        return Memory(implementation, shape, batch, error=why)
    request = {
        "implementation": implementation,
        "shape": shape.name,
        "frames": shape.frames,
        "length": shape.length,
        "classes": shape.classes,
        "batch": batch,
        "threads": threads,
    }
    try:
        answer = memory_probe.measure(CHILD, request)
    except Failed as error:
        return Memory(implementation, shape, batch, error=str(error))
    except Lost as lost:
        return Memory(implementation, shape, batch, error=f"child process: {lost.how}")
    size = answer["logits_bytes"]
    return Memory(implementation, shape, batch, answer["first"] / size, answer["later"] / size)
