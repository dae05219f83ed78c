"""The TensorFlow model the tests of ctcop.tf convert (spec 15): a Dense layer feeding
``tf.compat.v1.nn.ctc_loss`` with SparseTensor labels (:class:`SparseModel`, ``T`` frames, ``N``
samples, ``F`` features, ``C`` classes), its inputs (``FEATURES``, ``INDICES``, ``VALUES``,
``LENGTHS``), the hostile label sets of ``CASES``, and a model compiled by OpenVINO with ctcop's
extensions (:func:`compiled`). Imported after the tests' ``pytest.importorskip("tensorflow")``."""

from __future__ import annotations

from typing import Any

import numpy as np
import openvino as ov
import tensorflow as tf

from ctcop.tf import tensorflow_extensions

T, N, F, C = 6, 3, 5, 4
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
SPARSE = [
    tf.TensorSpec([T, N, F], tf.float32, "features"),
    tf.TensorSpec([None, 2], tf.int64, "indices"),
    tf.TensorSpec([None], tf.int32, "values"),
    tf.TensorSpec([N], tf.int32, "sequence_length"),
]
FEATURES = np.random.default_rng(7).normal(size=(T, N, F)).astype(np.float32)
INDICES = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [1, 2], [2, 0]], np.int64)
VALUES = np.array([0, 1, 2, 2, 1, 0], np.int32)
LENGTHS = np.array([6, 5, 3], np.int32)


class SparseModel(tf.Module):  # type: ignore[misc]
    """A Dense layer feeding ``tf.compat.v1.nn.ctc_loss`` with SparseTensor labels."""

    def __init__(self, ignore_longer: bool) -> None:
        super().__init__()
        self.dense = tf.keras.layers.Dense(C, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=3))
        self.dense.build((None, F))
        self.ignore_longer = ignore_longer

    def logits(self, features: Any) -> Any:
        return self.dense(features)

    @tf.function(input_signature=SPARSE)  # type: ignore[untyped-decorator]
    def __call__(self, features: Any, indices: Any, values: Any, sequence_length: Any) -> Any:
        labels = tf.SparseTensor(indices, values, [N, T])
        return tf.compat.v1.nn.ctc_loss(
            labels, self.logits(features), sequence_length, ignore_longer_outputs_than_inputs=self.ignore_longer
        )


def compiled(model: Any) -> Any:
    return ov.compile_model(ov.convert_model(model, extension=tensorflow_extensions()), "CPU", F32)


EMPTY = (INDICES[:-1], VALUES[:-1], LENGTHS)  # sample 2 has no label
TOO_LONG = (INDICES, VALUES, np.array([6, 2, 3], np.int32))  # sample 1: 3 labels, 2 frames
REPEATS = (np.array([[0, 0], [0, 1], [1, 0], [2, 0]]), np.array([1, 1, 2, 0], np.int32), np.array([2, 5, 3], np.int32))
CASES = {
    "empty target": (EMPTY, {}),
    "too long": (TOO_LONG, {}),
    "too long, ignored": (TOO_LONG, {"ignore": True}),
    "repeats need a blank": (REPEATS, {}),
    "row index out of range": ((np.array([[0, 0], [7, 0]]), VALUES[:2], LENGTHS), {}),
    "row index past int32": ((np.array([[0, 0], [2**40, 0]]), VALUES[:2], LENGTHS), {}),
    "indices out of order": ((INDICES[::-1].copy(), VALUES[::-1].copy(), LENGTHS), {}),
    "negative label": ((INDICES, np.array([0, 1, -1, 2, 1, 0], np.int32), LENGTHS), {}),
    "label is the blank": ((INDICES, np.array([0, 1, 3, 2, 1, 0], np.int32), LENGTHS), {}),
    "sequence_length beyond T": ((INDICES, VALUES, np.array([6, 9, 3], np.int32)), {}),
    "values shorter than indices": ((INDICES, VALUES[:4], LENGTHS), {}),
    "no labels at all": ((np.zeros((0, 2), np.int64), np.zeros(0, np.int32), LENGTHS), {}),
}
