"""The Python API under a hostile caller: numpy's error state set to raise, arrays whose
``__array__`` raises, malformed exporter options. Valid input gives its value, invalid input
``InvalidInputError`` naming the input; nothing else escapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import ctcop
from ctcop.onnx import onnx_model
from ctcop.openvino import ir_model

MASK = np.ones((3, 1), np.int32)
LABELS = np.array([[0, -1, -1]])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.bfloat16, np.float64])
def test_numpy_set_to_raise_changes_no_result(dtype: Any) -> None:
    # A loss of about 1e-87 underflows to 0 when rounded to float32: rounding, not an error.
    inputs = np.array([[[200.0, 0.0, 0.0]], [[0.0, 0.0, 50.0]], [[0.0, -3.0, 1.0]]]).astype(dtype)
    expected = ctcop.ctc_loss(inputs, MASK, LABELS)
    expected_grad = ctcop.ctc_loss_grad(inputs, MASK, LABELS)[1]
    with np.errstate(all="raise"):
        loss = ctcop.ctc_loss(inputs, MASK, LABELS)
        _, grad = ctcop.ctc_loss_grad(inputs, MASK, LABELS)
        total = ctcop.ctc_loss_or_nan(inputs, MASK, LABELS)
        released = ctcop.openvino_ctc_loss(inputs.transpose(1, 0, 2), [3], [[0, 0, 0]], [1])
    np.testing.assert_array_equal(loss, expected)
    np.testing.assert_array_equal(total, expected)
    np.testing.assert_array_equal(released, expected)
    np.testing.assert_array_equal(grad, expected_grad)


class Refuses:
    """An array-like whose conversion raises (as a torch tensor that requires grad does)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise self.error


@pytest.mark.parametrize(
    "error", [RuntimeError("requires grad"), KeyError("x"), AttributeError("y"), NotImplementedError()]
)
def test_an_array_whose_conversion_raises_is_invalid_input(error: BaseException) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=r"^inputs: cannot be read as"):
        ctcop.ctc_loss(Refuses(error), MASK, LABELS)
    with pytest.raises(ctcop.InvalidInputError, match=r"^logits: cannot be read as"):
        ctcop.openvino_ctc_loss(Refuses(error), [3], [[0, 0, 0]], [1])


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: onnx_model(attributes=[("merge_repeated", True)]), "attributes"),
        (lambda: onnx_model(attributes="merge_repeated"), "attributes"),
        (lambda: onnx_model(dims=None), "dims"),
        (lambda: onnx_model(dims="TNC"), "dims"),
        (lambda: ir_model(dims=None), "dims"),
        (lambda: ir_model(form="custom", attributes=[1]), "attributes"),
    ],
)
def test_malformed_exporter_options_are_invalid_input(call: Callable[[], object], name: str) -> None:
    with pytest.raises(ctcop.InvalidInputError, match=rf"^{name}: "):
        call()


ADDRESS_SPACE_LIMIT = """
import resource, numpy as np, ctcop
ctcop.ctc_loss(np.zeros((2, 1, 3), np.float32), np.ones((2, 1), np.int32), np.array([[0, -1]]))
with open("/proc/self/statm") as statm:
    size = int(statm.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + 2**30, resource.RLIM_INFINITY))  # 1 GiB more
frames = 2**27  # 2**28 elements of logits: 2 GiB of working memory
try:
    ctcop.ctc_loss(np.broadcast_to(np.float16(0), (frames, 1, 2)), np.broadcast_to(np.int8(1), (frames, 1)),
                   np.broadcast_to(np.int8(-1), (1, frames)))
except ctcop.InvalidInputError as error:
    print(error)
"""


def test_inputs_beyond_what_ulimit_leaves_are_refused_before_allocating() -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", ADDRESS_SPACE_LIMIT], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("inputs: shape (134217728, 1, 2) needs "), result.stdout
    assert "this process may use" in result.stdout


def test_an_allocation_that_fails_during_the_computation_is_invalid_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctcop.core import scheduler

    def fails(*args: object, **kwargs: object) -> None:
        raise MemoryError("Unable to allocate 9 GiB")

    monkeypatch.setattr(scheduler, "time_major_losses", fails)
    inputs = np.zeros((3, 1, 3), np.float32)
    with pytest.raises(ctcop.InvalidInputError, match=r"^inputs: needs more memory than this process could allocate"):
        ctcop.ctc_loss(inputs, MASK, LABELS)
