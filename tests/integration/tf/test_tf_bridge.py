"""TensorFlow's CTC losses converted by OpenVINO with ctcop's extensions (spec 15, ctcop.tf): a
Dense layer feeding ``tf.compat.v1.nn.ctc_loss`` saved and converted gives TensorFlow's values,
the spec-15 values where TensorFlow raises, and the native conversion's failures for contrast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
ov = pytest.importorskip("openvino")

from support.tf_models import (  # noqa: E402
    CASES,
    EMPTY,
    F32,
    FEATURES,
    INDICES,
    LENGTHS,
    SPARSE,
    VALUES,
    C,
    N,
    SparseModel,
    T,
    compiled,
)

from ctcop.process.workers import Lost, call  # noqa: E402
from ctcop.tf import ctc_loss, redirect_ctc_loss, reference_loss, tensorflow_extensions  # noqa: E402
from ctcop.tf.gradient import GRADIENT_REFUSED  # noqa: E402
from ctcop.tf.semantics import TfCtcCall  # noqa: E402


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[SparseModel, Path]]:
    """Both models (ignore_longer_outputs_than_inputs False and True), saved."""
    found = {}
    for ignore in (False, True):
        model = SparseModel(ignore)
        path = tmp_path_factory.mktemp("saved") / f"ignore_{ignore}"
        tf.saved_model.save(model, str(path))
        found[ignore] = (model, path)
    return found


def fed(model: Any, *inputs: np.ndarray) -> np.ndarray:
    """The saved model's loss: inputs by name (a SavedModel's signature orders them by name)."""
    return model(dict(zip(("features", "indices", "values", "sequence_length"), inputs, strict=True)))[0]


def test_the_saved_model_holds_the_op_and_converts_to_tensorflows_loss(saved: dict[bool, Any]) -> None:
    model, path = saved[False]
    concrete = model.__call__.get_concrete_function()
    assert "CTCLoss" in {op.type for op in concrete.graph.get_operations()}
    expected = model(FEATURES, INDICES, VALUES, LENGTHS).numpy()
    got = fed(compiled(str(path)), FEATURES, INDICES, VALUES, LENGTHS)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


EXPECTED = {
    "empty target": "number",
    "too long": [None, "nan", None],
    "too long, ignored": [None, 0.0, None],
    "repeats need a blank": ["inf", None, None],
    "row index out of range": ["nan"] * 3,
    "row index past int32": ["nan"] * 3,
    "indices out of order": ["nan"] * 3,
    "negative label": [None, "nan", None],
    "label is the blank": [None, "nan", None],
    "sequence_length beyond T": [None, "nan", None],
    "values shorter than indices": ["nan"] * 3,
    "no labels at all": "number",
}


@pytest.fixture(scope="module")
def converted(saved: dict[bool, Any]) -> dict[bool, Any]:
    return {ignore: compiled(str(path)) for ignore, (_, path) in saved.items()}


@pytest.mark.parametrize("name", CASES)
def test_edge_cases_give_spec_15s_values(name: str, saved: dict[bool, Any], converted: dict[bool, Any]) -> None:
    (indices, values, lengths), options = CASES[name]
    ignore = options.get("ignore", False)
    model = saved[ignore][0]
    got = fed(converted[ignore], FEATURES, indices, values, lengths)
    logits = model.logits(FEATURES).numpy()
    expected = reference_loss(logits, indices, values, lengths, TfCtcCall(ignore_longer_outputs_than_inputs=ignore))
    np.testing.assert_allclose(got, expected, rtol=1e-5)  # NaN and inf in the same places
    try:
        framework = model(FEATURES, indices, values, lengths).numpy()
    except tf.errors.InvalidArgumentError:
        framework = None
    shape = EXPECTED[name]
    if shape == "number":  # TensorFlow's kernel raises; tf.nn.ctc_loss with dense labels gives the all-blank loss
        assert framework is None and np.isfinite(got).all()
        return
    for k, want in enumerate(shape):
        if want is None:  # the samples TensorFlow computes
            values_now = framework if framework is not None else model(FEATURES, INDICES, VALUES, LENGTHS).numpy()
            np.testing.assert_allclose(got[k], values_now[k], rtol=1e-5)
        else:
            np.testing.assert_equal(got[k], float(want))
    if framework is not None:
        np.testing.assert_allclose(got, framework, rtol=1e-5)


def test_the_empty_target_gets_tensorflows_dense_value(saved: dict[bool, Any], converted: dict[bool, Any]) -> None:
    model = saved[False][0]
    got = fed(converted[False], FEATURES, *EMPTY)
    logits = model.logits(FEATURES)
    dense = tf.nn.ctc_loss(
        np.array([[0, 1, 0], [2, 2, 1], [0, 0, 0]], np.int32), logits, np.array([2, 3, 0]), LENGTHS, blank_index=-1
    )
    np.testing.assert_allclose(got, dense.numpy(), rtol=1e-5)


def test_a_graph_that_reads_the_gradient_is_refused_at_conversion() -> None:
    spec = [tf.TensorSpec([T, N, C], tf.float32), *SPARSE[1:]]

    @tf.function(input_signature=spec)  # type: ignore[untyped-decorator]
    def training_step(logits: Any, indices: Any, values: Any, sequence_length: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.compat.v1.nn.ctc_loss(tf.SparseTensor(indices, values, [N, T]), logits, sequence_length)
        return loss, tape.gradient(loss, logits)

    with pytest.raises(Exception, match="not its gradient output"):
        ov.convert_model(training_step, extension=tensorflow_extensions())
    assert "gradient" in GRADIENT_REFUSED


def test_the_dense_drop_in_and_keras_ctc_convert_to_their_values() -> None:
    keras = pytest.importorskip("keras")
    rng = np.random.default_rng(2)
    labels = np.array([[0, 1, 0], [2, 2, 1], [1, 0, 0]], np.int32)
    label_length, logit_length = np.array([2, 3, 0], np.int32), np.array([6, 5, 4], np.int32)
    x = rng.normal(size=(T, N, C)).astype(np.float32)
    spec = [tf.TensorSpec([N, 3], tf.int32), tf.TensorSpec([T, N, C], tf.float32)] + [tf.TensorSpec([N], tf.int32)] * 2
    drop_in = tf.function(lambda a, b, c, d: ctc_loss(a, b, c, d, blank_index=-1)).get_concrete_function(*spec)
    expected = tf.nn.ctc_loss(labels, x, label_length, logit_length, blank_index=-1).numpy()
    np.testing.assert_allclose(compiled(drop_in)([labels, x, label_length, logit_length])[0], expected, rtol=1e-5)
    targets = np.array([[1, 2, 0], [3, 3, 2], [2, 0, 0]], np.int32)  # Keras: 0 pads and is the blank
    y = rng.normal(size=(N, T, C)).astype(np.float32)
    loss = keras.losses.CTC(reduction=None)
    with redirect_ctc_loss():
        graph = tf.function(loss).get_concrete_function(tf.TensorSpec([N, 3], tf.int32), tf.TensorSpec([N, T, C]))
    np.testing.assert_allclose(compiled(graph)([targets, y])[0], loss(targets, y).numpy(), rtol=1e-5)
    assert tf.nn.ctc_loss is not ctc_loss


def native_loss(request: dict[str, Any]) -> list[float]:
    """Worker: the saved model converted by OpenVINO alone, on the request's inputs."""
    model = ov.compile_model(ov.convert_model(request["path"]), "CPU", F32)
    types = {"features": np.float32, "indices": np.int64, "values": np.int32, "sequence_length": np.int32}
    return [float(v) for v in fed(model, *(np.asarray(request[name], dtype) for name, dtype in types.items()))]


def test_the_native_conversion_fails_where_ctcops_gives_values(saved: dict[bool, Any]) -> None:
    """OpenVINO's own rule for the op: an empty target crashes the process (D1), a target longer
    than its frames fails the inference (D2), ignore_longer_outputs_than_inputs is dropped."""
    path = str(saved[False][1])

    def native(indices: np.ndarray, values: np.ndarray, lengths: np.ndarray) -> Any:
        request = {"path": path, "features": FEATURES.tolist(), "indices": indices.tolist()}
        request |= {"values": values.tolist(), "sequence_length": lengths.tolist()}
        return call("test_tf_bridge:native_loss", request, timeout_s=240)

    np.testing.assert_allclose(
        native(INDICES, VALUES, LENGTHS), saved[False][0](FEATURES, INDICES, VALUES, LENGTHS).numpy(), rtol=1e-4
    )
    try:
        wrong = native(*EMPTY)
    except Lost:  # D1: the process died
        return
    # D1's other outcome: a run returns a wrong loss (ctcop's conversion gives the all-blank loss)
    assert not np.allclose(wrong, fed(compiled(path), FEATURES, *EMPTY), rtol=1e-4)
