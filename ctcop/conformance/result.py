"""A conformance result: one runtime's answer for one case, judged (spec 10).

:class:`Result` is what every step of a run hands on: :func:`.verdict.judge` makes one per
evaluation, :mod:`.runner` combines a case's two into one, :mod:`.expected` and :mod:`.known` mark
expected failures and registered defects, :mod:`.classes` classifies the failures, :mod:`.report`
and :mod:`.junit` write them. Its facts are fields: the :class:`~ctcop.tolerance.Mismatch` of an
answer that departs from the reference, the exception a runtime raised (:class:`Raised`), how a
worker died (``death``). ``message`` is for people: rendered from those facts, never read back.

JSON (:func:`to_dict`, :func:`from_dict`) is for the edges only: the worker pipe (:mod:`.pool`,
every field) and the report (:mod:`.report`, the fields of :data:`REPORTED`; ``ctcop
conformance-merge`` reads its rows back with :func:`from_dict`). A number that is not finite is
the string "inf", "-inf" or "nan".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..text import one_line, printable
from ..tolerance import Mismatch
from .rows import ROW

STATUSES = ("pass", "fail", "error", "crash", "timeout", "skip", "xfail", "xpass", "nondeterministic")
ANSWERS = ("value", "raised", "skip", "crash", "timeout")  # what one evaluation gave
REPORTED = ("case", "runtime", "status", "defect", "max_abs_err", "max_rel_err", "message", "mismatch", "raised",
            "death")  # fmt: skip
_ROW = "is not {case, runtime, status, message} with a known status"
_ERRORS = "has errors that are not numbers or a defect that is not an id"
_MISMATCH_DEFAULTS = {f.name: f.default for f in fields(Mismatch)} | {"kind": ""}


@dataclass(frozen=True)
class Raised:
    """What a runtime raised: the exception's type name and its message as one printable line."""

    type: str
    text: str

    def __str__(self) -> str:
        return f"{self.type}: {self.text}" if self.text else self.type


@dataclass(frozen=True)
class Result:
    """One runtime on one case. ``status`` is one of :data:`STATUSES`; ``defect`` the registered
    defect that made it an xfail or, not reproduced, an xpass; ``max_abs_err`` / ``max_rel_err``
    the loss's (None when no loss was compared); ``mismatch`` how a value departs (a ``fail``);
    ``raised`` what the runtime raised (an ``error``, or the ``pass`` of a case to reject);
    ``death`` how the worker ended (a ``crash``: "killed by SIGSEGV", "exited with code 7").

    The rest describe one evaluation, so that :mod:`.runner` can tell whether two agree bit for
    bit: ``answer`` (one of :data:`ANSWERS`), ``loss`` (the first values as text), ``loss_bits``
    and ``grad_bits`` (digests, :func:`.verdict.bits`). ``seconds`` is the wall time its
    evaluations took, as the pool measured it (the two runs' sum for a case; None where unknown:
    a result read back from JSON, which does not carry it)."""

    case: str
    runtime: str
    status: str
    message: str = ""
    defect: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatch: Mismatch | None = None
    raised: Raised | None = None
    death: str | None = None
    answer: str = ""
    loss: tuple[str, ...] = ()
    loss_bits: str = ""
    grad_bits: str = ""
    seconds: float | None = None


# -- JSON ------------------------------------------------------------------------------------------


def _number_out(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"


def _number_in(value: Any) -> float | None:
    """A number as :func:`_number_out` writes it; ValueError for anything else."""
    if value is None:
        return None
    if value == "nan":
        return math.nan
    if value in ("inf", "-inf") or type(value) in (int, float):
        try:
            return float(value)
        except OverflowError:  # an integer beyond float64
            raise ValueError(value) from None
    raise ValueError(value)


def _mismatch_out(found: Mismatch) -> dict[str, Any]:
    out = asdict(found)
    for name in ("got", "expected", "allowed"):
        out[name] = _number_out(out[name])
    return {name: list(value) if isinstance(value, tuple) else value for name, value in out.items()}


def _ints(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise ValueError(value)
    return tuple(value)


def _mismatch_in(data: Any) -> Mismatch | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or set(data) - set(_MISMATCH_DEFAULTS):
        raise ValueError(data)
    values: dict[str, Any] = {}
    for name, value in data.items():
        default = _MISMATCH_DEFAULTS[name]
        if isinstance(default, tuple):
            values[name] = _ints(value)
        elif isinstance(default, float):
            values[name] = _number_in(value)
            if values[name] is None:
                raise ValueError(value)
        elif type(value) is not type(default):
            raise ValueError(value)
        else:
            values[name] = value
    return Mismatch(**values)


def to_dict(result: Result) -> dict[str, Any]:
    """``result`` as JSON values: every field but ``seconds``; :data:`REPORTED` picks a report's row
    from it."""
    return {
        "case": result.case,
        "runtime": result.runtime,
        "status": result.status,
        "defect": result.defect,
        "max_abs_err": _number_out(result.max_abs_err),
        "max_rel_err": _number_out(result.max_rel_err),
        "message": result.message,
        "mismatch": None if result.mismatch is None else _mismatch_out(result.mismatch),
        "raised": None if result.raised is None else {"type": result.raised.type, "text": result.raised.text},
        "death": result.death,
        "answer": result.answer,
        "loss": list(result.loss),
        "loss_bits": result.loss_bits,
        "grad_bits": result.grad_bits,
    }


DEFECT_ID = re.compile(r"D[1-9][0-9]{0,3}")  # the registry's ids (spec 10.1)
MESSAGE_LIMIT = 2000  # characters of a message kept: one line a report and a terminal can take


def _optional_text(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if not isinstance(value, (str, type(None))):
        raise ValueError(f"has a {name} that is not text")
    return value


def from_dict(data: Any) -> Result:
    """The :class:`Result` that :func:`to_dict` wrote (a report's row: the fields of
    :data:`REPORTED`; those absent are None). ValueError, one line, saying what is wrong with
    ``data`` when it is not one."""
    row = data if isinstance(data, dict) else {}
    texts = [row.get(name) for name in ("case", "runtime", "status", "message")]
    if not all(isinstance(v, str) for v in texts) or texts[2] not in STATUSES:
        raise ValueError(_ROW)
    try:
        errors = [_number_in(row.get(name)) for name in ("max_abs_err", "max_rel_err")]
    except ValueError:
        raise ValueError(_ERRORS) from None
    defect = row.get("defect")
    if not (defect is None or (isinstance(defect, str) and DEFECT_ID.fullmatch(defect))):
        raise ValueError("has a defect that is not an id D1, D2, ... or null")
    try:
        found = _mismatch_in(row.get("mismatch"))
    except (ValueError, TypeError):
        raise ValueError("has a mismatch that is not one (kind, sample, got, expected, ...)") from None
    raised = row.get("raised")
    if raised is not None and not (
        isinstance(raised, dict)
        and set(raised) == {"type", "text"}
        and all(isinstance(v, str) for v in raised.values())
    ):
        raise ValueError("has a raised that is not {type, text}")
    answer, loss = row.get("answer", ""), row.get("loss", [])
    if answer not in ("", *ANSWERS) or not isinstance(loss, list) or not all(isinstance(v, str) for v in loss):
        raise ValueError("has an answer that is not one of value, raised, skip, crash, timeout, or a loss not text")
    if not ROW.fullmatch(str(texts[1])):
        raise ValueError("has a runtime that is not a row's name (runtime[~LABEL][@DEVICE][/PRECISION], spec 10.4)")
    death = _optional_text(row, "death")
    return Result(
        case=printable(str(texts[0])),
        runtime=str(texts[1]),
        status=str(texts[2]),
        message=one_line(texts[3], MESSAGE_LIMIT),
        defect=defect,
        max_abs_err=errors[0],
        max_rel_err=errors[1],
        mismatch=found,
        raised=None if raised is None else Raised(one_line(raised["type"]), one_line(raised["text"], MESSAGE_LIMIT)),
        death=None if death is None else one_line(death),
        answer=answer,
        loss=tuple(loss),
        loss_bits=_optional_text(row, "loss_bits") or "",
        grad_bits=_optional_text(row, "grad_bits") or "",
    )
