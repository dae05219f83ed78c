"""The raw native kernel (runtime "openvino") still shows the defects listed in spec 12.2.

These tests pass while the defects exist; when an OpenVINO release fixes one, its test fails and
spec 12.2 (and the lowering's guard) must be revisited. The guarded exports are tested elsewhere.
"""

import math
import subprocess
import sys

import numpy as np
import pytest

from ctcop.runtimes import RUNTIMES

native = RUNTIMES["openvino"]


def test_d1_empty_target_kills_the_process() -> None:
    code = (
        "import numpy as np; from ctcop.runtimes import RUNTIMES; "
        "RUNTIMES['openvino'](np.zeros((1, 1, 2), np.float32), np.ones((1, 1), np.int64), np.array([[-1]]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    assert result.returncode < 0, "OpenVINO no longer crashes on an empty target: revisit spec 12.2 D1"
    assert RUNTIMES["openvino-ir"](np.zeros((1, 1, 2), np.float32), np.ones((1, 1), np.int64), np.array([[-1]]))[0] == (
        pytest.approx(math.log(2), rel=1e-6)
    )


def test_d2_target_longer_than_frames_raises() -> None:
    with pytest.raises(RuntimeError, match="Label length cannot be greater than a logit length"):
        native(np.zeros((1, 1, 2), np.float32), np.zeros((1, 1), np.int64), np.array([[0]]))


@pytest.mark.parametrize(
    ("logits", "wrong", "right"),
    [([0.0, 100.0], np.inf, 100.0), ([-200.0, -201.0], np.nan, math.log1p(math.exp(-1)))],
)
def test_d3_logits_are_exponentiated_unshifted(logits: list[float], wrong: float, right: float) -> None:
    inputs = np.array([[logits]], np.float32)
    got = native(inputs, np.ones((1, 1), np.int64), np.array([[0]]))[0]
    assert got == wrong or (np.isnan(wrong) and np.isnan(got))
    assert RUNTIMES["openvino-ir"](inputs, np.ones((1, 1), np.int64), np.array([[0]]))[0] == pytest.approx(right)
