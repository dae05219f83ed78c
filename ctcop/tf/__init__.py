"""The TensorFlow wing: TensorFlow's CTC losses converted onto CTCLoss-4 exactly (spec section 15).

* :mod:`.openvino_frontend` maps TensorFlow's ``CTCLoss`` op (what ``tf.compat.v1.nn.ctc_loss``
  and ``tf.nn.ctc_loss`` with SparseTensor labels run) in OpenVINO's ``convert_model`` onto the
  guarded lowering (:func:`~.openvino_frontend.tensorflow_extensions`, part of
  ``ctcop.openvino_extensions()``); its gradient output is refused (:mod:`.gradient`);
* :func:`tf2onnx_handlers` is tf2onnx's ``custom_op_handlers`` for the op (:mod:`.onnx_handler`),
  and :func:`finish_onnx` expands what it writes around the ``ai.ctcop.CTCLoss`` node (:mod:`.onnx_graph`);
* :mod:`.semantics` holds TensorFlow's rules and :func:`reference_loss`, the mapping in numpy;
* :func:`ctc_loss` is ``tf.nn.ctc_loss`` for dense labels written as the op, and :func:`redirect_ctc_loss`
  puts it in place of ``tf.nn.ctc_loss`` (Keras 3's CTC) while a model is traced (:mod:`.dense`).

``import ctcop.tf`` imports neither tensorflow nor openvino: the names below import their modules
when first asked for. May import the core, the ONNX and OpenVINO wings and tensorflow; never the PyTorch wing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .dense import ctc_loss, redirect_ctc_loss
    from .onnx_graph import finish_onnx
    from .onnx_handler import tf2onnx_handlers
    from .openvino_frontend import tensorflow_extensions
    from .semantics import TfCtcCall, reference_loss

_HOMES = {
    "ctc_loss": "dense",
    "redirect_ctc_loss": "dense",
    "finish_onnx": "onnx_graph",
    "tf2onnx_handlers": "onnx_handler",
    "tensorflow_extensions": "openvino_frontend",
    "TfCtcCall": "semantics",
    "reference_loss": "semantics",
}
__all__ = [
    "TfCtcCall",
    "ctc_loss",
    "finish_onnx",
    "redirect_ctc_loss",
    "reference_loss",
    "tensorflow_extensions",
    "tf2onnx_handlers",
]


def __getattr__(name: str) -> Any:
    """The public names, each imported from its module when first asked for."""
    if name in _HOMES:
        return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
