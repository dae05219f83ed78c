"""ctcop: the exact reference, exporters and conformance suite for the CTCLoss-4 operator.

``import ctcop`` loads the core only (numpy, and numba for its compiled kernels): the evaluator,
its gradient, greedy decoding, the error type and the core's thread count. The wings load on first
use: ``ctcop.onnx`` (ONNX export), ``ctcop.openvino`` (IR export, lowering, extensions),
``ctcop.conformance`` (cases, runtime adapters, runner).
"""

from typing import Any

from .decode import greedy_decode
from .errors import InvalidInputError
from .recursion import get_num_threads, set_num_threads
from .reference import ctc_loss, ctc_loss_grad, ctc_loss_or_nan, openvino_ctc_loss

__all__ = [
    "InvalidInputError",
    "ctc_loss",
    "ctc_loss_grad",
    "ctc_loss_or_nan",
    "get_num_threads",
    "greedy_decode",
    "openvino_ctc_loss",
    "openvino_extensions",
    "set_num_threads",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``ctcop.openvino_extensions`` imports the OpenVINO wing when first asked for."""
    if name == "openvino_extensions":
        from .openvino.extensions import openvino_extensions

        return openvino_extensions
    raise AttributeError(f"module 'ctcop' has no attribute {name!r}")
