"""Fuzzing the reference (tests/support/fuzz_strategies.py has the strategies and the budgets).

- valid input of every element type and both attributes, pads anywhere: ``ctcop.ctc_loss`` is the
  brute-force path sum of tests/support/oracle.py at 1e-12 relative, rounded once to the logits'
  type;
- the released OpenVINO form (blank anywhere, ``unique``, junk after the targets): the same for
  ``ctcop.openvino_ctc_loss``;
- one rule of spec sections 3, 6 and 7 broken: ``InvalidInputError`` naming the input, and nothing
  else; anything at all (any rank, shape, element type, Python objects): a result or
  ``InvalidInputError``, nothing else, and never a hang;
- ``ctcop.ctc_loss_or_nan``: ``ctc_loss`` on valid input; NaN exactly on the samples whose own mask
  column or label row breaks rule 3.1 or 3.3, the other samples as ``ctc_loss`` of the batch without
  the faulty ones; all NaN when the shapes disagree or C = 0.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fuzz_strategies import (
    Batch,
    Call,
    anything,
    budget,
    graph_cases,
    invalid_openvino_calls,
    invalid_time_major_calls,
    nonfinite_active,
    openvino_batches,
    valid_batches,
)
from support.oracle import openvino_loss, time_major_loss

import ctcop

pytestmark = pytest.mark.fuzz
RTOL, ATOL = 1e-12, 1e-14
HANG_S = 300  # a guard against a hang, not a judgement of speed


@contextlib.contextmanager
def no_hang(seconds: int = HANG_S) -> Iterator[None]:
    """Fail instead of waiting forever: SIGALRM after ``seconds``."""

    def alarm(*_: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_rounded_from(got: np.ndarray, exact: np.ndarray, where: str) -> None:
    """``got`` (in its own element type) is ``exact`` (float64) within 1e-12 relative, rounded once:
    some value within the tolerance of ``exact`` rounds to ``got``. NaN and inf exactly."""
    assert got.shape == exact.shape, where
    for i, (g, e) in enumerate(zip(got, exact, strict=True)):
        if np.isnan(e) or np.isinf(e):
            assert (np.isnan(g) and np.isnan(e)) or g == e, f"{where}: sample {i}: got {g!r}, expected {e!r}"
            continue
        margin = RTOL * abs(e) + ATOL
        low, high = (np.array(e - margin).astype(got.dtype), np.array(e + margin).astype(got.dtype))
        assert low <= g <= high, f"{where}: sample {i}: got {float(g)!r}, enumeration gives {e!r}"


def enumerated(batch: Batch) -> np.ndarray:
    """Brute-force losses; NaN for a sample with a non-finite active value (spec 4.4)."""
    wide = batch.inputs.astype(np.float64)
    nonfinite = nonfinite_active(batch.inputs, batch.sequence_mask)
    wide[:, nonfinite] = 0.0
    collapse, merge = batch.attributes["preprocess_collapse_repeated"], batch.attributes["merge_repeated"]
    expected = time_major_loss(wide, batch.sequence_mask, batch.labels, collapse, merge)
    return np.where(nonfinite, np.nan, expected)


@budget("reference")
@given(valid_batches())
def test_ctc_loss_is_the_enumerated_path_sum(batch: Batch) -> None:
    got = ctcop.ctc_loss(batch.inputs, batch.sequence_mask, batch.labels, **batch.attributes)
    assert got.dtype == batch.inputs.dtype
    assert_rounded_from(got, enumerated(batch), "ctc_loss")


@budget("openvino_form")
@given(openvino_batches())
def test_openvino_ctc_loss_is_the_enumerated_path_sum(batch) -> None:
    got = ctcop.openvino_ctc_loss(*batch.args(), **batch.attributes)
    assert got.dtype == batch.logits.dtype
    attributes = batch.attributes
    expected = openvino_loss(
        batch.logits.astype(np.float64),
        batch.logit_length,
        batch.labels,
        batch.label_length,
        batch.blank(),
        attributes["preprocess_collapse_repeated"],
        attributes["ctc_merge_repeated"],
        attributes["unique"],
    )
    assert_rounded_from(got, expected, "openvino_ctc_loss")


def call(function: str, args: dict, kwargs: dict) -> object:
    with no_hang():
        return getattr(ctcop, function)(*args.values(), **kwargs)


@budget("invalid")
@given(st.one_of(invalid_time_major_calls(), invalid_openvino_calls()))
def test_each_broken_rule_raises_invalid_input_error_naming_the_input(case: Call) -> None:
    with pytest.raises(ctcop.InvalidInputError) as raised:
        call(case.function, case.args, case.kwargs)
    assert raised.value.name == case.name, f"{case.what}: {raised.value}"
    assert str(raised.value).startswith(case.name), str(raised.value)


FUNCTIONS = {"ctc_loss": 3, "ctc_loss_grad": 3, "ctc_loss_or_nan": 3, "greedy_decode": 2, "openvino_ctc_loss": 5}


@budget("arbitrary")
@given(
    st.sampled_from(sorted(FUNCTIONS)),
    st.one_of(valid_batches(junk=False), openvino_batches()),
    st.lists(st.tuples(st.integers(0, 4), anything()), max_size=3),
)
def test_anything_gives_a_result_or_invalid_input_error_and_nothing_else(function, base, replaced) -> None:
    """Start from a valid batch of either form, replace up to three arguments by anything at all."""
    values = list(base.args() if hasattr(base, "args") else (base.inputs, base.sequence_mask, base.labels))
    values = [*values, None, None][: FUNCTIONS[function]]
    for position, value in replaced:
        values[position % len(values)] = value
    try:
        call(function, dict(enumerate(values)), {})
    except ctcop.InvalidInputError as error:
        assert str(error).startswith(error.name)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(((a == b) | (np.isnan(a) & np.isnan(b))).all())


def column_or_row_faulty(batch: Batch, i: int) -> bool:
    """Rule 3.1 on mask column i or 3.3 on label row i, read here independently of ctcop."""
    column = [int(v) for v in batch.sequence_mask[:, i]]
    classes = batch.inputs.shape[2]
    bad_value = any(v not in (0, 1) for v in column)
    gap = any(later > earlier for earlier, later in itertools.pairwise(column))
    bad_label = any(not (v == -1 or 0 <= v <= classes - 2) for v in (int(v) for v in batch.labels[i]))
    return bad_value or gap or bad_label


@budget("or_nan")
@given(graph_cases(("float16", "bfloat16", "float32", "float64")))
def test_ctc_loss_or_nan_is_nan_exactly_on_the_faulty_samples(case) -> None:
    batch = case.batch
    got = ctcop.ctc_loss_or_nan(batch.inputs, batch.sequence_mask, batch.labels, **batch.attributes)
    t, n, c = batch.inputs.shape
    assert got.shape == (n,) and got.dtype == batch.inputs.dtype
    if batch.sequence_mask.shape != (t, n) or batch.labels.shape != (n, t) or c == 0:
        assert np.isnan(got).all()
        return
    faulty = np.array([column_or_row_faulty(batch, i) for i in range(n)], dtype=bool)
    for i in range(n):
        alone = (batch.inputs[:, i : i + 1], batch.sequence_mask[:, i : i + 1], batch.labels[i : i + 1])
        try:
            loss = ctcop.ctc_loss(*alone, **batch.attributes)
        except ctcop.InvalidInputError:
            assert faulty[i] and np.isnan(got[i]), f"sample {i}: ctc_loss raises for it alone; got {got[i]}"
            continue
        assert not faulty[i] and same_bits(got[i : i + 1], loss), f"sample {i}: {got[i]} alone {loss}"
    keep = ~faulty
    rest = ctcop.ctc_loss(batch.inputs[:, keep], batch.sequence_mask[:, keep], batch.labels[keep], **batch.attributes)
    assert same_bits(got[keep], rest)


@budget("or_nan")
@given(valid_batches(max_paths=10**9, max_frames_cap=12))
def test_ctc_loss_or_nan_is_ctc_loss_on_valid_input(batch: Batch) -> None:
    expected = ctcop.ctc_loss(batch.inputs, batch.sequence_mask, batch.labels, **batch.attributes)
    got = ctcop.ctc_loss_or_nan(batch.inputs, batch.sequence_mask, batch.labels, **batch.attributes)
    assert same_bits(got, expected)
