"""ctcop: the exact reference, exporters and conformance suite for the CTCLoss-4 operator.

``import ctcop`` loads the core only (numpy): the evaluator, its gradient, greedy decoding and the
error type. The wings load on first use: ``ctcop.onnx`` (ONNX export), ``ctcop.openvino`` (IR
export, lowering, extensions), ``ctcop.conformance`` (cases, runtime adapters, runner).
"""

from typing import Any

from .decode import greedy_decode
from .errors import InvalidInputError
from .reference import ctc_loss, ctc_loss_grad, ctc_loss_or_nan, openvino_ctc_loss

__all__ = [
    "InvalidInputError",
    "ctc_loss",
    "ctc_loss_grad",
    "ctc_loss_or_nan",
    "greedy_decode",
    "openvino_ctc_loss",
    "openvino_extensions",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``ctcop.openvino_extensions`` imports the OpenVINO wing when first asked for."""
    if name == "openvino_extensions":
        from .openvino.extensions import openvino_extensions

        return openvino_extensions
    raise AttributeError(f"module 'ctcop' has no attribute {name!r}")
