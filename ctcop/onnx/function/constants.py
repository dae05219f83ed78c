"""The function's name and opset (from the schema's ONNX encoding, spec 11.1) and the sizes that
fix the shape of its graph."""

from __future__ import annotations

from onnx import TensorProto

from ...schema import encoding

DOMAIN: str = encoding("onnx")["domain"]
DOMAIN_VERSION: int = encoding("onnx")["domain_version"]
OP_TYPE: str = encoding("onnx")["op_type"]
MIN_OPSET: int = encoding("onnx")["min_opset"]
# Steps per Loop iteration: the offset update and the Loop's own work come once per block.
UNROLL = 10
# Up to this many classes the emissions are gathered with GatherElements, which onnxruntime runs
# ten times faster than an element-wise Gather; onnx.reference's GatherElements (np.choose) takes
# at most 32 choices under NumPy 1 and 64 under NumPy 2, so more classes use a flat Gather.
FEW_CLASSES = 32
# With more classes the frame terms are computed a chunk of whole frames at a time: about this many
# values (1 MiB of float32), so a chunk and its temporaries stay in a core's cache.
CHUNK = 1 << 18
BOOL, INT64, DOUBLE = TensorProto.BOOL, TensorProto.INT64, TensorProto.DOUBLE
# The name of every subgraph (If branches, Loop and Scan bodies; what each one is, its doc_string).
# onnxruntime's OpenVINO execution provider (onnxruntime-openvino 1.24) partitions each subgraph
# apart from the node that holds it unless it has this name: an If or Loop it then takes whole holds
# its own fused nodes, which OpenVINO cannot read, and a Loop body it takes whole loses the values
# the body reads from the enclosing graph. Under this name it takes or leaves each If, Loop and
# Scan whole, with its subgraphs.
SUBGRAPH = "tf2onnx"
