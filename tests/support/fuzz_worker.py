"""Worker of tests/system/test_fuzz_graphs.py: one exported graph in one runtime, crash-isolated
(:func:`evaluate`, run in a fresh process by :class:`ctcop.process.workers.Worker`).

A request ``{"runtime", "path"}`` names an ``.npz`` (``inputs``, ``sequence_mask``, ``labels`` and
the attributes as 0-d bools); the worker runs ctcop's exported graph for the inputs' element types
and attributes in that runtime and writes the loss to ``PATH.out.npy``; an exception the graph
raises is the worker's error answer. Models are built with fully dynamic dimensions
(``dims=(None, None, None)``), so that mask and labels shapes may disagree with the logits, and
cached per runtime, element types and attributes.

Runtimes: ``onnxruntime`` and ``onnx-reference`` (ctcop.onnx.onnx_model), ``openvino-onnx`` (the
same model read by OpenVINO with ctcop.openvino_extensions()), ``openvino-ir`` (ir_model(), stock
OpenVINO) and ``openvino-custom`` (ir_model(form="custom") with the extensions).
"""

from __future__ import annotations

import os
import tempfile
from functools import cache
from typing import Any

import numpy as np

ATTRIBUTES = ("preprocess_collapse_repeated", "merge_repeated")
DIMS = (None, None, None)
Key = tuple[str, str, str, bool, bool]


def _options(key: Key) -> dict[str, Any]:
    dtype, mask_dtype, labels_dtype, collapse, merge = key
    return {
        "dtype": dtype,
        "mask_dtype": mask_dtype,
        "labels_dtype": labels_dtype,
        "dims": DIMS,
        "attributes": dict(zip(ATTRIBUTES, (collapse, merge), strict=True)),
    }


def _onnx_bytes(key: Key) -> bytes:
    from ctcop.onnx import onnx_model

    return bytes(onnx_model(**_options(key)).SerializeToString())


def _core(extensions: bool) -> Any:
    import openvino

    import ctcop

    core = openvino.Core()
    if extensions:
        for extension in ctcop.openvino_extensions():
            core.add_extension(extension)
    return core


def _compiled(core: Any, write: Any, name: str, dtype: str) -> Any:
    """The model ``write`` writes, compiled at the precision its ``dtype`` logits declare (spec 13)."""
    from ctcop.openvino import declared_precision_config

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, name)
        write(path)
        return core.compile_model(core.read_model(path), "CPU", declared_precision_config(core, "CPU", dtype))


@cache
def _model(runtime: str, key: Key) -> Any:
    """A callable (inputs, mask, labels) -> loss for ``runtime``."""
    if runtime == "onnxruntime":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        session = onnxruntime.InferenceSession(_onnx_bytes(key), options, providers=["CPUExecutionProvider"])
        return lambda x, m, y: session.run(None, {"inputs": x, "sequence_mask": m, "labels": y})[0]
    if runtime == "onnx-reference":
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(_onnx_bytes(key))
        return lambda x, m, y: evaluator.run(None, {"inputs": x, "sequence_mask": m, "labels": y})[0]
    if runtime == "openvino-onnx":

        def write_onnx(path: str) -> None:
            with open(path, "wb") as file:
                file.write(_onnx_bytes(key))

        compiled = _compiled(_core(True), write_onnx, "ctc.onnx", key[0])
    else:
        from ctcop.openvino import ir_model, save_ir

        form = {"openvino-ir": "lowered", "openvino-custom": "custom"}[runtime]
        model = ir_model(form=form, **_options(key))
        compiled = _compiled(_core(form == "custom"), lambda path: save_ir(model, path), "ctc.xml", key[0])
    return lambda x, m, y: compiled([x, m, y])[0]


def evaluate(request: dict[str, str]) -> None:
    """Run the graph on the request's inputs; the loss goes to ``PATH.out.npy``."""
    path = request["path"]
    with np.load(path) as data:
        inputs, mask, labels = data["inputs"], data["sequence_mask"], data["labels"]
        key = (inputs.dtype.name, mask.dtype.name, labels.dtype.name, *(bool(data[name]) for name in ATTRIBUTES))
    with np.errstate(all="ignore"):
        loss = np.array(_model(request["runtime"], key)(inputs, mask, labels), copy=True)
    np.save(path + ".out.npy", loss)
