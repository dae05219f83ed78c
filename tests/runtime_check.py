"""Comparison of a runtime's losses with the reference, at the tolerances of the export issues."""

import numpy as np

import ctcop
from ctcop.runtimes import RUNTIMES

TOLERANCE = {"float16": (1e-3, 1e-2), "float32": (1e-5, 1e-4), "float64": (1e-9, 1e-12)}
FLOAT32_MAX = float(np.finfo(np.float32).max)
# Runtimes that compute through OpenVINO's CPU plugin, which has defects D4/D5 (spec 12.2) for
# float64: inputs rounded to float32 (+-inf saturated to +-FLT_MAX), float32 arithmetic, and +inf
# saturated to FLT_MAX in float64 outputs.
OPENVINO_CPU = {"openvino-onnx", "openvino-ir", "openvino-custom", "openvino"}


def assert_close_to_reference(got: np.ndarray, expected: np.ndarray, dtype: str, where: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, where
    assert np.array_equal(np.isnan(got), np.isnan(expected)), f"{where}: NaN pattern {got} vs {expected}"
    assert np.array_equal(got[np.isinf(expected)], expected[np.isinf(expected)]), f"{where}: {got} vs {expected}"
    finite = np.isfinite(expected)
    assert np.isfinite(got[finite]).all(), f"{where}: {got} vs {expected}"
    np.testing.assert_allclose(got[finite], expected[finite], rtol=rtol, atol=atol, err_msg=where)


def assert_runtime_matches(runtime: str, got: np.ndarray, case) -> None:
    """``got`` from ``runtime`` on ``case`` against the reference, with OpenVINO's float64
    limitations (D4/D5) applied to the expectation, and only to it."""
    dtype = case.inputs.dtype.name
    expected = ctcop.ctc_loss(case.inputs, case.sequence_mask, case.labels, **case.attributes)
    if runtime in OPENVINO_CPU and dtype == "float64":
        got = np.where(got == FLOAT32_MAX, np.inf, got)
        as_float32 = np.clip(case.inputs, -FLOAT32_MAX, FLOAT32_MAX).astype(np.float32)
        expected = ctcop.ctc_loss(as_float32, case.sequence_mask, case.labels, **case.attributes)
        dtype = "float32"
    assert_close_to_reference(got, expected, dtype, f"{runtime} {case.name} {case.inputs.dtype.name}")


def run(runtime: str, case) -> np.ndarray:
    """``case`` through the adapter of ``runtime``."""
    return RUNTIMES[runtime](case.inputs, case.sequence_mask, case.labels, **case.attributes)
