"""The inference precision a model is compiled at when it is compared with the reference (spec 13).

OpenVINO's plugins choose a default inference precision by hardware: the CPU plugin's is bfloat16
on CPUs with AVX-512-BF16 or AMX and float32 elsewhere (spec 12.2, "What depends on the CPU").
Compared with the reference, a model is compiled at the precision it declares: the element type of
the loss layer's logits, where the device can compute it (the device's capabilities are read from
OpenVINO, never assumed), else float32.
"""

from __future__ import annotations

from typing import Any

from .files import VIRTUAL_DEVICES
from .types import ELEMENT_TYPES

HINT = "INFERENCE_PRECISION_HINT"
# The reduced precisions and the OPTIMIZATION_CAPABILITIES entry that says a device computes them.
REDUCED = {"f16": "FP16", "bf16": "BF16"}
_SHORT = {numpy_name: short for short, numpy_name in ELEMENT_TYPES.items()}


def short_type_name(element_type: Any) -> str:
    """OpenVINO's short name ("f32", "bf16", ...) of an ``openvino.Type``, a numpy type name
    ("float32", as the schema writes it: spec 10) or a short name; other names are returned as
    they are."""
    name = element_type.get_type_name() if hasattr(element_type, "get_type_name") else str(element_type)
    return _SHORT.get(name, name)


def declared_hint(element_type: Any) -> str:
    """The hint that computes logits of ``element_type`` at their own precision on a device that
    can: "f16" for float16, "bf16" for bfloat16, "f32" for anything else (float64 included: the
    CPU plugin has no f64 inference precision, spec 12.2 D4)."""
    declared = short_type_name(element_type)
    return declared if declared in REDUCED else "f32"


def _hardware_devices(core: Any, device: str) -> list[str]:
    """The devices that ``device`` computes on: the listed ones of a virtual device (``HETERO:GPU,CPU``,
    ``BATCH:GPU(4)``), every available device for a bare ``AUTO``, else ``device`` itself."""
    head, colon, rest = device.partition(":")
    if head not in VIRTUAL_DEVICES:
        return [device]
    return [part.split("(")[0] for part in rest.split(",")] if colon else list(core.available_devices)


def _property(core: Any, device: str, name: str) -> list[str]:
    """A list-valued property of a hardware device; empty when the device does not report it."""
    try:
        return [str(value) for value in core.get_property(device, name)]
    except RuntimeError:
        return []


def declared_precision_config(core: Any, device: str, element_type: Any) -> dict[str, str]:
    """The ``compile_model`` config that computes a model at the precision it declares (spec 13):
    ``element_type`` is the declared element type of the loss layer's logits (an ``openvino.Type``
    or a type name). float32 and float64 give f32 (the CPU plugin has no f64 inference precision:
    float64 models are computed in float32, spec 12.2 D4); float16 gives f16 and bfloat16 gives bf16
    only where every device ``device`` computes on lists FP16 / BF16 among its
    ``OPTIMIZATION_CAPABILITIES``, else f32; any other type gives f32. Empty (the device's default)
    for a device that does not take ``INFERENCE_PRECISION_HINT``."""
    devices = _hardware_devices(core, device)
    if not all(HINT in _property(core, d, "SUPPORTED_PROPERTIES") for d in devices):
        return {}
    declared = declared_hint(element_type)
    if declared in REDUCED and all(
        REDUCED[declared] in _property(core, d, "OPTIMIZATION_CAPABILITIES") for d in devices
    ):
        return {HINT: declared}
    return {HINT: "f32"}


def compiled_precision(compiled: Any) -> str | None:
    """The inference precision a compiled model actually runs at, read back from OpenVINO ("f32",
    "bf16", "f16"), as ``ctcop eval`` reports it (spec 13); None where the compiled model does not
    report it (AUTO, HETERO, MULTI)."""
    try:
        value = compiled.get_property(HINT)
    except RuntimeError:
        return None
    return short_type_name(value)


def device_precisions(core: Any, device: str = "CPU") -> dict[str, Any]:
    """What a report records of ``device``'s precision (spec 12.2, "Precision"): its default
    inference precision and the reduced precisions its ``OPTIMIZATION_CAPABILITIES`` list, read
    from OpenVINO; models compared with the reference are compiled at the precision they declare."""
    try:
        default: str | None = short_type_name(core.get_property(device, HINT))
    except RuntimeError:
        default = None
    capabilities = _property(core, device, "OPTIMIZATION_CAPABILITIES")
    reduced = [short for short, capability in REDUCED.items() if capability in capabilities]
    return {"openvino_device": device, "openvino_default_precision": default, "openvino_reduced_precisions": reduced}


def precision_config(core: Any, device: str, precision: str, element_type: Any) -> dict[str, str]:
    """The ``compile_model`` config of a conformance row's precision (spec 10.4): ``declared``
    (:func:`declared_precision_config`), ``native`` (nothing: the device's default), or a hint
    (``f32``, ``bf16``, ``f16``) given as it is to a device that takes one. OpenVINO may compile
    at another precision than a hint asks (a CPU without BF16 computes a bf16 hint in f32): what
    it chose is read back (:func:`compiled_precision`), never assumed."""
    if precision == "declared":
        return declared_precision_config(core, device, element_type)
    takes_hint = all(HINT in _property(core, d, "SUPPORTED_PROPERTIES") for d in _hardware_devices(core, device))
    return {HINT: precision} if precision != "native" and takes_hint else {}


def device_facts(core: Any, device: str, precision: str) -> dict[str, Any]:
    """What a report records of an OpenVINO row's device (spec 10.4), read from OpenVINO: the
    hardware devices a float32 model compiled for ``device`` at ``precision`` executes on, each
    one's full name, default and reduced precisions, the plugins' names and builds, and the
    precision the model was compiled at. ``RuntimeError`` when ``device`` cannot compile it."""
    import numpy as np
    import openvino
    import openvino.opset8 as ops

    parameter = ops.parameter([-1], np.float32)
    model = openvino.Model([ops.exp(parameter)], [parameter])
    compiled = core.compile_model(model, device, precision_config(core, device, precision, "float32"))
    executes_on = [str(name) for name in compiled.get_property("EXECUTION_DEVICES")]
    chosen = compiled_precision(compiled)
    if chosen is None and len(executes_on) == 1:  # a virtual device does not report it; its one device does
        config = precision_config(core, executes_on[0], precision, "float32")
        chosen = compiled_precision(core.compile_model(model, executes_on[0], config))
    versions = core.get_versions(device).items()
    plugins = {name: f"{version.description} {version.build_number}" for name, version in versions}
    hardware = {
        name: {"full_name": str(core.get_property(name, "FULL_DEVICE_NAME")), **device_precisions(core, name)}
        for name in executes_on
    }
    return {
        "device": device,
        "precision": precision,
        "compiled_precision": chosen,
        "executes_on": executes_on,
        "hardware": hardware,
        "plugins": plugins,
    }
