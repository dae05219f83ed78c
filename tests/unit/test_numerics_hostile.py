"""Reproductions of hostile numerical inputs: values that are valid by the spec but sit at the
edges of the float formats, the thread pool and the size of inputs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ctcop
from ctcop.core import scheduler

SUBNORMAL_LOSS = 2.5494452  # T = 3, C = 4, target (0, 1), logits 0 but one tiny one


def _subnormal_case(value: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    inputs = np.zeros((3, 1, 4), np.float32)
    inputs[1, 0, 2] = value
    return inputs, np.ones((3, 1), np.int32), np.array([[0, 1, -1]], np.int64)


def _compiled(form: str, hint: str) -> tuple[Any, str]:
    """The lowered IR on stock OpenVINO, or ctcop's ONNX read with ctcop's extension, compiled
    with the inference precision ``hint``, and the precision compiled (read back)."""
    import openvino

    from ctcop.onnx import onnx_model
    from ctcop.openvino import ir_model, openvino_core

    config = {"INFERENCE_PRECISION_HINT": hint}
    if form == "onnx":
        with tempfile.TemporaryDirectory() as name:
            path = Path(name) / "ctc.onnx"
            path.write_bytes(onnx_model().SerializeToString())
            compiled = openvino_core().compile_model(openvino_core().read_model(str(path)), "CPU", config)
    else:
        compiled = openvino.Core().compile_model(ir_model(), "CPU", config)
    got = compiled.get_property("INFERENCE_PRECISION_HINT")
    return compiled, next(n for n in ("f32", "bf16", "f16") if got == getattr(openvino.Type, n))


@pytest.mark.parametrize("value", [1e-38, 1e-40, -1e-40])
def test_subnormal_logit_is_finite_for_the_reference(value: float) -> None:
    assert ctcop.ctc_loss_or_nan(*_subnormal_case(value))[0] == pytest.approx(SUBNORMAL_LOSS, rel=1e-6)


@pytest.mark.parametrize("hint", ["f32", "bf16"])
@pytest.mark.parametrize("form", ["ir", "onnx"])
def test_subnormal_logit_is_finite_in_the_lowering(form: str, hint: str) -> None:
    compiled, precision = _compiled(form, hint)
    assert precision in ("f32", "bf16")  # neither runs the lowering's operators in a narrower type
    for value in (1e-38, 1e-40, -1e-40):
        inputs, mask, labels = _subnormal_case(value)
        loss = compiled({"inputs": inputs, "sequence_mask": mask, "labels": labels})["loss"]
        assert loss[0] == pytest.approx(SUBNORMAL_LOSS, rel=1e-6), (value, precision)
    for bad in (np.inf, -np.inf, np.nan):  # the guard still sees non-finite values
        inputs, mask, labels = _subnormal_case(bad)
        assert np.isnan(compiled({"inputs": inputs, "sequence_mask": mask, "labels": labels})["loss"][0])


# -- the thread pool -------------------------------------------------------------------------------


def _batch(n: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(8)
    return rng.normal(size=(3, n, 4)), np.ones((3, n), np.int8), rng.integers(-1, 3, size=(n, 3))


def test_an_absurd_thread_count_is_refused() -> None:
    before = ctcop.get_num_threads()
    with pytest.raises(ctcop.InvalidInputError, match="threads"):
        ctcop.set_num_threads(100000)
    assert ctcop.get_num_threads() == before


def test_a_failed_thread_start_leaves_a_working_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads the system refuses to start (as at thousands of threads): an InvalidInputError, the
    threads that did start end, and a smaller count then computes as before."""
    import threading

    before = ctcop.get_num_threads()
    inputs, mask, labels = _batch()
    expected = ctcop.ctc_loss(inputs, mask, labels)
    start = threading.Thread.start
    started: list[threading.Thread] = []

    def refusing(thread: threading.Thread) -> None:
        if thread.name.startswith("ctcop") and len(started) >= 3:
            raise RuntimeError("can't start new thread")
        start(thread)
        if thread.name.startswith("ctcop"):
            started.append(thread)

    try:
        ctcop.set_num_threads(16)
        monkeypatch.setattr(scheduler, "PARALLEL_WORK", 0)  # the small batch goes to the pool too
        monkeypatch.setattr(threading.Thread, "start", refusing)
        with pytest.raises(ctcop.InvalidInputError, match="could not start 16 threads"):
            ctcop.ctc_loss(inputs, mask, labels)
        monkeypatch.undo()
        assert started and not any(thread.is_alive() for thread in started)
        ctcop.set_num_threads(2)
        np.testing.assert_array_equal(ctcop.ctc_loss(inputs, mask, labels), expected)
    finally:
        monkeypatch.undo()
        ctcop.set_num_threads(before)
