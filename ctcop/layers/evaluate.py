"""``ctcop eval``: each CTCLoss layer of a model by the reference and by the runtime, with a verdict.

Verdicts: ``agree`` (within the element type's tolerance, :func:`ctcop.tolerance.compare`),
``disagree``, ``error`` (the runtime raised), ``crash`` (the runtime killed its worker process),
``invalid-layer`` (a static finding of :mod:`.validate`) and ``invalid-input`` (the layer's
actual inputs break a rule of the spec; nothing is compared). Where ctcop knows the likely cause
of a failure (a defect of spec 12.2) it says so with the evidence. OpenVINO compiles the model at
the precision the layer declares, or at the device's default (``native``); a layer that disagrees
under a reduced precision is evaluated again at the declared one, and the cause says what that
showed (spec 13).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

import numpy as np

from .. import canonical
from ..errors import InvalidInputError
from ..process.workers import Failed, Lost, call
from ..reference import ctc_loss, ctc_loss_or_nan, openvino_ctc_loss, openvino_ctc_loss_or_nan
from ..tolerance import describe, max_errors, mismatch
from .causes import likely_cause, precision_cause
from .find import Layer
from .result import LayerResult
from .validate import attributes_of, validate_layer

WORKER = "ctcop.layers.worker:evaluate"
WORKER_TIMEOUT_S = 600.0


SHOWN_FAULTS = 3  # invalid samples whose rule a cause quotes


def _alone(layer: Layer, inputs: list[np.ndarray], sample: int) -> list[np.ndarray]:
    """``inputs`` with every sample but ``sample`` replaced by a valid empty one (no frames, no
    labels), so that the reference names the rule ``sample`` breaks at its own index."""
    others = np.arange(inputs[0].shape[0 if layer.spec_form == "openvino" else 1]) != sample
    changed = list(inputs)
    if layer.spec_form == "openvino":
        for k in (1, 3):  # logit_length, label_length
            changed[k] = np.where(others, 0, inputs[k]).astype(inputs[k].dtype)
    else:
        changed[1] = np.where(others[None, :], 0, inputs[1]).astype(inputs[1].dtype)
        empty = -1 if inputs[2].dtype.kind == "i" else 0
        changed[2] = np.where(others[:, None], empty, inputs[2]).astype(inputs[2].dtype)
    return changed


def _strict(layer: Layer, inputs: list[np.ndarray]) -> np.ndarray:
    attributes = attributes_of(layer)
    if layer.spec_form == "openvino":
        blank = inputs[4] if len(inputs) > 4 else None
        return openvino_ctc_loss(inputs[0], inputs[1], inputs[2], inputs[3], blank, **attributes)
    return ctc_loss(inputs[0], inputs[1], inputs[2], **attributes)


def invalid_samples(layer: Layer, inputs: list[np.ndarray], faults: np.ndarray) -> str:
    """What is invalid in the samples ``faults`` marks: each sample's first broken rule (the
    reference's own message), or the batch's when every sample is at fault for one reason."""
    try:
        _strict(layer, inputs)
    except InvalidInputError as error:
        batch = str(error)
    else:
        return ""
    shown = []
    for sample in np.flatnonzero(faults)[:SHOWN_FAULTS]:
        try:
            _strict(layer, _alone(layer, inputs, int(sample)))
        except InvalidInputError as error:
            shown.append(str(error))
    if not shown:  # the fault is the batch's: a shape, the blank, C = 0
        return f"every sample is invalid input: {batch}"
    more = f" (and {int(faults.sum()) - len(shown)} more)" if faults.sum() > len(shown) else ""
    samples = ", ".join(str(int(i)) for i in np.flatnonzero(faults))
    return f"invalid input in sample{'s' if faults.sum() > 1 else ''} {samples}, NaN expected: {'; '.join(shown)}{more}"


def reference_loss(layer: Layer, inputs: list[np.ndarray]) -> tuple[np.ndarray, str]:
    """The reference for ``layer`` on its input values, read as ctcop's exported graphs read any
    input (spec 11.5): NaN for each sample that breaks a rule of the values, with what it breaks
    ("" when every sample is valid). A rank or an element type raises :class:`InvalidInputError`."""
    attributes = attributes_of(layer)
    if layer.spec_form == "openvino":
        logits, logit_length, labels, label_length = inputs[:4]
        blank = inputs[4] if len(inputs) > 4 else None
        faults = canonical.openvino_faults(logits, logit_length, labels, label_length, blank, **attributes)
        expected = openvino_ctc_loss_or_nan(logits, logit_length, labels, label_length, blank, **attributes)
    else:
        faults = canonical.time_major_faults(inputs[0], inputs[1], inputs[2])[3]
        expected = ctc_loss_or_nan(inputs[0], inputs[1], inputs[2], **attributes)
    return expected, invalid_samples(layer, inputs, faults) if faults.any() else ""


def _finished(folder: str, index: int) -> bool:
    return any(os.path.exists(os.path.join(folder, f"{index}.{kind}")) for kind in ("loss.npy", "error.txt"))


def _run_worker(request: dict[str, Any], folder: str, settled: set[int]) -> None:
    """Run a worker (:mod:`.worker` in a fresh process, :mod:`ctcop.process.workers`) until every
    requested layer has its result file or has been found to kill the worker (then a fresh worker
    resumes after it). The first worker may run an ONNX model's layers together; one that dies then
    is run again layer by layer, so that a crash is its own layer's. ``settled`` receives each layer
    index whose outcome is known, also when an interruption ends this early (the worker is then
    killed and reaped)."""
    indices = request["layers"]
    start, batch = 0, request["kind"] == "onnx"
    try:
        while start < len(indices):
            with contextlib.suppress(Lost, Failed):  # died, hung (a crash) or failed: its files say how far it got
                call(WORKER, {**request, "start": start, "batch": batch}, WORKER_TIMEOUT_S)
            pending = [position for position in range(start, len(indices)) if not _finished(folder, indices[position])]
            if pending and batch:  # died running layers together: again one by one, to place the crash
                batch = False
                continue
            start = pending[0] + 1 if pending else len(indices)
    finally:
        settled.update(indices[:start])
        settled.update(index for index in indices[start:] if _finished(folder, index))


def _verdict(layer: Layer, errors: list[str], folder: str, runtime: str, precision: str | None) -> LayerResult:
    result = LayerResult(layer.name, layer.form, attributes_of(layer), precision=precision)
    if errors:
        result.verdict, result.cause = "invalid-layer", errors[0]
        return result
    precision_path = os.path.join(folder, f"{layer.index}.precision.json")
    if os.path.exists(precision_path):
        with open(precision_path, encoding="utf-8") as file:
            result.compiled_precision = json.load(file)["compiled"]
    inputs_path = os.path.join(folder, f"{layer.index}.inputs.npz")
    inputs, invalid = [], ""
    if os.path.exists(inputs_path):
        with np.load(inputs_path, allow_pickle=False) as archive:
            computed = [archive[f"arr_{k}"] for k in range(len(archive.files))]
        # Constants as the file holds them (spec 13): the CPU plugin hands int64 values on wrapped (D6).
        inputs = [p.constant if p.constant is not None else v for p, v in zip(layer.ports, computed, strict=False)]
        try:
            expected, invalid = reference_loss(layer, inputs)
        except InvalidInputError as error:
            result.verdict, result.cause = "invalid-input", str(error)
            return result
        result.reference = [float(v) for v in expected]
        result.note = invalid
    loss_path, error_path = (os.path.join(folder, f"{layer.index}.{k}") for k in ("loss.npy", "error.txt"))
    if os.path.exists(loss_path):
        got = np.load(loss_path, allow_pickle=False)
        result.runtime = [float(v) for v in np.ravel(got)]
        if result.reference is not None:
            result.max_abs_err, result.max_rel_err = max_errors(got, expected)
            found = mismatch(got, expected, str(expected.dtype))
            result.verdict = "disagree" if found else "agree"
            result.cause = "" if found is None else describe(found)
    elif os.path.exists(error_path):
        with open(error_path, encoding="utf-8") as file:
            raised = file.read()
        # a runtime may refuse invalid input by raising (spec 11.5): then nothing is compared
        result.verdict, result.cause = (
            ("invalid-input", f"the runtime raised {raised}") if invalid else ("error", raised)
        )
    else:
        result.verdict, result.cause = "crash", "the runtime's worker process died"
    known = likely_cause(layer, inputs, result.verdict, runtime)
    if known:
        result.cause = f"{known} ({result.cause})" if result.cause else known
    return result


def _reduced(layer: Layer, result: LayerResult) -> bool:
    """Whether ``result`` disagrees under a precision below the one ``layer`` declares (spec 13)."""
    reduced = result.compiled_precision in ("bf16", "f16")
    return result.verdict == "disagree" and reduced and layer.ports[0].dtype in ("float32", "float64")


def _explain_precision(request: dict[str, Any], evaluated: list[tuple[Layer, LayerResult]], folder: str) -> None:
    """Evaluate each layer that disagrees under a reduced precision again at its declared
    precision, and put what that showed in front of its cause (spec 13)."""
    suspects = [(layer, result) for layer, result in evaluated if _reduced(layer, result)]
    if not suspects:
        return
    again_folder = os.path.join(folder, "declared")
    os.mkdir(again_folder)
    indices = [layer.index for layer, _ in suspects]
    again = {**request, "precision": "declared", "out": again_folder, "layers": indices}
    _run_worker(again, again_folder, set())
    for layer, result in suspects:
        at_declared = _verdict(layer, [], again_folder, request["runtime"], "declared")
        known = precision_cause(str(result.compiled_precision), layer.ports[0].dtype, at_declared)
        result.cause = f"{known}; {result.cause}" if result.cause else known


def evaluate_layers(
    model_path: str,
    kind: str,
    layers: list[Layer],
    feeds: dict[str, np.ndarray],
    runtime: str,
    device: str,
    into: list[LayerResult] | None = None,
    precision: str = "declared",
    kernels: bool = False,
) -> list[LayerResult]:
    """Every layer of ``layers`` by the reference and, in worker processes, by ``runtime``;
    OpenVINO compiles at the layer's declared precision or, with ``precision`` "native", at the
    device's default (spec 13); ``kernels`` as given to :func:`ctcop.layers.model.open_model` for
    ``layers``. The results also go into ``into``; when an interruption
    (KeyboardInterrupt) stops the workers, ``into`` holds the layers whose outcome was known by
    then and the interruption propagates."""
    results: list[LayerResult] = [] if into is None else into
    mode = precision if runtime == "openvino" else None
    with tempfile.TemporaryDirectory(prefix="ctcop-eval-") as folder:
        # Positional arrays and the names in the request: an input name may be any string (one
        # longer than a zip member name may be, or holding a NUL).
        feeds_path = os.path.join(folder, "feeds.npz")
        np.savez(feeds_path, *feeds.values())
        errors = {layer.index: [f.message for f in validate_layer(layer) if f.level == "error"] for layer in layers}
        valid = [layer.index for layer in layers if not errors[layer.index]]
        request = {
            "model": os.path.abspath(model_path),
            "kind": kind,
            "runtime": runtime,
            "device": device,
            "precision": precision,
            "feeds": feeds_path,
            "feed_names": list(feeds),
            "kernels": kernels,
        }
        settled: set[int] = set()
        try:
            _run_worker({**request, "out": folder, "layers": valid}, folder, settled)
        finally:
            done = [layer for layer in layers if errors[layer.index] or layer.index in settled]
            results[:] = [_verdict(layer, errors[layer.index], folder, runtime, mode) for layer in done]
        _explain_precision(request, list(zip(done, results, strict=True)), folder)
    return results
