"""The readable table and the JSON document of ``ctcop eval`` (schema in docs/eval.md; spec 13)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from .result import LayerResult

SHOWN_SAMPLES = 4


def _values(values: list[float] | None) -> str:
    if values is None:
        return "-"
    shown = " ".join(f"{v:.7g}" for v in values[:SHOWN_SAMPLES])
    return f"[{shown}{' ...' if len(values) > SHOWN_SAMPLES else ''}]"


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def _precision(result: LayerResult) -> str | None:
    """The ``--precision`` mode and the precision OpenVINO compiled at ("-" where it does not report
    it); None for onnxruntime (no such notion) and for a layer that was not run."""
    if result.precision is None or result.verdict == "invalid-layer":
        return None
    return f"  precision {result.precision}, compiled {result.compiled_precision or '-'}"


def format_table(results: list[LayerResult]) -> list[str]:
    """The table's lines: one block per layer, then the cause of each failure in one line."""
    lines = []
    for result in results:
        flags = ",".join(f"{name}={int(value)}" for name, value in result.attributes.items())
        lines.append(f"{result.name}  [{result.form}]  {flags}")
        lines.append(f"  reference {_values(result.reference)}")
        lines.append(f"  runtime   {_values(result.runtime)}")
        precision = _precision(result)
        if precision:
            lines.append(precision)
        lines.append(
            f"  max abs err {_error(result.max_abs_err)}  max rel err {_error(result.max_rel_err)}  "
            f"verdict {result.verdict.upper()}"
        )
        if result.note:
            lines.append(f"  note: {result.note}")
        if result.verdict != "agree" and result.cause:
            lines.append(f"  cause: {result.cause}")
    return lines


def _jsonable(value: Any) -> Any:
    """Non-finite floats as the strings "inf", "-inf", "nan" (strict JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def document(
    model: str,
    runtime: str,
    device: str,
    versions: dict[str, str],
    results: list[LayerResult],
    interrupted_by: str | None = None,
) -> str:
    """The ``--json`` document; ``complete`` is false and ``interrupted_by`` the signal's name when
    an interruption cut the run short (``layers`` then holds the layers that finished)."""
    body: dict[str, Any] = {
        "complete": interrupted_by is None,
        "interrupted_by": interrupted_by,
        "model": model,
        "runtime": runtime,
        "device": device,
        "versions": versions,
        "layers": [asdict(result) for result in results],
    }
    return json.dumps(_jsonable(body), indent=1, allow_nan=False)
