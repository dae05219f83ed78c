"""OpenVINO extensions that teach ``openvino.Core`` the ctcop CTCLoss (spec sections 11.3, 12)."""

from __future__ import annotations

from typing import Any

import openvino as ov
from openvino.frontend import NodeContext
from openvino.frontend.onnx import ConversionExtension

from ..attributes import Attributes
from ..schema import encoding
from .custom_op import CTCLossOp
from .lowering import lower


def _convert_onnx_node(node: NodeContext) -> list[ov.Output]:
    """Map one ``ai.ctcop.CTCLoss`` ONNX node onto OpenVINO operators (the lowering)."""
    defaults = Attributes.of()
    attributes = Attributes.of({name: bool(node.get_attribute(name, int(v), int)) for name, v in defaults.items()})
    loss = lower(node.get_input(0), node.get_input(1), node.get_input(2), **attributes)
    return [loss.output(0)]


def openvino_extensions() -> list[Any]:
    """Extensions to pass, one at a time, to ``openvino.Core.add_extension`` or all at once to
    ``openvino.convert_model(..., extension=...)`` (every item is an extension object; the custom
    op class is wrapped in ``openvino.OpExtension``).

    With them, ``Core.read_model`` maps the ``ai.ctcop.CTCLoss`` node of an ONNX model from
    :mod:`ctcop.onnx` onto OpenVINO's native CTCLoss-4 and the adapters and guards of
    :mod:`ctcop.openvino.lowering`, and reads IR layers of type ``CTCLoss`` version ``ctcop1``
    (the custom-op form) as :class:`ctcop.openvino.custom_op.CTCLossOp`. Both are total functions
    (spec 11.5): input that breaks a rule gives NaN for the samples that break it, never a crash
    or a failed inference. ``ctcop.openvino_extensions()`` adds the PyTorch frontend's rules for
    ``aten::ctc_loss`` and ``ctcop::ctc_loss`` (:mod:`ctcop.torch.openvino_frontend`).
    """
    onnx_encoding = encoding("onnx")
    return [
        ConversionExtension(onnx_encoding["op_type"], onnx_encoding["domain"], _convert_onnx_node),
        ov.OpExtension(CTCLossOp),
    ]
