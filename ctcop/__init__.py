"""ctcop: the exact reference, exporters and conformance suite for the CTCLoss-4 operator.

``import ctcop`` loads nothing heavy; its names load the core on first use (numpy, and numba for
its compiled kernels): the evaluator, its gradient, greedy decoding, the error type and the core's
thread count. The wings load on first use too: ``ctcop.onnx`` (ONNX export), ``ctcop.openvino``
(IR export, lowering, extensions), ``ctcop.conformance`` (cases, runtime adapters, runner). A
light package is what lets the ``ctcop`` command take over SIGINT before the core is imported.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import InvalidInputError

if TYPE_CHECKING:
    from .core.scheduler import get_num_threads, set_num_threads
    from .decode import greedy_decode
    from .reference import (
        ctc_loss,
        ctc_loss_grad,
        ctc_loss_or_nan,
        openvino_ctc_loss,
        openvino_ctc_loss_grad,
        openvino_ctc_loss_or_nan,
    )

__all__ = [
    "InvalidInputError",
    "ctc_loss",
    "ctc_loss_grad",
    "ctc_loss_or_nan",
    "get_num_threads",
    "greedy_decode",
    "openvino_ctc_loss",
    "openvino_ctc_loss_grad",
    "openvino_ctc_loss_or_nan",
    "openvino_extensions",
    "set_num_threads",
]
__version__ = "0.1.0"

_HOME = {
    "ctc_loss": ".reference",
    "ctc_loss_grad": ".reference",
    "ctc_loss_or_nan": ".reference",
    "openvino_ctc_loss": ".reference",
    "openvino_ctc_loss_grad": ".reference",
    "openvino_ctc_loss_or_nan": ".reference",
    "greedy_decode": ".decode",
    "get_num_threads": ".core.scheduler",
    "set_num_threads": ".core.scheduler",
}


def openvino_extensions(*, pytorch: bool | None = None) -> list[Any]:
    """Extensions for ``openvino.Core.add_extension`` (one at a time) or ``openvino.convert_model(...,
    extension=...)`` (all at once): the OpenVINO wing's (the ``ai.ctcop.CTCLoss`` ONNX node, the
    custom IR layer; spec 11.3, 12), PyTorch's ``ctc_loss`` (spec 14; with ``pytorch``, by default
    when torch is imported) and TensorFlow's ``CTCLoss`` op (spec 15; where the installed openvino
    has a TensorFlow frontend). Loads openvino."""
    from .tf.openvino_frontend import tensorflow_extensions
    from .torch.openvino_frontend import openvino_extensions as with_pytorch

    return [*with_pytorch(pytorch=pytorch), *tensorflow_extensions()]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module when first asked for."""
    if name not in _HOME:
        raise AttributeError(f"module 'ctcop' has no attribute {name!r}")
    value = getattr(import_module(_HOME[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
