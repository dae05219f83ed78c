"""An ONNX model run in onnxruntime (:func:`run_onnxruntime`) and in tract (:func:`run_tract`,
:func:`tract_outputs`; the tests that call them skip without tract)."""

import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime


def tract_outputs(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Every output of ``model`` that tract computes from ``inputs``, in the graph's order (its
    Python API loads a model from a file)."""
    import tract  # only where tract is installed: its tests skip without it

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        onnx.save(model, path)
        runnable = tract.onnx().load(str(path)).into_model().into_runnable()
    return [output.to_numpy() for output in runnable.run(inputs)]


def run_tract(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """tract's loss for ``feeds``."""
    return tract_outputs(model, [feeds["inputs"], feeds["sequence_mask"], feeds["labels"]])[0]


def run_onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]
