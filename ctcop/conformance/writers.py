"""Writers for other harnesses: corpus cases as ONNX backend tests and as OpenVINO IR tests.

:func:`write_onnx_tests` writes the layout of ONNX's backend tests (``onnx/backend/test/data``),
which onnxruntime's ``onnx_test_runner``, ``onnx.backend.test`` and other backend harnesses run
without ctcop, one folder per case (:func:`onnx_tests`). :func:`write_ir_tests` writes, for
OpenVINO plugin developers, a model, its inputs and its expected loss per case (:func:`ir_tests`):
ctcop's lowered IR for spec-form cases, OpenVINO's CTCLoss-4 alone for released-form ones, so a
kernel defect (spec 12.2 D1-D5) shows as a difference. Both writers also write
``<folder>/ctcop_tests.json``: the cases written and the cases skipped with the reason.

A case a model cannot express is skipped (:class:`Skip`). Cases that must be rejected are written
where their inputs fit the model: ctcop's exported graphs are total functions (spec 11.5), so their
expected output is NaN for each faulty sample (:func:`graph_expected_loss`); for OpenVINO's kernel
alone there is no such output, and a conforming plugin refuses the input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..options import EXPORT_FLOAT_TYPES
from ..reference import ctc_loss_or_nan, openvino_ctc_loss
from ..schema import FormSpec, form, raw_schema, type_constraint
from ..tolerance import tolerance
from . import corpus
from .case import ATTRIBUTE_FORMS, Case

INDEX_FILE = "ctcop_tests.json"
# The forms an ONNX backend test's model is written in (see :func:`onnx_tests`); the first is the default.
ONNX_FORMS = ("inlined", "function")
IR_TEST_FORMAT = "ctcop-ir-test-1"
ONNX_PREFIX = "test_ctcop_"


class Skip(Exception):
    """A case the harness format cannot express (the message says why): bfloat16 logits where
    ctcop's export has none (ONNX, and the lowered IR: spec 11.1); inputs whose element types or
    ranks a model cannot declare, or whose shapes contradict the dims the model fixes from the
    logits, or C = 0 (a runtime refuses those before it runs; the exporters refuse C = 0 as a
    fixed dim)."""


@dataclass
class Written:
    """The outcome of a writer: the case ids written and ``(id, reason)`` of those skipped."""

    written: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def save_index(self, folder: Path, layout: str) -> None:
        document = {
            "layout": layout,
            "written": self.written,
            "skipped": [{"id": case_id, "reason": reason} for case_id, reason in self.skipped],
        }
        (folder / INDEX_FILE).write_text(corpus.dumps(document), encoding="utf-8")


def _spec_of(case: Case) -> FormSpec:
    return form(ATTRIBUTE_FORMS[case.form])


def logits_type(case: Case) -> str:
    """The logits' element type as the case declares it (bfloat16 even when stored as bits)."""
    return str(case.logits_dtype)


def declared_dims(case: Case) -> dict[str, int]:
    """N, T, C of the case, from its logits; :class:`Skip` when an input's element type or rank
    cannot be declared by a model, another input's shape contradicts those dims, or C = 0."""
    spec = _spec_of(case)
    dims: dict[str, int] = {}
    for port in spec.inputs:
        if port.name not in case.inputs:
            continue
        array = case.inputs[port.name]
        declared = logits_type(case) if port is spec.inputs[0] else array.dtype.name
        if declared not in port.types or array.ndim != port.rank:
            types = ", ".join(port.types)
            raise Skip(f"{port.name} is {declared} of rank {array.ndim}; a model declares rank {port.rank}, {types}")
        for symbol, size in zip(port.dims, array.shape, strict=True):
            if dims.setdefault(symbol, int(size)) != size:
                raise Skip(
                    f"{port.name} has shape {array.shape}; the model's {symbol} is {dims[symbol]}, from the logits"
                )
    if dims.get("C") == 0:
        raise Skip("C = 0 cannot be a fixed dim of an exported model")
    return dims


def released_loss_or_nan(inputs: Mapping[str, np.ndarray], attributes: Mapping[str, bool]) -> np.ndarray:
    """What ctcop's released ONNX model computes (spec 11.5, released form): the reference per
    sample, NaN for a sample that breaks rule 7.1/7.2, every sample NaN for a bad ``blank_index``.
    Shapes must agree (:func:`declared_dims`)."""
    logits, blank = inputs["logits"], inputs.get("blank_index")
    out = np.empty(logits.shape[0], dtype=logits.dtype)
    for i in range(out.size):
        lengths, labels, targets = (inputs[name][i : i + 1] for name in ("logit_length", "labels", "label_length"))
        try:
            out[i] = openvino_ctc_loss(logits[i : i + 1], lengths, labels, targets, blank, **attributes)[0]
        except InvalidInputError:
            out[i] = np.nan
    return out


def graph_expected_loss(case: Case) -> np.ndarray:
    """The expected output of ctcop's exported graphs: the corpus's value, or for a case that
    must be rejected, the total function's answer (spec 11.5): both ONNX models and the lowered IR
    answer NaN for each faulty sample and the reference's value for the others (every sample NaN
    for a bad ``blank_index``). OpenVINO's kernel alone (released cases in IR) has no such output:
    ``case.json`` says ``"expect": "reject"`` and no expected file is written."""
    if case.expect == "value":
        assert case.expected_loss is not None
        return case.expected_loss
    x = case.inputs
    if case.form == "spec":
        return ctc_loss_or_nan(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)
    return released_loss_or_nan(x, case.attributes)


def _check_floats(case: Case, allowed: tuple[str, ...], what: str) -> None:
    dtype = logits_type(case)
    if dtype in type_constraint("T_F") and dtype not in allowed:
        raise Skip(f"{what} serves {', '.join(allowed)} logits, not {dtype} (spec 11.1)")
    if dtype == "bfloat16" and next(iter(case.inputs.values())).dtype.name != "bfloat16":
        raise Skip("bfloat16 logits need the ml_dtypes package")


def _write_all(
    cases: Iterable[Case], folder: str | Path, write_one: Callable[[Case, Path], None], layout: str
) -> Written:
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    result = Written()
    for case in cases:
        try:
            write_one(case, root)
        except Skip as reason:
            result.skipped.append((case.id, str(reason)))
        else:
            result.written.append(case.id)
    result.save_index(root, layout)
    return result


def spec_model_options(case: Case) -> dict[str, Any]:
    """The exporters' keyword arguments for a spec-form ``case``: its element types, fixed dims
    and attributes (:func:`ctcop.onnx.onnx_model`, :func:`ctcop.openvino.ir_model`)."""
    dims, x = declared_dims(case), case.inputs
    return {
        "dtype": logits_type(case),
        "mask_dtype": x["sequence_mask"].dtype.name,
        "labels_dtype": x["labels"].dtype.name,
        "dims": (dims["T"], dims["N"], dims["C"]),
        "attributes": case.attributes,
    }


# -- ONNX backend tests ----------------------------------------------------------------------


def onnx_case_model(case: Case, model_form: str = ONNX_FORMS[0]) -> Any:
    """The ONNX model of ``case``: its form, element types, attributes and fixed dims, written in
    ``model_form`` (one of ONNX_FORMS)."""
    from ..onnx import inlined, onnx_model
    from ..onnx.released import released_model

    _check_floats(case, EXPORT_FLOAT_TYPES, "ctcop's ONNX export")
    if case.form == "spec":
        model = onnx_model(**spec_model_options(case))
    else:
        dims, x = declared_dims(case), case.inputs
        model = released_model(
            dtype=logits_type(case),
            index_dtype={name: value.dtype.name for name, value in x.items() if name != "logits"},
            dims=(dims["N"], dims["T"], dims["C"]),
            blank_index="blank_index" in x,
            attributes=case.attributes,
        )
    return inlined(model) if model_form == "inlined" else model


def checked_onnx_form(model_form: str) -> str:
    """``model_form`` when it is one of ONNX_FORMS, else an :class:`InvalidInputError`."""
    if model_form not in ONNX_FORMS:
        raise InvalidInputError("onnx_form", f"{model_form!r} is not one of {', '.join(ONNX_FORMS)}")
    return model_form


def _write_onnx_case(case: Case, root: Path, model_form: str) -> None:
    from onnx import numpy_helper

    model = onnx_case_model(case, model_form)
    expected = graph_expected_loss(case)
    model.doc_string = f"ctcop corpus case {case.id}: {case.description}"
    if case.expect != "value":
        model.doc_string += f"; the input breaks rule {case.rule}: NaN for each faulty sample (spec 11.5)"
    folder = root / (ONNX_PREFIX + case.id.replace("/", "_"))
    data = folder / "test_data_set_0"
    data.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    for k, graph_input in enumerate(model.graph.input):
        tensor = numpy_helper.from_array(case.inputs[graph_input.name], graph_input.name)
        (data / f"input_{k}.pb").write_bytes(tensor.SerializeToString())
    output = model.graph.output[0].name
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(expected, output).SerializeToString())
    limit = tolerance(logits_type(case))  # the allclose form that contains the rule (spec 10.2)
    (folder / "data.json").write_text(json.dumps({"rtol": limit.rtol, "atol": limit.atol}) + "\n")


def onnx_tests(cases: Iterable[Case], folder: str | Path, model_form: str = ONNX_FORMS[0]) -> Written:
    """Write ``cases`` as ONNX backend tests under ``folder``, the models in ``model_form``; what
    was written and what was skipped, and why. Per case::

        <folder>/test_ctcop_<case id, "/" -> "_">/model.onnx
                                                 /data.json                 {"rtol", "atol"} (spec 10.2)
                                                 /test_data_set_0/input_0.pb ... input_K.pb
                                                 /test_data_set_0/output_0.pb

    Spec-form cases: :func:`ctcop.onnx.onnx_model` with the case's element types, attributes and
    fixed dims; released-form cases: :func:`ctcop.onnx.released.released_model`. The ``.pb`` files
    are TensorProtos named after the graph's inputs (in their order) and its output ``loss``.
    ONNX_FORMS: "inlined" (default: the ``ai.ctcop.CTCLoss`` node replaced by its function's body,
    :func:`ctcop.onnx.inlined`; standard operators of a released opset only, so
    ``onnx.backend.test.runner.Runner`` with ``onnxruntime.backend`` runs them as they are) or
    "function" (the node and its model-local function, spec 11.2; onnxruntime's backend skips a
    model importing ``ai.ctcop`` unless ALLOW_RELEASED_ONNX_OPSET_ONLY=0)."""
    chosen = checked_onnx_form(model_form)
    return _write_all(cases, folder, partial(_write_onnx_case, model_form=chosen), "onnx-backend-test")


def write_onnx_tests(cases: Iterable[Case], folder: str | Path, model_form: str = ONNX_FORMS[0]) -> int:
    """Write ``cases`` as ONNX backend tests under ``folder`` in ``model_form``; the number of
    cases written."""
    return len(onnx_tests(cases, folder, model_form).written)


# -- OpenVINO IR tests -----------------------------------------------------------------------


def native_model(case: Case, dims: Mapping[str, int]) -> Any:
    """OpenVINO's CTCLoss-4 (opset4) alone over parameters of the case's element types and
    shapes, named after the released inputs; output ``loss``."""
    import openvino
    import openvino.opset4 as opset4

    from ..openvino.writer import named

    parameters = []
    for port in _spec_of(case).inputs:
        if port.name in case.inputs:
            dtype = logits_type(case) if port.name == "logits" else case.inputs[port.name].dtype.name
            element = openvino.Type.bf16 if dtype == "bfloat16" else np.dtype(dtype)
            parameters.append(named(opset4.parameter([dims[d] for d in port.dims], element), port.name))
    loss = named(opset4.ctc_loss(*parameters, **case.attributes), _spec_of(case).output_name)
    return openvino.Model([opset4.result(loss)], parameters, "ctc_loss_opset4")


def ir_case_model(case: Case) -> tuple[Any, str]:
    """The IR model of ``case`` and what it is ("lowered" or "opset4")."""
    if case.form == "released":
        _check_floats(case, type_constraint("T_F"), "OpenVINO's CTCLoss-4")
        return native_model(case, declared_dims(case)), "opset4"
    from ..openvino import ir_model

    _check_floats(case, EXPORT_FLOAT_TYPES, "ctcop's IR export")
    return ir_model(**spec_model_options(case)), "lowered"


def ir_manifest(case: Case, model_form: str, expected: np.ndarray | None) -> dict[str, Any]:
    """``case.json`` of an IR test: ``format``, ``id``, ``description``, ``form`` (spec |
    released), ``model`` (files and what the layers are), ``attributes``, ``inputs`` (the model's
    parameters in order: name, dtype, shape, file, storage for bfloat16 bits), ``expect`` (value:
    compare with ``expected``; reject: the model must refuse the input), ``expected`` {"loss"},
    ``tolerance`` {dtype, eps, wide_eps, units, rule; rtol, atol: the allclose form that contains
    the rule, spec 10.2}, ``compile`` (the ``INFERENCE_PRECISION_HINT`` to
    compare at: the declared precision, f32 where the device lacks it, as ctcop compiles, spec 13)
    and ``rule``/``error`` of an input the spec rejects."""
    from ..openvino.precision import declared_hint

    dtype = logits_type(case)
    limit = tolerance(dtype)
    layers = {
        "lowered": "ctcop's lowering: stock OpenVINO operators around CTCLoss opset4 (spec 12.1), "
        "a total function (spec 11.5)",
        "opset4": "OpenVINO's CTCLoss-4 (opset4) alone, fed the case's own inputs",
    }
    manifest: dict[str, Any] = {
        "format": IR_TEST_FORMAT,
        "id": case.id,
        "description": case.description,
        "form": case.form,
        "model": {"xml": "model.xml", "bin": "model.bin", "layers": layers[model_form]},
        "attributes": dict(case.attributes),
        "inputs": [{"name": name, **corpus.array_entry(a, f"{name}.npy")} for name, a in case.inputs.items()],
        "expect": "value" if expected is not None else "reject",
        "tolerance": {
            "dtype": dtype,
            "eps": limit.eps,
            "wide_eps": limit.wide_eps,
            "units": limit.units,
            "rule": raw_schema()["tolerance"]["rule"],
            "rtol": limit.rtol,
            "atol": limit.atol,
        },
        "compile": {"INFERENCE_PRECISION_HINT": declared_hint(dtype), "without_it": "f32"},
    }
    if expected is not None:
        manifest["expected"] = {"loss": corpus.array_entry(expected, "expected_loss.npy")}
    if case.expect != "value":
        manifest.update(rule=case.rule, error=case.error)
    return manifest


def _write_ir_case(case: Case, root: Path) -> None:
    from ..openvino import save_ir

    model, model_form = ir_case_model(case)
    total = model_form == "lowered" or case.expect == "value"
    expected = graph_expected_loss(case) if total else None
    folder = corpus.case_folder(root, case.id)
    folder.mkdir(parents=True, exist_ok=True)
    save_ir(model, str(folder / "model.xml"))
    arrays = {f"{name}.npy": array for name, array in case.inputs.items()}
    if expected is not None:
        arrays["expected_loss.npy"] = expected
    corpus.save(folder, ir_manifest(case, model_form, expected), arrays)


def ir_tests(cases: Iterable[Case], folder: str | Path) -> Written:
    """Write ``cases`` as OpenVINO IR tests under ``folder``; what was written and what was
    skipped, and why. Per case::

        <folder>/<case id>/model.xml, model.bin     read by a plain openvino.Core
                          /<input name>.npy ...      the inputs (bfloat16 as uint16 bits, as in the corpus)
                          /expected_loss.npy         absent when the model must refuse the input
                          /case.json                 format "ctcop-ir-test-1" (see :func:`ir_manifest`)

    Spec-form cases: ctcop's lowered IR (:func:`ctcop.openvino.ir_model`, stock operators around
    the native CTCLoss-4); released-form cases: OpenVINO's CTCLoss-4 (opset4) alone over the case's
    own inputs, so the expected values are the spec's and a kernel defect (spec 12.2 D1-D5) shows
    as a difference. Backend harnesses ignore ``ctcop_tests.json`` beside the test folders."""
    return _write_all(cases, folder, _write_ir_case, "openvino-ir-test")


def write_ir_tests(cases: Iterable[Case], folder: str | Path) -> int:
    """Write ``cases`` as OpenVINO IR tests under ``folder``; the number of cases written."""
    return len(ir_tests(cases, folder).written)
