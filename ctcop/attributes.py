"""The one attribute type: the boolean attributes of a form of the op, defaults from the schema.

Validation, the exporters, the runtime adapters, the case corpus and the CLI all hold attributes
as :class:`Attributes` (or pass them through :func:`flag`), so the names, the defaults and the
"must be a boolean" rule exist in this one place (spec sections 2 and 7). Core module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidInputError
from .schema import form


def flag(value: Any, name: str) -> bool:
    """``value`` as the boolean attribute ``name``; anything but a bool is invalid."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise InvalidInputError(name, f"attribute must be a boolean, got {value!r}")


def written_flag(value: Any, name: str) -> bool:
    """The boolean attribute ``name`` as a model file writes it (spec 13): the words "true" and
    "false" in any case and the digits "1" and "0" (an IR's text, as OpenVINO's reader takes it;
    no white space, which OpenVINO reads as false), the integers 0 and 1 (an ONNX node's), or a
    bool; anything else is invalid, by :func:`flag`."""
    if isinstance(value, str):
        value = {"true": True, "false": False, "1": True, "0": False}.get(value.lower(), value)
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in (0, 1):
        value = bool(value)
    return flag(value, name)


@dataclass(frozen=True)
class Attributes(Mapping[str, bool]):
    """The attributes of one form of the op, every name present (defaults filled in); hashable,
    and a mapping, so ``f(**attributes)`` passes them as keywords."""

    form: str
    pairs: tuple[tuple[str, bool], ...]

    @classmethod
    def of(cls, given: Mapping[str, Any] | None = None, *, form_name: str = "time_major") -> Attributes:
        """Defaults of ``form_name`` overridden by ``given``; unknown names and non-booleans are
        an :class:`InvalidInputError`."""
        defaults = form(form_name).attributes
        chosen = dict(defaults)
        for name, value in (given or {}).items():
            if name not in defaults:
                raise InvalidInputError("attributes", f"unknown attribute {name!r}; known: {', '.join(defaults)}")
            chosen[name] = flag(value, name)
        return cls(form_name, tuple(chosen.items()))

    def replace(self, **changes: bool) -> Attributes:
        return Attributes.of({**self, **changes}, form_name=self.form)

    def label(self) -> str:
        """``name=0|1`` pairs in name order, for case names and reports."""
        return ",".join(f"{name}={int(value)}" for name, value in sorted(self.pairs))

    def __getitem__(self, name: str) -> bool:
        for key, value in self.pairs:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)
