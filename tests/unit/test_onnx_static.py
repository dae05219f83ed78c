"""The static form of the ONNX export (spec 11.2): fixed dims, every shape a constant, the
recursion a Scan, no model-local function. It is the same total function as the default form
(spec 11.5) in onnxruntime, onnx.reference and tract, on fuzzed input of every size the fuzz of
the default form draws (T = 0, C above and below the few-classes bound, float32 and float64)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from onnx.reference import ReferenceEvaluator
from support.models import onnx_acoustic_model
from support.onnx_batches import Batch, batches, hostile_batch
from support.onnx_runs import run_onnxruntime, run_tract, tract_outputs

import ctcop
from ctcop.onnx import attach_onnx, function, onnx_model
from ctcop.tolerance import compare

tract = pytest.importorskip("tract")

RUNTIMES = ["onnxruntime", "onnx-reference", "tract"]


def static_model(case: Batch) -> onnx.ModelProto:
    """The static form for ``case``'s dims and element types."""
    inputs, mask, labels, attributes = case
    frames, batch, classes = inputs.shape
    return onnx_model(
        dtype=inputs.dtype.name,
        mask_dtype=mask.dtype.name,
        labels_dtype=labels.dtype.name,
        dims=(frames, batch, classes),
        attributes=attributes,
        inline=True,
        static=True,
    )


def run(runtime: str, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    if runtime == "tract":
        return run_tract(model, feeds)
    if runtime == "onnx-reference":
        return ReferenceEvaluator(model).run(None, feeds)[0]
    return run_onnxruntime(model, feeds)


def expect_total(runtime: str, case: Batch) -> None:
    """The static form's losses equal ``ctc_loss_or_nan``'s by the conformance rule, +0.0 for
    every zero."""
    inputs, mask, labels, attributes = case
    feeds = {"inputs": inputs, "sequence_mask": mask, "labels": labels}
    got = run(runtime, static_model(case), feeds)
    expected = ctcop.ctc_loss_or_nan(inputs, mask, labels, **attributes)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    problem = compare(got, expected, inputs.dtype.name)
    assert problem is None, f"{runtime}: {problem} (got {got}, expected {expected})"
    assert not np.signbit(got[got == 0]).any(), f"{runtime}: -0.0 in {got}"


@pytest.mark.parametrize("runtime", RUNTIMES)
@settings(max_examples=25, deadline=None)
@given(case=batches(misshape=False))
def test_the_static_form_agrees_with_ctc_loss_or_nan_on_fuzzed_input(runtime: str, case: Batch) -> None:
    expect_total(runtime, case)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("classes", [5, function.FEW_CLASSES + 8])
def test_the_static_form_runs_float16_and_no_frames(runtime: str, classes: int) -> None:
    rng = np.random.default_rng(classes)
    labels = np.array([[0, -1, 1, 1], [-1, -1, -1, -1], [2, 3, 9, 9]], np.int64)
    for frames in (4, 0):
        inputs = rng.normal(size=(frames, 3, classes)).astype(np.float16)
        mask = np.ones((frames, 3), np.int32)
        mask[3:, 0] = 0
        case = (inputs, mask, labels[:, :frames], {})
        expect_total(runtime, case)


def test_the_static_form_is_function_free_with_a_scan_and_no_loop() -> None:
    model = onnx_model(dims=(6, 4, 5), inline=True, static=True)
    onnx.checker.check_model(model, full_check=True)
    assert not model.functions and {op.domain for op in model.opset_import} == {""}

    def op_types(nodes: list[onnx.NodeProto]) -> list[str]:
        found = []
        for node in nodes:
            found.append(node.op_type)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    found += op_types(list(attribute.g.node))
        return found

    ops = op_types(list(model.graph.node))
    # One Scan, with the body merge_repeated asks for (no If); the default form's Loops are gone.
    assert ops.count("Scan") == 1 and "Loop" not in ops and "If" not in ops
    # With T = 0 there is no step and no Scan.
    assert "Scan" not in op_types(list(onnx_model(dims=(0, 4, 5), inline=True, static=True).graph.node))


@pytest.mark.parametrize(
    ("options", "pattern"),
    [
        ({"dims": (6, 4, 5), "static": True}, r"^static: needs inline"),
        ({"dims": ("T", 4, 5), "inline": True, "static": True}, r"^static: needs fixed dims T, N, C"),
    ],
)
def test_the_static_form_needs_inline_and_fixed_dims(options: dict, pattern: str) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=pattern):
        onnx_model(**options)


def test_export_static_writes_a_model_tract_runs(tmp_path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ctcop", "export", *args], capture_output=True, text=True, timeout=300
        )

    path = tmp_path / "static.onnx"
    written = cli("-o", str(path), "--dims", "5,3,4", "--inline", "--static", "--preprocess-collapse-repeated")
    assert written.returncode == 0, written.stderr
    rng = np.random.default_rng(3)
    inputs = rng.normal(size=(5, 3, 4)).astype(np.float32)
    mask = (np.arange(5)[:, None] < np.array([5, 2, 0])[None, :]).astype(np.int32)
    labels = np.array([[0, 0, -1, 1, -1], [2, 2, -1, -1, -1], [-1, -1, -1, -1, -1]], np.int64)
    got = run_tract(onnx.load(path), {"inputs": inputs, "sequence_mask": mask, "labels": labels})
    expected = ctcop.ctc_loss(inputs, mask, labels, preprocess_collapse_repeated=True)
    assert compare(got, expected, "float32") is None, (got, expected)
    refused = cli("-o", str(tmp_path / "dynamic.onnx"), "--inline", "--static")
    assert refused.returncode == 2 and "static: needs fixed dims" in refused.stderr


def test_attach_writes_the_static_form_for_logits_of_fixed_dims() -> None:
    acoustic = onnx_acoustic_model()
    for value in (acoustic.graph.input[0], acoustic.graph.output[0]):
        for dim, size in zip(value.type.tensor_type.shape.dim[:2], (6, 6), strict=True):
            dim.dim_value = size
    model = attach_onnx(acoustic, "logits", inline=True, static=True)
    assert not model.functions and [o.name for o in model.graph.output] == ["logits", "loss"]
    feeds = hostile_batch()
    features = np.random.default_rng(4).normal(size=(6, 6, 6)).astype(np.float32)
    logits, loss = tract_outputs(model, [features, feeds["sequence_mask"], feeds["labels"]])
    expected = ctcop.ctc_loss(logits, feeds["sequence_mask"], feeds["labels"])
    assert compare(loss, expected, "float32") is None, (loss, expected)
    with pytest.raises(ctcop.InvalidInputError, match=r"^static: needs fixed dims"):
        attach_onnx(onnx_acoustic_model(), "logits", inline=True, static=True)
