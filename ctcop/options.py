"""What the two exporter wings share: validated element types, dimensions and attributes of an
exported op (spec sections 11 and 12), and the names an attached op adds to a model.

Core module: the ONNX and OpenVINO wings translate these into their own type codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .attributes import Attributes
from .errors import InvalidInputError
from .schema import form, type_constraint

# Logit types an exported graph takes: the schema's T_F less bfloat16, which neither ONNX's
# function body (CastLike to bfloat16 has no kernel in onnxruntime) nor OpenVINO's IR writer serves.
EXPORT_FLOAT_TYPES = tuple(name for name in type_constraint("T_F") if name != "bfloat16")
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
        return cls(dtype, mask_dtype, labels_dtype, _checked_dims(dims), Attributes.of(attributes))


def _checked_dims(dims: Any) -> Dims:
    if len(dims) != 3:
        raise InvalidInputError("dims", f"must give T, N, C, got {dims!r}")
    for symbol, dim in zip("TNC", dims, strict=True):
        if isinstance(dim, (bool, np.bool_)) or not (dim is None or isinstance(dim, (int, str))):
            raise InvalidInputError("dims", f"{symbol} must be an int, a name or None, got {dim!r}")
        if isinstance(dim, int) and dim < 0:
            raise InvalidInputError("dims", f"{symbol} = {dim} is negative")
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
