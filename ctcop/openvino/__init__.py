"""The OpenVINO wing: CTCLoss-4 on stock OpenVINO (spec section 12).

Holds the guarded lowering onto OpenVINO's native CTCLoss-4 (:mod:`.lowering`), the custom-op
layer evaluated by the reference (:mod:`.custom_op`), the extensions that teach a Core both and the
ONNX node (:mod:`.extensions`), the IR writer (:mod:`.writer`), the op attached to an existing model
(:mod:`.attach`), safe IR reading and writing (:mod:`.files`), the inference precision a model is
compared at (:mod:`.precision`) and element type names (:mod:`.types`).
May import the core and openvino; never onnx or the conformance wing (the ONNX encoding's names come from the schema).
"""

from .attach import attach_openvino
from .extensions import openvino_extensions
from .files import load_ir, openvino_core, save_ir
from .precision import compiled_precision, declared_precision_config
from .writer import IR_FORMS, ir_model

__all__ = [
    "IR_FORMS",
    "attach_openvino",
    "compiled_precision",
    "declared_precision_config",
    "ir_model",
    "load_ir",
    "openvino_core",
    "openvino_extensions",
    "save_ir",
]
