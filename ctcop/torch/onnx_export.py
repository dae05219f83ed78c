"""A PyTorch model whose forward calls ``ctc_loss``, exported to ONNX with ctcop's CTCLoss.

Both of PyTorch's exporters are served; each writes every ``ctc_loss`` call as ctcop's
placeholder node (:mod:`ctcop.torch.onnx_graph`), which :func:`finish_onnx` expands:

* ``exporter="dynamo"`` (the default; ``torch.onnx.export(..., dynamo=True)``, torch.export and
  onnxscript): the model runs under :class:`redirect_ctc_loss`, so its ``F.ctc_loss``,
  ``torch.ctc_loss`` and ``nn.CTCLoss`` calls become ``ctcop::ctc_loss`` nodes, which
  :func:`~ctcop.torch.onnx_translations.translation_table` translates (with ``aten.masked_select``,
  and any translations the caller adds);
* ``exporter="torchscript"`` (``dynamo=False``, deprecated by PyTorch): a symbolic for
  ``aten::ctc_loss`` and ``ctcop::ctc_loss``, registered for the one export only.
"""

from __future__ import annotations

import inspect
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
from . import onnx_graph
from .custom_op import hidden_frames, redirect_ctc_loss
from .onnx_translations import translation_table
from .semantics import ArgumentFacts, checked_call

EXPORTERS = ("dynamo", "torchscript")
DEFAULT_OPSET = 20
_SCALAR_NAMES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64"}
_SCALAR_NAMES |= {"Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}


# -- dynamic dimensions by default ------------------------------------------------------------------


def _arguments(model: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """``model.forward``'s parameters bound to ``args`` and ``kwargs``, by name."""
    return dict(inspect.signature(model.forward).bind(*args, **(kwargs or {})).arguments)


def _every_axis(value: Any) -> Any:
    """torch.export's ``dynamic_shapes`` entry for ``value``: ``Dim.AUTO`` on every axis of each
    tensor in it (tuples, lists and dicts followed), None for anything else."""
    if isinstance(value, torch.Tensor):
        return {axis: torch.export.Dim.AUTO for axis in range(value.dim())}
    if isinstance(value, tuple | list):
        return type(value)(_every_axis(item) for item in value)
    if isinstance(value, dict):
        return {key: _every_axis(item) for key, item in value.items()}
    return None


def _tensor_names(name: str, value: Any) -> list[tuple[str, torch.Tensor]]:
    """The tensors in ``value`` in the TorchScript exporter's input order (tuples and lists
    flattened), each named ``name``, or ``name_0``, ``name_1``, ... where there are several."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, tuple | list):
        return [leaf for k, item in enumerate(value) for leaf in _tensor_names(f"{name}_{k}", item)]
    return []


def _default_dynamic(
    model: torch.nn.Module, args: tuple[Any, ...], exporter: str, options: dict[str, Any]
) -> dict[str, Any]:
    """``options`` with every axis of every tensor argument dynamic, where the caller gave
    neither ``dynamic_shapes`` nor ``dynamic_axes`` (spec 14.4): under "dynamo"
    ``dynamic_shapes`` of ``Dim.AUTO`` (torch.export keeps static the axes the model fixes, and
    an axis of size 0 or 1 in ``args``); under "torchscript" ``dynamic_axes`` on every axis of
    every tensor input, the inputs named after ``forward``'s parameters unless ``input_names``
    names them."""
    if "dynamic_shapes" in options or "dynamic_axes" in options:
        return options
    bound = _arguments(model, args, options.get("kwargs"))
    if exporter == "dynamo":
        return options | {"dynamic_shapes": {name: _every_axis(value) for name, value in bound.items()}}
    tensors = [leaf for name, value in bound.items() for leaf in _tensor_names(name, value)]
    given = list(options.get("input_names", []))
    names = given + [name for name, _ in tensors[len(given) :]]
    pairs = zip(names, (tensor for _, tensor in tensors), strict=False)  # input_names may name more
    axes = {name: {axis: f"{name}_{axis}" for axis in range(tensor.dim())} for name, tensor in pairs}
    return options | {"input_names": names, "dynamic_axes": axes}


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
    attributes = onnx_graph.placeholder_attributes(call.attributes(), facts.log_prob_type)
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
    if options.pop("custom_translation_table", None) is not None:
        raise InvalidInputError("custom_translation_table", "the TorchScript exporter takes no translations")
    with tempfile.TemporaryDirectory() as folder, _symbolics(opset), torch.no_grad():
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            model, args, path, dynamo=False, opset_version=opset, custom_opsets={onnx_graph.DOMAIN: 1}, **options
        )
        return onnx.load(path)


# -- the torch.export-based exporter ----------------------------------------------------------------


def _dynamo(model: torch.nn.Module, args: tuple[Any, ...], options: dict[str, Any], opset: int) -> onnx.ModelProto:
    try:
        import onnxscript  # noqa: F401 - torch's exporter needs it; say so before it does
    except ImportError:
        raise InvalidInputError("exporter", "'dynamo' needs the onnxscript package (pip install onnxscript)") from None
    table = translation_table()
    extra = options.pop("custom_translation_table", {})
    if any(key in table for key in extra):
        names = ", ".join(str(key) for key in table)
        raise InvalidInputError("custom_translation_table", f"{names} are ctcop's own translations")
    with redirect_ctc_loss():
        program = torch.onnx.export(
            model, args, dynamo=True, opset_version=opset, custom_translation_table=table | extra, **options
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
    custom_translation_table: Mapping[Callable[..., Any], Any] | None = None,
) -> onnx.ModelProto:
    """Export ``model(*args, **kwargs)``, whose forward calls ``F.ctc_loss``, ``torch.ctc_loss``,
    ``nn.CTCLoss`` or ctcop's drop-ins, to ONNX: each call becomes standard operators around one
    ``ai.ctcop.CTCLoss`` node, computing what PyTorch computes (spec 14), with the node's
    model-local function; checked with ``onnx.checker`` (full_check) and written to ``path`` when
    given. Every axis of every tensor argument is dynamic by default (batch, time, target width:
    the model runs at any of them; under "dynamo" torch.export keeps static the axes the model
    fixes, such as a Conv's channels, and any axis of size 0 or 1 in ``args``). ``dynamic_shapes``
    (torch.export's, "dynamo") or ``dynamic_axes`` ({input or output name: {axis: name}},
    "torchscript"; "dynamo" converts them, with a warning) choose instead: ``dynamic_axes={}``
    or ``dynamic_shapes`` of None entries fix every axis. ``opset`` >= 18. ``custom_translation_table``
    ({torch op: onnxscript function}, "dynamo" only) adds translations of operators that
    onnxscript's library lacks to ctcop's (:func:`translation_table`: ``ctcop::ctc_loss`` and
    ``aten.masked_select``, which it may not replace). A call that no graph can express exactly
    (lengths as Python lists, ...) is an :class:`InvalidInputError` naming the argument. Under
    "dynamo" the model runs under :class:`redirect_ctc_loss`: a Python ``if`` on tensor values
    that torch.export cannot decide is traced as not taken and the losses are NaN where it would
    be taken (spec 14.3)."""
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
        "custom_translation_table": dict(custom_translation_table) if custom_translation_table else None,
    }
    options = _default_dynamic(model, tuple(args), exporter, {k: v for k, v in options.items() if v is not None})
    export = _dynamo if exporter == "dynamo" else _torchscript
    try:
        exported = export(model, tuple(args), options, opset)
    except Exception as error:  # PyTorch's exporters wrap what ctcop's rules raise: raise that
        cause = _ctcop_cause(error)
        if cause is None:
            raise hidden_frames(error)  # noqa: B904 - the error itself, re-raised
        raise cause from None
    model_proto = finish_onnx(exported)
    if path is not None:
        save_onnx(model_proto, os.fspath(path))
    return model_proto
