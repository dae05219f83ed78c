"""Reading untrusted ONNX files and writing models; failures are :class:`InvalidInputError`.

Limits: the model file is a regular file of at most ``MAX_FILE_BYTES``; external data, of any
tensor (initializers, Constant nodes, subgraphs), must be regular files inside the model's folder,
not symbolic links; no tensor may declare more than ``MAX_TENSOR_BYTES``; the model must pass
onnx's checker (spec 13).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import onnx
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from ..errors import InvalidInputError
from ..files import MAX_TENSOR_BYTES, atomic_output, checked_input_file
from ..text import first_line


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``graph``: initializers, sparse ones, node attributes, subgraphs' (If, Loop, Scan)."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: onnx.NodeProto) -> Iterator[onnx.TensorProto]:
    for attribute in node.attribute:
        if attribute.HasField("t"):
            yield attribute.t
        yield from attribute.tensors
        if attribute.HasField("sparse_tensor"):
            yield from (attribute.sparse_tensor.values, attribute.sparse_tensor.indices)
        for sparse in attribute.sparse_tensors:
            yield from (sparse.values, sparse.indices)
        if attribute.HasField("g"):
            yield from _graph_tensors(attribute.g)
        for graph in attribute.graphs:
            yield from _graph_tensors(graph)


def model_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``model``, wherever it is declared (main graph, subgraphs, functions)."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _node_tensors(node)


def check_external_data(model: onnx.ModelProto, path: str) -> None:
    """Refuse ONNX external data, of any tensor of the model, whose location leaves the model's
    folder, holds a NUL, is a symbolic link (onnx refuses to read those) or is not a regular file."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for tensor in model_tensors(model):
        if not uses_external_data(tensor):
            continue
        location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
        if not location or "\0" in location:
            raise InvalidInputError(
                "model", f"tensor {tensor.name!r}: external data location {location!r} is no file name"
            )
        given = os.path.join(folder, location)
        target = os.path.realpath(given)
        if os.path.isabs(location) or os.path.commonpath([folder, target]) != folder:
            raise InvalidInputError("model", f"tensor {tensor.name!r}: external data {location!r} is outside {folder}")
        if os.path.normpath(given) != target:
            raise InvalidInputError("model", f"tensor {tensor.name!r}: external data {location!r} is a symbolic link")
        checked_input_file(target, "model")


# Bits per element of the packed types, whose raw data is not one element per itemsize.
_PACKED_BITS = {"UINT4": 4, "INT4": 4, "FLOAT4E2M1": 4, "UINT2": 2, "INT2": 2, "FLOAT6E2M3": 6, "FLOAT6E3M2": 6}


def _element(tensor: onnx.TensorProto) -> tuple[str, int]:
    """The name of a tensor's element type and its bits; an unknown type is an :class:`InvalidInputError`."""
    name = onnx.TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in _DATA_TYPES else ""
    try:
        bits = _PACKED_BITS.get(name) or 8 * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        bits = 0
    if not name or name == "UNDEFINED" or not bits:
        raise InvalidInputError("model", f"tensor {tensor.name!r} has an unknown element type {tensor.data_type}")
    return name, bits


_DATA_TYPES = set(onnx.TensorProto.DataType.values())


def external_data_files(path: str) -> list[str]:
    """The files the ONNX model at ``path`` names as external data, resolved in its folder; none
    where the file cannot be read as ONNX (reading it properly then says why)."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # any failure here is reported by load_onnx
        return []
    folder = os.path.dirname(os.path.abspath(path))
    locations = (
        {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
        for tensor in model_tensors(model)
        if uses_external_data(tensor)
    )
    return [
        os.path.join(folder, location) for location in dict.fromkeys(locations) if location and "\0" not in location
    ]


def _check_tensor_sizes(model: onnx.ModelProto) -> None:
    """Every tensor of a known element type, declaring at most ``MAX_TENSOR_BYTES``; checked
    before external data is read."""
    for tensor in model_tensors(model):
        _, bits = _element(tensor)
        declared = (math.prod(int(d) for d in tensor.dims) * bits + 7) // 8  # Python ints: no overflow
        if declared > MAX_TENSOR_BYTES:
            raise InvalidInputError(
                "model",
                f"tensor {tensor.name!r} declares {declared} bytes, over the {MAX_TENSOR_BYTES}-byte limit",
            )


def _check_tensor_data(model: onnx.ModelProto) -> None:
    """Every tensor's raw data (its external data read in) the size its dims and type declare."""
    for tensor in model_tensors(model):
        name, bits = _element(tensor)
        if name == "STRING" or not tensor.raw_data:
            continue
        expected = (math.prod(int(d) for d in tensor.dims) * bits + 7) // 8
        if len(tensor.raw_data) != expected:
            raise InvalidInputError(
                "model",
                f"tensor {tensor.name!r} holds {len(tensor.raw_data)} bytes of data; its dims "
                f"{list(tensor.dims)} and type {name} declare {expected}",
            )


def _check_model(path: str) -> None:
    """onnx's checker on the file (its external data beside it): a model the checker refuses
    (nodes without outputs, recursive or duplicated local functions, no opset import, tensors
    whose data does not match their dims or type...) is an :class:`InvalidInputError`."""
    try:
        onnx.checker.check_model(path)
    except (onnx.checker.ValidationError, ValueError, OSError) as error:
        raise InvalidInputError("model", f"not a valid ONNX model: {first_line(error)}") from None


def inferred_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with onnx's shape inference applied; a model whose declared types or shapes
    contradict what inference derives (an initializer of another type shadowing an input, ...) is
    an :class:`InvalidInputError` naming the first line of onnx's reason."""
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception as error:  # onnx's InferenceError and friends: the model is not consistent
        raise InvalidInputError("model", f"shape inference fails: {first_line(error)}") from None


DEFAULT_DOMAINS = ("", "ai.onnx")


def known_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain opset (None when it imports none); one newer than the installed
    onnx knows is an :class:`InvalidInputError` (no reader can know what its nodes mean, and
    OpenVINO's reader takes time in proportion to the declared number)."""
    versions = [op.version for op in model.opset_import if op.domain in DEFAULT_DOMAINS]
    own = max(versions) if versions else None
    newest = onnx.defs.onnx_opset_version()
    if own is not None and own > newest:
        raise InvalidInputError(
            "model", f"default-domain opset {own} is newer than onnx {onnx.__version__} knows (at most {newest})"
        )
    return own


def _names(graph: onnx.GraphProto) -> Iterator[object]:
    """Every name the main graph holds: its values', initializers' and nodes'."""
    for value in [*graph.input, *graph.output, *graph.value_info, *graph.initializer]:
        yield value.name
    for node in graph.node:
        yield from (node.name, node.op_type, node.domain, *node.input, *node.output)


def _check_names(model: onnx.ModelProto) -> None:
    """protobuf hands a string field that is not valid UTF-8 back as bytes: such a name is refused."""
    for name in _names(model.graph):
        if not isinstance(name, str):
            raise InvalidInputError("model", f"a name is not UTF-8 text: {name!r}")


def _graph_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph`` and of the subgraphs its nodes hold (If, Loop, Scan bodies)."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for body in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                yield from _graph_nodes(body)


def _check_references(model: onnx.ModelProto) -> None:
    """An attribute that refers to a function's attribute (``ref_attr_name``) means something only
    inside a function body; in the model's graphs it has no value to read."""
    for node in _graph_nodes(model.graph):
        for attribute in node.attribute:
            if attribute.ref_attr_name:
                raise InvalidInputError(
                    "model",
                    f"node {node.name or node.op_type!r}: attribute {attribute.name!r} refers to a function "
                    f"attribute ({attribute.ref_attr_name!r}) outside any function",
                )


def load_onnx(path: str) -> onnx.ModelProto:
    """Read an ONNX model from an untrusted file, checking the file and its external data before
    reading them; any failure is an :class:`InvalidInputError`."""
    checked_input_file(path, "model")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("model", f"{path!r}: onnx reads files whose names are valid UTF-8 only") from None
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as error:  # OSError, protobuf's DecodeError, ...: all mean "not a readable model"
        raise InvalidInputError("model", f"cannot read {path!r} as ONNX: {type(error).__name__}") from None
    _check_names(model)
    _check_references(model)
    known_opset(model)
    check_external_data(model, path)
    _check_tensor_sizes(model)
    _check_model(path)
    try:
        load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except (OSError, ValueError) as error:
        raise InvalidInputError("model", f"{path!r}: cannot read its external data: {first_line(error)}") from None
    _check_tensor_data(model)
    return model


def save_onnx(model: onnx.ModelProto, path: str) -> None:
    """Write ``model`` atomically (a temporary file in the same folder, then a rename); an
    unwritable path is an :class:`InvalidInputError`."""
    try:
        with atomic_output(path) as temporary:
            onnx.save(model, temporary)
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else first_line(error)
        raise InvalidInputError("output", f"cannot write {path!r}: {reason}") from None
