"""+inf through TensorFlow's export routes into OpenVINO, at the precision the CPU plugin compiles to.

A float32 model's infeasible samples (repeats that need more frames than there are) are +inf,
exactly, in every route that ends in OpenVINO's CPU plugin: TensorFlow's ``CTCLoss`` through
tf2onnx and through ``convert_model`` (the op's own and PyTorch's routes:
tests/integration/torch/test_inf_export_torch.py); ONNX is read with ``core.read_model`` and
ctcop's extensions. Each is compiled on "CPU" with the f32 hint and with no config (bfloat16 on
CPUs with AVX-512-BF16 or AMX: the compiled precision is read back, never assumed;
tests/support/inf_routes.py). The oracle is TensorFlow's own loss, checked against the reference;
finite values are compared by the float32 rule where the plugin computes in float32, and only
checked finite where it computes the model in a reduced precision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import openvino
import pytest
from support.inf_routes import CONFIGS, FEATURES, WEIGHTS, X, assert_losses, compiled_for

import ctcop

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


def test_tensorflows_ctc_loss_gives_inf_through_both_routes(tmp_path: Path) -> None:
    """tf.compat.v1.nn.ctc_loss of a Dense layer: sample 0 holds repeats that need more frames
    than it has (+inf in TensorFlow and in spec 15), through tf2onnx + finish_onnx and through
    convert_model, under each config."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import tf2onnx

    from ctcop.tf import finish_onnx, reference_loss, tf2onnx_handlers

    spec = [
        tf.TensorSpec([None, None, FEATURES], tf.float32, "features"),
        tf.TensorSpec([None, 2], tf.int64, "indices"),
        tf.TensorSpec([None], tf.int32, "values"),
        tf.TensorSpec([None], tf.int32, "sequence_length"),
    ]

    @tf.function(input_signature=spec)  # type: ignore[untyped-decorator]
    def loss(features: Any, indices: Any, values: Any, sequence_length: Any) -> Any:
        labels = tf.SparseTensor(indices, values, tf.cast(tf.shape(features)[1::-1], tf.int64))
        logits = tf.einsum("tnf,fc->tnc", features, tf.constant(WEIGHTS))  # a Const of the graph
        return tf.compat.v1.nn.ctc_loss(labels, logits, sequence_length)

    indices = np.array([[0, 0], [0, 1], [1, 0], [2, 0], [2, 1]], np.int64)
    values = np.array([1, 1, 2, 0, 3], np.int32)
    lengths = np.array([2, 4, 3], np.int32)
    inputs = (X, indices, values, lengths)
    expected = loss(*inputs).numpy()
    assert np.isposinf(expected[0]) and np.isfinite(expected[1:]).all()
    np.testing.assert_allclose(reference_loss(X @ WEIGHTS, indices, values, lengths), expected, rtol=1e-5)
    converted, _ = tf2onnx.convert.from_function(
        loss, input_signature=spec, opset=18, custom_op_handlers=tf2onnx_handlers()
    )
    path = tmp_path / "tf.onnx"
    onnx.save(finish_onnx(converted), path)
    routes = {"tf2onnx": path, "convert_model": openvino.convert_model(loss, extension=ctcop.openvino_extensions())}
    for route, model in routes.items():
        for config in CONFIGS:
            compiled, precision = compiled_for(model, config)
            results = compiled(list(inputs))
            got = next(results[o] for o in compiled.outputs if results[o].dtype.kind == "f")  # not the dense shape
            assert_losses(got, expected, precision, f"{route} {precision}")
