"""The PyTorch wing: a model whose forward calls PyTorch's ``ctc_loss`` exported exactly (spec 14).

* :func:`export_onnx` writes an ONNX model in which every ``ctc_loss`` call is standard operators
  around one ``ai.ctcop.CTCLoss`` node with its model-local function (:mod:`.onnx_export`,
  :mod:`.onnx_translations`, :mod:`.onnx_graph`); any conforming runtime runs it with no custom library;
* :func:`ctc_loss` and :class:`CTCLoss` are PyTorch's ``F.ctc_loss`` and ``nn.CTCLoss`` (same values
  and gradients) as the custom op ``ctcop::ctc_loss`` that torch.export keeps (:mod:`.custom_op`);
* :mod:`.semantics` holds the argument mapping and :func:`reference_loss`, the mapping in numpy;
* :mod:`.openvino_frontend` maps ``ctc_loss`` in OpenVINO's ``convert_model`` of such a model
  (``ctcop.openvino_extensions()`` is its :func:`~.openvino_frontend.openvino_extensions`).

``import ctcop``, ``import ctcop.torch.semantics`` (numpy only) and ``import ctcop.torch.openvino_frontend``
(openvino) do not import torch: the names below import their modules, and torch, when first asked
for. May import the core, the ONNX and OpenVINO wings, torch and onnxscript.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .custom_op import CTCLoss, ctc_loss, redirect_ctc_loss
    from .onnx_export import export_onnx, finish_onnx
    from .onnx_translations import translation_table
    from .semantics import TorchCtcCall, reference_loss

_HOMES = {
    "CTCLoss": "custom_op",
    "ctc_loss": "custom_op",
    "redirect_ctc_loss": "custom_op",
    "export_onnx": "onnx_export",
    "finish_onnx": "onnx_export",
    "translation_table": "onnx_translations",
    "TorchCtcCall": "semantics",
    "reference_loss": "semantics",
}
__all__ = [
    "CTCLoss",
    "TorchCtcCall",
    "ctc_loss",
    "export_onnx",
    "finish_onnx",
    "redirect_ctc_loss",
    "reference_loss",
    "translation_table",
]


def __getattr__(name: str) -> Any:
    """The public names, each imported from its module when first asked for."""
    if name in _HOMES:
        return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
