"""The runtime defects of spec 11.4, each on its smallest input, asserted to still exist.

The ONNX function is shaped around them; if a runtime release fixes one, its test fails and the
workaround can be reconsidered.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator


def _model(
    nodes: list[onnx.NodeProto], inputs: list[tuple[str, int]], output: str, kind: int = TensorProto.DOUBLE
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "defect",
        [helper.make_tensor_value_info(name, kind, None) for name, kind in inputs],
        [helper.make_tensor_value_info(output, kind, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_onnx_reference_log_softmax_underflows() -> None:
    model = _model([helper.make_node("LogSoftmax", ["x"], ["y"])], [("x", TensorProto.DOUBLE)], "y")
    (got,) = ReferenceEvaluator(model).run(None, {"x": np.array([0.0, -800.0])})
    assert got[0] == 0.0 and got[1] == -np.inf  # exact: -800


def test_onnx_reference_gather_elements_fails_beyond_64_choices() -> None:
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    model = _model([node], [("x", TensorProto.DOUBLE), ("i", TensorProto.INT64)], "y")
    data = np.arange(65.0)
    with pytest.raises(ValueError, match="64"):
        ReferenceEvaluator(model).run(None, {"x": data, "i": np.array([64])})


def test_onnx_reference_loop_stacks_scan_outputs_without_new_axis() -> None:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["c_out"]),
            helper.make_node("ConstantOfShape", ["shape"], ["row"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("row", TensorProto.FLOAT, None),
        ],
    )
    loop = helper.make_node("Loop", ["n", "cond"], ["rows"], body=body)
    model = _model(
        [loop],
        [("n", TensorProto.INT64), ("cond", TensorProto.BOOL), ("shape", TensorProto.INT64)],
        "rows",
        TensorProto.FLOAT,
    )
    feeds = {"n": np.array(2), "cond": np.array(True), "shape": np.array([2, 3])}
    (reference,) = ReferenceEvaluator(model).run(None, feeds)
    (onnxruntime,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    assert onnxruntime.shape == (2, 2, 3) and reference.shape == (4, 3)


def test_onnxruntime_scan_fails_on_empty_scan_axis() -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s_out"])],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1])],
    )
    scan = helper.make_node("Scan", ["s0", "xs"], ["total"], body=body, num_scan_inputs=1)
    model = _model([scan], [("s0", TensorProto.FLOAT), ("xs", TensorProto.FLOAT)], "total", TensorProto.FLOAT)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="dim0_offset"):
        session.run(None, {"s0": np.zeros(1, np.float32), "xs": np.zeros((0, 1), np.float32)})
