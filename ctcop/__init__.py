"""ctcop: the exact reference, exporters and conformance suite for the CTCLoss-4 operator."""

from .decode import greedy_decode
from .errors import InvalidInputError
from .extensions import openvino_extensions
from .reference import ctc_loss, ctc_loss_grad, openvino_ctc_loss

__all__ = [
    "InvalidInputError",
    "ctc_loss",
    "ctc_loss_grad",
    "greedy_decode",
    "openvino_ctc_loss",
    "openvino_extensions",
]
__version__ = "0.1.0"
