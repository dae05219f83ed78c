"""The export routes' tests' shared parts (tests/integration/*/test_inf_export_*.py): the batch
with infeasible samples, OpenVINO's CPU compilation under each config and the loss comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import openvino

import ctcop
from ctcop.tolerance import compare

CONFIGS = {"f32": {"INFERENCE_PRECISION_HINT": "f32"}, "default": {}}
REDUCED = (openvino.Type.bf16, openvino.Type.f16)


def compiled_for(model: Any, config: str) -> tuple[Any, Any]:
    """``model`` (an openvino.Model or an ONNX file's path, read with ctcop's extensions)
    compiled on "CPU" under ``config``, and the inference precision it was compiled at."""
    core = openvino.Core()
    for extension in ctcop.openvino_extensions():
        core.add_extension(extension)
    read = core.read_model(str(model)) if isinstance(model, Path) else model
    compiled = core.compile_model(read, "CPU", CONFIGS[config])
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    assert precision == openvino.Type.f32 or (config == "default" and precision in REDUCED), precision
    return compiled, precision


def assert_losses(got: Any, expected: Any, precision: Any, where: str) -> None:
    """+inf and NaN exactly where ``expected`` has them; the finite values by the float32 rule
    under f32 inference precision, finite under a reduced one (the model's own layers round)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, where
    assert np.array_equal(np.isposinf(got), np.isposinf(expected)), (where, got, expected)
    assert np.array_equal(np.isnan(got), np.isnan(expected)), (where, got, expected)
    if precision == openvino.Type.f32:
        assert compare(got, expected, "float32") is None, (where, got, expected)
    else:
        assert np.isfinite(got[np.isfinite(expected)]).all(), (where, got, expected)


T, N, C, FEATURES = 4, 3, 5, 6
RNG = np.random.default_rng(3)
LOGITS = RNG.normal(size=(T, N, C)).astype(np.float32)
MASK = np.array([[1, 1, 1], [1, 0, 1], [1, 0, 1], [1, 0, 0]], np.int32)
# sample 1: two labels, one frame; sample 2: three repeats need five frames, it has three
LABELS = np.array([[1, 2, -1, -1], [1, 2, -1, -1], [3, 3, 3, -1]], np.int64)
X = RNG.normal(size=(T, N, FEATURES)).astype(np.float32)
WEIGHTS = RNG.normal(size=(FEATURES, C)).astype(np.float32)
