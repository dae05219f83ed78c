"""A PyTorch model whose forward calls ``ctc_loss``, exported to ONNX with ctcop's CTCLoss.

Both of PyTorch's exporters are served; each writes every ``ctc_loss`` call as ctcop's
placeholder node (:mod:`ctcop.torch.onnx_graph`), which :func:`finish_onnx` expands:

* ``exporter="dynamo"`` (the default; ``torch.onnx.export(..., dynamo=True)``, torch.export and
  onnxscript): the model runs under :class:`redirect_ctc_loss`, so its ``F.ctc_loss``,
  ``torch.ctc_loss`` and ``nn.CTCLoss`` calls become ``ctcop::ctc_loss`` nodes, which
  :func:`translation_table` translates;
* ``exporter="torchscript"`` (``dynamo=False``, deprecated by PyTorch): a symbolic for
  ``aten::ctc_loss`` and ``ctcop::ctc_loss``, registered for the one export only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import import_module
from typing import Any

import onnx
import torch

from ..errors import InvalidInputError
from ..onnx.files import save_onnx
from ..onnx.function import MIN_OPSET
from ..onnx.types import tensor_type
from . import onnx_graph
from .custom_op import redirect_ctc_loss
from .semantics import ArgumentFacts, checked_call

EXPORTERS = ("dynamo", "torchscript")
DEFAULT_OPSET = 20
_SCALAR_NAMES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64"}
_SCALAR_NAMES |= {"Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}


def _placeholder_attributes(call_attributes: dict[str, int], dtype: str) -> dict[str, int]:
    return {**call_attributes, "dtype": tensor_type(dtype)}


# -- the TorchScript exporter ---------------------------------------------------------------------


def _script_facts(values: Sequence[Any], lists: tuple[bool, ...]) -> ArgumentFacts:
    """ArgumentFacts of TorchScript values (``torch._C.Value``): ranks, element types, and which
    lengths were lists (``lists``, read from the original node: by now they are constants)."""
    from torch.onnx import symbolic_helper

    def type_name(value: Any) -> str:
        scalar = value.type().scalarType() if value.type().kind() == "TensorType" else None
        return _SCALAR_NAMES.get(str(scalar), str(scalar))

    ranks = tuple(symbolic_helper._get_tensor_rank(v) for v in values)
    sizes = symbolic_helper._get_tensor_sizes(values[0]) if ranks[0] in (2, 3) else None
    classes = sizes[-1] if sizes and isinstance(sizes[-1], int) else None
    types = tuple("int64" if is_list else type_name(v) for v, is_list in zip(values[2:], lists, strict=True))
    return ArgumentFacts(ranks, type_name(values[0]), types, classes, lists)


def _listed(g: Any) -> tuple[bool, ...]:
    """Whether the lengths of the call being converted were lists (the IntList overload)."""
    original = getattr(g, "original_node", None)
    if original is None:
        return (False, False)
    types = [str(value.type()) for value in original.inputs()]
    return tuple(kind.startswith(("List", "int[]")) for kind in types[2:4])


def _symbolic(g: Any, *values: Any) -> Any:
    """The TorchScript exporter's symbolic for ``ctc_loss``: one placeholder node."""
    from torch.onnx import symbolic_helper

    tensors = values[:4]
    blank = symbolic_helper._maybe_get_const(values[4], "i")
    reduction = symbolic_helper._maybe_get_const(values[5], "i")
    zero_infinity = symbolic_helper._maybe_get_const(values[6], "b")
    facts = _script_facts(tensors, _listed(g))
    call = checked_call(blank, reduction, bool(zero_infinity), facts)
    attributes = _placeholder_attributes(call.attributes(), facts.log_prob_type)
    out = g.op(f"{onnx_graph.DOMAIN}::{onnx_graph.OP_TYPE}", *tensors, **{f"{k}_i": v for k, v in attributes.items()})
    sizes = symbolic_helper._get_tensor_sizes(tensors[0]) or [None] * 3
    out.setType(tensors[0].type().with_sizes(sizes[1:2] if call.reduction == "none" and call.batched else []))
    return out


SYMBOLIC_NAMES = ("::ctc_loss", "ctcop::ctc_loss")


@contextmanager
def _symbolics(opset: int) -> Iterator[None]:
    """ctcop's symbolic for ``aten::ctc_loss`` and ``ctcop::ctc_loss``, for the one export."""
    registry = import_module("torch.onnx")  # the functions are public but not in torch.onnx's __all__
    for name in SYMBOLIC_NAMES:
        registry.register_custom_op_symbolic(name, _symbolic, opset)
    try:
        yield
    finally:
        for name in SYMBOLIC_NAMES:
            registry.unregister_custom_op_symbolic(name, opset)


def _torchscript(model: torch.nn.Module, args: tuple[Any, ...], options: dict[str, Any], opset: int) -> onnx.ModelProto:
    if options.pop("dynamic_shapes", None) is not None:
        raise InvalidInputError("dynamic_shapes", "the TorchScript exporter takes dynamic_axes")
    with tempfile.TemporaryDirectory() as folder, _symbolics(opset), torch.no_grad():
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            model, args, path, dynamo=False, opset_version=opset, custom_opsets={onnx_graph.DOMAIN: 1}, **options
        )
        return onnx.load(path)


# -- the torch.export-based exporter ----------------------------------------------------------------


def _placeholder_schema() -> onnx.defs.OpSchema:
    """An OpSchema for the placeholder, given to onnxscript's Op (nothing is registered)."""
    schema = onnx.defs.OpSchema
    inputs = [schema.FormalParameter(name, f"T{k}") for k, name in enumerate(onnx_graph.INPUTS)]
    types = ["tensor(float16)", "tensor(float)", "tensor(double)"]
    integers = [f"tensor({t})" for t in ("int8", "int16", "int32", "int64", "uint8", "bool", "float", "double")]
    constraints = [("T0", types, ""), *((f"T{k}", integers, "") for k in (1, 2, 3))]
    names = ("blank", "reduction", "zero_infinity", "batched", "concatenated", "dtype")
    return schema(
        onnx_graph.OP_TYPE,
        onnx_graph.DOMAIN,
        1,
        inputs=inputs,
        outputs=[schema.FormalParameter("loss", "T0")],
        type_constraints=constraints,
        attributes=[schema.Attribute(name, schema.AttrType.INT, "") for name in names],
    )


def _translation(
    log_probs: Any,
    targets: Any,
    input_lengths: Any,
    target_lengths: Any,
    blank: int,
    reduction: int,
    zero_infinity: bool,
) -> Any:
    """``ctcop::ctc_loss`` in the torch.export-based exporter: one placeholder node."""
    import onnxscript

    def rank(value: Any) -> int | None:
        return None if value.shape is None else len(value.shape)

    def type_name(value: Any) -> str:
        return str(value.dtype.numpy().name) if value.dtype is not None else "?"

    tensors = (log_probs, targets, input_lengths, target_lengths)
    ranks = tuple(rank(v) for v in tensors)
    classes = log_probs.shape[-1] if ranks[0] in (2, 3) else None
    types = (type_name(input_lengths), type_name(target_lengths))
    facts = ArgumentFacts(ranks, type_name(log_probs), types, classes if isinstance(classes, int) else None)
    call = checked_call(blank, reduction, zero_infinity, facts)
    attributes = _placeholder_attributes(call.attributes(), facts.log_prob_type)
    placeholder = onnxscript.values.Op(
        onnxscript.values.Opset(onnx_graph.DOMAIN, 1), onnx_graph.OP_TYPE, _placeholder_schema()
    )
    return placeholder(*tensors, **attributes)


def translation_table() -> dict[Callable[..., Any], Callable[..., Any]]:
    """``custom_translation_table`` for ``torch.onnx.export(..., dynamo=True)`` of a model that
    calls ``ctcop::ctc_loss`` (:func:`ctcop.torch.ctc_loss`, :class:`ctcop.torch.CTCLoss`, or
    PyTorch's under :class:`redirect_ctc_loss`); then :func:`finish_onnx` the result."""
    return {torch.ops.ctcop.ctc_loss.default: _translation}


def _dynamo(model: torch.nn.Module, args: tuple[Any, ...], options: dict[str, Any], opset: int) -> onnx.ModelProto:
    try:
        import onnxscript  # noqa: F401 - torch's exporter needs it; say so before it does
    except ImportError:
        raise InvalidInputError("exporter", "'dynamo' needs the onnxscript package (pip install onnxscript)") from None
    with redirect_ctc_loss():
        program = torch.onnx.export(
            model, args, dynamo=True, opset_version=opset, custom_translation_table=translation_table(), **options
        )
    if program is None:  # pragma: no cover - dynamo=True always returns the program
        raise InvalidInputError("exporter", "torch.onnx.export returned no program")
    model_proto: onnx.ModelProto = program.model_proto
    return model_proto


def _ctcop_cause(error: BaseException) -> InvalidInputError | None:
    """The InvalidInputError that ``error`` wraps (its chain of causes), if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, InvalidInputError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def finish_onnx(model: onnx.ModelProto) -> onnx.ModelProto:
    """The placeholders of an exported model expanded and the ai.ctcop.CTCLoss function added."""
    return onnx_graph.finish_onnx(model)


def export_onnx(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    path: str | os.PathLike[str] | None = None,
    *,
    kwargs: Mapping[str, Any] | None = None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    dynamic_shapes: Any = None,
    opset: int = DEFAULT_OPSET,
    exporter: str = "dynamo",
) -> onnx.ModelProto:
    """Export ``model(*args, **kwargs)``, whose forward calls ``F.ctc_loss``, ``torch.ctc_loss``,
    ``nn.CTCLoss`` or ctcop's drop-ins, to ONNX: each call becomes standard operators around one
    ``ai.ctcop.CTCLoss`` node, computing what PyTorch computes (spec 14), with the node's
    model-local function; checked with ``onnx.checker`` (full_check) and written to ``path`` when
    given. ``dynamic_axes`` ({input or output name: {axis: name}}) works with either exporter,
    ``dynamic_shapes`` (torch.export's) with "dynamo". ``opset`` >= 18. A call that no graph can
    express exactly (lengths as Python lists, ...) is an :class:`InvalidInputError` naming the
    argument."""
    if exporter not in EXPORTERS:
        raise InvalidInputError("exporter", f"{exporter!r} is not one of {', '.join(EXPORTERS)}")
    if (
        isinstance(opset, bool)
        or not isinstance(opset, int)
        or not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version()
    ):
        raise InvalidInputError("opset", f"{opset!r} is outside [{MIN_OPSET}, {onnx.defs.onnx_opset_version()}]")
    names = {"input_names": input_names, "output_names": output_names}
    options: dict[str, Any] = {key: None if value is None else list(value) for key, value in names.items()}
    options |= {
        "kwargs": dict(kwargs) if kwargs else None,
        "dynamic_axes": dynamic_axes,
        "dynamic_shapes": dynamic_shapes,
    }
    options = {key: value for key, value in options.items() if value is not None}
    export = _dynamo if exporter == "dynamo" else _torchscript
    try:
        exported = export(model, tuple(args), options, opset)
    except Exception as error:  # PyTorch's exporters wrap what ctcop's rules raise: raise that
        cause = _ctcop_cause(error)
        if cause is None:
            raise
        raise cause from None
    model_proto = finish_onnx(exported)
    if path is not None:
        save_onnx(model_proto, os.fspath(path))
    return model_proto
