"""+inf through the op's own routes into OpenVINO, at the precision the CPU plugin compiles to.

A float32 model's infeasible samples are +inf, exactly, for the op alone
(:func:`ctcop.onnx.onnx_model`, what ``ctcop export`` writes) and attached to an acoustic model
(:func:`ctcop.onnx.attach_onnx`, :func:`ctcop.openvino.attach_openvino`), compiled on "CPU" with
the f32 hint and with no config (the compiled precision read back: tests/support/inf_routes.py).
The frameworks' routes: tests/integration/torch/test_inf_export_torch.py and
tests/integration/tf/test_inf_export_tf.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import openvino
import openvino.opset15 as ops
import pytest
from onnx import TensorProto, helper
from support.inf_routes import CONFIGS, FEATURES, LABELS, LOGITS, MASK, WEIGHTS, C, X, assert_losses, compiled_for

import ctcop
from ctcop.onnx import attach_onnx, onnx_model
from ctcop.openvino import attach_openvino


def op_reference(logits: np.ndarray) -> np.ndarray:
    expected = ctcop.ctc_loss(logits, MASK, LABELS, merge_repeated=True)
    assert np.isfinite(expected[0]) and np.isposinf(expected[1:]).all()
    return expected


def acoustic_onnx() -> onnx.ModelProto:
    """x [T, N, F] -> logits [T, N, C]: one MatMul."""
    weights = helper.make_tensor("weights", TensorProto.FLOAT, WEIGHTS.shape, WEIGHTS.ravel())
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "weights"], ["logits"])],
        "acoustic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["T", "N", C])],
        [weights],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def acoustic_openvino() -> Any:
    x = ops.parameter([-1, -1, FEATURES], np.float32, "x")
    x.output(0).set_names({"x"})
    logits = ops.matmul(x, ops.constant(WEIGHTS), False, False)
    logits.output(0).set_names({"logits"})
    return openvino.Model([logits.output(0)], [x], "acoustic")


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("route", ["op alone", "attach_onnx", "attach_openvino"])
def test_the_ops_own_routes_give_inf(route: str, config: str, tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    if route == "op alone":
        onnx.save(onnx_model(dtype="float32", dims=("T", "N", C), attributes={"merge_repeated": True}), path)
        compiled, precision = compiled_for(path, config)
        got, expected = compiled([LOGITS, MASK, LABELS])[0], op_reference(LOGITS)
    else:
        if route == "attach_onnx":
            onnx.save(attach_onnx(acoustic_onnx(), "logits"), path)
            compiled, precision = compiled_for(path, config)
        else:
            compiled, precision = compiled_for(attach_openvino(acoustic_openvino(), "logits"), config)
        results = compiled({"x": X, "sequence_mask": MASK, "labels": LABELS})
        got = results[compiled.output("loss")]
        expected = op_reference(X @ WEIGHTS)
    assert_losses(got, expected, precision, f"{route} {precision}")
