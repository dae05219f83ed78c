"""TensorFlow's ``CTCLoss`` op in tf2onnx: the custom op handler (spec 15).

tf2onnx (1.17) has no rule for the op: it reports "Tensorflow op [CTCLoss: CTCLoss] is not
supported" and leaves an invalid node. :func:`tf2onnx_handlers` is the ``custom_op_handlers``
argument of ``tf2onnx.convert.from_function``, ``from_keras`` and ``from_graph_def`` that writes
each op as the placeholder of :mod:`ctcop.tf.onnx_graph`; :func:`ctcop.tf.finish_onnx` then
expands it into standard operators around the ``ai.ctcop.CTCLoss`` node and its model-local
function. Imports neither tensorflow nor tf2onnx: the handler works on the graph and node tf2onnx
passes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .onnx_graph import DOMAIN
from .semantics import ATTRIBUTES, OPERATION


def _placeholder(ctx: Any, node: Any, name: str, args: list[Any]) -> Any:
    """tf2onnx's handler for one ``CTCLoss`` node: the node itself, made the placeholder (its
    domain, the op's attributes as integers, ``dtype`` the logits' element type)."""
    attributes = {key: int(bool(node.get_attr_value(key, default))) for key, default in ATTRIBUTES.items()}
    attributes["dtype"] = ctx.get_dtype(node.input[0])
    for key in list(node.attr):
        del node.attr[key]
    node.domain = DOMAIN
    for key, value in attributes.items():
        node.set_attr(key, value)
    return node


def tf2onnx_handlers() -> dict[str, tuple[Callable[..., Any], list[Any]]]:
    """``custom_op_handlers`` for tf2onnx's converters: ``CTCLoss`` becomes the placeholder that
    :func:`ctcop.tf.finish_onnx` expands (convert with ``opset`` 18 or later)."""
    return {OPERATION: (_placeholder, [])}
