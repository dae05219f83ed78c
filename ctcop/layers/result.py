"""What ``ctcop eval`` reports for one layer (spec 13)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LayerResult:
    """What ``ctcop eval`` reports for one layer (the JSON's ``layers`` entries): ``cause`` why it
    does not agree, ``note`` what the reference read as invalid input (NaN expected there)."""

    name: str
    form: str
    attributes: dict[str, bool]
    reference: list[float] | None = None
    runtime: list[float] | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    verdict: str = ""
    cause: str = ""
    note: str = ""
    precision: str | None = None
    compiled_precision: str | None = None
