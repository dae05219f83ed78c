"""The framework peers (``ctcop.conformance.peers``) without a framework: importing them loads
none, and the suite's per-sample gradient rule (:func:`ctcop.conformance.verdict.compare_grad`)
that judges their gradients. Each framework's peers are tested against the reference in
tests/integration/<framework>/test_peers_<framework>.py.
"""

import subprocess
import sys

import numpy as np

from ctcop.conformance import verdict


def test_importing_the_peers_loads_no_framework() -> None:
    heavy = "{'torch', 'tensorflow', 'jax', 'optax', 'paddle'}"
    code = f"import sys, ctcop.conformance.peers; print(sorted({heavy} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "[]", result.stderr


def test_the_gradient_rule() -> None:
    expected = np.zeros((2, 2, 3))
    expected[:, 1] = np.nan
    loss = np.array([600.0, np.nan])
    got = expected.copy()
    got[0, 0, 0] = 32 * 2.0**-52 * 600 * 0.99  # within 32 eps max(1, |loss|)
    assert verdict.compare_grad(got, expected, loss, "float64", sample_axis=1) is None
    got[0, 0, 0] *= 1.02
    assert verdict.compare_grad(got, expected, loss, "float64", sample_axis=1).startswith("gradient at [0, 0, 0]")
    got[0, 0, 0], got[1, 1, 2] = 0.0, 0.0  # NaN expected, a number given
    assert "1 of 12 entries off" in verdict.compare_grad(got, expected, loss, "float64", sample_axis=1)
