"""Runtime adapters: one :class:`Runtime` per runtime, implementing the protocol of :mod:`.protocol`.

``RUNTIMES[name].run(case)`` evaluates a :class:`ctcop.conformance.corpus.Case` of either
form and returns the [N] loss (the reference: an :class:`Outcome` with the gradient too), or
raises :class:`Unsupported` for a case outside what the runtime implements. ``available()`` is
None when the runtime's libraries import here, else the reason. Calling a runtime,
``RUNTIMES[name](inputs, sequence_mask, labels, **attributes)``, evaluates spec-form arrays (the
tests and benchmarks use that). Exported models are built for the inputs' element types (and
attributes, and the presence of ``blank_index``) and cached. Adapters convert layouts only; for
a case that must be rejected they pass the inputs on unchanged (ctcop's exported graphs are total
functions and answer NaN for faulty samples, spec 11.5; the reference raises
:class:`ctcop.InvalidInputError`). The wings (onnx, onnxruntime, openvino) are imported inside
the adapters that need them. Released-form cases (spec 7): see :class:`Runtime`.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from .. import canonical
from ..attributes import Attributes
from ..reference import ctc_loss, ctc_loss_grad
from ..schema import form
from .case import Case, reference_grad, reference_loss
from .protocol import Outcome, Unsupported, outcome
from .rows import DECLARED, DEFAULT_DEVICE, Row

Evaluate = Callable[..., np.ndarray]  # (inputs, sequence_mask, labels, attributes[, row])
Released = Callable[..., np.ndarray | Outcome]  # (released inputs by name, attributes[, row])
Key = tuple[str, str, str, Attributes]
# The released form's inputs (element types) and whether blank_index is given, for model caches.
ReleasedKey = tuple[tuple[tuple[str, str], ...], Attributes]
IR_TIME_MAJOR_ONLY = "ctcop's custom IR layer implements the spec's time-major form"
NO_BFLOAT16 = "ctcop's {} export serves float16, float32 and float64 logits, not bfloat16 (spec 11.1)"


def _logits_type(case: Case) -> str:
    """The logits' element type as the case declares it (bfloat16 even when stored as bits)."""
    return str(case.logits_dtype)


@dataclass(frozen=True)
class Runtime:
    """A named way of evaluating CTCLoss-4: ``evaluate`` takes the spec form's arrays,
    ``released`` the released form's inputs by name (None: such cases are Unsupported, for
    ``released_unsupported``); ``bfloat16``: why bfloat16 logits are Unsupported ("" when they
    are served); ``needs``: the modules that must import for it to run; ``spec_outcome``: an
    evaluation of spec-form cases that gives the gradient too; ``sampled``: the default run runs
    :mod:`.sampling`'s sample of the cases only (its evaluations are costly); ``requires``: a
    further condition, once ``needs`` import (None when met, else why not).

    Released-form cases (spec 7): the reference evaluates them with ``openvino_ctc_loss``; the raw
    ``openvino`` runtime hands the case's own inputs to OpenVINO's CTCLoss-4 (no adapter); the ONNX
    runtimes run :func:`ctcop.onnx.released.released_model` (standard operators in front of ctcop's
    node); the lowered IR runs :func:`ctcop.openvino.released.released_ir_model` (stock operators in
    front of the guarded lowering); ctcop's custom IR layer implements the time-major form only
    (Unsupported). bfloat16 logits are Unsupported where ctcop's export does not serve them (spec
    11.1: ONNX and IR). The OpenVINO adapters compile at the precision the case's logits declare
    (spec 13), not at the CPU's default."""

    name: str
    description: str
    evaluate: Evaluate
    released: Released | None = None
    released_unsupported: str = ""
    bfloat16: str = ""
    needs: tuple[str, ...] = ()
    spec_outcome: Callable[[Mapping[str, np.ndarray], Attributes], Outcome] | None = None
    sampled: bool = False
    device: str | None = None
    precision: str = DECLARED
    requires: Callable[[], str | None] | None = None

    def on(self, device: str, precision: str) -> Runtime:
        """This OpenVINO runtime compiling for ``device`` at ``precision`` (spec 10.4), named
        for its row (:mod:`.rows`)."""
        assert self.device is not None, f"{self.name} compiles for no OpenVINO device"
        return replace(self, name=Row(self.name, device, precision).name, device=device, precision=precision)

    def __call__(
        self, inputs: np.ndarray, sequence_mask: np.ndarray, labels: np.ndarray, **attributes: bool
    ) -> np.ndarray:
        """The loss of spec-form arrays: :meth:`run` on the case they make."""
        arrays = (np.asarray(inputs), np.asarray(sequence_mask), np.asarray(labels))
        return outcome(self.run(Case.spec("arrays", *arrays, Attributes.of(attributes)))).loss

    def available(self) -> str | None:
        """None when every library the runtime needs imports here and ``requires`` holds; otherwise why not."""
        for module in self.needs:
            try:
                importlib.import_module(module)
            except Exception as error:  # a library that fails to import, however, is not there
                return f"{module} does not import: {type(error).__name__}: {error}"
        return None if self.requires is None else self.requires()

    def run(self, case: Case) -> Outcome | np.ndarray:
        """The runtime's answer for ``case`` (either form); :class:`Unsupported` outside its scope."""
        if case.form == "released" and self.released is None:
            raise Unsupported(self.released_unsupported)
        logits_type = _logits_type(case)
        if logits_type == "bfloat16" and self.bfloat16:
            raise Unsupported(self.bfloat16)
        x = case.inputs
        if logits_type == "bfloat16" and next(iter(x.values())).dtype.name != "bfloat16":
            raise Unsupported("bfloat16 logits need the ml_dtypes package (the corpus stores their bits)")
        target = () if self.device is None else (Row(self.name, self.device, self.precision),)
        if case.form == "released":
            assert self.released is not None
            return self.released(x, case.attributes, *target)
        if self.spec_outcome is not None:
            return self.spec_outcome(x, case.attributes)
        return self.evaluate(x["inputs"], x["sequence_mask"], x["labels"], case.attributes, *target)


# -- the reference ---------------------------------------------------------------------------


def _reference(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    return ctc_loss(inputs, mask, labels, **attributes)


def _reference_spec(x: Mapping[str, np.ndarray], attributes: Attributes) -> Outcome:
    loss, grad = ctc_loss_grad(x["inputs"], x["sequence_mask"], x["labels"], **attributes)
    return Outcome(loss, grad)


def _reference_released(x: Mapping[str, np.ndarray], attributes: Attributes) -> Outcome:
    return Outcome(reference_loss("released", x, attributes), reference_grad("released", x, attributes))


# -- ONNX models: the spec form's writer and the released form's front -------------------------


def _key(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> Key:
    return (inputs.dtype.name, mask.dtype.name, labels.dtype.name, attributes)


def _released_key(x: Mapping[str, np.ndarray], attributes: Attributes) -> ReleasedKey:
    """The element types of the released inputs present, in port order, and the attributes."""
    names = form("openvino").input_names
    return tuple((name, np.asarray(x[name]).dtype.name) for name in names if name in x), attributes


def _released_bytes(key: ReleasedKey) -> bytes:
    from ..onnx.released import released_model

    types, attributes = key
    dtypes = dict(types)
    logits = dtypes.pop("logits")
    model = released_model(dtype=logits, index_dtype=dtypes, blank_index="blank_index" in dtypes, attributes=attributes)
    return bytes(model.SerializeToString())


def _spec_bytes(key: Key) -> bytes:
    from ..onnx import onnx_model

    dtype, mask_dtype, labels_dtype, attributes = key
    model = onnx_model(dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, attributes=attributes)
    return bytes(model.SerializeToString())


# A folder the processes of one run share their exported models through (the conformance pool
# sets it for its workers): a model that another process of the run built is read, not built again.
MODELS_VARIABLE = "CTCOP_CONFORMANCE_MODELS"


def _built(key: Key | ReleasedKey) -> bytes:
    return _released_bytes(key) if len(key) == 2 else _spec_bytes(key)


@cache
def _model_bytes(key: Key | ReleasedKey) -> bytes:
    """The serialized ONNX model of a spec-form ``Key`` or a released-form ``ReleasedKey``: read
    from the folder :data:`MODELS_VARIABLE` names when a process of the run built it already, else
    built (and written there whole, by rename, for the others)."""
    folder = os.environ.get(MODELS_VARIABLE)
    if not folder:
        return _built(key)
    path = os.path.join(folder, hashlib.sha256(repr(key).encode()).hexdigest() + ".onnx")
    try:
        with open(path, "rb") as file:
            return file.read()
    except FileNotFoundError:
        pass
    data = _built(key)
    partial = f"{path}.{os.getpid()}"
    with open(partial, "wb") as file:
        file.write(data)
    os.replace(partial, path)
    return data


def _feeds(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip(form("time_major").input_names, (inputs, mask, labels), strict=True))


# onnxruntime threads per session: the suite runs one worker per core, so one thread each (and no
# spinning) keeps the workers from competing; 0 is onnxruntime's default (benchmarks set it).
ONNXRUNTIME_THREADS = 1
# The execution provider of each onnxruntime row and its options. The OpenVINO provider (the
# onnxruntime-openvino build) leaves the nodes it does not take to onnxruntime's CPU provider, as
# it does for its users.
OPENVINO_PROVIDER = "OpenVINOExecutionProvider"
PROVIDERS: dict[str, tuple[str, dict[str, str]]] = {
    "onnxruntime": ("CPUExecutionProvider", {}),
    "onnxruntime-openvino": (OPENVINO_PROVIDER, {"device_type": "CPU", "num_of_threads": str(ONNXRUNTIME_THREADS)}),
}


@cache
def _ort_session(key: Key | ReleasedKey, row: str) -> Any:
    import onnxruntime

    from ..onnx import session_options

    options = session_options(ONNXRUNTIME_THREADS, spinning=not ONNXRUNTIME_THREADS)
    provider, provider_options = PROVIDERS[row]
    return onnxruntime.InferenceSession(
        _model_bytes(key), options, providers=[provider], provider_options=[provider_options]
    )


def _onnxruntime(row: str) -> tuple[Evaluate, Released]:
    """The spec form's and the released form's evaluations on ``row``'s providers."""

    def evaluate(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
        session = _ort_session(_key(inputs, mask, labels, attributes), row)
        result: np.ndarray = session.run(None, _feeds(inputs, mask, labels))[0]
        return result

    def released(x: Mapping[str, np.ndarray], attributes: Attributes) -> np.ndarray:
        result: np.ndarray = _ort_session(_released_key(x, attributes), row).run(None, dict(x))[0]
        return result

    return evaluate, released


def _has_openvino_provider() -> str | None:
    import onnxruntime

    if OPENVINO_PROVIDER in onnxruntime.get_available_providers():
        return None
    return f"onnxruntime has no {OPENVINO_PROVIDER}: onnxruntime-openvino replaces onnxruntime (a venv of its own)"


@cache
def _onnx_reference_evaluator(key: Key | ReleasedKey) -> Any:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(_model_bytes(key))


def _onnx_reference(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes) -> np.ndarray:
    evaluator = _onnx_reference_evaluator(_key(inputs, mask, labels, attributes))
    with np.errstate(all="ignore"):
        result: np.ndarray = evaluator.run(None, _feeds(inputs, mask, labels))[0]
    return result


def _onnx_reference_released(x: Mapping[str, np.ndarray], attributes: Attributes) -> np.ndarray:
    evaluator = _onnx_reference_evaluator(_released_key(x, attributes))
    with np.errstate(all="ignore"):
        result: np.ndarray = evaluator.run(None, dict(x))[0]
    return result


_COMPILED: dict[tuple[Any, ...], Any] = {}


def _config(core: Any, row: Row, logits_dtype: str) -> dict[str, str]:
    """The compile config of ``row``'s precision for a model whose logits are ``logits_dtype``."""
    from ..openvino.precision import precision_config

    return precision_config(core, row.device, row.precision, logits_dtype)


def _logits_dtype(key: Key | ReleasedKey) -> str:
    """The logits' element type of a spec-form ``Key`` or a released-form ``ReleasedKey``."""
    return key[0] if len(key) == 4 else dict(key[0])["logits"]


def _infer(build: Callable[..., Any], key: tuple[Any, ...], inputs: Any) -> np.ndarray:
    """The first output of the compiled model ``build(*key)`` on ``inputs``. Compiled models are
    cached by builder and key, and a failed inference drops its model: OpenVINO's CPU plugin
    fails every later inference of a compiled model whose shape inference once failed, on any
    input, with the first failure's message (openvino 2026.4; a fresh infer request does not help)."""
    cache_key = (build.__name__, *key)
    compiled = _COMPILED.get(cache_key)
    if compiled is None:
        compiled = _COMPILED[cache_key] = build(*key)
    try:  # copied in: the case's arrays are read-only, and OpenVINO's shared path wants them writeable
        return np.asarray(compiled(inputs, share_inputs=False)[0])
    except Exception:
        del _COMPILED[cache_key]
        raise


def _openvino_onnx_model(key: Key | ReleasedKey, row: Row) -> Any:
    from ..openvino import openvino_core

    core = openvino_core()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ctc_loss.onnx")
        with open(path, "wb") as file:
            file.write(_model_bytes(key))
        return core.compile_model(core.read_model(path), row.device, _config(core, row, _logits_dtype(key)))


def _openvino_onnx(
    inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes, row: Row
) -> np.ndarray:
    return _infer(_openvino_onnx_model, (_key(inputs, mask, labels, attributes), row), [inputs, mask, labels])


def _openvino_onnx_released(x: Mapping[str, np.ndarray], attributes: Attributes, row: Row) -> np.ndarray:
    return _infer(_openvino_onnx_model, (_released_key(x, attributes), row), dict(x))


# -- ctcop's IR ------------------------------------------------------------------------------


def _openvino_ir_model(key: Key, ir_form: str, row: Row) -> Any:
    """ctcop's IR, saved and read back: by a stock Core for the lowered form (it needs nothing
    else), by a Core with ctcop's extensions for the custom-op form."""
    import openvino

    from ..openvino import ir_model, openvino_core, save_ir

    dtype, mask_dtype, labels_dtype, attributes = key
    model = ir_model(form=ir_form, dtype=dtype, mask_dtype=mask_dtype, labels_dtype=labels_dtype, attributes=attributes)
    core = openvino.Core() if ir_form == "lowered" else openvino_core()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ctc_loss.xml")
        save_ir(model, path)
        return core.compile_model(core.read_model(path), row.device, _config(core, row, dtype))


def _openvino_ir_released(x: Mapping[str, np.ndarray], attributes: Attributes, row: Row) -> np.ndarray:
    from ..openvino.released import compiled_released_model

    return _infer(compiled_released_model, (*_released_key(x, attributes), row.device, row.precision), dict(x))


def _openvino_ir(ir_form: str) -> Evaluate:
    def evaluate(
        inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes, row: Row
    ) -> np.ndarray:
        key = (_key(inputs, mask, labels, attributes), ir_form, row)
        return _infer(_openvino_ir_model, key, [inputs, mask, labels])

    return evaluate


# -- OpenVINO's native CTCLoss-4, unguarded ----------------------------------------------------


def _element_type(dtype: str) -> Any:
    """OpenVINO's element type for a numpy type name (bfloat16 has no numpy type OpenVINO knows)."""
    import openvino

    return openvino.Type.bf16 if dtype == "bfloat16" else np.dtype(dtype)


def _ov_input(array: np.ndarray) -> Any:
    """``array`` as OpenVINO takes it: bfloat16 as a bf16 Tensor over its bits."""
    if array.dtype.name != "bfloat16":
        return array
    import openvino

    return openvino.Tensor(np.ascontiguousarray(array).view(np.uint16), array.shape, openvino.Type.bf16)


def _ov_output(result: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """OpenVINO's output as an array of ``dtype`` (a bf16 output comes back as float16-typed bits)."""
    array = np.asarray(result)
    if dtype.name == "bfloat16" and array.dtype != dtype:
        return array.view(np.uint16).view(dtype)
    return array


def _openvino_native_model(key: ReleasedKey, row: Row) -> Any:
    """OpenVINO's opset4 CTCLoss over parameters of the given element types (dynamic shapes)."""
    import openvino
    import openvino.opset4 as opset4

    types, attributes = key
    ranks = {"logits": 3, "logit_length": 1, "labels": 2, "label_length": 1, "blank_index": 0}
    parameters = [opset4.parameter([-1] * ranks[name], _element_type(dtype), name=name) for name, dtype in types]
    node = opset4.ctc_loss(*parameters, **attributes)
    core = openvino.Core()
    config = _config(core, row, dict(types)["logits"])
    return core.compile_model(openvino.Model([node], parameters), row.device, config)


def openvino_native_inputs(
    inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The released form's inputs for the spec's inputs: layout only (spec 7, last paragraph).

    Logits transposed to [N, T, C], frame counts from the mask, pads moved out of the label rows
    (stable) and counted. No guard of any kind: what the kernel does with them is its own.
    """
    batch = canonical.from_time_major(inputs, mask, labels, preprocess_collapse_repeated=False, merge_repeated=True)
    frames, n = batch.num_frames, batch.batch_size
    targets = np.zeros((n, frames), dtype=np.int64)
    targets[:, : batch.targets.shape[1]] = batch.targets
    return np.ascontiguousarray(inputs.transpose(1, 0, 2)), batch.lengths, targets, batch.target_lengths


def _openvino_native_released(x: Mapping[str, np.ndarray], attributes: Attributes, row: Row) -> np.ndarray:
    """The case's own inputs, as they are, to OpenVINO's CTCLoss-4 with the case's attributes."""
    feeds = {name: _ov_input(np.asarray(value)) for name, value in x.items()}
    result = _infer(_openvino_native_model, (_released_key(x, attributes), row), feeds)
    return _ov_output(result, np.asarray(x["logits"]).dtype)


def _openvino_native(
    inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, attributes: Attributes, row: Row
) -> np.ndarray:
    names = form("openvino").input_names
    released = dict(zip(names, openvino_native_inputs(inputs, mask, labels), strict=False))
    chosen = Attributes.of(
        {
            "preprocess_collapse_repeated": attributes["preprocess_collapse_repeated"],
            "ctc_merge_repeated": attributes["merge_repeated"],
        },
        form_name="openvino",
    )
    return _openvino_native_released(released, chosen, row)


RUNTIMES: dict[str, Runtime] = {
    runtime.name: runtime
    for runtime in (
        Runtime(
            "reference",
            "ctcop's exact float64 evaluator (loss and gradient)",
            _reference,
            released=_reference_released,
            spec_outcome=_reference_spec,
        ),
        Runtime(
            "onnxruntime",
            "exported ONNX model (model-local function) on onnxruntime's CPU provider",
            *_onnxruntime("onnxruntime"),
            bfloat16=NO_BFLOAT16.format("ONNX"),
            needs=("onnx", "onnxruntime"),
        ),
        Runtime(
            "onnxruntime-openvino",
            "exported ONNX model on onnxruntime's OpenVINO provider (onnxruntime-openvino), device_type CPU",
            *_onnxruntime("onnxruntime-openvino"),
            bfloat16=NO_BFLOAT16.format("ONNX"),
            needs=("onnx", "onnxruntime"),
            requires=_has_openvino_provider,
        ),
        Runtime(
            "onnx-reference",
            "exported ONNX model on onnx.reference.ReferenceEvaluator",
            _onnx_reference,
            released=_onnx_reference_released,
            bfloat16=NO_BFLOAT16.format("ONNX"),
            needs=("onnx", "onnx.reference"),
        ),
        Runtime(
            "openvino-onnx",
            "exported ONNX model read by OpenVINO with ctcop's extension",
            _openvino_onnx,
            released=_openvino_onnx_released,
            bfloat16=NO_BFLOAT16.format("ONNX"),
            needs=("onnx", "openvino"),
            device=DEFAULT_DEVICE,
        ),
        Runtime(
            "openvino",
            "OpenVINO's native CTCLoss-4: released cases as they are, spec cases through layout adapters only",
            _openvino_native,
            released=_openvino_native_released,
            needs=("openvino",),
            device=DEFAULT_DEVICE,
            sampled=True,  # a registered crash (D1) costs a worker process per evaluation
        ),
        Runtime(
            "openvino-ir",
            "ctcop's lowered IR (stock operators and guards) on stock OpenVINO",
            _openvino_ir("lowered"),
            released=_openvino_ir_released,
            bfloat16=NO_BFLOAT16.format("IR"),
            needs=("openvino",),
            device=DEFAULT_DEVICE,
        ),
        Runtime(
            "openvino-custom",
            "ctcop's custom-op IR layer (CTCLoss, ctcop1) in OpenVINO",
            _openvino_ir("custom"),
            released_unsupported=IR_TIME_MAJOR_ONLY,
            bfloat16=NO_BFLOAT16.format("IR"),
            needs=("openvino",),
            device=DEFAULT_DEVICE,
        ),
    )
}
