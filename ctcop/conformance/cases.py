"""Spec-form cases as data: the worked examples of spec section 9, the named edge cases of
section 4.4 and seeded random cases, each a :class:`~.case.Case` holding exactly what a runtime
consumes (the three inputs and the attributes), so the tests and the corpus feed the same data to
every runtime.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..examples import worked_examples
from .case import Case


def _mask(frames: int, lengths: list[int]) -> np.ndarray:
    return (np.arange(frames)[:, None] < np.asarray(lengths)[None, :]).astype(np.int32)


def _labels(rows: list[list[int]], frames: int) -> np.ndarray:
    out = np.full((len(rows), frames), -1, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def random_case(rng: np.random.Generator, max_t: int = 5, max_c: int = 4, max_n: int = 3) -> Case:
    """Logits, a prefix mask (zero-length columns included) and -1-padded labels with pads anywhere.

    Label rows are drawn up to length T, so many targets are infeasible for their frame count;
    some rows are all pads (empty targets).
    """
    t = int(rng.integers(0, max_t + 1))
    c = int(rng.integers(1, max_c + 1))
    n = int(rng.integers(1, max_n + 1))
    scale = float(rng.choice([0.5, 3.0, 20.0]))
    inputs = rng.normal(size=(t, n, c)) * scale
    mask = _mask(t, list(rng.integers(0, t + 1, size=n)))
    labels = rng.integers(0, max(c - 1, 1), size=(n, t)) if c > 1 else np.full((n, t), -1)
    pads = rng.random(size=(n, t)) < rng.uniform(0.2, 0.9)
    return Case.spec(f"random_t{t}_n{n}_c{c}", inputs, mask, np.where(pads, -1, labels).astype(np.int64))


def random_cases(seed: int, count: int, max_t: int = 12, max_c: int = 8, max_n: int = 4) -> list[Case]:
    """``count`` random cases, the attributes cycling through all four combinations."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        case = random_case(rng, max_t, max_c, max_n)
        out.append(
            replace(case, id=f"{case.id}_{seed}_{k}").with_attributes(
                preprocess_collapse_repeated=bool(k & 1), merge_repeated=not k & 2
            )
        )
    return out


def edge_cases() -> list[Case]:
    """The worked examples of spec section 9 and the edge cases of section 4.4, float64."""
    rng = np.random.default_rng(2026)
    base = rng.normal(size=(6, 3, 5))
    mixed = [6, 4, 2]
    nan_masked = base.copy()
    nan_masked[4:, 1] = np.nan
    inf_active, nan_active, neg_inf_active = base.copy(), base.copy(), base.copy()
    inf_active[1, 2, 3], nan_active[1, 2, 3], neg_inf_active[1, 2, 3] = np.inf, np.nan, -np.inf
    # sample 0's one aligned path takes four labels at logit -2.5e4 (ln p exactly -2.5e4 in float64):
    # a loss of exactly 1e5, beyond float16's largest value, 65504
    beyond_half = np.zeros((4, 2, 3))
    beyond_half[:, 0, :2] = -2.5e4
    examples = [Case.spec(e.name, e.inputs, e.sequence_mask, e.labels, e.attributes) for e in worked_examples()]
    cases = [
        *examples,
        Case.spec("empty_targets", base, _mask(6, mixed), _labels([[], [], []], 6)),
        Case.spec(
            "interior_pads",
            base,
            _mask(6, mixed),
            np.array([[-1, 0, -1, 1, -1, 2], [3, -1, -1, 3, -1, -1], [-1, -1, -1, -1, -1, 1]]),
        ),
        Case.spec(
            "infeasible_too_long",
            base,
            _mask(6, mixed),
            _labels([[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 0], [1, 2, 3]], 6),
        ),
        Case.spec("infeasible_repeats", base, _mask(6, [6, 3, 2]), _labels([[1, 1, 1, 1], [2, 2], [0, 0]], 6)),
        Case.spec("exactly_feasible", base, _mask(6, [6, 3, 2]), _labels([[1, 1, 1], [2, 3, 0], [0, 1]], 6)),
        Case.spec("zero_length_sequences", base, _mask(6, [0, 0, 6]), _labels([[], [2], [1, 2]], 6)),
        Case.spec("single_class", rng.normal(size=(4, 2, 1)), _mask(4, [4, 1]), _labels([[], []], 4)),
        Case.spec("two_classes", rng.normal(size=(5, 2, 2)), _mask(5, [5, 3]), _labels([[0, 0], [0]], 5)),
        Case.spec("logits_1e4", np.round(base * 1e4), _mask(6, mixed), _labels([[0, 1], [2, 2], [3]], 6)),
        Case.spec("shift_plus_1e4", base + 1e4, _mask(6, mixed), _labels([[0, 1], [2, 2], [3]], 6)),
        Case.spec("shift_minus_3e5", base - 3e5, _mask(6, mixed), _labels([[0, 1], [2, 2], [3]], 6)),
        Case.spec("nan_in_masked_frames", nan_masked, _mask(6, mixed), _labels([[0, 1], [2], [3]], 6)),
        Case.spec("inf_in_active_frame", inf_active, _mask(6, mixed), _labels([[0, 1], [2], [3]], 6)),
        Case.spec("nan_in_active_frame", nan_active, _mask(6, mixed), _labels([[0, 1], [2], [3]], 6)),
        Case.spec("neg_inf_in_active_frame", neg_inf_active, _mask(6, mixed), _labels([[0, 1], [2], [3]], 6)),
        Case.spec("loss_beyond_float16", beyond_half, _mask(4, [4, 4]), _labels([[0, 1, 0, 1], [0, 1]], 4)),
        Case.spec(
            "long_sequence",
            rng.normal(size=(150, 2, 28)) * 3,
            _mask(150, [150, 97]),
            _labels([list(rng.integers(0, 27, 40)), list(rng.integers(0, 27, 20))], 150),
        ),
        Case.spec("empty_batch", np.zeros((4, 0, 3)), np.zeros((4, 0), np.int32), np.zeros((0, 4), np.int64)),
        Case.spec("no_frames", np.zeros((0, 2, 3)), np.zeros((0, 2), np.int32), np.zeros((2, 0), np.int64)),
    ]
    variants = [
        case.with_attributes(preprocess_collapse_repeated=collapse, merge_repeated=merge)
        for case in cases
        if case.id in ("interior_pads", "infeasible_repeats", "exactly_feasible", "two_classes")
        for collapse, merge in ((True, True), (False, False), (True, False))
    ]
    return cases + variants
