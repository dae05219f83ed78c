"""The released form (spec 7) lowered onto stock OpenVINO operators (``ctcop.openvino.released``):
every released corpus case through the IR a stock ``openvino.Core`` reads, ``blank_index`` absent,
a constant or a graph input, every attribute combination, and NaN, never a crash or a number, for
invalid released input (spec 11.5); ``ctcop export --format ir --form released``."""

import itertools
from functools import cache

import numpy as np
import openvino
import openvino.opset15 as ops
import pytest
from support.cli import ctcop_cli
from support.runtime_check import FLOAT32_MAX, SATURATED

import ctcop
from ctcop.attributes import Attributes
from ctcop.conformance import corpus
from ctcop.openvino import declared_precision_config
from ctcop.openvino.released import ReleasedInputs, compiled_released_model, released_ir_model, released_loss
from ctcop.schema import form
from ctcop.tolerance import compare

CASES = {case.id: case for case in corpus.select(corpus.load_all(), ["released"]) if case.tolerance != "bfloat16"}
VALUES = [case_id for case_id, case in CASES.items() if case.expect == "value"]
REJECTS = [case_id for case_id, case in CASES.items() if case.expect == "reject"]
NAMES = form("openvino").input_names
FLAGS = [
    dict(zip(("preprocess_collapse_repeated", "ctc_merge_repeated", "unique"), combo, strict=True))
    for combo in itertools.product((False, True), repeat=3)
]

compiled = cache(compiled_released_model)


def run(inputs: dict[str, np.ndarray], attributes: Attributes, build=compiled) -> np.ndarray:
    """The released IR, compiled for the inputs' element types (cached), on ``inputs``."""
    types = tuple((name, inputs[name].dtype.name) for name in NAMES if name in inputs)
    return np.asarray(build(types, attributes)(dict(inputs), share_inputs=False)[0])


def per_sample_or_nan(inputs: dict[str, np.ndarray], attributes) -> np.ndarray:
    """The contract of spec 11.5 (released form): the reference per sample, NaN where it refuses
    the sample; every sample NaN for lengths or labels that are not [N], [N, T], [N]."""
    logits = inputs["logits"]
    n, t = logits.shape[:2]
    if [inputs[name].shape for name in NAMES[1:4]] != [(n,), (n, t), (n,)]:
        return np.full(n, np.nan, dtype=logits.dtype)
    out = np.empty(n, dtype=logits.dtype)
    for i in range(n):
        one = [inputs[name][i : i + 1] for name in NAMES[:4]]
        try:
            out[i] = ctcop.openvino_ctc_loss(*one, inputs.get("blank_index"), **attributes)[0]
        except ctcop.InvalidInputError:
            out[i] = np.nan
    return out


def expected(inputs: dict[str, np.ndarray], attributes) -> tuple[np.ndarray, str]:
    """The reference and the tolerance that applies: float64 logits as the CPU plugin computes
    them, in float32 (spec 12.2 D4)."""
    dtype = inputs["logits"].dtype.name
    if dtype != "float64":
        return per_sample_or_nan(inputs, attributes), dtype
    as_float32 = np.clip(inputs["logits"], -FLOAT32_MAX, FLOAT32_MAX).astype(np.float32)
    return per_sample_or_nan({**inputs, "logits": as_float32}, attributes), "float32"


def assert_matches(got: np.ndarray, inputs: dict[str, np.ndarray], attributes, where: str) -> None:
    reference, dtype = expected(inputs, attributes)
    assert got.dtype == inputs["logits"].dtype and got.shape == reference.shape
    if inputs["logits"].dtype == np.float64:  # D5: +inf saturates to the largest float32 (or bfloat16)
        got = np.where(np.isin(got, SATURATED), np.inf, got)
    problem = compare(got, reference, dtype)
    assert problem is None, f"{where}: {problem}"


@pytest.mark.parametrize("case_id", VALUES)
def test_every_released_case_agrees_with_the_reference(case_id: str) -> None:
    case = CASES[case_id]
    assert_matches(run(case.inputs, case.attributes), case.inputs, case.attributes, case_id)


@pytest.mark.parametrize("case_id", REJECTS)
def test_invalid_released_cases_nan_their_samples(case_id: str) -> None:
    case = CASES[case_id]
    blank = case.inputs.get("blank_index")
    if blank is not None and blank.ndim != 0:  # the IR declares a scalar: OpenVINO refuses the tensor
        with pytest.raises(RuntimeError, match="expecting \\[\\]"):  # (and keeps it: a model of its own)
            run(case.inputs, case.attributes, compiled_released_model)
        return
    got = run(case.inputs, case.attributes)
    reference = per_sample_or_nan(case.inputs, case.attributes)
    assert np.isnan(reference).any()
    assert compare(got, reference, "float32") is None, f"{case_id}: {got} vs {reference}"


def batch(seed: int, classes: int = 5, dtype=np.int32) -> dict[str, np.ndarray]:
    """Six samples with repeats and returns in their targets: an empty target, one longer than
    its frames before collapse only, one longer after it too, no frames at all, full length."""
    rng = np.random.default_rng(seed)
    n, t = 6, 7
    labels = rng.integers(0, classes - 1, size=(n, t))
    labels[:, 1] = labels[:, 0]  # a repeat in every row
    return {
        "logits": rng.normal(size=(n, t, classes)).astype(np.float32) * 3,
        "logit_length": np.array([7, 5, 2, 0, 7, 3], dtype),
        "labels": labels.astype(dtype),
        "label_length": np.array([4, 0, 3, 0, 7, 2], dtype),
    }


def with_blank(inputs: dict[str, np.ndarray], blank: int) -> dict[str, np.ndarray]:
    """``inputs`` with the blank at ``blank``: labels equal to it become the last class."""
    classes = inputs["logits"].shape[2]
    labels = np.where(inputs["labels"] == blank, classes - 1, inputs["labels"])
    return {**inputs, "labels": labels.astype(inputs["labels"].dtype), "blank_index": np.array(blank, np.int32)}


@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: Attributes.of(f, form_name="openvino").label())
def test_every_attribute_combination_with_blank_absent_and_as_input(flags: dict[str, bool]) -> None:
    attributes = Attributes.of(flags, form_name="openvino")
    for seed in range(3):
        inputs = batch(seed)
        assert_matches(run(inputs, attributes), inputs, attributes, f"absent, seed {seed}")
        for blank in (0, 2, 4):
            given = with_blank(inputs, blank)
            assert_matches(run(given, attributes), given, attributes, f"blank {blank}, seed {seed}")


def constant_blank_model(blank: int, attributes: Attributes) -> openvino.CompiledModel:
    """The released lowering over parameters and a constant ``blank_index``."""
    parameters = [
        ops.parameter([-1, -1, -1], np.float32),
        *(ops.parameter([-1] * rank, np.int32) for rank in (1, 2, 1)),
    ]
    x = ReleasedInputs(*(p.output(0) for p in parameters), ops.constant(np.int64(blank)).output(0))
    model = openvino.Model([released_loss(x, attributes)], parameters)
    core = openvino.Core()
    return core.compile_model(model, "CPU", declared_precision_config(core, "CPU", "float32"))


@pytest.mark.parametrize("blank", [0, 2, 4, 5, -1])
def test_a_constant_blank_index(blank: int) -> None:
    attributes = Attributes.of({"unique": True}, form_name="openvino")
    inputs = with_blank(batch(1), min(max(blank, 0), 4))
    inputs["blank_index"] = np.array(blank, np.int32)
    got = constant_blank_model(blank, attributes)([inputs[name] for name in NAMES[:4]])[0]
    assert_matches(np.asarray(got), inputs, attributes, f"constant blank {blank}")
    if not 0 <= blank < 5:
        assert np.isnan(got).all()


def test_values_the_cpu_plugin_would_wrap_are_faults_not_lengths() -> None:
    """int64 2**32 + 3 reads as 3 after the CPU plugin's narrowing (D6); the float32 copy sees it."""
    attributes = Attributes.of(None, form_name="openvino")
    inputs = {name: value.astype(np.int64) if value.dtype == np.int32 else value for name, value in batch(2).items()}
    inputs["logit_length"][0] = 2**32 + 7
    inputs["label_length"][1] = -(2**32)
    inputs["labels"][4, 3] = 2**32 + 1
    got = run(inputs, attributes)
    assert np.isnan(got[[0, 1, 4]]).all()
    assert_matches(got, inputs, attributes, "wrapped")
    unsigned = {**batch(2, dtype=np.uint64), "blank_index": np.array(2**64 - 1, np.uint64)}
    assert np.isnan(run(unsigned, attributes)).all()


def test_a_faulty_sample_leaves_the_others_bit_identical() -> None:
    attributes = Attributes.of({"preprocess_collapse_repeated": True}, form_name="openvino")
    inputs = batch(3)
    clean = run(inputs, attributes)
    for name, index, value in (("labels", (2, 0), 4), ("logit_length", 5, 9), ("label_length", 0, -1)):
        broken = {key: array.copy() for key, array in inputs.items()}
        broken[name][index] = value
        got = run(broken, attributes)
        sample = index[0] if isinstance(index, tuple) else index
        assert np.isnan(got[sample])
        others = np.arange(len(got)) != sample
        np.testing.assert_array_equal(got[others], clean[others])


def test_shapes_that_disagree_nan_every_sample() -> None:
    attributes = Attributes.of(None, form_name="openvino")
    inputs = batch(4)
    for name, value in (("labels", inputs["labels"][:, :5]), ("label_length", inputs["label_length"][:4])):
        assert np.isnan(run({**inputs, name: value}, attributes)).all()


def test_the_model_names_its_inputs_and_output_as_the_schema_does() -> None:
    model = released_ir_model(dims=(3, "T", 6), blank_index=True, index_dtype={"labels": "int32"})
    assert [p.get_any_name() for p in model.inputs] == list(NAMES)
    assert [str(p.get_partial_shape()) for p in model.inputs] == ["[3,?,6]", "[3]", "[3,?]", "[3]", "[]"]
    assert model.inputs[2].get_element_type() == openvino.Type.i32
    assert model.outputs[0].get_any_name() == "loss"
    with pytest.raises(ctcop.InvalidInputError, match="blank_index: unknown element type 'float32'"):
        released_ir_model(index_dtype={"blank_index": "float32"})
    with pytest.raises(ctcop.InvalidInputError, match="'mask' is not an integer input"):
        released_ir_model(index_dtype={"mask": "int32"})


def test_export_writes_the_released_form(tmp_path) -> None:
    path = tmp_path / "released.xml"
    result = ctcop_cli(
        "export", "--format", "ir", "--form", "released", "--blank-index", "--unique", "--index-dtype", "int32",
        "--dims", "T,N,5", "-o", str(path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    core = openvino.Core()  # stock: nothing of ctcop added
    model = core.read_model(str(path))
    assert {op.get_type_name() for op in model.get_ops()} >= {"CTCLoss", "Gather", "Transpose"}
    inputs = with_blank(batch(5), 1)
    got = core.compile_model(model, "CPU", declared_precision_config(core, "CPU", "float32"))(inputs)[0]
    assert_matches(np.asarray(got), inputs, Attributes.of({"unique": True}, form_name="openvino"), "export")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--form", "released", "--mask-dtype", "int8"], "--mask-dtype is ignored with --form released"),
        (["--unique"], "--unique is ignored without --form released"),
        (["--blank-index"], "--blank-index is ignored without --form released"),
        (["--form", "released", "--index-dtype", "float32"], "unknown element type 'float32'"),
    ],
)
def test_export_refuses_options_of_the_other_form(tmp_path, args: list[str], message: str) -> None:
    result = ctcop_cli("export", "--format", "ir", "-o", str(tmp_path / "x.xml"), *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "x.xml").exists()
