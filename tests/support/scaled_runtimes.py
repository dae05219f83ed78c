"""Runtimes off by a multiple of spec 10.5's bf16 bound, for ``--precision bf16``'s tests
(``--runtime-module tests/support/scaled_runtimes.py:RUNTIMES``): ``bf16-within`` adds half the
bound to the reference's loss, ``bf16-beyond`` twice the bound."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ctcop import ctc_loss
from ctcop.conformance.protocol import Unsupported
from ctcop.conformance.verdict import reduced_bounds


@dataclass(frozen=True)
class Scaled:
    """The reference on spec-form cases plus ``times`` spec 10.5's bf16 bound."""

    name: str
    times: float
    description: str = "the reference plus a multiple of the bf16 bound"

    def run(self, case: Any) -> np.ndarray:
        if case.form != "spec":
            raise Unsupported("spec form only")
        x = case.inputs
        loss = ctc_loss(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)
        bounds = reduced_bounds(case, loss.astype(np.float64), "bf16")
        return (loss + self.times * np.where(np.isfinite(bounds), bounds, 0.0)).astype(np.float64)


RUNTIMES = [Scaled("bf16-within", 0.5), Scaled("bf16-beyond", 2.0)]
