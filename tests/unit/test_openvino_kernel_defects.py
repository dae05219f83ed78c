"""The raw native kernel (runtime "openvino") and the CPU plugin against the OpenVINO defects of
spec 12.2 (registry ids D1-D7).

Each test checks a registered defect against the installed version (``reproduces``): on the
version the registry was measured on the defect must show, on another one a defect that no longer
shows is a re-measure warning (then spec 12.2 and the lowering's guard can be revisited). What the
guarded exports give is asserted on every version; they are tested further elsewhere.
"""

import math
import signal
import subprocess
import sys

import numpy as np
import openvino
import openvino.opset15 as ops
import pytest
from support.registered import reproduces
from support.runtime_check import FLOAT32_MAX

from ctcop.conformance.cases import edge_cases
from ctcop.conformance.runtimes import RUNTIMES
from ctcop.openvino import ir_model
from ctcop.openvino import openvino_extensions as ctcop_extensions

native = RUNTIMES["openvino"]


def test_d1_empty_target_kills_the_process_or_gives_a_wrong_loss() -> None:
    code = (
        "import numpy as np; from ctcop.conformance.runtimes import RUNTIMES; "
        "print(RUNTIMES['openvino'](np.zeros((1, 1, 2), np.float32), np.ones((1, 1), np.int64), np.array([[-1]]))[0])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    died = result.returncode < 0
    wrong = result.returncode == 0 and float(result.stdout.split()[-1]) != pytest.approx(math.log(2), rel=1e-6)
    if reproduces("D1", died or wrong) and died:  # the corrupted heap: SIGSEGV, or an abort in a later free
        assert -result.returncode in (signal.SIGSEGV, signal.SIGABRT), result.stderr
    assert RUNTIMES["openvino-ir"](np.zeros((1, 1, 2), np.float32), np.ones((1, 1), np.int64), np.array([[-1]]))[0] == (
        pytest.approx(math.log(2), rel=1e-6)
    )


def test_d2_target_longer_than_frames_raises() -> None:
    inputs = (np.zeros((1, 1, 2), np.float32), np.zeros((1, 1), np.int64), np.array([[0]]))
    try:
        native(*inputs)
    except RuntimeError as error:
        message: str | None = str(error)
    else:
        message = None
    if reproduces("D2", message is not None):
        assert "Label length cannot be greater than a logit length" in str(message)
    assert RUNTIMES["openvino-ir"](*inputs)[0] == np.inf


@pytest.mark.parametrize(
    ("logits", "wrong", "right"),
    [([0.0, 100.0], np.inf, 100.0), ([-200.0, -201.0], np.nan, math.log1p(math.exp(-1)))],
)
def test_d3_logits_are_exponentiated_unshifted(logits: list[float], wrong: float, right: float) -> None:
    inputs = np.array([[logits]], np.float32)
    got = native(inputs, np.ones((1, 1), np.int64), np.array([[0]]))[0]
    if reproduces("D3", not np.isclose(got, right)):
        assert got == wrong or (np.isnan(wrong) and np.isnan(got))
    assert RUNTIMES["openvino-ir"](inputs, np.ones((1, 1), np.int64), np.array([[0]]))[0] == pytest.approx(right)


@pytest.mark.parametrize("hint", ["f32", "bf16"])
def test_d5_float64_outputs_saturate_infinity(hint: str) -> None:
    # D5 is a property of the CPU plugin (spec 12.2): +inf in a float64 output becomes float32's
    # largest value, under f32 and under bf16 inference precision (the default on AVX-512-BF16 and
    # AMX CPUs, asked for here explicitly; a CPU without bfloat16 may refuse the hint or fall back
    # to f32). ctcop's lowering makes its +inf at run time; an inf *constant* under bf16
    # became bfloat16's largest instead (D7, below).
    core = openvino.Core()
    model = ir_model(dtype="float64")
    try:
        compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
    except RuntimeError:
        assert hint == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        return
    infeasible = next(c for c in edge_cases() if c.id == "infeasible_too_long")
    got = compiled(
        [infeasible.inputs["inputs"], infeasible.inputs["sequence_mask"].astype(np.int32), infeasible.inputs["labels"]]
    )[0]
    in_bfloat16 = compiled.get_property("INFERENCE_PRECISION_HINT") == openvino.Type.bf16
    # bf16 only where asked; where the CPU lists BF16 it is taken, and a CPU with AVX-512 but no
    # BF16 instructions may take it too (emulated), so there the compiled precision is read back
    assert not in_bfloat16 or hint == "bf16"
    assert in_bfloat16 or hint != "bf16" or "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if reproduces("D5", got[1] != np.inf):
        assert got[1] == got[2] == FLOAT32_MAX


def test_d7_inf_and_nan_constants_become_65504_under_float16_inference_precision() -> None:
    # D7 (spec 12.2): under f16 inference precision (the default on ARM CPUs; asked for here) the
    # plugin converts a float32 model's constants to float16 with saturation, NaN included, so
    # Select(c, inf or NaN constant, x) gives 65504; the same values computed at run time (1/0,
    # 0/0) survive. The lowering therefore makes its +inf and NaN at run time.
    core = openvino.Core()
    if "FP16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("this CPU has no float16 inference precision")
    x = ops.parameter([2], np.float32)
    zeros = ops.multiply(x, ops.constant(np.float32(0.0)))
    constants = [ops.constant(np.float32(v)) for v in (np.inf, np.nan)]
    computed = [ops.divide(ops.constant(np.float32(1.0)), zeros), ops.divide(zeros, zeros)]
    take = ops.constant(np.array([True, False]))
    results = [ops.result(ops.select(take, value, x)) for value in [*constants, *computed]]
    compiled = core.compile_model(openvino.Model(results, [x]), "CPU", {"INFERENCE_PRECISION_HINT": "f16"})
    constant_inf, constant_nan, computed_inf, computed_nan = (r[0] for r in compiled([np.ones(2, np.float32)]).values())
    if reproduces("D7", constant_inf != np.inf):
        assert constant_inf == constant_nan == 65504.0
    assert computed_inf == np.inf and np.isnan(computed_nan)


def test_d6_int64_inputs_reach_integer_operators_wrapped_to_int32() -> None:
    # D6 (spec 12.2): the CPU plugin computes int64 (and uint64, uint32) in int32, wrapping the
    # input values (2**32 reads as 0), before an integer operator or a custom op's evaluate sees
    # them; a Convert straight to float32 still reads the true value, which is how the lowering
    # tests labels and mask values. The custom layer sees the wrapped values.
    x = ops.parameter([3], np.int64)
    model = openvino.Model([ops.result(ops.convert(x, "f32")), ops.result(ops.convert(ops.negative(x), "f32"))], [x])
    direct, negated = openvino.Core().compile_model(model, "CPU")([np.array([2**32, 2**32 + 5, 7])]).values()
    assert direct.tolist() == [2.0**32, 2.0**32, 7.0]
    if reproduces("D6", negated[0] != -(2.0**32)):
        assert negated.tolist() == [0.0, -5.0, -7.0]


def test_d6_the_custom_layer_alone_sees_wrapped_labels() -> None:
    # Why ir_model(form="custom") guards its layer: a model of the bare layer reads label 2**32 as 0
    # and label 2**32 - 1 as the pad -1 (both must give NaN, rule 3.3).
    from ctcop.openvino.custom_op import CTCLossOp

    x, mask, labels = (
        ops.parameter([2, 3, 3], np.float32),
        ops.parameter([2, 3], np.int32),
        ops.parameter([3, 2], np.int64),
    )
    model = openvino.Model([ops.result(CTCLossOp([x.output(0), mask.output(0), labels.output(0)]))], [x, mask, labels])
    inputs = np.zeros((2, 3, 3), np.float32)
    feeds = [inputs, np.ones((2, 3), np.int32), np.array([[2**32, -1], [0, -1], [2**32 - 1, -1]])]
    got = openvino.Core().compile_model(model, "CPU")(feeds)[0]
    if reproduces("D6", got[0] == got[1], "the custom layer"):
        assert got[0] == got[1] and got[2] == pytest.approx(2 * math.log(3))
    guarded = openvino.Core()
    for extension in ctcop_extensions():
        guarded.add_extension(extension)
    custom = guarded.compile_model(ir_model(form="custom"), "CPU")(feeds)[0]
    assert np.isnan(custom[0]) and np.isnan(custom[2]) and custom[1] == got[1]
