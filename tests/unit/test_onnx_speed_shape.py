"""The shape of the ONNX function that its speed in onnxruntime rests on (spec 11.2), its accuracy
where that shape matters, and its peak memory. No timings: those are in benchmarks/onnx_profile.py."""

from collections import Counter
from typing import Any

import numpy as np
import onnx
import pytest

import ctcop
from ctcop.conformance.runtimes import RUNTIMES
from ctcop.onnx import function, onnx_model
from ctcop.process import memory_probe

# Per step of the recursion: two Gathers and an Add (skip penalty) for the terms, a floored Max,
# three Sub/Exp for the weights, two Gathers and three Muls for the masses (not on a block's first
# step, whose masses are 1), Sum and an Add for the emission; one more Add where the stay penalty
# applies.
OPS_PER_STEP = 17


def _graphs(graph: onnx.GraphProto | onnx.FunctionProto) -> list[onnx.GraphProto]:
    """Every subgraph under ``graph``, depth first."""
    found = []
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                found += [attribute.g, *_graphs(attribute.g)]
    return found


def _forward_bodies() -> list[onnx.GraphProto]:
    (loss_function,) = onnx_model(dims=("T", "N", "C")).functions
    return [g for g in _graphs(loss_function) if g.doc_string == "ctc_forward_step"]


def test_the_forward_body_is_a_short_run_of_cheap_operators() -> None:
    bodies = _forward_bodies()
    # With and without the stay penalty, for each way of reading emissions (few / many classes).
    assert len(bodies) == 4
    for body in bodies:
        ops = Counter(node.op_type for node in body.node)
        # One Log per block: the forward variables are (scale, mass) pairs within a block.
        assert ops["Log"] == 1 and ops["Sum"] == ops["Max"] == function.UNROLL
        # Three Muls a step for the masses, one a block for the padding of the carried rows.
        assert ops["Exp"] == 3 * function.UNROLL and ops["Mul"] == 3 * (function.UNROLL - 1) + 1
        # Two Adds a step (skip penalty, emission) and four a block; a third a step for the stay penalty.
        stay_penalty = ops["Add"] >= 3 * function.UNROLL
        per_step = OPS_PER_STEP + stay_penalty
        # Few classes: each step's emissions are one Gather of rows from the block's emissions by
        # class (its GatherElements); many: the block's emissions are split into the steps.
        assert ops["GatherElements"] + ops["Split"] == 1
        per_step += ops["GatherElements"]
        # A block computes the rows a lane can have reached by its end (function.row_limits): the
        # first rows of the moves' rows, of the penalties and of each step's emissions are Slices
        # of tensors of 2 + S rows, and the carried rows are grown to them by one Pad.
        assert ops["Slice"] == function.UNROLL + 4 + stay_penalty and ops["Pad"] == 1
        # The rest is per block: the block's emissions, its rows, the offset update, the loop
        # condition.
        assert len(body.node) - ops["Constant"] <= per_step * function.UNROLL + 18 + ops["Slice"] + 5
        # No reduction or Where per step (onnxruntime's cost several simple operators): one
        # ReduceMax and one Where per block, for the offset.
        assert ops["ReduceMax"] == ops["Where"] == 1
        assert not {"Concat", "Transpose", "ScatterElements", "ReduceSum", "ReduceLogSumExp"} & set(ops)


def _case(frames: int, batch: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    inputs = (rng.normal(size=(frames, batch, classes)) * 3.0).astype(np.float32)
    lengths = rng.integers(0, frames + 1, size=batch)
    lengths[0] = frames
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(np.int32)
    labels = np.full((batch, frames), -1, np.int64)
    for n, length in enumerate(lengths):
        target = int(rng.integers(0, max(length // 3, 1) + 1)) if classes > 1 else 0
        labels[n, :target] = rng.integers(0, max(classes - 1, 1), size=target)
    # Masked frames are never read: NaN there changes nothing.
    inputs[mask == 0] = np.nan
    return inputs, mask, labels


@pytest.mark.parametrize(
    ("frames", "batch", "classes"),
    [
        (2000, 8, 300),  # frame terms in 19 chunks of 109 frames, the last one short
        (33, 3, 2000),  # 43 frames to a chunk: one chunk holds every frame
        (37, 40, 7000),  # a chunk of one frame (more values per frame than CHUNK)
        (41, 5, 32),  # the most classes read by GatherElements
        (41, 5, 33),  # the fewest read by the Gather of the flat logits
        (10, 4, 1),  # blank only
        (40, 6, 5),  # ceil(T / 2) a multiple of UNROLL: the longest lanes wait no step
    ],
)
def test_chunks_and_waiting_steps_match_the_reference(frames: int, batch: int, classes: int) -> None:
    inputs, mask, labels = _case(frames, batch, classes, seed=frames * classes)
    expected = ctcop.ctc_loss(inputs, mask, labels)
    got = RUNTIMES["onnxruntime"](inputs, mask, labels)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-5)


def test_float32_export_stays_accurate_over_2000_frames_with_few_classes() -> None:
    # The float32 recursion relative to a float64 offset per sample and block of UNROLL steps
    # (spec 11.2); 6e-8 relative measured (the README's bar is 1.1e-6).
    frames, batch, classes = 2000, 4, 28
    rng = np.random.default_rng(2000)
    inputs = (rng.normal(size=(frames, batch, classes)) * 3.0).astype(np.float32)
    lengths = np.array([frames, frames - 3, frames // 2, 1234])
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(np.int32)
    labels = np.full((batch, frames), -1, np.int64)
    labels[:, :400] = rng.integers(0, classes - 1, size=(batch, 400))
    expected = ctcop.ctc_loss(inputs.astype(np.float64), mask, labels)
    got = RUNTIMES["onnxruntime"](inputs, mask, labels).astype(np.float64)
    assert np.isfinite(expected).all() and expected.min() > 1000.0
    np.testing.assert_allclose(got, expected, rtol=1.1e-6, atol=0)


def _fastest_paths(targets: list[list[int]], classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T = 4 UNROLL frames over which nearly all the probability is on one path per sample: its
    labels one a frame at the end of its frames (after blanks), the blank elsewhere."""
    frames = 4 * function.UNROLL
    inputs = np.zeros((frames, len(targets), classes), np.float32)
    labels = np.full((len(targets), frames), -1, np.int64)
    for n, target in enumerate(targets):
        labels[n, : len(target)] = target
        inputs[:, n, classes - 1] = 8.0
        inputs[frames - len(target) :, n, classes - 1] = 0.0
        inputs[np.arange(frames - len(target), frames), n, target] = 8.0
    return inputs, np.ones((frames, len(targets)), np.int32), labels


def _stock_openvino(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The inlined form in OpenVINO without ctcop's extensions (which map the ``ai.ctcop`` node
    onto OpenVINO's own CTCLoss, so ``openvino-onnx`` never runs the function's body), at f32."""
    import openvino

    from ctcop.openvino import declared_precision_config

    core = openvino.Core()
    model = core.read_model(onnx_model(inline=True).SerializeToString(), b"")
    compiled = core.compile_model(model, "CPU", declared_precision_config(core, "CPU", "f32"))
    return np.asarray(compiled([inputs, mask, labels])[0])


@pytest.mark.parametrize("runtime", ["onnxruntime", "onnx-reference", "stock-openvino"])
@pytest.mark.parametrize(
    ("targets", "classes"),
    [
        # 20 labels in the last 20 frames: the second lane reads one a step from its first step
        # and is in state 2k - 1, row 2k + 1, after k steps (r = 2; limits 3, 23, 43 rows).
        ([list(range(20))], 22),
        # 40 labels in 40 frames beside 15 in the last 15 (more than 32 classes: the emissions
        # split into the steps): the short target's second lane starts at row 2 + 2 (40 - 15) = 52
        # and reaches row 71 after 10 steps (r = 52; limits 53, 73, 83).
        ([list(range(40)), list(range(15))], 42),
    ],
)
def test_the_loops_row_limits_keep_the_fastest_paths(runtime: str, targets: list[list[int]], classes: int) -> None:
    # A Loop's block b computes the rows up to r + 2 UNROLL (b + 1) (function.row_limits), one
    # more than a path can have reached; with two rows fewer a block, or r ignored, these paths
    # are cut off and the losses grow by about 8 a frame in every runtime here (checked).
    inputs, mask, labels = _fastest_paths(targets, classes)
    expected = ctcop.ctc_loss(inputs, mask, labels)
    assert expected.max() < 1.0  # the fastest paths are nearly certain
    run = _stock_openvino if runtime == "stock-openvino" else RUNTIMES[runtime]
    np.testing.assert_allclose(run(inputs, mask, labels), expected, rtol=1e-5, atol=1e-6)


def peak_child(request: dict[str, Any]) -> float:
    """In a fresh worker: the peak of two calls after a first one, above the resident size before
    them, over the logits' bytes."""
    import onnxruntime

    from ctcop.onnx import session_options

    frames, batch, classes = request["frames"], request["batch"], request["classes"]
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(frames, batch, classes)).astype(np.float32)
    mask = np.ones((frames, batch), np.int32)
    labels = rng.integers(0, classes - 1, size=(batch, frames)).astype(np.int64)
    labels[:, 20:] = -1
    model = onnx_model(dims=("T", "N", classes)).SerializeToString()
    options = session_options(2, arena=request["arena"])
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feeds = {"inputs": inputs, "sequence_mask": mask, "labels": labels}
    session.run(None, feeds)
    return memory_probe.peak(lambda: session.run(None, feeds), 2) / inputs.nbytes


@pytest.mark.skipif(memory_probe.available() is not None, reason=str(memory_probe.available()))
@pytest.mark.parametrize("arena", [True, False])
def test_peak_memory_is_a_small_fraction_of_the_logits(arena: bool) -> None:
    # No tensor of the logits' size: with more than 32 classes the frame terms are computed a
    # cache-sized chunk of frames at a time (one tensor of the logits' size would take 2x the
    # logits' bytes without onnxruntime's arena, 4.2x with it). Measured in a fresh process: the RSS high-water mark
    # of two calls after a first one, over the logits' bytes (0.03x measured with the arena, 0.04x
    # to 0.3x without it, as glibc's heap grows).
    request = {"frames": 150, "batch": 16, "classes": 5000, "arena": arena}
    assert memory_probe.measure(f"{__name__}:peak_child", request) < 1.0
