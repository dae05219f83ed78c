"""+inf through every export route into OpenVINO, at the precision the CPU plugin compiles to.

A float32 model's infeasible samples (a target longer than its frames; repeats that need more
frames than there are) are +inf, exactly, in every route that ends in OpenVINO's CPU plugin: the
op alone (:func:`ctcop.onnx.onnx_model`, what ``ctcop export`` writes) and attached to an acoustic
model (:func:`ctcop.onnx.attach_onnx`, :func:`ctcop.openvino.attach_openvino`), a PyTorch model
through both exporters of :func:`ctcop.torch.export_onnx` and through ``openvino.convert_model``,
and TensorFlow's ``CTCLoss`` through tf2onnx and through ``convert_model``; ONNX is read with
``core.read_model`` and ctcop's extensions. Each is compiled on "CPU" with the f32 hint and with
no config (bfloat16 on CPUs with AVX-512-BF16 or AMX: the compiled precision is read back, never
assumed). The oracle is PyTorch's own loss (``reduction`` none/sum/mean, ``zero_infinity`` off and
on) or the reference; finite values are compared by the float32 rule where the plugin computes in
float32, and only checked finite where it computes the model in a reduced precision.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import openvino
import openvino.opset15 as ops
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper
from torch import nn

import ctcop
import ctcop.torch
from ctcop.onnx import attach_onnx, onnx_model
from ctcop.openvino import attach_openvino
from ctcop.tolerance import compare

pytestmark = [
    pytest.mark.slow,  # exporters and OpenVINO's compilation: seconds a route
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]
CONFIGS = {"f32": {"INFERENCE_PRECISION_HINT": "f32"}, "default": {}}
REDUCED = (openvino.Type.bf16, openvino.Type.f16)


def compiled_for(model: Any, config: str) -> tuple[Any, Any]:
    """``model`` (an openvino.Model or an ONNX file's path, read with ctcop's extensions)
    compiled on "CPU" under ``config``, and the inference precision it was compiled at."""
    core = openvino.Core()
    for extension in ctcop.openvino_extensions():
        core.add_extension(extension)
    read = core.read_model(str(model)) if isinstance(model, Path) else model
    compiled = core.compile_model(read, "CPU", CONFIGS[config])
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    assert precision == openvino.Type.f32 or (config == "default" and precision in REDUCED), precision
    return compiled, precision


def assert_losses(got: Any, expected: Any, precision: Any, where: str) -> None:
    """+inf and NaN exactly where ``expected`` has them; the finite values by the float32 rule
    under f32 inference precision, finite under a reduced one (the model's own layers round)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, where
    assert np.array_equal(np.isposinf(got), np.isposinf(expected)), (where, got, expected)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), (where, got, expected)
    if precision == openvino.Type.f32:
        assert compare(got, expected, "float32") is None, (where, got, expected)
    else:
        assert np.isfinite(got[np.isfinite(expected)]).all(), (where, got, expected)


# -- the op alone and attached ------------------------------------------------------------------

T, N, C, FEATURES = 4, 3, 5, 6
RNG = np.random.default_rng(3)
LOGITS = RNG.normal(size=(T, N, C)).astype(np.float32)
MASK = np.array([[1, 1, 1], [1, 0, 1], [1, 0, 1], [1, 0, 0]], np.int32)
# sample 1: two labels, one frame; sample 2: three repeats need five frames, it has three
LABELS = np.array([[1, 2, -1, -1], [1, 2, -1, -1], [3, 3, 3, -1]], np.int64)
X = RNG.normal(size=(T, N, FEATURES)).astype(np.float32)
WEIGHTS = RNG.normal(size=(FEATURES, C)).astype(np.float32)


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


# -- PyTorch ----------------------------------------------------------------------------------

OPTIONS = [(reduction, zero) for reduction in ("none", "sum", "mean") for zero in (False, True)]


class ConvLoss(nn.Module):
    """A float32 Conv1d -> log_softmax -> ``F.ctc_loss`` under every reduction and zero_infinity."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv1d(FEATURES, C, kernel_size=3, padding=1)

    def forward(
        self, features: torch.Tensor, targets: torch.Tensor, input_lengths: torch.Tensor, target_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        log_probs = F.log_softmax(self.conv(features).permute(2, 0, 1), dim=-1)
        arguments = (log_probs, targets, input_lengths, target_lengths)
        return tuple(F.ctc_loss(*arguments, reduction=r, zero_infinity=z) for r, z in OPTIONS)


def torch_batch(n: int, frames: int) -> tuple[torch.Tensor, ...]:
    """Sample 0 feasible, sample 1 a target longer than its frames, sample 2 repeats that need
    more frames than it has; any further samples feasible."""
    generator = torch.Generator().manual_seed(n * 100 + frames)
    features = torch.randn(n, FEATURES, frames, generator=generator)
    targets = torch.randint(1, C, (n, 4), generator=generator)
    targets[2] = torch.tensor([2, 2, 2, 2])
    input_lengths = torch.full((n,), frames)
    input_lengths[1], input_lengths[2] = 2, 5
    target_lengths = torch.full((n,), 2)
    target_lengths[1], target_lengths[2] = 3, 4
    return features, targets, input_lengths, target_lengths


def torch_expected(batch: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        expected = [v.numpy() for v in ConvLoss().eval()(*batch)]
    assert np.isposinf(expected[0][1:3]).all() and np.isfinite(expected[0][[0, *range(3, len(expected[0]))]]).all()
    assert np.isposinf(expected[2]) and np.isfinite(expected[3]) and np.isposinf(expected[4])
    return expected


@pytest.fixture(scope="module")
def torch_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each PyTorch route's model: the ONNX files of both exporters (written by the default
    call, dimensions dynamic) and convert_model's openvino.Model."""
    folder = tmp_path_factory.mktemp("torch")
    example = torch_batch(4, 12)
    found: dict[str, Any] = {}
    for exporter in ("dynamo", "torchscript"):
        found[exporter] = folder / f"{exporter}.onnx"
        ctcop.torch.export_onnx(ConvLoss().eval(), example, found[exporter], exporter=exporter)
    found["convert_model"] = openvino.convert_model(
        ConvLoss().eval(), example_input=example, extension=ctcop.openvino_extensions()
    )
    return found


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("route", ["dynamo", "torchscript", "convert_model"])
def test_a_float32_torch_model_gives_inf_in_openvino(route: str, config: str, torch_models: dict[str, Any]) -> None:
    compiled, precision = compiled_for(torch_models[route], config)
    for n, frames in ((4, 12), (6, 17)):
        batch = torch_batch(n, frames)
        results = compiled([v.numpy() for v in batch])
        got = [results[output] for output in compiled.outputs]
        for (reduction, zero), value, wanted in zip(OPTIONS, got, torch_expected(batch), strict=True):
            assert_losses(value, wanted, precision, f"{route} {precision} N={n} {reduction} zero_infinity={zero}")


def test_the_float32_export_holds_no_float64_inf_or_nan() -> None:
    """Where +inf and NaN come from in the export: run-time values of the log-probs' compute
    type, never a constant (D7) and never a float64 value (D5)."""
    exported = ctcop.torch.export_onnx(ConvLoss().eval(), torch_batch(4, 12))
    for node in exported.graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                value = onnx.numpy_helper.to_array(attribute.t)
                assert np.isfinite(value).all() if value.dtype.kind == "f" else True, node.name
    casts = [n for n in exported.graph.node if n.op_type == "Cast"]
    to_double = [n for n in casts if helper.get_attribute_value(n.attribute[0]) == TensorProto.DOUBLE]
    # the finite correction of each of the six calls (spec 14.1): its log-sum-exps and CTCLoss-4's loss
    assert len(to_double) == 2 * len(OPTIONS)


# -- TensorFlow -------------------------------------------------------------------------------


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
