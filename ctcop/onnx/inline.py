"""The function-free form of an exported model (spec 11.2): every ``ai.ctcop.CTCLoss`` node
replaced by the body of its model-local function, for tools that read no model-local functions
(onnx's version converter drops them; onnxruntime's backend-test harness skips a model that
imports a domain outside the released opsets)."""

from __future__ import annotations

import onnx
from onnx import inliner

from . import function


def inlined(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its ``ai.ctcop.CTCLoss`` calls inlined, the function and the ``ai.ctcop``
    import dropped (other model-local functions and imports are kept), checked with
    ``onnx.checker`` (full check). The values computed are the function's, operator for operator."""
    out = inliner.inline_selected_functions(model, [(function.DOMAIN, function.OP_TYPE)])
    kept = [op for op in out.opset_import if op.domain != function.DOMAIN]
    del out.opset_import[:]
    out.opset_import.extend(kept)
    onnx.checker.check_model(out, full_check=True)
    return out
