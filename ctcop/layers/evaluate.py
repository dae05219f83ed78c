"""``ctcop eval``: each CTCLoss layer of a model by the reference and by the runtime, with a verdict.

Verdicts: ``agree`` (within the element type's tolerance, :func:`ctcop.tolerance.compare`),
``disagree``, ``error`` (the runtime raised), ``crash`` (the runtime killed its worker process),
``invalid-layer`` (a static finding of :mod:`.validate`) and ``invalid-input`` (the layer's
actual inputs break a rule of the spec; nothing is compared). Where ctcop knows the likely cause
of a failure (a defect of spec 12.2) it says so with the evidence.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..reference import ctc_loss, openvino_ctc_loss
from ..tolerance import compare, max_errors
from .find import Layer
from .validate import attributes_of, validate_layer

WORKER_TIMEOUT_S = 600.0


@dataclass
class LayerResult:
    """What ``ctcop eval`` reports for one layer (the JSON's ``layers`` entries)."""

    name: str
    form: str
    attributes: dict[str, bool]
    reference: list[float] | None = None
    runtime: list[float] | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    verdict: str = ""
    cause: str = ""


def reference_loss(layer: Layer, inputs: list[np.ndarray]) -> np.ndarray:
    """The reference for ``layer`` on its input values (raises :class:`InvalidInputError`)."""
    attributes = attributes_of(layer)
    if layer.spec_form == "openvino":
        logits, logit_length, labels, label_length = inputs[:4]
        blank = inputs[4] if len(inputs) > 4 else None
        return openvino_ctc_loss(logits, logit_length, labels, label_length, blank, **attributes)
    return ctc_loss(inputs[0], inputs[1], inputs[2], **attributes)


def likely_cause(layer: Layer, inputs: list[np.ndarray], verdict: str, runtime: str) -> str:
    """A known defect of spec 12.2 that explains ``verdict``, with its evidence, or ""."""
    if runtime != "openvino" or not inputs:
        return ""
    logits = np.asarray(inputs[0], dtype=np.float64)
    if layer.form == "released":
        lengths, target_lengths = np.asarray(inputs[1]), np.asarray(inputs[3])
        if verdict == "crash" and (target_lengths == 0).any():
            i = int(np.argmax(target_lengths == 0))
            return f"spec 12.2 D1: sample {i} has an empty target (label_length 0); the native kernel crashes on it"
        if verdict == "error" and (target_lengths > lengths).any():
            i = int(np.argmax(target_lengths > lengths))
            return f"spec 12.2 D2: sample {i} has label_length {target_lengths[i]} > logit_length {lengths[i]}"
        if verdict == "disagree" and logits.size and (logits.max() >= 88.0 or logits.max(axis=2).min() <= -103.0):
            top, low = logits.max(), logits.max(axis=2).min()
            return f"spec 12.2 D3: largest logit {top:.6g}, smallest frame maximum {low:.6g}: exponentiated unshifted"
    if verdict == "disagree" and layer.ports[0].dtype == "float64":
        return "spec 12.2 D4/D5: OpenVINO's CPU plugin computes float64 models in float32 and saturates +inf"
    return ""


def _finished(folder: str, index: int) -> bool:
    return any(os.path.exists(os.path.join(folder, f"{index}.{kind}")) for kind in ("loss.npy", "error.txt"))


def _run_worker(request: dict[str, Any], folder: str, settled: set[int]) -> None:
    """Run the worker until every requested layer has its result file or has been found to kill
    the worker (then a fresh worker resumes after it). ``settled`` receives each layer index whose
    outcome is known, also when an interruption ends this early (the worker is then killed and
    reaped by ``subprocess.run``)."""
    indices = request["layers"]
    start = 0
    try:
        while start < len(indices):
            path = os.path.join(folder, "request.json")
            with open(path, "w", encoding="utf-8") as file:
                json.dump({**request, "start": start}, file)
            command = [sys.executable, "-m", "ctcop.layers.worker", path]
            with contextlib.suppress(subprocess.TimeoutExpired):  # a hung runtime counts as a crash
                subprocess.run(
                    command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S
                )
            pending = [position for position in range(start, len(indices)) if not _finished(folder, indices[position])]
            start = pending[0] + 1 if pending else len(indices)
    finally:
        settled.update(indices[:start])
        settled.update(index for index in indices[start:] if _finished(folder, index))


def _verdict(layer: Layer, errors: list[str], folder: str, runtime: str) -> LayerResult:
    result = LayerResult(layer.name, layer.form, attributes_of(layer))
    if errors:
        result.verdict, result.cause = "invalid-layer", errors[0]
        return result
    inputs_path = os.path.join(folder, f"{layer.index}.inputs.npz")
    inputs = []
    if os.path.exists(inputs_path):
        with np.load(inputs_path, allow_pickle=False) as archive:
            inputs = [archive[f"arr_{k}"] for k in range(len(archive.files))]
        try:
            expected = reference_loss(layer, inputs)
        except InvalidInputError as error:
            result.verdict, result.cause = "invalid-input", str(error)
            return result
        result.reference = [float(v) for v in expected]
    loss_path, error_path = (os.path.join(folder, f"{layer.index}.{k}") for k in ("loss.npy", "error.txt"))
    if os.path.exists(loss_path):
        got = np.load(loss_path, allow_pickle=False)
        result.runtime = [float(v) for v in np.ravel(got)]
        if result.reference is not None:
            result.max_abs_err, result.max_rel_err = max_errors(got, expected)
            problem = compare(got, expected, str(expected.dtype))
            result.verdict = "disagree" if problem else "agree"
            result.cause = problem or ""
    elif os.path.exists(error_path):
        with open(error_path, encoding="utf-8") as file:
            result.verdict, result.cause = "error", file.read()
    else:
        result.verdict, result.cause = "crash", "the runtime's worker process died"
    known = likely_cause(layer, inputs, result.verdict, runtime)
    if known:
        result.cause = f"{known} ({result.cause})" if result.cause else known
    return result


def evaluate_layers(
    model_path: str,
    kind: str,
    layers: list[Layer],
    feeds: dict[str, np.ndarray],
    runtime: str,
    device: str,
    into: list[LayerResult] | None = None,
) -> list[LayerResult]:
    """Every layer of ``layers`` by the reference and, in worker processes, by ``runtime``. The
    results also go into ``into``; when an interruption (KeyboardInterrupt) stops the workers,
    ``into`` holds the layers whose outcome was known by then and the interruption propagates."""
    results: list[LayerResult] = [] if into is None else into
    with tempfile.TemporaryDirectory(prefix="ctcop-eval-") as folder:
        feeds_path = os.path.join(folder, "feeds.npz")
        np.savez(feeds_path, **feeds)  # type: ignore[arg-type]
        errors = {layer.index: [f.message for f in validate_layer(layer) if f.level == "error"] for layer in layers}
        valid = [layer.index for layer in layers if not errors[layer.index]]
        request = {"model": os.path.abspath(model_path), "kind": kind, "runtime": runtime, "device": device}
        settled: set[int] = set()
        try:
            _run_worker({**request, "feeds": feeds_path, "out": folder, "layers": valid}, folder, settled)
        finally:
            done = [layer for layer in layers if errors[layer.index] or layer.index in settled]
            results[:] = [_verdict(layer, errors[layer.index], folder, runtime) for layer in done]
    return results
