"""Two runtimes of one name for ``ctcop conformance-diff``'s tests: the reference, and the reference
with the loss of one case shifted (``--runtime-module tests/support/diff_runtimes.py:SHIFTED``), so
that two reports differ in exactly that result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ctcop import ctc_loss
from ctcop.conformance.protocol import Unsupported

SHIFTED_CASE = "spec/hand_worked/float32"


@dataclass(frozen=True)
class Shifted:
    """The reference on spec-form cases, the loss of ``case`` plus ``shift``."""

    case: str = ""
    shift: float = 0.0
    name: str = "probe"
    description: str = "the reference, one case's loss shifted or none"

    def run(self, case: Any) -> np.ndarray:
        if case.form != "spec":
            raise Unsupported("spec form only")
        x = case.inputs
        loss = ctc_loss(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)
        return loss + np.asarray(self.shift if case.id == self.case else 0.0, loss.dtype)


FAITHFUL = Shifted()
SHIFTED = Shifted(SHIFTED_CASE, 0.5)
