"""Comparison of a runtime's losses with the reference, at the tolerances of the export issues."""

import numpy as np

TOLERANCE = {"float16": (1e-3, 1e-2), "float32": (1e-5, 1e-4), "float64": (1e-9, 1e-12)}


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
