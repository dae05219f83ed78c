"""Spec 11.5 for OpenVINO: every graph ctcop gives OpenVINO is a total function, crash-isolated.

Three graph forms, each run on the CPU device in a child process (a SIGSEGV in OpenVINO kills the
process that runs it): ``ir`` (the lowered IR on stock OpenVINO), ``onnx`` (ctcop's ONNX export read
by OpenVINO with ``ctcop.openvino_extensions()``, which maps the node onto the same lowering) and
``custom`` (the ``CTCLoss``/``ctcop1`` layer, whose ``evaluate`` calls ``ctc_loss_or_nan``).

On every input of the declared ranks and element types each form returns ``ctc_loss_or_nan``: NaN
exactly where it has NaN, +inf where it has +inf, +0.0 and never -0.0, float32 finite values within
``ctcop.tolerance.compare``, with no allowance: the CPU plugin narrows int64, uint64 and uint32
inputs to int32 by wrapping before an integer operator or a custom op sees them (spec 12.2 D6),
so the lowering reads them through a float32 conversion first and the custom form guards its
layer with stock operators. A child that dies is retried from the next case, and the case that
killed it fails its test. Float32 logits (float64 models are subject to D4/D5, tested in
tests/unit/test_ir_export.py), with one test per inference precision hint.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

FORMS = {"ir": "openvino-ir", "onnx": "openvino-onnx", "custom": "openvino-custom"}
INT64 = np.iinfo(np.int64)
FUZZ_CASES = 100


@dataclass
class Case:
    name: str
    inputs: np.ndarray
    mask: np.ndarray
    labels: np.ndarray
    attributes: dict[str, bool] = field(default_factory=dict)


# -- the child: runs cases through one runtime adapter, one JSON line per case ----------------------


STATIC_DIMS = (4, 2, 5)


def static_model(form: str) -> Any:
    """The form compiled with static dims ``STATIC_DIMS`` (mask int32, labels int64)."""
    import openvino

    from ctcop.onnx import onnx_model
    from ctcop.openvino import ir_model, openvino_core

    if form == "onnx":
        with tempfile.TemporaryDirectory() as name:
            path = str(Path(name) / "ctc.onnx")
            Path(path).write_bytes(onnx_model(dims=STATIC_DIMS).SerializeToString())
            return openvino_core().compile_model(openvino_core().read_model(path), "CPU")
    core = openvino.Core() if form == "ir" else openvino_core()
    return core.compile_model(ir_model(form="lowered" if form == "ir" else "custom", dims=STATIC_DIMS), "CPU")


FLOAT_TYPES = ("f32", "bf16", "f16")


def compiled_precision(compiled: Any) -> str:
    """The inference precision the CPU plugin compiled ``compiled`` in (f32, bf16 or f16), read
    back from it: a hint is a request, and a CPU without the asked type compiles another."""
    import openvino

    got = compiled.get_property("INFERENCE_PRECISION_HINT")
    return next((name for name in FLOAT_TYPES if got == getattr(openvino.Type, name)), str(got))


class Hinted:
    """Runs the lowered IR (dynamic dims) compiled with INFERENCE_PRECISION_HINT ``hint``;
    ``precision`` is the one the last call's model was compiled in (None when it was refused)."""

    def __init__(self, hint: str) -> None:
        import openvino

        self.hint, self.core = hint, openvino.Core()
        self.models: dict[tuple[Any, ...], Any] = {}
        self.precision: str | None = None

    def __call__(self, inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, **attributes: bool) -> np.ndarray:
        from ctcop.openvino import ir_model

        self.precision = None
        key = (mask.dtype.name, labels.dtype.name, tuple(sorted(attributes.items())))
        if key not in self.models:
            model = ir_model(mask_dtype=key[0], labels_dtype=key[1], attributes=attributes)
            self.models[key] = self.core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": self.hint})
        self.precision = compiled_precision(self.models[key])
        return np.asarray(self.models[key]([inputs, mask, labels])[0])


def child(runtime: str, folder: str, start: int) -> None:
    import warnings

    from ctcop.conformance.runtimes import RUNTIMES

    warnings.simplefilter("ignore")
    data = np.load(Path(folder) / "cases.npz")
    static = static_model(runtime.split("-")[1]) if runtime.startswith("static-") else None
    hinted = Hinted(runtime.split("-")[1]) if runtime.startswith("hint-") else None
    evaluate = hinted if hinted is not None else RUNTIMES.get(runtime)
    for k in range(start, int(data["count"])):
        print(json.dumps({"start": k}), flush=True)
        flags = data[f"{k}/attributes"]
        attributes = {"preprocess_collapse_repeated": bool(flags[0]), "merge_repeated": bool(flags[1])}
        feeds = [data[f"{k}/inputs"], data[f"{k}/mask"], data[f"{k}/labels"]]
        try:
            got = np.asarray(static(feeds)[0]) if static else evaluate(*feeds, **attributes)
            answer: dict[str, Any] = {"dtype": got.dtype.name, "bits": [float(v).hex() for v in got.ravel()]}
        except Exception as error:  # a clean refusal is recorded, not fatal
            answer = {"error": f"{type(error).__name__}: {error}"[:300]}
        if hinted is not None and hinted.precision is not None:
            answer["precision"] = hinted.precision  # what the plugin compiled, whatever was asked
        print(json.dumps({"done": k, **answer}), flush=True)


def _save(cases: list[Case], folder: Path) -> None:
    arrays: dict[str, np.ndarray] = {"count": np.array(len(cases))}
    for k, case in enumerate(cases):
        flags = [
            case.attributes.get("preprocess_collapse_repeated", False),
            case.attributes.get("merge_repeated", True),
        ]
        arrays.update(
            {f"{k}/inputs": case.inputs, f"{k}/mask": case.mask, f"{k}/labels": case.labels},
            **{f"{k}/attributes": np.array(flags)},
        )
    np.savez(folder / "cases.npz", **arrays)


def run_in_children(runtime: str, cases: list[Case]) -> dict[str, Any]:
    """Each case's answer: {"dtype", "bits"}, {"error"} or {"crash": exit status}; a dead child is
    replaced by a fresh one that starts after the case that killed it."""
    answers: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _save(cases, folder)
        start = 0
        while start < len(cases):
            command = [sys.executable, __file__, runtime, str(folder), str(start)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent)
            lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            for line in lines:
                if "done" in line:
                    answers[cases[line["done"]].name] = line
            started = [line["start"] for line in lines if "start" in line]
            if done.returncode == 0:
                break
            dead = started[-1] if started else start
            answers[cases[dead].name] = {"crash": done.returncode, "stderr": done.stderr[-500:]}
            start = dead + 1
    return answers


# -- expectations --------------------------------------------------------------------------------


def expected(case: Case) -> np.ndarray:
    import ctcop

    return ctcop.ctc_loss_or_nan(case.inputs, case.mask, case.labels, **case.attributes)


def got_values(answer: dict[str, Any]) -> np.ndarray:
    return np.array([float.fromhex(v) for v in answer["bits"]], dtype=answer["dtype"])


def problems(form: str, cases: list[Case], answers: dict[str, Any]) -> list[str]:
    from ctcop.tolerance import compare

    found = []
    for case in cases:
        answer = answers.get(case.name, {"missing": True})
        if "bits" not in answer:
            found.append(f"{case.name}: {answer}")
            continue
        got, want = got_values(answer), expected(case)
        problem = compare(got, want, "float32") if got.dtype == want.dtype else f"dtype {got.dtype}"
        if problem is None and np.signbit(got[got == 0]).any():
            problem = "-0.0"
        if problem is not None:
            found.append(f"{case.name}: {problem} (got {got.tolist()}, expected {want.tolist()})")
    return found


# -- the cases -----------------------------------------------------------------------------------


def batch(frames: int = 4, n: int = 2, classes: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Valid float32 logits, a full int32 mask and int64 labels: sample i has target (i % (C-1), ...)."""
    rng = np.random.default_rng(seed)
    inputs = rng.normal(size=(frames, n, classes)).astype(np.float32)
    labels = np.full((n, frames), -1, np.int64)
    labels[:, : min(2, frames)] = (np.arange(n)[:, None] + np.arange(min(2, frames))) % max(classes - 1, 1)
    return inputs, np.ones((frames, n), np.int32), labels


def with_label(value: int, dtype: str = "int64", classes: int = 5) -> Case:
    inputs, mask, labels = batch(classes=classes)
    labels = (labels if np.dtype(dtype).kind == "i" else np.where(labels < 0, 0, labels)).astype(dtype)
    labels[0, 1] = value  # an unsigned row has no pads: its other values are classes
    return Case(f"label_{value}_{dtype}_C{classes}", inputs, mask, labels)


def finding_cases() -> dict[str, list[Case]]:
    zeros = np.zeros((4, 2, 4), np.float32)
    huge = np.array([[10**9, -1, -1, -1], [1, -1, -1, -1]])
    million = np.array([[10**6, -1, -1, -1], [1, -1, -1, -1]])
    return {
        "huge_label": [Case("issue10_label_1e9", zeros, np.ones((4, 2), np.int32), huge)],
        "million_label": [Case("issue10_label_1e6", zeros, np.ones((4, 2), np.int32), million)],
        "labels": [
            *(with_label(v) for v in (4, -2, -3, 5, 6, 40, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1)),
            *(with_label(v) for v in (2**40, -(2**31), -(2**32) - 1, int(INT64.max), int(INT64.min))),
            *(with_label(v, classes=40) for v in (39, 40, 41, 10**9)),
            *(with_label(v, "int32") for v in (4, -2, 2**31 - 1, -(2**31))),
            *(with_label(v, "uint64") for v in (4, 2**63, 2**64 - 1, 2**32)),
            *(with_label(v, "uint32") for v in (4, 2**31, 2**32 - 1)),
            *(with_label(v, "uint8") for v in (4, 255)),
            *(with_label(v, "int8") for v in (-128, 127, -1)),
        ],
        "mask": mask_cases(),
        "shapes": shape_cases(),
        "degenerate": degenerate_cases(),
        "nonfinite": nonfinite_cases(),
    }


def mask_cases() -> list[Case]:
    cases = []
    for dtype, value in [("int32", 2), ("int32", -1), ("int64", 2**32), ("int64", 2**32 + 1), ("uint8", 255)]:
        inputs, mask, labels = batch(seed=1)
        mask = mask.astype(dtype)
        mask[2, 1] = value
        cases.append(Case(f"mask_{value}_{dtype}", inputs, mask, labels))
    for dtype in ("uint64", "int64"):
        inputs, mask, labels = batch(seed=1)
        mask = mask.astype(dtype)
        mask[0, 0] = 2**64 - 1 if dtype == "uint64" else int(INT64.min)
        cases.append(Case(f"mask_extreme_{dtype}", inputs, mask, labels))
    inputs, mask, labels = batch(seed=1)
    gapped = mask.copy()
    gapped[1, 0] = 0
    cases.append(Case("mask_gap", inputs, gapped, labels))
    late = np.zeros_like(mask)
    late[2:, 1] = 1
    cases.append(Case("mask_late_start", inputs, late, labels))
    cases.append(Case("mask_bool_gap", inputs, gapped.astype(bool), labels))
    return cases


SHAPES = [
    ((4, 2, 5), (5, 2), (2, 4)),
    ((4, 2, 5), (3, 2), (2, 4)),
    ((4, 2, 5), (4, 3), (2, 4)),
    ((4, 2, 5), (4, 1), (2, 4)),
    ((4, 2, 5), (4, 2), (3, 4)),
    ((4, 2, 5), (4, 2), (1, 4)),
    ((4, 2, 5), (4, 2), (2, 3)),
    ((4, 2, 5), (4, 2), (2, 7)),
    ((4, 2, 40), (4, 2), (3, 4)),
    ((4, 2, 5), (0, 0), (0, 0)),
    ((0, 2, 5), (1, 2), (2, 0)),
    ((0, 2, 5), (0, 2), (2, 3)),
    ((0, 2, 5), (0, 3), (1, 0)),
    ((3, 0, 5), (3, 1), (0, 3)),
    ((3, 0, 5), (3, 0), (1, 3)),
]


def shape_cases() -> list[Case]:
    rng = np.random.default_rng(2)
    cases = []
    for inputs_shape, mask_shape, labels_shape in SHAPES:
        inputs = rng.normal(size=inputs_shape).astype(np.float32)
        labels = np.zeros(labels_shape, np.int64)
        name = "shape_" + "_".join("x".join(map(str, s)) for s in (inputs_shape, mask_shape, labels_shape))
        cases.append(Case(name, inputs, np.ones(mask_shape, np.int32), labels))
    huge = np.full((2, 6), 10**9, np.int64)  # a wrong shape and labels that used to crash
    cases.append(Case("shape_wide_huge_labels", np.zeros((4, 2, 4), np.float32), np.ones((4, 2), np.int32), huge))
    return cases


def degenerate_cases() -> list[Case]:
    cases = []
    for frames, n, classes in [(3, 2, 0), (0, 2, 0), (3, 0, 0), (0, 2, 5), (0, 2, 1), (0, 0, 3), (3, 0, 4)]:
        inputs = np.zeros((frames, n, classes), np.float32)
        cases.append(
            Case(f"dims_{frames}_{n}_{classes}", inputs, np.ones((frames, n), np.int32), np.full((n, frames), -1))
        )
    inputs = np.random.default_rng(3).normal(size=(3, 3, 1)).astype(np.float32)
    labels = np.full((3, 3), -1)
    labels[1, 0] = 0  # the blank of C = 1
    labels[2, 2] = 1
    cases.append(Case("single_class_labels", inputs, np.ones((3, 3), np.int32), labels))
    inputs = np.random.default_rng(3).normal(size=(3, 2, 2)).astype(np.float32)
    cases.append(
        Case("two_classes_blank_label", inputs, np.ones((3, 2), np.int32), np.array([[1, -1, -1], [0, 0, -1]]))
    )
    return cases


def nonfinite_cases() -> list[Case]:
    cases = []
    for value in (np.nan, np.inf, -np.inf, 3.0e38):
        inputs, mask, labels = batch(frames=5, n=3, seed=4)
        mask[3:, 1] = 0
        inputs[1, 0, 2] = value  # active
        inputs[4, 1, 0] = value  # inactive
        inputs[0, 2, :] = value  # a whole active frame
        cases.append(Case(f"nonfinite_{value}", inputs, mask, labels))
    inputs, mask, labels = batch(frames=5, n=3, seed=4)
    inputs[:, 1] = np.nan
    labels[1, 0] = 10**9  # a faulty sample with non-finite logits
    cases.append(Case("nonfinite_in_faulty_sample", inputs, mask, labels))
    return cases


CROSS_KINDS = ("huge_label", "blank_label", "nan_logits", "mask_gap", "mask_two", "too_long", "empty", "new_logits")


def crossed(case: Case, j: int, kind: str) -> Case:
    """``case`` with sample j's inputs changed by ``kind``."""
    inputs, mask, labels = case.inputs.copy(), case.mask.copy(), case.labels.copy()
    classes = inputs.shape[2]
    if kind == "huge_label":
        labels[j, 0] = 10**9
    elif kind == "blank_label":
        labels[j, -1] = classes - 1
    elif kind == "nan_logits":
        inputs[0, j] = np.nan
    elif kind in ("mask_gap", "mask_two"):
        mask[1, j] = 0 if kind == "mask_gap" else 2
    elif kind == "too_long":
        labels[j] = np.arange(labels.shape[1]) % (classes - 1)
        mask[1:, j] = 0
    elif kind == "empty":
        labels[j] = -1
    else:
        inputs[:, j] = np.random.default_rng(j).normal(size=inputs[:, j].shape) * 30
    return Case(f"{case.name}/{j}_{kind}", inputs, mask, labels, case.attributes)


def cross_cases() -> tuple[Case, list[Case], list[Case]]:
    inputs, mask, labels = batch(frames=6, n=4, classes=6, seed=5)
    mask[4:, 2] = 0
    labels[3, :4] = [1, 1, 2, 2]
    base = Case("cross", inputs, mask, labels)
    variants = [crossed(base, j, kind) for j in range(4) for kind in CROSS_KINDS]
    alone = [Case(f"cross/alone{i}", inputs[:, i : i + 1], mask[:, i : i + 1], labels[i : i + 1]) for i in range(4)]
    return base, variants, alone


# -- the fuzz: ~100 seeded random inputs per form, valid or not ------------------------------------

FAULTY_LABELS = (-3, -2, "blank", "C", "C+1", 10**6, 10**9, 2**31, 2**32, int(INT64.max), int(INT64.min))
DTYPES = [("int32", "int64")] * 6 + [("int64", "int64"), ("uint8", "uint64"), ("bool", "int32"), ("int64", "uint32")]


def _faulty_label(rng: np.random.Generator, classes: int, dtype: str) -> int:
    info = np.iinfo(dtype)
    while True:
        choice = FAULTY_LABELS[int(rng.integers(len(FAULTY_LABELS)))]
        value = {"blank": classes - 1, "C": classes, "C+1": classes + 1}.get(str(choice), choice)
        if info.min <= int(value) <= info.max and (int(value) < 0 or int(value) >= classes - 1):
            return int(value)


def _fuzz_labels(rng: np.random.Generator, n: int, frames: int, classes: int, dtype: str) -> np.ndarray:
    labels = np.full((n, frames), -1, np.int64)
    for i in range(n):
        length = int(rng.integers(0, frames + 1)) if classes > 1 else 0
        where = np.sort(rng.choice(frames, size=length, replace=False)) if length else []
        labels[i, where] = rng.integers(0, max(classes - 1, 1), size=length)
    if dtype.startswith("u"):
        labels = np.where(labels < 0, int(rng.integers(0, 3)), labels)  # no pads in an unsigned row
    typed = labels.astype(dtype)
    if typed.size and rng.random() < 0.35:
        typed[int(rng.integers(n)), int(rng.integers(frames))] = _faulty_label(rng, classes, dtype)
    return typed


def _fuzz_mask(rng: np.random.Generator, frames: int, n: int, dtype: str) -> np.ndarray:
    lengths = rng.integers(0, frames + 1, size=n)
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(np.int64)
    if mask.size and rng.random() < 0.3:
        t, i = int(rng.integers(frames)), int(rng.integers(n))
        mask[t, i] = 1 - mask[t, i] if dtype == "bool" or rng.random() < 0.5 else int(rng.choice([2, -1, 7]))
    return mask.astype(dtype) if dtype not in ("uint8",) else np.where(mask < 0, 255, mask).astype(dtype)


def _mismatched(rng: np.random.Generator, array: np.ndarray, fill: int) -> np.ndarray:
    axis = int(rng.integers(2))
    if array.shape[axis] and rng.random() < 0.5:
        return np.take(array, np.arange(array.shape[axis] - 1), axis=axis)
    pad = [(0, 0), (0, 0)]
    pad[axis] = (0, 1)
    return np.pad(array, pad, constant_values=fill)


def fuzz_case(k: int) -> Case:
    rng = np.random.default_rng(1000 + k)
    frames, n = int(rng.integers(0, 7)), int(rng.integers(0, 5))
    classes = int(rng.choice([0, 1, 2, 3, 5, 8, 40], p=[0.05, 0.1, 0.15, 0.2, 0.25, 0.15, 0.1]))
    inputs = (rng.normal(size=(frames, n, classes)) * rng.choice([1.0, 10.0, 200.0])).astype(np.float32)
    if inputs.size and rng.random() < 0.2:
        inputs[tuple(int(rng.integers(d)) for d in inputs.shape)] = rng.choice([np.nan, np.inf, -np.inf])
    mask_dtype, labels_dtype = DTYPES[int(rng.integers(len(DTYPES)))]
    mask = _fuzz_mask(rng, frames, n, mask_dtype)
    labels = _fuzz_labels(rng, n, frames, classes, labels_dtype)
    if rng.random() < 0.08:
        mask = _mismatched(rng, mask, 1)
    elif rng.random() < 0.08:
        labels = _mismatched(rng, labels, 0)
    attributes = {}
    if (mask_dtype, labels_dtype) == DTYPES[0]:
        attributes = {
            "preprocess_collapse_repeated": bool(rng.random() < 0.5),
            "merge_repeated": bool(rng.random() < 0.7),
        }
    return Case(f"fuzz{k}", inputs, mask, labels, attributes)


# -- the tests -------------------------------------------------------------------------------------

FINDINGS = finding_cases()
CROSS_BASE, CROSS_VARIANTS, CROSS_ALONE = cross_cases()
FUZZ = [fuzz_case(k) for k in range(FUZZ_CASES)]
ALL_CASES = [*(c for group in FINDINGS.values() for c in group), CROSS_BASE, *CROSS_VARIANTS, *CROSS_ALONE, *FUZZ]


@pytest.fixture(scope="module", params=sorted(FORMS))
def form_answers(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """All cases through one form, in one child process (more only after a crash)."""
    return request.param, run_in_children(FORMS[request.param], ALL_CASES)


@pytest.mark.parametrize("finding", sorted(FINDINGS))
def test_findings_give_nan_where_ctc_loss_or_nan_does(form_answers: tuple[str, dict[str, Any]], finding: str) -> None:
    # huge_label: once a SIGSEGV in the lowered IR and the ONNX export; million_label:
    # a loss of -2.4e13; labels: blank, -2, >= C, int32/int64/uint64 extremes; mask: 2, -1, gaps;
    # shapes: mask or labels not [T, N] / [N, T] (dims are dynamic); degenerate: C = 0, C = 1,
    # T = 0, N = 0; nonfinite: NaN and +-inf in active and inactive frames.
    form, answers = form_answers
    found = problems(form, FINDINGS[finding], answers)
    assert not found, f"{form}: " + "\n".join(found)


def test_a_sample_never_depends_on_another(form_answers: tuple[str, dict[str, Any]]) -> None:
    # Bit for bit: changing sample j (valid or not) leaves every other sample's loss alone, and a
    # sample's loss is the same alone as in the batch.
    form, answers = form_answers
    found = problems(form, [CROSS_BASE, *CROSS_VARIANTS, *CROSS_ALONE], answers)
    assert not found, f"{form}: " + "\n".join(found)
    base = got_values(answers[CROSS_BASE.name]).view(np.uint32)
    for variant in CROSS_VARIANTS:
        j = int(variant.name.split("/")[1].split("_")[0])
        bits = got_values(answers[variant.name]).view(np.uint32)
        others = [i for i in range(len(base)) if i != j]
        assert (bits[others] == base[others]).all(), f"{form}: {variant.name} moved another sample"
    for i, alone in enumerate(CROSS_ALONE):
        assert got_values(answers[alone.name]).view(np.uint32)[0] == base[i], f"{form}: {alone.name}"


def test_fuzz_matches_ctc_loss_or_nan(form_answers: tuple[str, dict[str, Any]]) -> None:
    form, answers = form_answers
    found = problems(form, FUZZ, answers)
    assert not found, f"{form}: {len(found)} of {len(FUZZ)} fuzz cases differ:\n" + "\n".join(found[:10])


@pytest.mark.parametrize("form", sorted(FORMS))
def test_static_dims_refuse_other_shapes_cleanly(form: str) -> None:
    # Where the graph's dims are static the plugin checks the shapes before running: a mask or
    # labels of another shape is refused with an exception (the process lives on), and a case of
    # the right shape still runs in the same process afterwards.
    inputs, mask, labels = batch(frames=STATIC_DIMS[0], n=STATIC_DIMS[1], classes=STATIC_DIMS[2])
    cases = [
        Case("static_mask_long", inputs, np.ones((5, 2), np.int32), labels),
        Case("static_labels_wide", inputs, mask, np.full((2, 6), 10**9)),
        Case("static_batch_short", inputs, mask[:, :1], labels[:1]),
        Case("static_valid", inputs, mask, labels),
    ]
    answers = run_in_children(f"static-{form}", cases)
    for case in cases[:-1]:
        assert "error" in answers[case.name], f"{form} {case.name}: {answers[case.name]}"
    assert not problems(form, cases[-1:], answers)


# What the plugin may compile for each hint: the hint itself, or a type the CPU has instead (f16
# is compiled as bf16 on an AVX-512-BF16 CPU without float16, bf16 and f16 as f32 on an AVX2 CPU).
COMPILED_FOR = {"f32": {"f32"}, "bf16": {"bf16", "f32"}, "f16": {"f16", "bf16", "f32"}}
CAPABILITY = {"bf16": "bfloat16", "f16": "float16"}


@pytest.mark.parametrize("hint", FLOAT_TYPES)
def test_nan_and_inf_survive_every_inference_precision(hint: str) -> None:
    # The plugin computes a float32 model in bfloat16 or float16 when asked (bf16 is the default
    # on AVX-512-BF16 and AMX CPUs, f16 on ARM), and under f16 it turns an inf or NaN *constant*
    # into 65504 (spec 12.2 D7): the lowering makes them at run time. The precision checked is
    # the one the plugin compiled, read back from the compiled model. NaN and +-inf stand where
    # ctc_loss_or_nan has them (on logits rounded to float16 for f16, whose range ends at 65504);
    # finite values are checked for f32 and bf16 (ctcop's operators run in float32 there).
    cases = [*FINDINGS["huge_label"], *FINDINGS["labels"], *FINDINGS["mask"], *FINDINGS["nonfinite"], *FUZZ]
    answers = run_in_children(f"hint-{hint}", cases)
    if hint != "f32" and all("error" in answer for answer in answers.values()):
        pytest.skip(f"this CPU has no {CAPABILITY[hint]} inference precision (it refuses the {hint} hint)")
    for case in cases:
        answer = answers[case.name]
        assert "bits" in answer, f"{hint} {case.name}: {answer}"
        assert answer.get("precision") in COMPILED_FOR[hint], f"hint {hint} compiled as {answer.get('precision')}"
    in_float16 = {case.name for case in cases if answers[case.name]["precision"] == "f16"}
    assert not problems("ir", [case for case in cases if case.name not in in_float16], answers)
    for case in (case for case in cases if case.name in in_float16):
        got = got_values(answers[case.name])
        with np.errstate(over="ignore"):
            rounded = case.inputs.astype(np.float16).astype(np.float32)
        want = expected(Case(case.name, rounded, case.mask, case.labels, case.attributes))
        same = (np.isnan(got) == np.isnan(want)) & (np.isposinf(got) == np.isposinf(want))
        assert same.all(), f"f16 {case.name}: got {got.tolist()}, expected {want.tolist()}"


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], int(sys.argv[3]))
