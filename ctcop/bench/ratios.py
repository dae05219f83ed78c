"""The ratio columns: one implementation's median over another's in the same row (shape and N),
all measured in one process with the same thread count."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .implementations import IMPLEMENTATIONS
from .timing import Cell


@dataclass(frozen=True)
class Ratio:
    """``numerator`` / ``denominator`` per row; the denominator "float32" is the fastest float32 peer."""

    column: str
    numerator: str
    denominator: str

    def describe(self) -> str:
        def head(name: str) -> str:
            if name == "float32":
                peers = [i.column for i in IMPLEMENTATIONS.values() if i.float32_peer]
                return f"the fastest of {', '.join(peers)}"
            return IMPLEMENTATIONS[name].column

        return f"{self.column} = {head(self.numerator)} / {head(self.denominator)}"


RATIOS = (
    Ratio("c/pt64", "ctcop", "torch-f64"),
    Ratio("g/pt64b", "ctcop-grad", "torch-f64-grad"),
    Ratio("ort/f32", "onnxruntime", "float32"),
    Ratio("c/exp", "ctcop", "exp-floor"),
)


def ratio_value(ratio: Ratio, row: dict[str, Cell]) -> float | None:
    """The ratio of one row's medians; None where a cell is missing, failed or wrong."""

    def median(name: str) -> float | None:
        cell = row.get(name)
        return cell.median_s if cell is not None and cell.status == "ok" else None

    top = median(ratio.numerator)
    if ratio.denominator == "float32":
        peers = [median(name) for name, i in IMPLEMENTATIONS.items() if i.float32_peer]
        bottom = min((value for value in peers if value is not None), default=None)
    else:
        bottom = median(ratio.denominator)
    return None if top is None or bottom is None or bottom <= 0 else top / bottom


def usable_ratios(names: Sequence[str]) -> list[Ratio]:
    def present(name: str) -> bool:
        if name == "float32":
            return any(IMPLEMENTATIONS[n].float32_peer for n in names)
        return name in names

    return [ratio for ratio in RATIOS if present(ratio.numerator) and present(ratio.denominator)]
