"""PyTorch models that call ctc_loss, exported to ONNX and converted to OpenVINO (ctcop.torch).

Every exported or converted model is compared with PyTorch's own losses by the suite's float32
rule (ctcop.tolerance.compare: relative 1e-5, absolute 1e-4 near zero, +inf/NaN exactly), on the
export's batch and on two batches of other N and T (the exported dimensions are dynamic). The
model (tests/support/torch_models.py) covers every reduction, zero_infinity on and off, blank 0
and C-1, padded and concatenated targets, variable lengths, an empty and an infeasible target,
-inf log-probabilities and unnormalised ones, and four ways of calling the loss.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")  # torch.onnx.export(dynamo=True) needs it; the torch extra installs both

import onnx  # noqa: E402
import onnxruntime  # noqa: E402
import openvino  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from support.torch_models import CLASSES, CONFIGS, FEW_CONFIGS, INPUT_NAMES, Batch, LossModel, batch, log_probs_for  # noqa: E402
from torch import nn  # noqa: E402

import ctcop  # noqa: E402
import ctcop.torch  # noqa: E402
from ctcop.openvino import declared_precision_config  # noqa: E402
from ctcop.tolerance import compare  # noqa: E402
from ctcop.torch.semantics import reference_loss  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*(dynamic_axes|training mode).*:UserWarning"),
]
SIZES = ((4, 16), (6, 23), (2, 9))  # (N, T): the export's batch, then two others
EXPORTERS = ("dynamo", "torchscript")
REDUCTIONS = ("none", "mean", "sum")
_BUILT: dict[tuple[str, bool], object] = {}  # exported sessions and converted models, reused


@pytest.fixture(scope="module")
def models() -> dict[bool, LossModel]:
    """The model for padded targets (every config) and for concatenated ones (FEW_CONFIGS)."""
    return {False: LossModel(CONFIGS).eval(), True: LossModel(FEW_CONFIGS).eval()}


def torch_losses(model: LossModel, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        return [loss.numpy() for loss in model(*inputs)]


def assert_agree(model: LossModel, got: list[np.ndarray], expected: list[np.ndarray], where: str) -> None:
    assert len(got) == len(expected) == len(model.configs)
    for config, value, wanted in zip(model.configs, got, expected, strict=True):
        assert np.shape(value) == np.shape(wanted), f"{where} {config.name}"
        problem = compare(value, wanted, "float32")
        assert problem is None, f"{where} {config.name}: {problem}"


def dynamic_options(model: LossModel, exporter: str, concatenated: bool) -> dict[str, object]:
    """Dynamic N and T (and the concatenation's length) in each exporter's own terms."""
    if exporter == "dynamo":
        n, t, total = (torch.export.Dim(name) for name in ("N", "T", "L"))
        targets = {0: total} if concatenated else {0: n}
        return {"dynamic_shapes": ({0: n, 2: t}, targets, {0: n}, {0: n})}
    axes = {"features": {0: "N", 2: "T"}, "targets": {0: "L" if concatenated else "N"}}
    axes |= {"input_lengths": {0: "N"}, "target_lengths": {0: "N"}}
    axes |= {c.name: {0: "N"} for c in model.configs if c.reduction == "none"}
    return {"dynamic_axes": axes}


def export(model: LossModel, exporter: str, concatenated: bool) -> onnx.ModelProto:
    inputs = batch(0, *SIZES[0], concatenated).tensors()
    options = dynamic_options(model, exporter, concatenated)
    names = [config.name for config in model.configs]
    return ctcop.torch.export_onnx(
        model, inputs, input_names=INPUT_NAMES, output_names=names, exporter=exporter, **options
    )


def onnx_session(model: LossModel, exporter: str, concatenated: bool) -> onnxruntime.InferenceSession:
    key = (exporter, concatenated)
    if key not in _BUILT:
        exported = export(model, exporter, concatenated)
        onnx.checker.check_model(exported, full_check=True)
        domains = [node.domain for node in exported.graph.node]
        assert domains.count("ai.ctcop") == len(model.configs) and "ai.ctcop.torch" not in domains
        assert [(f.domain, f.name) for f in exported.functions] == [("ai.ctcop", "CTCLoss")]
        assert [i.name for i in exported.graph.input] == list(INPUT_NAMES)
        _BUILT[key] = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    session: onnxruntime.InferenceSession = _BUILT[key]
    return session


@pytest.mark.parametrize("concatenated", [False, True], ids=["padded", "concatenated"])
@pytest.mark.parametrize("exporter", EXPORTERS)
def test_onnx_export_computes_what_pytorch_computes(
    models: dict[bool, LossModel], exporter: str, concatenated: bool
) -> None:
    model = models[concatenated]
    session = onnx_session(model, exporter, concatenated)
    for seed, (n, frames) in enumerate(SIZES):
        data = batch(seed, n, frames, concatenated)
        got, expected = session.run(None, data.feeds()), torch_losses(model, data.tensors())
        assert_agree(model, got, expected, f"{exporter} N={n} T={frames}")


def compiled_openvino(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> openvino.CompiledModel:
    converted = openvino.convert_model(model, example_input=inputs, extension=ctcop.openvino_extensions())
    # f32: on bfloat16 CPUs the default precision runs the model's Conv/Linear in bfloat16 (spec 12.2)
    return openvino.Core().compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def openvino_losses(model: LossModel, data: Batch, concatenated: bool) -> list[np.ndarray]:
    key = ("openvino", concatenated)
    if key not in _BUILT:
        _BUILT[key] = compiled_openvino(model, batch(0, *SIZES[0], concatenated).tensors())
    compiled: openvino.CompiledModel = _BUILT[key]
    results = compiled(list(data.arrays()))
    return [results[output] for output in compiled.outputs]


@pytest.mark.parametrize("concatenated", [False, True], ids=["padded", "concatenated"])
def test_openvino_conversion_computes_what_pytorch_computes(models: dict[bool, LossModel], concatenated: bool) -> None:
    model = models[concatenated]
    for seed, (n, frames) in enumerate(SIZES):
        data = batch(seed, n, frames, concatenated)
        got = openvino_losses(model, data, concatenated)
        assert_agree(model, got, torch_losses(model, data.tensors()), f"openvino N={n} T={frames}")


def test_openvino_converts_an_exported_program() -> None:
    """torch.export's program (ctc_loss calls made ctcop::ctc_loss by the redirect mode)."""
    model = LossModel(FEW_CONFIGS[:2]).eval()
    data = batch(3, 5, 14, False)
    with ctcop.torch.redirect_ctc_loss():
        program = torch.export.export(model, data.tensors())
    converted = openvino.convert_model(program, extension=ctcop.openvino_extensions())
    compiled = openvino.Core().compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(list(data.arrays()))
    got = [results[output] for output in compiled.outputs]
    assert_agree(model, got, torch_losses(model, data.tensors()), "openvino, ExportedProgram")


class Unbatched(nn.Module):
    """ctc_loss of one sample: log-probabilities [T, C], a target [S] or [1, S], scalar lengths."""

    def forward(self, scores: torch.Tensor, target: torch.Tensor, frames: torch.Tensor, length: torch.Tensor):  # type: ignore[no-untyped-def]
        log_probs = F.log_softmax(scores, dim=-1)
        return tuple(F.ctc_loss(log_probs, target, frames, length, 2, r) for r in ("none", "mean", "sum"))


@pytest.mark.parametrize(
    ("target_shape", "exporter"), [((3,), "dynamo"), ((1, 5), "torchscript")], ids=["concatenated", "padded"]
)
def test_unbatched_calls(target_shape: tuple[int, ...], exporter: str) -> None:
    scores = torch.randn(9, 4, generator=torch.Generator().manual_seed(1))
    target = torch.tensor([1, 1, 3, 0, 0][: target_shape[-1]]).reshape(target_shape)
    inputs = (scores, target, torch.tensor(7), torch.tensor(3))
    expected = [v.numpy() for v in Unbatched()(*inputs)]
    feeds = [v.numpy() for v in inputs]
    exported = ctcop.torch.export_onnx(Unbatched(), inputs, exporter=exporter)
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip([i.name for i in session.get_inputs()], feeds, strict=True)))
    compiled = compiled_openvino(Unbatched(), inputs)
    results = compiled(feeds)
    for value, converted, wanted in zip(got, [results[o] for o in compiled.outputs], expected, strict=True):
        assert np.shape(value) == np.shape(converted) == ()
        assert compare(value, wanted, "float32") is None and compare(converted, wanted, "float32") is None


def random_call(rng: np.random.Generator) -> tuple[tuple[np.ndarray, ...], dict[str, object]]:
    """Arguments of a random valid ctc_loss call: unnormalised or normalised, some -inf, both
    target forms, any blank, lengths up to the frames and targets up to past them."""
    frames, n, classes, width = (int(rng.integers(lo, hi)) for lo, hi in ((1, 12), (1, 5), (2, 7), (1, 8)))
    blank = int(rng.choice([0, classes - 1, rng.integers(0, classes)]))
    x = rng.normal(size=(frames, n, classes)) * rng.choice([1.0, 5.0]) + rng.choice([0.0, 30.0])
    if rng.random() < 0.5:
        x = x - np.log(np.exp(x).sum(axis=2, keepdims=True))
    if rng.random() < 0.3:
        x[rng.random(x.shape) < 0.25] = -np.inf
    x = x.astype(rng.choice([np.float32, np.float64]))
    target_lengths = rng.integers(0, min(width, frames + 2) + 1, size=n)
    padded = rng.choice([c for c in range(classes) if c != blank], size=(n, width))
    targets = np.concatenate([padded[i, : target_lengths[i]] for i in range(n)]) if rng.random() < 0.5 else padded
    arrays = (x, targets, rng.integers(0, frames + 1, size=n), target_lengths)
    reduction = str(rng.choice(["none", "sum", "mean"]))
    return arrays, {"blank": blank, "reduction": reduction, "zero_infinity": bool(rng.random() < 0.5)}


def test_the_mapping_in_numpy_is_pytorchs_loss() -> None:
    """reference_loss (CTCLoss-4 plus the mapping) against F.ctc_loss on 300 random calls."""
    rng = np.random.default_rng(12)
    for _ in range(300):
        arrays, options = random_call(rng)
        expected = F.ctc_loss(*(torch.from_numpy(np.asarray(a)) for a in arrays), **options).numpy()
        got = reference_loss(*arrays, **options)  # type: ignore[arg-type]
        assert got.dtype == expected.dtype and compare(got, expected, expected.dtype.name) is None, options


def faulty_batch() -> Batch:
    """Values PyTorch refuses or reads out of range, one per sample: an input length over T, a
    negative target length, a target class that is blank 0, a class >= C; sample 0 is valid."""
    data = batch(5, 6, 16, False)
    input_lengths, target_lengths, targets = data.input_lengths.copy(), data.target_lengths.copy(), data.targets.copy()
    input_lengths[1], target_lengths[2], target_lengths[3:] = 17, -1, 2
    targets[3, 0], targets[4, 1], targets[5, 0] = 0, CLASSES, -3
    return Batch(data.features, targets, input_lengths, target_lengths)


def test_values_pytorch_refuses_give_nan_for_their_samples(models: dict[bool, LossModel]) -> None:
    """Spec 14: NaN for the samples concerned, the others exact, in onnxruntime and OpenVINO."""
    model, data = models[False], faulty_batch()
    with torch.no_grad():
        scores = model.acoustic(torch.from_numpy(data.features))
    expected = []
    for config in CONFIGS:
        log_probs = log_probs_for(config, scores).numpy()
        expected.append(
            reference_loss(log_probs, *data.arrays()[1:], config.blank, config.reduction, config.zero_infinity)
        )
    none = CONFIGS.index(next(c for c in CONFIGS if c.reduction == "none" and c.blank == 0))
    assert np.isfinite(expected[none][0]) and np.isnan(expected[none][1:]).all()
    assert_agree(model, onnx_session(model, "dynamo", False).run(None, data.feeds()), expected, "onnxruntime")
    assert_agree(model, openvino_losses(model, data, False), expected, "openvino")


class ListLengths(nn.Module):
    def forward(self, log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.ctc_loss(log_probs, targets, [5, 5], [2, 2])


def test_a_call_no_graph_can_express_is_refused_naming_the_argument() -> None:
    inputs = (torch.randn(5, 2, 4).log_softmax(-1), torch.tensor([[1, 2], [2, 3]]))
    for exporter in EXPORTERS:
        with pytest.raises(ctcop.InvalidInputError, match=r"^input_lengths: a Python list"):
            ctcop.torch.export_onnx(ListLengths(), inputs, exporter=exporter)
    with pytest.raises(Exception, match=r"input_lengths: a Python list"):
        openvino.convert_model(ListLengths(), example_input=inputs, extension=ctcop.openvino_extensions())
    # a static C (every axis is dynamic by default, and a blank >= a dynamic C is NaN, spec 14.3)
    inputs = (torch.randn(3, 2), torch.tensor([1]), torch.tensor(3), torch.tensor(1))
    with pytest.raises(ctcop.InvalidInputError, match=r"^blank: 2 is outside the classes \[0, 2\)"):
        ctcop.torch.export_onnx(Unbatched(), inputs, dynamic_shapes=(None,) * 4)


def test_the_drop_in_loss_is_pytorchs_in_value_and_gradient() -> None:
    log_probs = torch.randn(12, 3, 5, dtype=torch.float64).log_softmax(-1).requires_grad_(True)
    targets, lengths = torch.tensor([[1, 1, 2], [3, 4, 0], [2, 0, 0]]), ([12, 9, 4], [3, 2, 1])
    for reduction in ("none", "mean"):
        ours = ctcop.torch.CTCLoss(blank=0, reduction=reduction)(log_probs, targets, *lengths)
        theirs = nn.CTCLoss(blank=0, reduction=reduction)(log_probs, targets, *lengths)
        (grad_ours,) = torch.autograd.grad(ours.sum(), log_probs)
        (grad_theirs,) = torch.autograd.grad(theirs.sum(), log_probs)
        assert torch.equal(ours, theirs) and torch.allclose(grad_ours, grad_theirs, rtol=1e-12, atol=1e-12)


def test_export_writes_the_file_and_finish_onnx_refuses_a_model_without_a_call(tmp_path) -> None:  # type: ignore[no-untyped-def]
    inputs = (torch.randn(5, 3), torch.tensor([1, 2]), torch.tensor(5), torch.tensor(2))
    written = ctcop.torch.export_onnx(Unbatched(), inputs, tmp_path / "unbatched.onnx", exporter="torchscript")
    assert onnx.load(str(tmp_path / "unbatched.onnx")) == written
    plain = onnx.helper.make_model(onnx.helper.make_graph([], "empty", [], []))
    with pytest.raises(ctcop.InvalidInputError, match=r"holds no ai\.ctcop\.torch\.CTCLoss node"):
        ctcop.torch.finish_onnx(plain)


def test_openvino_cpu_orders_nan_as_the_mapping_expects() -> None:
    """The defects the OpenVINO rule guards against (openvino 2026.4.1, CPU): Maximum drops a NaN
    first operand, ReduceMax skips NaN and gives float32's lowest for a row of -inf (fails the day
    a release fixes one); Greater and GreaterEqual agree on a NaN operand, true on AVX-512 CPUs and
    IEEE's false on AVX2 ones (measured on a Zen 3), so the rule tests for NaN itself."""
    import openvino.opset15 as ops

    x, y = ops.parameter([3], np.float32), ops.parameter([1], np.float32)
    axis = ops.constant(np.int64(0))
    outputs = [ops.greater(x, y), ops.greater_equal(x, y), ops.maximum(x, y), ops.reduce_max(x, axis, False)]
    core = openvino.Core()
    model = openvino.Model([o.output(0) for o in outputs], [x, y])
    compiled = core.compile_model(model, "CPU", declared_precision_config(core, "CPU", "float32"))  # not bf16
    half = np.float32([0.5])
    greater, greater_equal, maximum, top = compiled([np.float32([np.nan, 1, -np.inf]), half]).values()
    assert greater[0] == greater_equal[0] and not greater[2] and maximum[0] == 0.5 and top == 1.0
    *_, top = compiled([np.full(3, -np.inf, np.float32), half]).values()
    assert top == np.finfo(np.float32).min


class Blank4(nn.Module):
    """ctc_loss with blank 4 over five classes: log-probabilities as given (none normalised)."""

    def forward(self, x: torch.Tensor, targets: torch.Tensor, frames: torch.Tensor, lengths: torch.Tensor):  # type: ignore[no-untyped-def]
        return F.ctc_loss(x, targets, frames, lengths, blank=4, reduction="none")


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_an_unread_class_far_above_the_rest_changes_nothing(exporter: str) -> None:
    """Class 0 is neither a target nor the blank of sample 0, so no path reads it and PyTorch's
    loss does not depend on it; raised by 1e6 / 1e10 / 1e30 it must not dominate the log-sum-exp
    of the correction (which would cancel the loss to 5.19 / 0 / -6e23, spec 14.1)."""
    rng = np.random.default_rng(0)
    x = np.log(rng.dirichlet(np.ones(5), size=(6, 2))).astype(np.float32)
    targets, frames, lengths = np.array([[1, 2], [3, 1]]), np.array([6, 5]), np.array([2, 2])
    inputs = tuple(torch.from_numpy(v) for v in (x, targets, frames, lengths))
    exported = ctcop.torch.export_onnx(Blank4(), inputs, exporter=exporter)
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    compiled = compiled_openvino(Blank4(), inputs)
    for raised in (0.0, 1e6, 1e10, 1e30, np.inf):  # +inf: a NaN sample (spec 14.3), as before
        y = x.copy()
        y[:, 0, 0] += np.float32(raised)
        feeds = (y, targets, frames, lengths)
        expected = F.ctc_loss(*(torch.from_numpy(v) for v in feeds), blank=4, reduction="none").numpy()
        if raised == np.inf:
            expected = np.array([np.nan, expected[1]], np.float32)
        got = {
            "reference_loss": reference_loss(*feeds, blank=4, reduction="none"),
            "onnxruntime": session.run(None, dict(zip(names, feeds, strict=True)))[0],
            "openvino": compiled(list(feeds))[0],
        }
        for where, value in got.items():
            assert compare(value, expected, "float32") is None, (where, raised, value, expected)


@pytest.mark.parametrize("hint", ["f32", "bf16"])
def test_a_subnormal_log_prob_is_finite_in_the_conversion(hint: str) -> None:
    """The conversion's guard of non-finite frames (the lowering's) holds for subnormal values,
    which the CPU plugin's IsFinite calls non-finite, under either precision (read back)."""
    x = np.zeros((3, 1, 5), np.float32)
    targets, frames, lengths = np.array([[0, 1]]), np.array([3]), np.array([2])
    inputs = tuple(torch.from_numpy(v) for v in (x, targets, frames, lengths))
    converted = openvino.convert_model(Blank4(), example_input=inputs, extension=ctcop.openvino_extensions())
    compiled = openvino.Core().compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": hint})
    assert compiled.get_property("INFERENCE_PRECISION_HINT") in (openvino.Type.f32, openvino.Type.bf16)
    for value in (1e-38, 1e-40, -1e-40):
        y = x.copy()
        y[1, 0, 2] = value
        expected = F.ctc_loss(*(torch.from_numpy(v) for v in (y, targets, frames, lengths)), blank=4, reduction="none")
        assert compare(compiled([y, targets, frames, lengths])[0], expected.numpy(), "float32") is None, value


class ThreeReductions(nn.Module):
    """ctc_loss with blank 0 under each reduction."""

    def forward(self, log_probs: torch.Tensor, targets: torch.Tensor, frames: torch.Tensor, lengths: torch.Tensor):  # type: ignore[no-untyped-def]
        return tuple(F.ctc_loss(log_probs, targets, frames, lengths, reduction=r) for r in REDUCTIONS)


@pytest.mark.parametrize("scalar", ["target_lengths", "both"])
def test_scalar_lengths_of_one_sample_are_pytorchs(scalar: str) -> None:
    """PyTorch's test_CTCLoss_critical_target_len: log_probs [500, 1, 10], 256 concatenated
    targets, target_lengths a 0-d tensor (and input_lengths too), as PyTorch accepts them for N = 1."""
    generator = torch.Generator().manual_seed(4)
    log_probs = torch.randn(500, 1, 10, generator=generator).log_softmax(2)
    targets = torch.randint(1, 10, (256,), generator=generator)
    input_lengths = torch.tensor(500, dtype=torch.int) if scalar == "both" else torch.full((1,), 500, dtype=torch.int)
    inputs = (log_probs, targets, input_lengths, torch.tensor(256, dtype=torch.int))
    expected = [v.numpy() for v in ThreeReductions()(*inputs)]
    feeds = [v.numpy() for v in inputs]
    got = {"reference_loss": [reference_loss(*feeds, reduction=r) for r in REDUCTIONS]}  # type: ignore[arg-type]
    for exporter in EXPORTERS:
        exported = ctcop.torch.export_onnx(ThreeReductions(), inputs, exporter=exporter)
        session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
        got[exporter] = session.run(None, dict(zip([i.name for i in session.get_inputs()], feeds, strict=True)))
    got["openvino"] = list(compiled_openvino(ThreeReductions(), inputs)(feeds).values())
    for where, values in got.items():
        for reduction, value, wanted in zip(REDUCTIONS, values, expected, strict=True):
            assert np.shape(value) == np.shape(wanted), (where, reduction)
            assert compare(value, wanted, "float32") is None, (where, reduction)


class Shifted(nn.Module):
    """A model whose own code fails under torch.export (a matmul of mismatched shapes)."""

    def forward(self, log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        shifted = log_probs @ torch.ones(3, 3)
        return F.ctc_loss(shifted, targets, torch.tensor([4]), torch.tensor([1]))


class Checked(nn.Module):
    """A model that raises for a value of its input: an ``if`` torch.export cannot decide."""

    def forward(self, log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if targets.max() > 3:
            raise ValueError("a target above 3")
        return F.ctc_loss(log_probs, targets, torch.tensor([4]), torch.tensor([1]))


def test_an_if_on_values_is_traced_as_a_check_that_gives_nan() -> None:
    """``if targets.max() > 3: raise`` cannot be traced; the export takes the branch as not
    taken, and the loss is NaN for the values that take it (PyTorch's run raises there)."""
    inputs = (torch.randn(4, 1, 5).log_softmax(-1), torch.tensor([[1]]))
    exported = ctcop.torch.export_onnx(Checked(), inputs)
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for target in (1, 3, 4):
        feeds = (inputs[0].numpy(), np.array([[target]]))
        (got,) = session.run(None, dict(zip(names, feeds, strict=True)))
        if target > 3:
            with pytest.raises(ValueError, match="a target above 3"):
                Checked()(*(torch.from_numpy(v) for v in feeds))
            assert np.isnan(got)
        else:
            assert compare(got, Checked()(*(torch.from_numpy(v) for v in feeds)).numpy(), "float32") is None


def test_the_redirect_is_absent_from_errors_it_did_not_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error of the model's own code names the model, not ctcop's redirect mode: in the
    traceback, and in torch's report of a data-dependent guard (here one the mode is made to
    leave undecided)."""
    import traceback

    inputs = (torch.randn(4, 1, 5).log_softmax(-1), torch.tensor([[1]]))
    with pytest.raises(Exception) as caught:  # whatever torch raises
        ctcop.torch.export_onnx(Shifted(), inputs)
    text = "".join(traceback.format_exception(caught.value))
    assert "custom_op.py" not in text and "test_torch_export.py" in text
    monkeypatch.setattr(ctcop.torch.redirect_ctc_loss, "_truth", staticmethod(bool))
    with pytest.raises(Exception, match="GuardOnDataDependentSymNode") as caught:
        ctcop.torch.export_onnx(Checked(), inputs)
    assert "custom_op.py" not in "".join(traceback.format_exception(caught.value))


def test_extra_translations_join_ctcops() -> None:
    """custom_translation_table: the user's translation is used; ctcop's own are not replaced;
    the TorchScript exporter takes none."""
    from onnxscript import opset18 as op

    def relu_as_max(x):  # type: ignore[no-untyped-def]
        return op.Max(x, op.CastLike(op.Constant(value_float=0.0), x))

    inputs = (torch.randn(6, 2, 5), torch.tensor([[1, 2], [3, 3]]), torch.tensor([6, 5]), torch.tensor([2, 2]))
    relu = {torch.ops.aten.relu.default: relu_as_max}
    exported = ctcop.torch.export_onnx(ReluLoss(), inputs, custom_translation_table=relu)
    kinds = {node.op_type for node in exported.graph.node}
    assert "Max" in kinds and "Relu" not in kinds
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in session.get_inputs()], [v.numpy() for v in inputs], strict=True))
    assert compare(session.run(None, feeds)[0], ReluLoss()(*inputs).numpy(), "float32") is None
    own = {torch.ops.aten.masked_select.default: relu_as_max}
    with pytest.raises(ctcop.InvalidInputError, match=r"^custom_translation_table: .*ctcop's own"):
        ctcop.torch.export_onnx(ReluLoss(), inputs, custom_translation_table=own)
    with pytest.raises(ctcop.InvalidInputError, match=r"^custom_translation_table: the TorchScript exporter"):
        ctcop.torch.export_onnx(ReluLoss(), inputs, exporter="torchscript", custom_translation_table=relu)


class ReluLoss(nn.Module):
    """ctc_loss of log_softmax(relu(x))."""

    def forward(self, x: torch.Tensor, targets: torch.Tensor, frames: torch.Tensor, lengths: torch.Tensor):  # type: ignore[no-untyped-def]
        return F.ctc_loss(torch.relu(x).log_softmax(-1), targets, frames, lengths, reduction="none")


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_the_default_export_runs_at_any_batch_and_time(models: dict[bool, LossModel], exporter: str) -> None:
    """``export_onnx(model, args, path)`` with no dynamic options: every axis of every input is
    dynamic, so other batch sizes and frame counts run and give PyTorch's losses; "dynamo" does
    it with torch.export's own dynamic_shapes, so without the dynamic_axes warning."""
    import warnings

    model = models[False]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exported = ctcop.torch.export_onnx(model, batch(0, *SIZES[0], False).tensors(), exporter=exporter)
    assert not [w for w in caught if "dynamic_axes" in str(w.message)]
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for seed, (n, frames) in enumerate(SIZES):
        data = batch(seed, n, frames, False)
        got = session.run(None, dict(zip(names, data.arrays(), strict=True)))
        assert_agree(model, got, torch_losses(model, data.tensors()), f"default {exporter} N={n} T={frames}")
    static = ctcop.torch.export_onnx(model, batch(0, *SIZES[0], False).tensors(), exporter=exporter, **fixed(exporter))
    assert all(d.HasField("dim_value") for i in static.graph.input for d in i.type.tensor_type.shape.dim)


def fixed(exporter: str) -> dict[str, object]:
    """The options that fix every axis, in each exporter's terms."""
    return {"dynamic_shapes": (None,) * 4} if exporter == "dynamo" else {"dynamic_axes": {}}
