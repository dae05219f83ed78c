"""What the two exporter wings share: validated element types, dimensions and attributes of an
exported op (spec sections 11 and 12), and the names an attached op adds to a model.

Core module: the ONNX and OpenVINO wings translate these into their own type codes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
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
# The largest model file the exporters and ``ctcop eval`` read, and the largest tensor they load.
MAX_FILE_BYTES = 4 << 30
MAX_TENSOR_BYTES = 1 << 30
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


def checked_input_file(path: str, what: str, limit: int = MAX_FILE_BYTES) -> int:
    """The size of ``path`` when it is a regular file (a symlink to one included) of at most
    ``limit`` bytes, checked before anything reads it: a device (/dev/zero), FIFO or directory
    would block or never end. Otherwise an :class:`InvalidInputError` naming ``what``."""
    try:
        status = os.stat(path)
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InvalidInputError(what, f"cannot read {path!r}: {reason}") from None
    if not stat.S_ISREG(status.st_mode):
        raise InvalidInputError(what, f"{path!r} is not a regular file")
    if status.st_size > limit:
        raise InvalidInputError(what, f"{path!r} is {status.st_size} bytes, over the limit of {limit}")
    return status.st_size


@contextlib.contextmanager
def atomic_output(path: str, extension: str = ".tmp", companions: tuple[str, ...] = ()) -> Iterator[str]:
    """A temporary path in the folder of ``path``, ending in ``extension``, for the block to write;
    when the block ends without an exception it is renamed onto ``path`` (and each temporary
    ``stem + companion``, e.g. an IR's ``.bin``, onto ``path``'s stem + companion, first), else
    removed. A reader, a crash or an interruption never sees half a file. The file gets the
    permissions of a plain ``open``."""
    target = os.path.realpath(path)
    folder, name = os.path.split(target)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=extension)
    os.close(handle)
    stem, final_stem = temporary[: -len(extension)], target.removesuffix(extension)
    pairs = [*((stem + c, final_stem + c) for c in companions), (temporary, target)]
    try:
        yield temporary
        mask = os.umask(0)
        os.umask(mask)
        for written, final in pairs:
            os.chmod(written, 0o666 & ~mask)
            os.replace(written, final)
    finally:
        for written, _ in pairs:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(written)
