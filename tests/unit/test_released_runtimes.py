"""Released-form cases (spec 7) in every runtime, in their own form.

The ONNX runtimes run ``ctcop.onnx.released_model`` (standard operators in front of ctcop's node)
and agree with the reference on every released corpus case; invalid released input gives NaN for
the offending sample (every sample for a bad ``blank_index`` or disagreeing shapes) and leaves
the others alone; the raw ``openvino`` runtime hands the case's own inputs (``blank_index``,
``unique``) to OpenVINO's kernel; ctcop's IR layers are Unsupported for released cases.
"""

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from support.runtime_check import assert_case_matches

import ctcop
from ctcop.attributes import Attributes
from ctcop.conformance import corpus
from ctcop.conformance.case import Case
from ctcop.conformance.protocol import Outcome, Unsupported, outcome
from ctcop.conformance.runtimes import OPENVINO_PROVIDER, RUNTIMES
from ctcop.onnx import released_model
from ctcop.tolerance import compare

CASES = {case.id: case for case in corpus.select(corpus.load_all(), ["released"])}
VALUES = [case_id for case_id, case in CASES.items() if case.expect == "value"]
REJECTS = [case_id for case_id, case in CASES.items() if case.expect == "reject"]
ONNX_RUNTIMES = ("onnxruntime", "onnx-reference")
RELEASED = ("logits", "logit_length", "labels", "label_length")


def per_sample_or_nan(inputs: dict[str, np.ndarray], attributes) -> np.ndarray:
    """What the released model computes (spec 11.5, released form): the reference per sample,
    NaN for a sample the reference refuses; every sample NaN when the lengths or labels are not
    [N], [N, T], [N] (then no sample can be read on its own) or ``blank_index`` is refused."""
    logits = inputs["logits"]
    n, t = logits.shape[:2]
    shapes = [inputs[name].shape for name in RELEASED[1:]]
    if shapes != [(n,), (n, t), (n,)]:
        return np.full(n, np.nan, dtype=logits.dtype)
    out = np.empty(n, dtype=logits.dtype)
    for i in range(n):
        one = [inputs[name][i : i + 1] for name in RELEASED]
        try:
            out[i] = ctcop.openvino_ctc_loss(*one, inputs.get("blank_index"), **attributes)[0]
        except ctcop.InvalidInputError:
            out[i] = np.nan
    return out


@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
@pytest.mark.parametrize("case_id", VALUES)
def test_every_released_case_agrees_with_the_reference(runtime: str, case_id: str) -> None:
    case = CASES[case_id]
    if case.tolerance == "bfloat16":
        with pytest.raises(Unsupported, match="bfloat16"):
            RUNTIMES[runtime].run(case)
        return
    got = outcome(RUNTIMES[runtime].run(case)).loss
    assert got.dtype == case.expected_loss.dtype
    problem = compare(got, case.expected_loss, case.tolerance)
    assert problem is None, f"{runtime} {case_id}: {problem}"


@pytest.mark.parametrize("runtime", ONNX_RUNTIMES)
@pytest.mark.parametrize("case_id", REJECTS)
def test_invalid_released_input_nans_its_sample(runtime: str, case_id: str) -> None:
    case = CASES[case_id]
    with pytest.raises(ctcop.InvalidInputError):
        RUNTIMES["reference"].run(case)
    got = outcome(RUNTIMES[runtime].run(case)).loss
    expected = per_sample_or_nan(case.inputs, case.attributes)
    assert np.isnan(expected).any()
    assert compare(got, expected, "float32") is None, f"{runtime} {case_id}: {got} vs {expected}"


def test_the_reference_answers_released_cases_with_the_gradient() -> None:
    case = CASES["released/flags_collapse_unique/int64/float64"]
    answer = RUNTIMES["reference"].run(case)
    assert isinstance(answer, Outcome)
    assert answer.grad is not None and answer.grad.shape == case.inputs["logits"].shape
    assert compare(answer.loss, case.expected_loss, "float64") is None
    assert compare(answer.grad, case.expected_grad, "float64") is None


@pytest.mark.parametrize("case_id", [i for i in VALUES if CASES[i].tolerance != "bfloat16"])
def test_openvino_onnx_runs_the_released_model(case_id: str) -> None:
    """Every released case through OpenVINO with ctcop's extension: float16 and float32 as the
    reference; float64 under the plugin's float32 arithmetic (spec 12.2 D4/D5)."""
    assert_case_matches("openvino-onnx", CASES[case_id])


def test_openvino_onnx_nans_invalid_released_input() -> None:
    bad = CASES["invalid/released/label_is_blank_in_prefix"]
    got = outcome(RUNTIMES["openvino-onnx"].run(bad)).loss
    assert compare(got, per_sample_or_nan(bad.inputs, bad.attributes), "float32") is None


def test_ctcops_custom_ir_layer_is_unsupported_for_released_cases() -> None:
    with pytest.raises(Unsupported, match="time-major"):
        RUNTIMES["openvino-custom"].run(CASES["released/flags_default/int64/float32"])


def test_every_runtime_is_available_here_and_the_openvino_provider_where_installed() -> None:
    found = {name: runtime.available() for name, runtime in RUNTIMES.items()}
    provider = found.pop("onnxruntime-openvino")
    assert found == dict.fromkeys(found)
    if OPENVINO_PROVIDER in onnxruntime.get_available_providers():
        assert provider is None
    else:  # onnxruntime-openvino replaces onnxruntime: its row runs in a venv of its own
        assert provider is not None and OPENVINO_PROVIDER in provider


# -- the raw kernel gets the case's own inputs -------------------------------------------------


def released_case(inputs: dict[str, np.ndarray], **attributes: bool) -> Case:
    """A released case over in-memory arrays."""
    return Case("released/probe", "released", inputs, Attributes.of(attributes, form_name="openvino"))


def probe_inputs(blank: int | None) -> dict[str, np.ndarray]:
    """Two samples with targets over classes 1..3 (valid whether the blank is 0 or 4), feasible,
    non-empty and with moderate logits: nothing the kernel's defects D1-D3 touch."""
    rng = np.random.default_rng(7)
    inputs = {
        "logits": rng.normal(size=(2, 5, 5)).astype(np.float32),
        "logit_length": np.array([5, 4], np.int32),
        "labels": np.array([[1, 3, 1, 2, 9], [2, 2, 3, 0, 0]], np.int32),
        "label_length": np.array([3, 3], np.int32),
    }
    if blank is not None:
        inputs["blank_index"] = np.array(blank, np.int32)
    return inputs


def test_the_native_kernel_receives_blank_index() -> None:
    first, last = released_case(probe_inputs(0)), released_case(probe_inputs(None))
    got = RUNTIMES["openvino"].run(first)
    expected = ctcop.openvino_ctc_loss(*(first.inputs[name] for name in RELEASED), first.inputs["blank_index"])
    assert compare(got, expected, "float32") is None
    default_blank = ctcop.openvino_ctc_loss(*(last.inputs[name] for name in RELEASED))
    assert compare(RUNTIMES["openvino"].run(last), default_blank, "float32") is None
    assert compare(expected, default_blank, "float32") is not None  # the blank made a difference


def test_the_native_kernel_receives_unique_and_bfloat16() -> None:
    case = released_case(probe_inputs(0), unique=True, preprocess_collapse_repeated=True)
    expected = ctcop.openvino_ctc_loss(*(case.inputs[name] for name in RELEASED), 0, unique=True)
    assert compare(RUNTIMES["openvino"].run(case), expected, "float32") is None
    assert compare(ctcop.openvino_ctc_loss(*(case.inputs[name] for name in RELEASED), 0), expected, "float32")
    bfloat16 = CASES["released/flags_default/int32/bfloat16"]
    got = RUNTIMES["openvino"].run(bfloat16)
    assert isinstance(got, np.ndarray) and got.dtype.name == "bfloat16"
    assert compare(got, bfloat16.expected_loss, "bfloat16") is None


# -- the released model itself -----------------------------------------------------------------


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime

    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_the_released_model_is_checked_and_typed() -> None:
    model = released_model(dtype="float16", index_dtype={"labels": "uint8", "logit_length": "int16"}, blank_index=True)
    onnx.checker.check_model(model, full_check=True)
    types = {value.name: value.type.tensor_type.elem_type for value in model.graph.input}
    assert types == {
        "logits": onnx.TensorProto.FLOAT16,
        "logit_length": onnx.TensorProto.INT16,
        "labels": onnx.TensorProto.UINT8,
        "label_length": onnx.TensorProto.INT64,
        "blank_index": onnx.TensorProto.INT64,
    }
    with pytest.raises(ctcop.InvalidInputError):
        released_model(dtype="bfloat16")
    with pytest.raises(ctcop.InvalidInputError):
        released_model(index_dtype="float32")
    fixed = released_model(dims=(2, 5, 5), blank_index=True, attributes={"unique": True})
    feeds = {name: value.astype(np.int64) if name != "logits" else value for name, value in probe_inputs(0).items()}
    expected = ctcop.openvino_ctc_loss(*(feeds[name] for name in RELEASED), 0, unique=True)
    assert compare(run_model(fixed, feeds), expected, "float32") is None


def test_faults_with_no_frames_and_wide_values() -> None:
    """T = 0 leaves no label position or mask entry to carry a fault: the NaN is set after the
    node. Values beyond int64 (uint64) and far outside [0, C-1] are faults, never wrapped."""
    model = released_model(index_dtype="uint64", blank_index=True)
    feeds = {
        "logits": np.zeros((3, 0, 2), np.float32),
        "logit_length": np.array([0, 1, 0], np.uint64),
        "labels": np.zeros((3, 0), np.uint64),
        "label_length": np.array([0, 0, 2**64 - 1], np.uint64),
        "blank_index": np.array(1, np.uint64),
    }
    assert compare(run_model(model, feeds), [0.0, np.nan, np.nan], "float32") is None
    feeds["blank_index"] = np.array(2**64 - 1, np.uint64)
    assert np.isnan(run_model(model, feeds)).all()


def test_a_faulty_sample_leaves_the_others_bit_identical() -> None:
    rng = np.random.default_rng(3)
    feeds = {name: value.astype(np.int64) if name != "logits" else value for name, value in probe_inputs(2).items()}
    feeds["logits"] = rng.normal(size=(2, 5, 40)).astype(np.float32)  # the Gather path of the node (C > 32)
    model = released_model(blank_index=True, attributes={"ctc_merge_repeated": False})
    clean = run_model(model, feeds)
    for broken in ({"labels": [[1, 3, 2, 2, 9], [2, 2, 3, 0, 0]]}, {"label_length": [-1, 3]}, {"logit_length": [6, 4]}):
        name, value = next(iter(broken.items()))
        got = run_model(model, {**feeds, name: np.array(value, np.int64)})
        assert np.isnan(got[0]) and got[1].tobytes() == clean[1].tobytes()
    expected = per_sample_or_nan(feeds, {"ctc_merge_repeated": False})
    assert compare(clean, expected, "float32") is None


def random_released(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Released inputs of a random size, valid but for one entry made invalid half of the time."""
    n, t, c = int(rng.integers(0, 4)), int(rng.integers(0, 6)), int(rng.choice([1, 2, 4, 40]))
    blank = int(rng.integers(0, c))
    labels = rng.integers(0, max(c - 1, 1), size=(n, t))
    feeds = {
        "logits": (rng.normal(size=(n, t, c)) * 3).astype(np.float32),
        "logit_length": rng.integers(0, t + 1, size=n),
        "labels": labels + (labels >= blank),
        "label_length": rng.integers(0, t + 1, size=n),
        "blank_index": np.array(blank),
    }
    name = str(rng.choice(["logit_length", "label_length", "labels", "blank_index"]))
    if rng.random() < 0.5 and feeds[name].size:
        flat = feeds[name].reshape(-1)
        flat[rng.integers(flat.size)] = rng.choice([-1, t + 1, c, blank, 2**40])
    return feeds


def test_random_released_input_matches_the_per_sample_reference() -> None:
    rng = np.random.default_rng(11)
    for _ in range(60):
        names = ("preprocess_collapse_repeated", "ctc_merge_repeated", "unique")
        attributes = {name: bool(rng.integers(2)) for name in names}
        feeds = random_released(rng)
        got = outcome(RUNTIMES["onnxruntime"].run(released_case(feeds, **attributes))).loss
        assert compare(got, per_sample_or_nan(feeds, attributes), "float32") is None, (feeds, attributes)


@pytest.mark.parametrize("hint", ["f32", "f16"])
def test_openvino_reads_wide_int64_released_values(tmp_path: Path, hint: str) -> None:
    """OpenVINO's CPU plugin wraps int64 inputs to int32 before an integer operator sees them
    (spec 12.2 D6): the released model casts each to float64 first, so 2**32 + k is a fault, not
    k; NaN survives f16 inference precision (D7)."""
    from ctcop.openvino import compiled_precision, openvino_core

    path = tmp_path / "released.onnx"
    path.write_bytes(released_model(blank_index=True).SerializeToString())
    core = openvino_core()
    try:
        compiled = core.compile_model(core.read_model(str(path)), "CPU", {"INFERENCE_PRECISION_HINT": hint})
    except RuntimeError:
        pytest.skip(f"this CPU has no {hint_dtype(hint)} inference precision (it refuses the {hint} hint)")
    feeds = {name: value.astype(np.int64) if name != "logits" else value for name, value in probe_inputs(0).items()}
    clean = np.asarray(compiled(feeds)[0])
    # an f16 hint compiles as bf16 on an x86 CPU without FP16, and as f32 on one without either
    offered = set(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    reduced = "f16" if "FP16" in offered else "bf16" if "BF16" in offered else "f32"
    ran = compiled_precision(compiled)
    assert ran == ("f32" if hint == "f32" else reduced), ran
    expected = ctcop.openvino_ctc_loss(*(feeds[name] for name in RELEASED), 0)
    assert compare(clean, expected, {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[ran]) is None
    for name, value in (
        ("labels", [[1, 2**32 + 3, 1, 2, 9], [2, 2, 3, 0, 0]]),
        ("label_length", [2**32 + 3, 3]),
        ("logit_length", [2**32 + 5, 4]),
    ):
        got = np.asarray(compiled({**feeds, name: np.array(value, np.int64)})[0])
        assert np.isnan(got[0]) and got[1] == clean[1], name


def hint_dtype(hint: str) -> str:
    return {"f32": "float32", "f16": "float16"}[hint]
