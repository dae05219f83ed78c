"""The ONNX wing: CTCLoss-4 as an ``ai.ctcop.CTCLoss`` node with its model-local function in
standard operators (spec section 11).

Holds the function body (:mod:`.function`, built with :mod:`.graph`), the writer of a model that is
the op alone (:mod:`.writer`), the function-free form of a model (:mod:`.inline`), the op attached
to an existing model (:mod:`.attach`), the released form in front of the node (:mod:`.released`),
onnxruntime session options (:mod:`.session`) and safe file reading and writing (:mod:`.files`).
May import the core (schema, options, errors) and onnx; never OpenVINO or the conformance wing.
"""

from .attach import attach_onnx
from .files import load_onnx, save_onnx
from .function import DOMAIN, MIN_OPSET, OP_TYPE, ctc_loss_function
from .inline import inlined
from .released import released_model
from .session import session_options
from .writer import onnx_model

__all__ = [
    "DOMAIN",
    "MIN_OPSET",
    "OP_TYPE",
    "attach_onnx",
    "ctc_loss_function",
    "inlined",
    "load_onnx",
    "onnx_model",
    "released_model",
    "save_onnx",
    "session_options",
]
