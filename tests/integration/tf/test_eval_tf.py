"""``ctcop eval`` (as a process) of a TensorFlow model: ``tf.compat.v1.nn.ctc_loss`` fed by a Keras
Dense layer, saved and converted by OpenVINO's TensorFlow frontend, compared at its declared
precision and at the CPU's native one."""

import json

import numpy as np
import openvino
import pytest
from support.cli import ctcop_cli
from support.eval_files import C, N, T

tf = pytest.importorskip("tensorflow")


def native_precision(model_path: str) -> str:
    """The inference precision OpenVINO's CPU plugin compiles ``model_path`` at without a hint."""
    compiled = openvino.Core().compile_model(model_path, "CPU")
    return str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())


def tensorflow_model(folder, width: int = 64) -> np.ndarray:
    """A Keras Dense layer feeding ``tf.compat.v1.nn.ctc_loss`` (sparse labels, time-major), saved as
    a SavedModel (a tf.Module's tf.function with an input signature), converted by OpenVINO's
    TensorFlow frontend and written as ``folder/model.xml``, with its inputs in
    ``folder/inputs.npz``; returns TensorFlow's own loss on them."""
    rng = np.random.default_rng(11)
    dense = tf.keras.layers.Dense(C)
    dense.build((None, width))
    dense.set_weights([rng.normal(size=(width, C)).astype(np.float32) / 4, rng.normal(size=C).astype(np.float32)])
    signature = [
        tf.TensorSpec([T, N, width], tf.float32, name="features"),
        tf.TensorSpec([N], tf.int32, name="sequence_length"),
        tf.TensorSpec([None, 2], tf.int64, name="label_indices"),
        tf.TensorSpec([None], tf.int32, name="label_values"),
        tf.TensorSpec([2], tf.int64, name="label_shape"),
    ]

    class CTCModel(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = dense

        @tf.function(input_signature=signature)
        def __call__(self, features, sequence_length, label_indices, label_values, label_shape):
            labels = tf.SparseTensor(label_indices, label_values, label_shape)
            return tf.compat.v1.nn.ctc_loss(labels, self.dense(features), sequence_length, time_major=True)

    targets = [[0, 1, 1], [2], [3, 0, 2, 1]]  # the blank is C - 1
    inputs = {
        "features": rng.normal(size=(T, N, width)).astype(np.float32),
        "sequence_length": np.array([8, 6, 7], np.int32),
        "label_indices": np.array([[i, j] for i, t in enumerate(targets) for j in range(len(t))], np.int64),
        "label_values": np.array([c for t in targets for c in t], np.int32),
        "label_shape": np.array([N, max(map(len, targets))], np.int64),
    }
    model = CTCModel()
    tf.saved_model.save(model, str(folder / "saved"))
    converted = openvino.convert_model(str(folder / "saved"))
    openvino.save_model(converted, str(folder / "model.xml"), compress_to_fp16=False)
    np.savez(folder / "inputs.npz", **inputs)
    return model(**inputs).numpy()


def test_eval_of_a_tensorflow_model_compares_at_its_declared_precision(tmp_path) -> None:
    expected = tensorflow_model(tmp_path)
    model, inputs = str(tmp_path / "model.xml"), str(tmp_path / "inputs.npz")
    out = tmp_path / "declared.json"
    result = ctcop_cli("eval", model, "--inputs", inputs, "--json", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "precision declared, compiled f32" in result.stdout
    (layer,) = json.loads(out.read_text())["layers"]
    assert layer["verdict"] == "agree" and (layer["precision"], layer["compiled_precision"]) == ("declared", "f32")
    np.testing.assert_allclose(layer["reference"], expected, rtol=1e-5)  # the model's float32 truth
    # What a deployment computes: the CPU's default precision, read back from OpenVINO.
    native = native_precision(model)
    out = tmp_path / "native.json"
    result = ctcop_cli("eval", model, "--inputs", inputs, "--precision", "native", "--json", str(out))
    (layer,) = json.loads(out.read_text())["layers"]
    assert (layer["precision"], layer["compiled_precision"]) == ("native", native), result.stdout
    if native == "f32":
        assert layer["verdict"] == "agree", result.stdout
    else:
        assert native in ("bf16", "f16") and layer["verdict"] in ("agree", "disagree"), result.stdout
        if layer["verdict"] == "disagree":
            assert layer["cause"].startswith(f"runtime ran in {native}"), layer["cause"]
