"""Fuzzing the exported graphs (spec 11.5: exported graphs are total functions).

For each runtime form, a crash-isolated worker process (tests/support/fuzz_worker.py) runs ctcop's
exported graph on inputs of the declared ranks and element types, valid or not
(tests/support/fuzz_strategies.py: ``graph_cases``), fed one at a time by hypothesis through a pipe.
Each result must equal ``ctcop.ctc_loss_or_nan`` (NaN exactly where it is NaN, +inf where +inf,
finite values within ``ctcop.tolerance.compare``), and a sample's result must not move by one bit
when another sample's inputs change, nor when the other sample leaves the batch (by the tolerance
rule on onnxruntime: see :data:`LAST_BIT_DEPENDS_ON_LENGTH`). A child that dies, hangs or raises is
a failure that names the input (also kept as ``crash-K.npz`` in the child's folder).
:data:`FINDINGS` replays what the fuzzing found, in every runtime form.

OpenVINO forms are fuzzed with float16 and float32 logits only: the CPU plugin computes float64
models in float32 and saturates +inf (spec 12.2 D4/D5), which no graph can avoid.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from support.fuzz_strategies import Batch, GraphCase, budget, graph_cases

import ctcop
from ctcop.process.workers import Failed, Lost, Worker
from ctcop.tolerance import compare

WORKER = "support.fuzz_worker:evaluate"
ALL_FLOATS = ("float16", "float32", "float64")
OPENVINO_FLOATS = ("float16", "float32")
RUNTIME_FLOATS = {
    "onnxruntime": ALL_FLOATS,
    "onnx-reference": ALL_FLOATS,
    "openvino-onnx": OPENVINO_FLOATS,
    "openvino-ir": OPENVINO_FLOATS,
    "openvino-custom": OPENVINO_FLOATS,
}
ANSWER_TIMEOUT_S = 300.0
# onnxruntime's Log (float32, float64) and Exp (float64) round the last bit of the same value
# differently in a tensor of one element and in a longer one (vectorised body and scalar tail), so
# its losses may differ in the last bit between batch sizes: compared by the tolerance rule there,
# bit for bit elsewhere. Changing another sample's values (same batch size) is bit for bit everywhere.
LAST_BIT_DEPENDS_ON_LENGTH = {"onnxruntime"}
ATTRIBUTES = {"preprocess_collapse_repeated": False, "merge_repeated": True}


class ChildFailure(AssertionError):
    """The child died, hung or the graph raised: a finding, not an infrastructure error."""


class Child:
    """One worker process for one runtime (tests/support/fuzz_worker.py); a fresh one after it dies."""

    def __init__(self, runtime: str, folder: Path) -> None:
        self.runtime, self.folder = runtime, folder
        self.worker: Worker | None = None
        self.crashes = 0
        self.calls = 0

    def _alive(self) -> Worker:
        if self.worker is None:
            with open(self.folder / "stderr.txt", "ab") as stderr:  # the worker keeps its own copy
                self.worker = Worker(WORKER, stderr=stderr)
        return self.worker

    def _died(self, path: Path, how: str) -> ChildFailure:
        self.worker = None
        self.crashes += 1
        kept = self.folder / f"crash-{self.crashes}.npz"
        shutil.copyfile(path, kept)
        tail = (self.folder / "stderr.txt").read_text(errors="replace").strip().splitlines()[-3:]
        return ChildFailure(f"{self.runtime}: the child ended ({how}) on {kept}; stderr: {' | '.join(tail)}")

    def run(self, batch: Batch) -> np.ndarray:
        self.calls += 1
        path = self.folder / "example.npz"
        np.savez(
            path,
            inputs=batch.inputs,
            sequence_mask=batch.sequence_mask,
            labels=batch.labels,
            **{name: np.array(value) for name, value in batch.attributes.items()},
        )
        worker = self._alive()
        try:
            worker.send({"runtime": self.runtime, "path": str(path)})
            worker.answer(ANSWER_TIMEOUT_S)
        except Lost as lost:
            raise self._died(path, lost.how) from None
        except Failed as failed:
            raise ChildFailure(f"{self.runtime}: the graph raised {failed}") from None
        return np.load(str(path) + ".out.npy")

    def close(self) -> None:
        if self.worker is not None:
            self.worker.end()


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Child]]:
    made = {name: Child(name, tmp_path_factory.mktemp(name)) for name in RUNTIME_FLOATS}
    yield made
    for child in made.values():
        child.close()


def check_total(runtime: str, got: np.ndarray, batch: Batch) -> None:
    """``got`` is ctc_loss_or_nan of ``batch``: same shape and type, NaN and inf where it has
    them, finite values within the tolerance of the logits' type, +0.0 for a zero loss by construction."""
    expected = ctcop.ctc_loss_or_nan(batch.inputs, batch.sequence_mask, batch.labels, **batch.attributes)
    dtype = batch.inputs.dtype.name
    assert got.shape == expected.shape, f"{runtime}: loss shape {got.shape}, expected {expected.shape}"
    assert got.dtype == batch.inputs.dtype, f"{runtime}: loss type {got.dtype}, expected {dtype}"
    problem = compare(got, expected, dtype)
    assert problem is None, f"{runtime}: {problem}; ctc_loss_or_nan {expected.tolist()}, got {got.tolist()}"
    # Spec 11.5: a zero loss is +0.0 where it is zero by construction (C = 1, no active frame with an
    # empty target). A loss that rounds to zero (a certain path in float16) may come out as -0.0.
    mask = batch.sequence_mask.astype(np.int64)
    frames = mask.sum(axis=0) if mask.shape[1:] == expected.shape else np.ones(expected.shape, np.int64)
    structural = (expected == 0) & ((batch.inputs.shape[2] == 1) | (frames == 0))
    negative_zero = structural & (got == 0) & np.signbit(got)
    assert not negative_zero.any(), f"{runtime}: -0.0 at {np.flatnonzero(negative_zero).tolist()}"


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same bits, or both NaN."""
    return (a.view(np.uint8).reshape(a.size, -1) == b.view(np.uint8).reshape(b.size, -1)).all(axis=1) | (
        np.isnan(a) & np.isnan(b)
    )


def without(batch: Batch, sample: int) -> Batch:
    keep = np.arange(batch.inputs.shape[1]) != sample
    return Batch(batch.inputs[:, keep], batch.sequence_mask[:, keep], batch.labels[keep], batch.attributes)


def check_no_cross_sample_effect(runtime: str, child: Child, got: np.ndarray, other: int, perturbed: Batch) -> None:
    changed = child.run(perturbed)
    check_total(runtime, changed, perturbed)
    keep = np.arange(got.size) != other
    moved = np.flatnonzero(keep & ~same_bits(got, changed))
    assert not moved.size, (
        f"{runtime}: changing sample {other} moved samples {moved.tolist()}: {got.tolist()} -> {changed.tolist()}"
    )
    smaller = without(perturbed, other)
    alone = child.run(smaller)
    check_total(runtime, alone, smaller)
    if runtime in LAST_BIT_DEPENDS_ON_LENGTH:
        problem = compare(alone, changed[keep], perturbed.inputs.dtype.name)
        assert problem is None, f"{runtime}: removing sample {other} from the batch: {problem}"
        return
    moved = np.flatnonzero(~same_bits(changed[keep], alone))
    assert not moved.size, (
        f"{runtime}: removing sample {other} from the batch moved the others (spec 11.5: a result does not depend"
        f" on how many samples share the batch): {changed[keep].tolist()} -> {alone.tolist()}"
    )


def check_case(runtime: str, child: Child, case: GraphCase) -> None:
    got = child.run(case.batch)
    check_total(runtime, got, case.batch)
    if case.perturbed is not None:
        assert case.other is not None
        check_no_cross_sample_effect(runtime, child, got, case.other, case.perturbed)


@pytest.mark.fuzz
@pytest.mark.parametrize("runtime", list(RUNTIME_FLOATS))
def test_exported_graph_is_a_total_function_equal_to_ctc_loss_or_nan(runtime: str, children: dict) -> None:
    child = children[runtime]

    @budget("graph")
    @given(case=graph_cases(RUNTIME_FLOATS[runtime]))
    def check(case: GraphCase) -> None:
        check_case(runtime, child, case)

    try:
        check()
    finally:
        print(f"{runtime}: {child.calls} graph runs, {child.crashes} child deaths ({child.folder})", file=sys.stderr)
        if os.environ.get("CTCOP_FUZZ_STATS"):
            with open(os.environ["CTCOP_FUZZ_STATS"], "a") as stats:
                stats.write(json.dumps({"runtime": runtime, "calls": child.calls, "crashes": child.crashes}) + "\n")


def finding(inputs: np.ndarray, mask: list, labels: list, other: int | None = None, seed: int = 0) -> GraphCase:
    """A case the fuzzing found, as a regression test; ``other``: redraw that sample's logits."""
    batch = Batch(inputs, np.array(mask, np.int32), np.array(labels, np.int64), ATTRIBUTES)
    if other is None:
        return GraphCase(batch)
    changed = inputs.copy()
    changed[:, other] = np.random.default_rng(seed + 1).normal(size=changed[:, other].shape) * 30
    return GraphCase(batch, other, Batch(changed, batch.sequence_mask, batch.labels, batch.attributes))


FINDINGS = {
    # OpenVINO (lowering and ONNX via the extension): the process died (SIGSEGV) on a huge label.
    "label_1e9": finding(np.zeros((4, 2, 4), np.float32), np.ones((4, 2)), [[10**9, -1, -1, -1], [1, -1, -1, -1]]),
    # ONNX export, C > 32 (flat Gather): a label equal to C in sample 0 read sample 1's logits.
    "label_C_over_32": finding(
        np.random.default_rng(0).normal(size=(3, 2, 40)).astype(np.float32),
        np.ones((3, 2)),
        [[40, -1, -1], [1, -1, -1]],
        other=1,
    ),
    # OpenVINO custom layer: the CPU plugin hands int64 inputs over as int32, so 2**32 reads as 0.
    "label_2_32": finding(np.zeros((1, 2, 3), np.float32), np.ones((1, 2)), [[2**32], [0]]),
}


@pytest.mark.fuzz
@pytest.mark.parametrize("name", list(FINDINGS))
@pytest.mark.parametrize("runtime", list(RUNTIME_FLOATS))
def test_what_fuzzing_found_stays_fixed(runtime: str, name: str, children: dict) -> None:
    check_case(runtime, children[runtime], FINDINGS[name])
