"""The op alone in onnxruntime with its batch split over threads: the same losses as one run and
as the reference, the split decided from the work, and what it refuses. No timings: those are in
``ctcop bench`` (column ort-p)."""

import threading
import time
from typing import Any

import numpy as np
import onnx
import onnxruntime
import pytest
from models import onnx_acoustic_model

import ctcop
from ctcop.onnx import BatchParallelSession, attach_onnx, function, inlined, onnx_model, parallel, session_options

MODEL = onnx_model(dtype="float32", mask_dtype="int32", labels_dtype="int64")


def _batch(frames: int, batch: int, classes: int, longest: int, seed: int) -> tuple[np.ndarray, ...]:
    """Logits, mask and labels with lengths that vary per sample, a sample whose mask has a gap
    and one with a label out of range (both NaN by the spec's rules)."""
    rng = np.random.default_rng(seed)
    logits = (rng.normal(size=(frames, batch, classes)) * 3.0).astype(np.float32)
    lengths = rng.integers(frames // 2, frames + 1, size=batch)
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(np.int32)
    labels = np.full((batch, frames), -1, np.int64)
    for n in range(batch):
        size = int(rng.integers(0, longest + 1))
        labels[n, :size] = rng.integers(0, classes - 1, size=size)
    labels[0, :longest] = rng.integers(0, classes - 1, size=longest)
    mask[3, 1] = 0
    labels[2, 0] = classes - 1
    return logits, mask, labels


def _whole(inputs: tuple[np.ndarray, ...], model: Any = MODEL) -> np.ndarray:
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), session_options(1), providers=["CPUExecutionProvider"]
    )
    return np.asarray(session.run(None, dict(zip(("inputs", "sequence_mask", "labels"), inputs, strict=True)))[0])


@pytest.mark.parametrize(("frames", "batch", "threads", "parts"), [(80, 48, 2, 2), (100, 64, 3, 3), (100, 64, 8, 3)])
def test_a_split_batch_gives_one_runs_losses(frames: int, batch: int, threads: int, parts: int) -> None:
    inputs = _batch(frames, batch, 28, 20, seed=frames + batch)
    with BatchParallelSession(MODEL, threads) as session:
        # N * T * (2L + 3 + C) over PART_WORK, at most one part per thread.
        assert session.parts(*inputs) == parts
        got = session.run(*inputs)
    whole = _whole(inputs)
    # Equal up to the rounding onnxruntime takes from where a value lies (equal bits here).
    np.testing.assert_allclose(got, whole, rtol=1e-6, atol=0)
    expected = ctcop.ctc_loss_or_nan(*inputs)
    assert np.isnan(got[1]) and np.isnan(got[2]) and np.isnan(expected[[1, 2]]).all()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_small_wide_or_disagreeing_batches_run_as_one_call() -> None:
    with BatchParallelSession(MODEL, 2) as session:
        # Too little work: 8 * 80 * 71 units, under two parts' worth.
        small = _batch(80, 8, 28, 20, seed=1)
        assert session.parts(*small) == 1
        # The logits outweigh the states (C = 200 > 4 * (2 * 2 + 3)): reading them is bound by memory.
        wide = _batch(80, 64, 200, 2, seed=2)
        assert session.parts(*wide) == 1
        np.testing.assert_allclose(session.run(*wide), ctcop.ctc_loss_or_nan(*wide), rtol=1e-5, atol=1e-6)
        # The inputs disagree on N: the model's own rule decides, so the batch is not split.
        logits, mask, labels = _batch(80, 48, 28, 20, seed=3)
        assert session.parts(logits, mask, labels) == 2
        disagreeing = (logits, mask[:, :47], labels)
        assert session.parts(*disagreeing) == 1
        np.testing.assert_array_equal(session.run(*disagreeing), _whole(disagreeing))


def test_a_model_of_fixed_n_runs_as_one_call_and_refuses_another_n() -> None:
    model = onnx_model(dtype="float32", dims=("T", 48, 28))
    inputs = _batch(80, 48, 28, 20, seed=8)
    with BatchParallelSession(model, 2) as session:
        assert session.parts(*inputs) == 1
        np.testing.assert_array_equal(session.run(*inputs), _whole(inputs, model))
        logits, mask, labels = _batch(80, 64, 28, 20, seed=9)
        with pytest.raises(ctcop.InvalidInputError) as error:
            session.run(logits, mask, labels)
        assert str(error.value) == "inputs: has 64 along axis 1; the model fixes it at 48"
    # N fixed on the labels alone (a hand-edited model): not split either.
    labels_fixed = onnx_model(dtype="float32")
    labels_fixed.graph.input[2].type.tensor_type.shape.dim[0].dim_value = 48
    with BatchParallelSession(labels_fixed, 2) as session:
        assert session.parts(*inputs) == 1
        np.testing.assert_array_equal(session.run(*inputs), _whole(inputs, labels_fixed))


def test_two_callers_at_once_each_get_their_losses() -> None:
    batches = [_batch(80, 48, 28, 20, seed=seed) for seed in (4, 5)]
    results: dict[int, np.ndarray] = {}
    with BatchParallelSession(MODEL, 2) as session:

        def call(index: int) -> None:
            for _ in range(3):
                results[index] = session.run(*batches[index])

        callers = [threading.Thread(target=call, args=(index,)) for index in (0, 1)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        session.close()
        again = session.run(*batches[0])  # a closed session makes its parts' sessions again
    for index, inputs in enumerate(batches):
        np.testing.assert_allclose(results[index], _whole(inputs), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(again, results[0])


def test_inputs_of_another_type_or_rank_are_refused() -> None:
    logits, mask, labels = _batch(10, 4, 5, 3, seed=6)
    session = BatchParallelSession(MODEL.SerializeToString(), 2)
    cases = [
        ((logits.astype(np.float64), mask, labels), "inputs: must be a 3-D numpy array of float32"),
        ((logits, mask.astype(np.float32), labels), "sequence_mask: must be a 2-D numpy array of int32"),
        ((logits, mask, labels[0]), "labels: must be a 2-D numpy array of int64"),
        ((logits.tolist(), mask, labels), "inputs: must be a 3-D numpy array of float32"),
    ]
    for arrays, message in cases:
        with pytest.raises(ctcop.InvalidInputError) as error:
            session.run(*arrays)
        assert str(error.value) == message


def test_a_model_that_is_not_the_op_alone_is_refused() -> None:
    # The loss scaled by the batch's mean: right names, but a sample's output depends on the others.
    scaled = onnx_model(dtype="float32")
    scaled.graph.node[0].output[0] = "unscaled"
    scaled.graph.node.extend(
        [
            onnx.helper.make_node("ReduceMean", ["unscaled"], ["mean"], keepdims=1),
            onnx.helper.make_node("Div", ["unscaled", "mean"], ["loss"]),
        ]
    )
    not_alone = (
        "must be the op alone as ctcop.onnx.onnx_model writes it: one ai.ctcop.CTCLoss node with this ctcop's "
        "function (not inlined), inputs inputs, sequence_mask, labels, output loss [N]"
    )
    # Another body under the function's name (here the one written for opset 19), and an attribute
    # the op does not have.
    other_body = onnx_model(dtype="float32")
    other_body.functions[0].CopyFrom(function.ctc_loss_function(19, "float32"))
    unknown_attribute = onnx_model(dtype="float32")
    unknown_attribute.graph.node[0].attribute.append(onnx.helper.make_attribute("blank", 0))
    for model, rule in [
        (attach_onnx(onnx_acoustic_model(), "logits"), not_alone),
        (scaled, not_alone),
        (inlined(onnx_model(dtype="float32")), not_alone),
        (other_body, not_alone),
        (unknown_attribute, not_alone),
        (b"not a model", "is not an ONNX model (DecodeError)"),
        ("model.onnx", "must be an onnx.ModelProto or its bytes, not str"),
    ]:
        with pytest.raises(ctcop.InvalidInputError) as error:
            BatchParallelSession(model, 2)
        assert (error.value.name, error.value.rule) == ("model", rule)
    for threads in (-1, True, 1.5, 2**31):
        with pytest.raises(ctcop.InvalidInputError) as error:
            BatchParallelSession(MODEL, threads)  # type: ignore[arg-type]
        assert (error.value.name, error.value.rule) == (
            "threads",
            f"must be a whole number in [0, 1024], not {threads!r}",
        )
    assert BatchParallelSession(MODEL, np.int64(2)).parts(*_batch(80, 48, 28, 20, seed=10)) == 2  # type: ignore[arg-type]


class _Failing:
    def run(self, *_: object) -> None:
        raise RuntimeError("part 0 failed")


class _Whole:
    def run(self, *_: object) -> list[np.ndarray]:
        return [np.zeros(24, np.float32)]


class _Recording:
    """A part's session that records when its run ended, or reports ``error`` instead of running."""

    def __init__(self, session: Any, error: str = "") -> None:
        self.session, self.error, self.ended = session, error, []

    def run_async(self, names: Any, feed: Any, callback: Any, data: Any) -> None:
        def done(outputs: Any, data: Any, error: str) -> None:
            self.ended.append(time.perf_counter())
            callback(outputs, data, error)

        if self.error:
            done([], data, self.error)
        else:
            self.session.run_async(names, feed, done, data)


def test_run_returns_only_once_every_part_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = _batch(80, 48, 28, 20, seed=11)
    with BatchParallelSession(MODEL, 2) as session:
        second = _Recording(session._sessions(2)[1])
        # Part 0 fails at once while part 1 runs: run raises only after part 1 has ended.
        monkeypatch.setattr(session, "_sessions", lambda count: [_Failing(), second])
        with pytest.raises(RuntimeError, match="part 0 failed"):
            session.run(*inputs)
        returned = time.perf_counter()
        assert len(second.ended) == 1 and second.ended[0] <= returned
        # A part that onnxruntime fails on: its error, not a result.
        failing = _Recording(None, "no memory")
        monkeypatch.setattr(session, "_sessions", lambda count: [_Whole(), failing])
        with pytest.raises(RuntimeError, match="onnxruntime failed on a part of the batch: no memory"):
            session.run(*inputs)


class _InterruptedOnce(threading.Event):
    """An event whose first wait is interrupted (a KeyboardInterrupt, as Ctrl-C raises it)."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def wait(self, timeout: float | None = None) -> bool:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return super().wait(timeout)


class _Later:
    """A part's session whose run ends ``delay`` seconds after it starts, recording when."""

    def __init__(self, delay: float) -> None:
        self.delay, self.ended = delay, []

    def run_async(self, names: Any, feed: Any, callback: Any, data: Any) -> None:
        def finish() -> None:
            time.sleep(self.delay)
            self.ended.append(time.perf_counter())
            callback([np.zeros(len(feed["labels"]), np.float32)], data, "")

        threading.Thread(target=finish).start()


def test_an_interrupted_run_raises_once_every_part_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = _batch(100, 64, 28, 20, seed=12)
    with BatchParallelSession(MODEL, 3) as session:
        assert session.parts(*inputs) == 3
        later = [_Later(0.05), _Later(0.15)]
        monkeypatch.setattr(session, "_sessions", lambda count: [_Whole(), *later])
        start = parallel._Part.__init__

        def interrupted_part(part: Any, session: Any, feed: Any) -> None:
            start(part, session, feed)
            part._done = _InterruptedOnce()  # set by the part's end, after this

        monkeypatch.setattr(parallel._Part, "__init__", interrupted_part)
        with pytest.raises(KeyboardInterrupt):
            session.run(*inputs)
        returned = time.perf_counter()
    assert [len(part.ended) for part in later] == [1, 1]
    assert all(part.ended[0] <= returned for part in later)
