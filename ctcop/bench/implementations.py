"""What ``ctcop bench`` times: ctcop's evaluator, its exports in onnxruntime and OpenVINO, and
the CTC losses of the frameworks installed here, each called the way its users call it.

An :class:`Implementation` turns the spec form's inputs (:class:`~.shapes.Inputs`) into a
:class:`Prepared` call. Everything a user would hold before computing a loss is done outside the
timed call: models built and compiled (once per process), inputs converted to the framework's
tensors and layout (batch-major logits for optax and OpenVINO's native CTCLoss, compacted
targets and lengths, float64 logits for the float64 peers), JIT compilations run (their time is
``compile_s``). The timed call computes the [N] losses (and the gradient d sum(loss) / d logits
where ``gradient``) and returns them as numpy arrays. Frameworks are imported by name on first
use, so that importing this module loads numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..process.frameworks import missing
from .ctcop_calls import (
    ctcop_forward,
    ctcop_grad,
    exp_floor,
    onnxruntime,
    openvino_ir,
    openvino_onnx,
)
from .framework_calls import openvino_native, optax, tensorflow, torch_backward, torch_forward, warpctc
from .prepared import Prepare


@dataclass(frozen=True)
class Implementation:
    """A column of the table: ``name`` on the command line, ``column`` in the table's head,
    ``label`` in its legend; ``modules`` must be installed; ``gradient``: the call computes the
    gradient too; ``checked``: its losses are compared with ctcop's (the floor computes none)."""

    name: str
    column: str
    label: str
    modules: tuple[str, ...]
    prepare: Prepare
    gradient: bool = False
    float32_peer: bool = False
    default: bool = True
    checked: bool = True

    def missing(self) -> str | None:
        """None when the libraries it needs are installed, else which are not (nothing imported)."""
        return missing(*self.modules)


IMPLEMENTATIONS: dict[str, Implementation] = {
    implementation.name: implementation
    for implementation in (
        Implementation("ctcop", "ctcop", "ctcop.ctc_loss (float64 math on float32 input)", ("numpy",), ctcop_forward),
        Implementation(
            "ctcop-grad", "ctcop+g", "ctcop.ctc_loss_grad (loss and gradient)", ("numpy",), ctcop_grad, True
        ),
        Implementation(
            "onnxruntime", "ort", "ctcop's ONNX export in onnxruntime (float32)", ("onnxruntime",), onnxruntime(True)
        ),
        Implementation(
            "onnxruntime-no-arena",
            "ort-na",
            "the same without onnxruntime's CPU memory arena (enable_cpu_mem_arena = False)",
            ("onnxruntime",),
            onnxruntime(False),
            default=False,
        ),
        Implementation(
            "openvino-onnx", "ov-onnx", "ctcop's ONNX export in OpenVINO (float32)", ("openvino",), openvino_onnx
        ),
        Implementation(
            "openvino-ir",
            "ov-ir",
            "ctcop's lowered IR in OpenVINO (float32)",
            ("openvino",),
            openvino_ir,
            default=False,
        ),
        Implementation(
            "torch-f32",
            "pt32",
            "PyTorch float32 forward (log_softmax + F.ctc_loss)",
            ("torch",),
            torch_forward(np.float32),
            float32_peer=True,
        ),
        Implementation(
            "torch-f64",
            "pt64",
            "PyTorch float64 forward (log_softmax + F.ctc_loss)",
            ("torch",),
            torch_forward(np.float64),
        ),
        Implementation(
            "torch-f64-grad", "pt64+b", "PyTorch float64 forward + backward", ("torch",), torch_backward, True
        ),
        Implementation(
            "warpctc",
            "wctc32+g",
            "warp-ctc through PaddlePaddle float32 loss and gradient (ctc_loss + backward; one thread, Paddle's)",
            ("paddle",),
            warpctc,
            True,
        ),
        Implementation(
            "tensorflow",
            "tf32",
            "TensorFlow tf.nn.ctc_loss float32 (sparse labels, tf.function)",
            ("tensorflow",),
            tensorflow,
            float32_peer=True,
        ),
        Implementation(
            "optax",
            "optax32",
            "optax.ctc_loss float32 (JAX, jitted)",
            ("jax", "optax"),
            optax(np.float32),
            float32_peer=True,
        ),
        Implementation(
            "optax-f64",
            "optax64",
            "optax.ctc_loss float64 (JAX x64, jitted)",
            ("jax", "optax"),
            optax(np.float64),
            default=False,
        ),
        Implementation(
            "openvino-native",
            "ov32",
            "OpenVINO native CTCLoss-4 (float32, inputs already laid out)",
            ("openvino",),
            openvino_native,
            float32_peer=True,
        ),
        Implementation(
            "exp-floor",
            "exp64",
            "floor: one float64 exp pass over the logits (numpy, one thread)",
            ("numpy",),
            exp_floor,
            checked=False,
        ),
    )
}


def default_names() -> list[str]:
    return [name for name, implementation in IMPLEMENTATIONS.items() if implementation.default]
