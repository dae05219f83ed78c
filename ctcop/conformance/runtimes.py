"""Runtime adapters: one callable per runtime, each taking the spec's three inputs and attributes.

Every adapter returns the [N] loss the runtime computes for ``(inputs, sequence_mask, labels)``
with the given attributes. Exported models are built for the inputs' element types and cached.
The conformance runner and the tests measure runtimes through these adapters only. The wings
(onnx, onnxruntime, openvino) are imported inside the adapters that need them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from .. import canonical
from ..attributes import Attributes
from ..reference import ctc_loss
from ..schema import form

Evaluate = Callable[[np.ndarray, np.ndarray, np.ndarray, Attributes], np.ndarray]
Key = tuple[str, str, str, Attributes]


@dataclass(frozen=True)
class Runtime:
    """A named way of evaluating CTCLoss-4."""

    name: str
    description: str
    evaluate: Evaluate

    def __call__(
        self, inputs: np.ndarray, sequence_mask: np.ndarray, labels: np.ndarray, **attributes: bool
    ) -> np.ndarray:
        chosen = Attributes.of(attributes)
        return self.evaluate(np.asarray(inputs), np.asarray(sequence_mask), np.asarray(labels), chosen)


def _key(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> Key:
    return (inputs.dtype.name, mask.dtype.name, labels.dtype.name, attributes)


def _model_bytes(key: Key) -> bytes:
    from ..onnx import onnx_model

    dtype, mask_dtype, labels_dtype, attributes = key
    model = onnx_model(dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, attributes=attributes)
    return bytes(model.SerializeToString())


def _feeds(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip(form("time_major").input_names, (inputs, mask, labels), strict=True))


def _reference(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    return ctc_loss(inputs, mask, labels, **attributes)


@cache
def _ort_session(key: Key) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(_model_bytes(key), options, providers=["CPUExecutionProvider"])


def _onnxruntime(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    session = _ort_session(_key(inputs, mask, labels, attributes))
    result: np.ndarray = session.run(None, _feeds(inputs, mask, labels))[0]
    return result


@cache
def _onnx_reference_evaluator(key: Key) -> Any:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(_model_bytes(key))


def _onnx_reference(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    evaluator = _onnx_reference_evaluator(_key(inputs, mask, labels, attributes))
    with np.errstate(all="ignore"):
        result: np.ndarray = evaluator.run(None, _feeds(inputs, mask, labels))[0]
    return result


@cache
def _openvino_onnx_model(key: Key) -> Any:
    from ..openvino import openvino_core

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ctc_loss.onnx")
        with open(path, "wb") as file:
            file.write(_model_bytes(key))
        return openvino_core().compile_model(openvino_core().read_model(path), "CPU")


def _openvino_onnx(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    compiled = _openvino_onnx_model(_key(inputs, mask, labels, attributes))
    return np.asarray(compiled([inputs, mask, labels])[0])


@cache
def _openvino_ir_model(key: Key, ir_form: str) -> Any:
    """ctcop's IR, saved and read back: by a stock Core for the lowered form (it needs nothing
    else), by a Core with ctcop's extensions for the custom-op form."""
    import openvino

    from ..openvino import ir_model, openvino_core, save_ir

    dtype, mask_dtype, labels_dtype, attributes = key
    model = ir_model(form=ir_form, dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, attributes=attributes)
    core = openvino.Core() if ir_form == "lowered" else openvino_core()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ctc_loss.xml")
        save_ir(model, path)
        return core.compile_model(core.read_model(path), "CPU")


def _openvino_ir(ir_form: str) -> Evaluate:
    def evaluate(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
        compiled = _openvino_ir_model(_key(inputs, mask, labels, attributes), ir_form)
        return np.asarray(compiled([inputs, mask, labels])[0])

    return evaluate


@cache
def _openvino_native_model(dtype: str, attributes: Attributes) -> Any:
    import openvino
    import openvino.opset4 as opset4

    parameters = [
        opset4.parameter([-1, -1, -1], np.dtype(dtype), name="logits"),
        opset4.parameter([-1], np.int64, name="logit_length"),
        opset4.parameter([-1, -1], np.int64, name="labels"),
        opset4.parameter([-1], np.int64, name="label_length"),
    ]
    node = opset4.ctc_loss(
        *parameters,
        preprocess_collapse_repeated=attributes["preprocess_collapse_repeated"],
        ctc_merge_repeated=attributes["merge_repeated"],
        unique=False,
    )
    return openvino.Core().compile_model(openvino.Model([node], parameters), "CPU")


def openvino_native_inputs(
    inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The released form's inputs for the spec's inputs: layout only (spec 7, last paragraph).

    Logits transposed to [N, T, C], frame counts from the mask, pads moved out of the label rows
    (stable) and counted. No guard of any kind: what the kernel does with them is its own.
    """
    batch = canonical.from_time_major(inputs, mask, labels, preprocess_collapse_repeated=False, merge_repeated=True)
    frames, n = batch.num_frames, batch.batch_size
    targets = np.zeros((n, frames), dtype=np.int64)
    targets[:, : batch.targets.shape[1]] = batch.targets
    return np.ascontiguousarray(inputs.transpose(1, 0, 2)), batch.lengths, targets, batch.target_lengths


def _openvino_native(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    compiled = _openvino_native_model(inputs.dtype.name, attributes)
    return np.asarray(compiled(list(openvino_native_inputs(inputs, mask, labels)))[0])


RUNTIMES: dict[str, Runtime] = {
    runtime.name: runtime
    for runtime in (
        Runtime("reference", "ctcop's exact float64 evaluator", _reference),
        Runtime(
            "onnxruntime",
            "exported ONNX model (model-local function) on onnxruntime's CPU provider",
            _onnxruntime,
        ),
        Runtime("onnx-reference", "exported ONNX model on onnx.reference.ReferenceEvaluator", _onnx_reference),
        Runtime(
            "openvino-onnx",
            "exported ONNX model read by OpenVINO with ctcop's extension, CPU device",
            _openvino_onnx,
        ),
        Runtime("openvino", "OpenVINO's native CTCLoss-4 on the CPU device, layout adapters only", _openvino_native),
        Runtime(
            "openvino-ir",
            "ctcop's lowered IR (stock operators and guards) on stock OpenVINO, CPU",
            _openvino_ir("lowered"),
        ),
        Runtime(
            "openvino-custom", "ctcop's custom-op IR layer (CTCLoss, ctcop1) in OpenVINO, CPU", _openvino_ir("custom")
        ),
    )
}
