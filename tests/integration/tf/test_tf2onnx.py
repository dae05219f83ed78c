"""TensorFlow's CTCLoss op converted by tf2onnx with ctcop's handler (spec 15, ctcop.tf): a Dense
layer feeding ``tf.compat.v1.nn.ctc_loss``, at any batch and time, run in onnxruntime with no
custom library, gives TensorFlow's values, ``ctcop.tf.reference_loss`` and what the OpenVINO path
gives on the same inputs; the dense drop-in converts too; a training step is refused."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")
tf2onnx = pytest.importorskip("tf2onnx")
ort = pytest.importorskip("onnxruntime")

from support.tf_models import CASES, EMPTY, FEATURES, INDICES, LENGTHS, VALUES, C, F, SparseModel, compiled  # noqa: E402

from ctcop.errors import InvalidInputError  # noqa: E402
from ctcop.onnx import DOMAIN, OP_TYPE  # noqa: E402
from ctcop.tf import ctc_loss, finish_onnx, reference_loss, tf2onnx_handlers  # noqa: E402
from ctcop.tf.semantics import TfCtcCall  # noqa: E402

SPARSE = [
    tf.TensorSpec([None, None, F], tf.float32, "features"),
    tf.TensorSpec([None, 2], tf.int64, "indices"),
    tf.TensorSpec([None], tf.int32, "values"),
    tf.TensorSpec([None], tf.int32, "sequence_length"),
]


class DynamicModel(SparseModel):  # type: ignore[misc]
    """:class:`support.tf_models.SparseModel` (the same Dense layer and weights) at any batch and time."""

    @tf.function(input_signature=SPARSE)  # type: ignore[untyped-decorator]
    def __call__(self, features: Any, indices: Any, values: Any, sequence_length: Any) -> Any:
        labels = tf.SparseTensor(indices, values, tf.cast(tf.shape(features)[1::-1], tf.int64))
        return tf.compat.v1.nn.ctc_loss(
            labels, self.logits(features), sequence_length, ignore_longer_outputs_than_inputs=self.ignore_longer
        )


def to_onnx(function: Any, signature: list[Any], opset: int = 18) -> Any:
    """``function`` converted by tf2onnx with ctcop's handler (not yet finished)."""
    model, _ = tf2onnx.convert.from_function(
        function, input_signature=signature, opset=opset, custom_op_handlers=tf2onnx_handlers()
    )
    return model


def session(model: Any) -> Any:
    """An onnxruntime session of ``model``, finished: no custom op library is registered."""
    return ort.InferenceSession(finish_onnx(model).SerializeToString(), providers=["CPUExecutionProvider"])


def run(found: Any, *inputs: np.ndarray) -> np.ndarray:
    names = [port.name for port in found.get_inputs()]
    return np.asarray(found.run(None, dict(zip(names, inputs, strict=True)))[0])


@pytest.fixture(scope="module")
def models() -> dict[bool, tuple[DynamicModel, Any, Any]]:
    """For ignore_longer_outputs_than_inputs False and True: the model, its tf2onnx conversion
    in onnxruntime and its OpenVINO conversion."""
    found = {}
    for ignore in (False, True):
        model = DynamicModel(ignore)
        concrete = model.__call__.get_concrete_function()
        found[ignore] = (model, session(to_onnx(model.__call__, SPARSE)), compiled(concrete))
    return found


def test_the_model_holds_the_ctcop_node_and_its_function() -> None:
    layer = DynamicModel(False)  # held: the traced method refers to it weakly
    model = finish_onnx(to_onnx(layer.__call__, SPARSE))
    assert [(n.domain, n.op_type) for n in model.graph.node if n.domain] == [(DOMAIN, OP_TYPE)]
    assert [(f.domain, f.name) for f in model.functions] == [(DOMAIN, OP_TYPE)]


def test_any_batch_and_time_give_tensorflows_loss(models: dict[bool, Any]) -> None:
    model, onnx_model, _ = models[False]
    rng = np.random.default_rng(5)
    features = rng.normal(size=(9, 5, F)).astype(np.float32)
    indices = np.array([[0, 0], [1, 0], [1, 1], [2, 0], [3, 0], [4, 0], [4, 3]], np.int64)
    values = np.array([0, 1, 2, 2, 1, 0, 1], np.int32)
    lengths = np.array([9, 8, 1, 4, 7], np.int32)
    for inputs in ((FEATURES, INDICES, VALUES, LENGTHS), (features, indices, values, lengths)):
        np.testing.assert_allclose(run(onnx_model, *inputs), model(*inputs).numpy(), rtol=1e-5)


@pytest.mark.parametrize("name", CASES)
def test_edge_cases_give_the_reference_and_the_openvino_paths_values(name: str, models: dict[bool, Any]) -> None:
    (indices, values, lengths), options = CASES[name]
    ignore = options.get("ignore", False)
    model, onnx_model, openvino_model = models[ignore]
    got = run(onnx_model, FEATURES, indices, values, lengths)
    logits = model.logits(FEATURES).numpy()
    call = TfCtcCall(ignore_longer_outputs_than_inputs=ignore)
    np.testing.assert_allclose(got, reference_loss(logits, indices, values, lengths, call), rtol=1e-5)
    inputs = {"features": FEATURES, "indices": indices, "values": values, "sequence_length": lengths}
    # The OpenVINO model also outputs the SparseTensor's dense shape, which the op never reads.
    openvino = next(value for value in openvino_model(inputs).values() if value.dtype.kind == "f")
    np.testing.assert_allclose(got, openvino, rtol=1e-5)  # NaN and inf in the same places
    try:
        np.testing.assert_allclose(got, model(FEATURES, indices, values, lengths).numpy(), rtol=1e-5)
    except tf.errors.InvalidArgumentError:
        assert np.isnan(got).any() or name in ("empty target", "no labels at all")


def test_the_empty_target_gets_the_all_blank_loss(models: dict[bool, Any]) -> None:
    model, onnx_model, _ = models[False]
    dense = tf.nn.ctc_loss(
        np.array([[0, 1, 0], [2, 2, 1], [0, 0, 0]], np.int32),
        model.logits(FEATURES),
        np.array([2, 3, 0]),
        LENGTHS,
        blank_index=-1,
    )
    np.testing.assert_allclose(run(onnx_model, FEATURES, *EMPTY), dense.numpy(), rtol=1e-5)


@pytest.mark.parametrize("blank_index", [-1, None])
def test_the_dense_drop_in_converts_to_its_values(blank_index: int | None) -> None:
    spec = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None, C], tf.float32)]
    spec += [tf.TensorSpec([None], tf.int32)] * 2
    function = tf.function(lambda a, b, c, d: ctc_loss(a, b, c, d, blank_index=blank_index), input_signature=spec)
    found = session(to_onnx(function, spec))
    labels = np.array([[1, 2, 1], [2, 2, 1], [2, 1, 1], [1, 1, 1]], np.int32)
    label_length, logit_length = np.array([2, 3, 1, 0], np.int32), np.array([7, 5, 4, 3], np.int32)
    x = np.random.default_rng(1).normal(size=(7, 4, C)).astype(np.float32)
    blank = 0 if blank_index is None else blank_index
    expected = tf.nn.ctc_loss(labels, x, label_length, logit_length, blank_index=blank).numpy()
    np.testing.assert_allclose(run(found, labels, x, label_length, logit_length), expected, rtol=1e-5)


def test_float64_logits_give_the_exact_loss() -> None:
    spec = [tf.TensorSpec([None, None, C], tf.float64), *SPARSE[1:]]
    function = tf.function(lambda x, i, v, s: tf.compat.v1.nn.ctc_loss(tf.SparseTensor(i, v, [3, 6]), x, s))
    found = session(to_onnx(function, spec))
    x = np.random.default_rng(6).normal(size=(6, 3, C))
    got = run(found, x, INDICES, VALUES, LENGTHS)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, reference_loss(x, INDICES, VALUES, LENGTHS), rtol=1e-12)
    # TensorFlow's float64 kernel is some 1e-8 off the exact value.
    np.testing.assert_allclose(got, function(x, INDICES, VALUES, LENGTHS).numpy(), rtol=1e-7)


def test_a_model_that_reads_the_gradient_is_refused() -> None:
    spec = [tf.TensorSpec([None, None, C], tf.float32), *SPARSE[1:]]

    def training_step(logits: Any, indices: Any, values: Any, sequence_length: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.compat.v1.nn.ctc_loss(tf.SparseTensor(indices, values, [3, 6]), logits, sequence_length)
        return loss, tape.gradient(loss, logits)

    with pytest.raises(InvalidInputError, match="not its gradient output"):
        finish_onnx(to_onnx(tf.function(training_step), spec))


def test_an_opset_below_the_functions_is_refused() -> None:
    layer = DynamicModel(False)
    with pytest.raises(InvalidInputError, match="needs 18"):
        finish_onnx(to_onnx(layer.__call__, SPARSE, opset=17))
