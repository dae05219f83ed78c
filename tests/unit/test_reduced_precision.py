"""Spec 10.5's bound for a loss computed at a reduced precision, held against a correct CTCLoss-4
that rounds every operation to bfloat16 or float16 (numpy and ml_dtypes), on the corpus's
spec-form cases: the bound holds for it on every case, and a runtime off by more than the bound
fails (the verdict, :func:`ctcop.conformance.verdict.judge`)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ctcop import canonical
from ctcop.conformance import corpus, verdict
from ctcop.conformance.protocol import Outcome
from ctcop.forward_backward import lattice
from ctcop.tolerance import REDUCED_TYPES, reduced_range

TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
CASES = [
    case
    for case in corpus.load_all()
    if case.form == "spec" and case.expect == "value" and case.logits_dtype == "float32"
    if case.expected_loss is not None and np.isfinite(np.asarray(case.inputs["inputs"], dtype=np.float64)).all()
]


def _loss(logits: np.ndarray, target: np.ndarray, blank: int, merge: bool, kind: type) -> float:
    """One sample's loss [T, C] with each operation's result rounded to ``kind``."""

    def r(values: np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=np.float64).astype(kind).astype(np.float64)

    x = r(logits)
    shifted = r(x - x.max(axis=1, keepdims=True))
    log_p = r(shifted - r(np.log(r(r(np.exp(shifted)).sum(axis=1, keepdims=True)))))
    classes, stay, skip = lattice(target.astype(np.int64), blank, merge)
    alpha = np.full(len(classes), -np.inf)
    alpha[0] = 0.0
    for frame in log_p[:, classes]:
        moved, skipped = (np.concatenate((np.full(k, -np.inf), alpha))[: len(alpha)] for k in (1, 2))
        before = r(np.logaddexp(np.where(stay, alpha, -np.inf), moved))
        alpha = r(frame + r(np.logaddexp(before, np.where(skip, skipped, -np.inf))))
    return float(-r(np.logaddexp.reduce(alpha[max(0, len(classes) - 2) :])))


def emulated(case: corpus.Case, precision: str) -> np.ndarray:
    """The case's [N] loss by a correct implementation that computes at ``precision``."""
    x, attributes = case.inputs, case.attributes
    batch = canonical.from_time_major(x["inputs"], x["sequence_mask"], x["labels"], **attributes)
    logits = np.asarray(x["inputs"], dtype=np.float64)
    with np.errstate(all="ignore"):  # what overflows at the precision is part of what it computes
        return _losses(logits, batch, TYPES[precision])


def _losses(logits: np.ndarray, batch: canonical.CanonicalBatch, kind: type) -> np.ndarray:
    samples = range(batch.batch_size)
    targets = [batch.targets[i, : batch.target_lengths[i]] for i in samples]
    return np.array(
        [_loss(logits[: batch.lengths[i], i], targets[i], batch.blank, batch.merge_repeated, kind) for i in samples]
    )


class Answers:
    """A runtime that answers the given losses."""

    name = description = "answers"

    def __init__(self, losses: np.ndarray) -> None:
        self.losses = losses

    def run(self, case: corpus.Case) -> Outcome:
        return Outcome(self.losses)


@pytest.mark.parametrize("precision", sorted(REDUCED_TYPES))
def test_a_correct_implementation_at_the_precision_is_within_the_bound_and_one_beyond_it_fails(precision) -> None:
    worst, judged = 0.0, 0
    for case in CASES:
        if (verdict.frame_facts(case)[1] > reduced_range(precision)).any():
            assert verdict.judge(Answers(np.zeros(1)), case, "answers", precision).status == "skip"
            continue
        expected = np.asarray(case.expected_loss, dtype=np.float64)
        bounds = verdict.reduced_bounds(case, expected, precision)
        got = emulated(case, precision)
        assert verdict.judge(Answers(got), case, "answers", precision).status == "pass", case.id
        bounded = np.isfinite(expected) & np.isfinite(bounds) & (bounds > 0)
        worst = max(worst, float((np.abs(got[bounded] - expected[bounded]) / bounds[bounded]).max(initial=0.0)))
        beyond = np.where(bounded, expected + 1.01 * bounds + 1e-3 * np.maximum(1.0, np.abs(expected)), expected)
        if bounded.any():
            assert verdict.judge(Answers(beyond), case, "answers", precision).status == "fail", case.id
        judged += 1
    assert judged >= 100
    # A bound, and not one loose by orders of magnitude: the worst case uses 0.17 (bf16) and 0.15 (f16) of it.
    assert 0.05 < worst <= 1.0, worst
