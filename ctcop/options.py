"""What the two exporter wings share: validated element types, dimensions and attributes of an
exported op (spec sections 11 and 12), and the names an attached op adds to a model.

Core module: the ONNX and OpenVINO wings translate these into their own type codes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .attributes import Attributes
from .errors import InvalidInputError
from .schema import form, type_constraint

# Logit types an exported graph takes: the schema's T_F less bfloat16, which neither ONNX's
# function body (CastLike to bfloat16 has no kernel in onnxruntime) nor OpenVINO's IR writer serves.
EXPORT_FLOAT_TYPES = tuple(name for name in type_constraint("T_F") if name != "bfloat16")
# The largest dimension an exported graph declares (ONNX and OpenVINO take int64; 2**31 - 1 keeps
# every index and product of two of them in int64 and what int32 index inputs can address).
MAX_DIM = 2**31 - 1
Dim = int | str | None
Dims = tuple[Dim, Dim, Dim]


@dataclass(frozen=True)
class ExportOptions:
    """Validated exporter options: logits, mask and labels element types, [T, N, C], attributes."""

    dtype: str
    mask_dtype: str
    labels_dtype: str
    dims: Dims
    attributes: Attributes

    @classmethod
    def of(
        cls,
        *,
        dtype: str,
        mask_dtype: str,
        labels_dtype: str,
        dims: Dims,
        attributes: Mapping[str, Any] | None,
    ) -> ExportOptions:
        for name, value, allowed in (
            ("dtype", dtype, EXPORT_FLOAT_TYPES),
            ("mask_dtype", mask_dtype, type_constraint("T_MASK")),
            ("labels_dtype", labels_dtype, type_constraint("T_IND")),
        ):
            if value not in allowed:
                raise InvalidInputError(name, f"unknown element type {value!r}; one of {', '.join(allowed)}")
        if attributes is not None and not isinstance(attributes, Mapping):
            given = type(attributes).__name__
            raise InvalidInputError("attributes", f"must be a mapping of names to booleans, got {given}")
        return cls(dtype, mask_dtype, labels_dtype, _checked_dims(dims), Attributes.of(attributes))


def _checked_dims(dims: Any) -> Dims:
    if not isinstance(dims, (list, tuple)) or len(dims) != 3:
        raise InvalidInputError("dims", f"must give T, N, C, got {dims!r}")
    for symbol, dim in zip("TNC", dims, strict=True):
        if isinstance(dim, (bool, np.bool_)) or not (dim is None or isinstance(dim, (int, str))):
            raise InvalidInputError("dims", f"{symbol} must be an int, a name or None, got {dim!r}")
        if isinstance(dim, int) and dim < 0:
            raise InvalidInputError("dims", f"{symbol} = {dim} is negative")
        if isinstance(dim, int) and dim > MAX_DIM:
            raise InvalidInputError("dims", f"{symbol} = {dim} is over the limit of {MAX_DIM}")
    if isinstance(dims[2], int) and dims[2] == 0:
        raise InvalidInputError("dims", "C = 0: C must be at least 1 (the blank class)")
    return (dims[0], dims[1], dims[2])


def attached_names(taken: set[str]) -> tuple[str, str, str]:
    """The mask and labels inputs and the loss output that attaching the op adds to a model
    whose values are named ``taken``; a name already in use is an :class:`InvalidInputError`."""
    spec = form("time_major")
    added = (spec.inputs[1].name, spec.inputs[2].name, spec.output_name)
    for name in added:
        if name in taken:
            raise InvalidInputError("model", f"already has a value named {name!r}")
    return added


def chosen_output(outputs: Sequence[Collection[str]], logits_output: str | int) -> int:
    """The index of the model output that ``logits_output`` names, or indexes (an int, or a string
    of ASCII digits that is no output's name); ``outputs`` holds each output's names (spec 11.1,
    12.1.1). Shared by both wings' attach."""
    named = [k for k, names in enumerate(outputs) if isinstance(logits_output, str) and logits_output in names]
    if isinstance(logits_output, str) and not named and re.fullmatch(r"[0-9]{1,9}", logits_output):
        logits_output = int(logits_output)
    if isinstance(logits_output, int) and not isinstance(logits_output, bool):
        if not 0 <= logits_output < len(outputs):
            raise InvalidInputError("logits_output", f"index {logits_output} is outside [0, {len(outputs) - 1}]")
        return logits_output
    if not named:
        raise InvalidInputError("logits_output", f"{logits_output!r} is not an output of the model")
    return named[0]


def released_index_types(index_dtype: str | Mapping[str, str]) -> dict[str, str]:
    """The element type of each integer input of the released form (spec 7): one for all, or by
    input name (int64 for an input not named); an unknown name or type is refused."""
    ports = form("openvino").input_names[1:]
    given = dict.fromkeys(ports, index_dtype) if isinstance(index_dtype, str) else dict(index_dtype)
    unknown = sorted(set(given) - set(ports))
    if unknown:
        raise InvalidInputError("index_dtype", f"{unknown[0]!r} is not an integer input; one of {', '.join(ports)}")
    chosen = {port: given.get(port, "int64") for port in ports}
    allowed = type_constraint("T_IND")
    for port, dtype in chosen.items():
        if dtype not in allowed:
            raise InvalidInputError(port, f"unknown element type {dtype!r}; one of {', '.join(allowed)}")
    return chosen
