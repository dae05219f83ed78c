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


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def test_onnxruntime_drops_an_added_zero_and_keeps_negative_zero() -> None:
    # Its optimizer removes ``x + 0`` (NoopElimination), which turns -0.0 into +0.0 in IEEE
    # arithmetic; the function writes its loss as ``0 - ln(mass)`` instead of Neg then + 0 (11.5).
    nodes = [
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.DOUBLE, [], [0.0])),
        helper.make_node("Neg", ["x"], ["negated"]),
        helper.make_node("Add", ["negated", "zero"], ["plus_zero"]),
        helper.make_node("Identity", ["plus_zero"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "defect",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1])],
    )
    session = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9))
    (got,) = session.run(None, {"x": np.array([0.0])})
    assert np.signbit(got[0])


def test_onnxruntime_plans_buffers_from_declared_dim_params() -> None:
    # Two inputs declared [T, N] but fed different shapes: a buffer planned for one is reused for
    # the other and the run fails. The function's first operator on the mask and the labels is a
    # Slice (an output of no inferred shape), so shapes that disagree give NaN, not this error.
    floats, ints = TensorProto.FLOAT, TensorProto.INT32
    nodes = [
        helper.make_node("Abs", ["a"], ["u"]),
        helper.make_node("Neg", ["u"], ["v"]),
        helper.make_node("ReduceSum", ["v"], ["sum_v"], keepdims=0),
        helper.make_node("Cast", ["b"], ["w"], to=floats),
        helper.make_node("ReduceSum", ["w"], ["sum_w"], keepdims=0),
        helper.make_node("Add", ["sum_v", "sum_w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "defect",
        [helper.make_tensor_value_info("a", floats, ["T", "N"]), helper.make_tensor_value_info("b", ints, ["T", "N"])],
        [helper.make_tensor_value_info("y", floats, [])],
    )
    session = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9))
    with pytest.raises(Exception, match="re-use buffer"):
        session.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((1, 3), np.int32)})


def test_onnxruntime_log_depends_on_where_the_element_lies() -> None:
    # Its float32 Log runs 4-wide vector code and a scalar log for the tail, and the two differ
    # in the last bit: a sample's loss alone can differ from its loss in a batch by rounding
    # (spec 11.5 claims bit identity only against the other samples' values).
    session = _session(
        _model([helper.make_node("Log", ["x"], ["y"])], [("x", TensorProto.FLOAT)], "y", TensorProto.FLOAT)
    )
    (got,) = session.run(None, {"x": np.full(5, 2.0924041, np.float32)})
    assert got[0] != got[4]
