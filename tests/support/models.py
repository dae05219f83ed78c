"""Small acoustic models ending in [T, N, C] logits, to attach the loss to (ONNX and OpenVINO)."""

import numpy as np
import onnx
import openvino
import openvino.opset15 as ops
from onnx import helper

WEIGHTS = np.random.default_rng(9).normal(size=(6, 5)).astype(np.float32)


def onnx_acoustic_model(rank3: bool = True) -> onnx.ModelProto:
    """features [T, N, 6] -> MatMul -> Add -> logits [T, N, 5] (or a rank-2 output)."""
    bias = np.random.default_rng(10).normal(size=5).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["features", "W"], ["scores"]),
        helper.make_node("Add", ["scores", "B"], ["logits"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["T", "N", 5])]
    if not rank3:
        nodes.append(helper.make_node("ReduceMean", ["logits"], ["pooled"], axes=[2], keepdims=0))
        outputs = [helper.make_tensor_value_info("pooled", onnx.TensorProto.FLOAT, ["T", "N"])]
    graph = helper.make_graph(
        nodes,
        "acoustic",
        [helper.make_tensor_value_info("features", onnx.TensorProto.FLOAT, ["T", "N", 6])],
        outputs,
        initializer=[onnx.numpy_helper.from_array(WEIGHTS, "W"), onnx.numpy_helper.from_array(bias, "B")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def openvino_acoustic_model(rank3: bool = True) -> openvino.Model:
    """features [T, N, 6] -> MatMul -> logits [T, N, 5] (or a rank-2 output), as OpenVINO ops."""
    features = ops.parameter([-1, -1, 6], np.float32, name="features")
    features.output(0).get_tensor().set_names({"features"})
    logits = ops.matmul(features, ops.constant(WEIGHTS), False, False)
    if not rank3:
        logits = ops.reduce_mean(logits, ops.constant(np.array([2])), False)
    logits.output(0).get_tensor().set_names({"logits"})
    return openvino.Model([ops.result(logits)], [features], "acoustic")
