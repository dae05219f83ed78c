"""OpenVINO extensions that teach ``openvino.Core`` the ctcop CTCLoss (spec sections 11.3, 12)."""

from __future__ import annotations

from typing import Any

import openvino as ov
from openvino.frontend import NodeContext
from openvino.frontend.onnx import ConversionExtension

from . import onnx_function
from .openvino_custom_op import CTCLossOp
from .openvino_lowering import lower
from .schema import form


def _convert_onnx_node(node: NodeContext) -> list[ov.Output]:
    """Map one ``ai.ctcop.CTCLoss`` ONNX node onto OpenVINO operators (the lowering)."""
    flags = {
        name: bool(node.get_attribute(name, int(default), int))
        for name, default in form("time_major").attributes.items()
    }
    loss = lower(node.get_input(0), node.get_input(1), node.get_input(2), **flags)
    return [loss.output(0)]


def openvino_extensions() -> list[Any]:
    """Extensions to pass, one at a time, to ``openvino.Core.add_extension``::

        for extension in ctcop.openvino_extensions():
            core.add_extension(extension)

    (``add_extension`` takes a frontend extension object or an operation class, not a list
    that mixes the two.)

    With them, ``Core.read_model`` maps the ``ai.ctcop.CTCLoss`` node of an ONNX model from
    :mod:`ctcop.export` onto OpenVINO's native CTCLoss-4 and the adapters of
    :mod:`ctcop.openvino_lowering`, and reads IR layers of type ``CTCLoss`` version ``ctcop1``
    (the custom-op form) as :class:`ctcop.openvino_custom_op.CTCLossOp`.
    """
    return [ConversionExtension(onnx_function.OP_TYPE, onnx_function.DOMAIN, _convert_onnx_node), CTCLossOp]
