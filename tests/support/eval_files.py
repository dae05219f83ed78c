"""The files ``ctcop eval``'s tests build: an IR of OpenVINO's released CTCLoss-4 fed by a small
acoustic model (:func:`released_ir`) and a ``batch.npz`` of its inputs (:func:`inputs_npz`), of
``N`` samples, ``T`` frames, ``FEATURES`` features and ``C`` classes."""

import numpy as np
import openvino
import openvino.opset4 as opset4
import openvino.opset15 as ops

T, N, FEATURES, C = 8, 3, 6, 5


def released_ir(
    path,
    *,
    shift: float = 0.0,
    blank_zero_unique: bool = False,
    layers: int = 1,
    width: int = FEATURES,
    compress_to_fp16: bool = True,
) -> tuple:
    """features [N, T, width] -> MatMul -> Add (+ shift) -> logits [N, T, 5] -> CTCLoss-4 (x ``layers``),
    saved with openvino.save_model's ``compress_to_fp16``; returns the weights and bias."""
    rng = np.random.default_rng(3)
    features = ops.parameter([N, T, width], np.float32, name="features")
    lengths = [ops.parameter([N], np.int32, name=name) for name in ("logit_length", "label_length")]
    labels = ops.parameter([N, T], np.int32, name="labels")
    for node in (features, labels, *lengths):
        node.output(0).get_tensor().set_names({node.get_friendly_name()})
    weights = rng.normal(size=(width, C)).astype(np.float32)
    bias = (rng.normal(size=C) + shift).astype(np.float32)
    logits = ops.add(ops.matmul(features, ops.constant(weights), False, False), ops.constant(bias))
    extra = [ops.constant(np.int32(0))] if blank_zero_unique else []
    results = []
    for k in range(layers):
        loss = opset4.ctc_loss(
            logits, lengths[0], labels, lengths[1], *extra, ctc_merge_repeated=k == 0, unique=blank_zero_unique
        )
        loss.set_friendly_name(f"ctc_loss_{k}")
        results.append(ops.result(loss))
    model = openvino.Model(results, [features, lengths[0], labels, lengths[1]])
    openvino.save_model(model, str(path), compress_to_fp16=compress_to_fp16)
    return weights, bias


def inputs_npz(path, label_length=(2, 1, 3), blank: int = C - 1, width: int = FEATURES) -> None:
    rng = np.random.default_rng(5)
    classes = [c for c in range(C) if c != blank]
    np.savez(
        path,
        features=rng.normal(size=(N, T, width)).astype(np.float32),
        logit_length=np.array([8, 6, 5], np.int32),
        labels=np.array(classes, np.int32)[rng.integers(0, C - 1, size=(N, T))],
        label_length=np.array(label_length, np.int32),
    )
