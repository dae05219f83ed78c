"""A runtime's losses against the reference, through ctcop's one comparison rule.

The only allowance is for OpenVINO's CPU plugin on float64 models (spec 12.2 D4/D5), and it is
applied to the expectation: inputs rounded to float32, float32 tolerance, and +inf saturated to a
large finite value whose exact constant depends on the plugin's inference precision.
"""

import ml_dtypes
import numpy as np

import ctcop
from ctcop.conformance.case import reference_loss
from ctcop.conformance.protocol import outcome
from ctcop.conformance.runtimes import RUNTIMES
from ctcop.tolerance import compare

FLOAT32_MAX = float(np.finfo(np.float32).max)
# D5 on CPUs whose plugin infers in bfloat16 by default (AVX-512-BF16, AMX): bfloat16's largest.
BFLOAT16_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
SATURATED = (FLOAT32_MAX, BFLOAT16_MAX)
OPENVINO_CPU = {"openvino-onnx", "openvino-ir", "openvino-custom", "openvino"}


def assert_close_to_reference(got: np.ndarray, expected: np.ndarray, dtype: str, where: str) -> None:
    problem = compare(got, expected, dtype)
    assert problem is None, f"{where}: {problem}"


def assert_runtime_matches(runtime: str, got: np.ndarray, case) -> None:
    """``got`` from ``runtime`` on ``case`` against the reference, with OpenVINO's float64
    limitations (D4/D5) applied to the expectation, and only to it."""
    dtype = case.tolerance
    expected = ctcop.ctc_loss(**case.inputs, **case.attributes)
    if runtime in OPENVINO_CPU and dtype == "float64":
        got = np.where(np.isin(got, SATURATED), np.inf, got)
        as_float32 = np.clip(case.inputs["inputs"], -FLOAT32_MAX, FLOAT32_MAX).astype(np.float32)
        expected = ctcop.ctc_loss(as_float32, case.inputs["sequence_mask"], case.inputs["labels"], **case.attributes)
        dtype = "float32"
    assert_close_to_reference(got, expected, dtype, f"{runtime} {case.id} {case.logits_dtype}")


def run(runtime: str, case) -> np.ndarray:
    """``case`` through the adapter of ``runtime``."""
    return outcome(RUNTIMES[runtime].run(case)).loss


def expected_for(runtime: str, case) -> tuple[np.ndarray, str]:
    """The loss a conforming ``runtime`` gives for the corpus ``case`` (a
    :class:`ctcop.conformance.case.Case` with a value) and the element type whose tolerance
    applies: the case's expected loss, or for OpenVINO's CPU plugin on float64 logits (D4) the
    reference on the logits rounded to float32, at float32's tolerance."""
    dtype = case.tolerance
    if runtime not in OPENVINO_CPU or dtype != "float64":
        return case.expected_loss, dtype
    logits = case.logits_name
    inputs = {**case.inputs, logits: np.clip(case.inputs[logits], -FLOAT32_MAX, FLOAT32_MAX).astype(np.float32)}
    return reference_loss(case.form, inputs, case.attributes), "float32"


def assert_case_matches(runtime: str, case) -> None:
    """``RUNTIMES[runtime].run(case)`` against the corpus case's expected loss, with OpenVINO's
    float64 limitations (D4/D5) applied to the expectation, and only to it."""
    got = outcome(RUNTIMES[runtime].run(case)).loss
    expected, dtype = expected_for(runtime, case)
    if runtime in OPENVINO_CPU and case.tolerance == "float64":
        got = np.where(np.isin(got, SATURATED), np.inf, got)
    assert_close_to_reference(got, expected, dtype, f"{runtime} {case.id}")
