"""The worked examples of spec section 9 as data: inputs, attributes and the value by hand.

One table serves ``ctcop example``, the conformance corpus and the tests. ``expected`` is the
closed form worked out in the spec, never a value computed by ctcop. Core module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .attributes import Attributes

# Section 9.1: T = 3, C = 3 (a = 0, b = 1, blank = 2), N = 1; the logits are ln of these.
HAND_WORKED_PROBS = np.array([[0.5, 0.2, 0.3], [0.4, 0.1, 0.5], [0.6, 0.3, 0.1]])
# Section 9.2: the seed's target row; with C = 5 and equal logits every path has probability 5**-9.
SEED_LABELS = [0, 3, 2, 2, -1, -1, -1, -1, -1]


@dataclass(frozen=True)
class WorkedExample:
    """One example of spec section 9: the op's inputs, attributes and the loss worked by hand."""

    name: str
    section: str
    inputs: np.ndarray
    sequence_mask: np.ndarray
    labels: np.ndarray
    expected: float
    closed_form: str
    attributes: Attributes = field(default_factory=Attributes.of)


def worked_examples() -> list[WorkedExample]:
    """9.1 (target a: six aligned paths, 0.339 in all) and 9.2 with and without merging
    (495 = C(12, 4) and 126 = C(9, 4) aligned paths of probability 5**-9 each)."""
    hand = WorkedExample(
        "hand_worked",
        "9.1",
        np.log(HAND_WORKED_PROBS)[:, None, :],
        np.ones((3, 1), np.int32),
        np.array([[0, -1, -1]]),
        -math.log(0.339),
        "-ln(0.339)",
    )
    seeds = [
        WorkedExample(
            "seed_example_uniform" if merge else "seed_example_uniform_no_merge",
            "9.2",
            np.zeros((9, 1, 5)),
            np.ones((9, 1), np.int32),
            np.array([SEED_LABELS]),
            9 * math.log(5) - math.log(paths),
            f"9 ln 5 - ln {paths}",
            Attributes.of({"merge_repeated": merge}),
        )
        for merge, paths in ((True, 495), (False, 126))
    ]
    return [hand, *seeds]
