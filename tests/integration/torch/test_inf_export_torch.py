"""+inf through every PyTorch export route into OpenVINO, at the precision the CPU plugin compiles to.

A float32 model's infeasible samples (a target longer than its frames; repeats that need more
frames than there are) are +inf, exactly, in every route that ends in OpenVINO's CPU plugin: a
PyTorch model through both exporters of :func:`ctcop.torch.export_onnx` and through ``openvino.convert_model``
(the op alone and attached: tests/unit/test_inf_export_op.py; TensorFlow's routes:
tests/integration/tf/test_inf_export_tf.py); ONNX is read with
``core.read_model`` and ctcop's extensions. Each is compiled on "CPU" with the f32 hint and with
no config (bfloat16 on CPUs with AVX-512-BF16 or AMX: the compiled precision is read back, never
assumed; tests/support/inf_routes.py). The oracle is PyTorch's own loss (``reduction``
none/sum/mean, ``zero_infinity`` off and on) or the reference; finite values are compared by the
float32 rule where the plugin computes in float32, and only checked finite where it computes the
model in a reduced precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import openvino
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper
from support.inf_routes import CONFIGS, FEATURES, C, assert_losses, compiled_for
from torch import nn

import ctcop
import ctcop.torch

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


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
