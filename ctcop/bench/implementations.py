"""What ``ctcop bench`` times: ctcop's evaluator, its exports in onnxruntime and OpenVINO, and
the CTC losses of the frameworks installed here, each called the way its users call it.

An :class:`Implementation` turns the spec form's inputs (:class:`~.shapes.Inputs`) into a
:class:`Prepared` call. Everything a user would hold before computing a loss is done outside the
timed call: models built and compiled (once per process), inputs converted to the framework's
tensors and layout (batch-major logits for optax and OpenVINO's native CTCLoss, compacted
targets and lengths, float64 logits for the float64 peers), JIT compilations run (their time is
``compile_s``). The timed call computes the [N] losses (and the gradient d sum(loss) / d logits
where ``gradient``) and returns them as numpy arrays. Frameworks are imported by name on first
use, so that importing this module loads numpy only.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import ctcop

from ..conformance.peers.common import framework, missing
from ..conformance.runtimes import openvino_native_inputs
from ..schema import form
from .shapes import Inputs
from .threads import tensorflow_threads, torch_threads

Result = tuple[np.ndarray, np.ndarray | None]  # [N] losses, [T, N, C] gradient or None


@dataclass(frozen=True)
class Prepared:
    """A call that computes the losses of one batch, and the JIT compilation it needed (s)."""

    call: Callable[[], Result]
    compile_s: float | None = None


@dataclass(frozen=True)
class Implementation:
    """A column of the table: ``name`` on the command line, ``column`` in the table's head,
    ``label`` in its legend; ``modules`` must be installed; ``gradient``: the call computes the
    gradient too; ``checked``: its losses are compared with ctcop's (the floor computes none)."""

    name: str
    column: str
    label: str
    modules: tuple[str, ...]
    prepare: Callable[[Inputs, int], Prepared]
    gradient: bool = False
    float32_peer: bool = False
    default: bool = True
    checked: bool = True

    def missing(self) -> str | None:
        """None when the libraries it needs are installed, else which are not (nothing imported)."""
        return missing(*self.modules)


def _blank(x: Inputs) -> int:
    return int(x.logits.shape[2]) - 1


# -- ctcop -----------------------------------------------------------------------------------


def _ctcop(x: Inputs, _: int) -> Prepared:
    return Prepared(lambda: (ctcop.ctc_loss(x.logits, x.mask, x.labels), None))


def _ctcop_grad(x: Inputs, _: int) -> Prepared:
    def call() -> Result:
        loss, grad = ctcop.ctc_loss_grad(x.logits, x.mask, x.labels)
        return loss, grad

    return Prepared(call)


# -- ctcop's exports -------------------------------------------------------------------------


@cache
def _onnx_bytes() -> bytes:
    from ..onnx import onnx_model

    return bytes(onnx_model(dtype="float32", mask_dtype="int32", labels_dtype="int64").SerializeToString())


@cache
def onnxruntime_session(threads: int, arena: bool = True) -> Any:
    """onnxruntime's CPU session of ctcop's float32 export: its default threading with
    ``intra_op_num_threads`` = ``threads`` (and the CPU memory arena unless ``arena`` is False)."""
    ort = framework("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.enable_cpu_mem_arena = arena
    return ort.InferenceSession(_onnx_bytes(), options, providers=["CPUExecutionProvider"])


def _onnxruntime(arena: bool) -> Callable[[Inputs, int], Prepared]:
    def prepare(x: Inputs, threads: int) -> Prepared:
        session = onnxruntime_session(threads, arena)
        feeds = dict(zip(form("time_major").input_names, (x.logits, x.mask, x.labels), strict=True))
        return Prepared(lambda: (session.run(None, feeds)[0], None))

    return prepare


def _openvino_config(threads: int) -> dict[str, Any]:
    return {"INFERENCE_NUM_THREADS": threads}


@cache
def _openvino_onnx_model(threads: int) -> Any:
    from ..openvino import openvino_core

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ctc_loss.onnx")
        with open(path, "wb") as file:
            file.write(_onnx_bytes())
        core = openvino_core()
        return core.compile_model(core.read_model(path), "CPU", _openvino_config(threads))


@cache
def _openvino_ir_model(threads: int) -> Any:
    from ..openvino import ir_model

    model = ir_model(form="lowered", dtype="float32", mask_dtype="int32", labels_dtype="int64")
    return framework("openvino").Core().compile_model(model, "CPU", _openvino_config(threads))


def _infer(compiled: Any, inputs: list[np.ndarray]) -> Prepared:
    request = compiled.create_infer_request()

    def call() -> Result:
        outputs = request.infer(inputs, share_inputs=True)
        return np.array(outputs[0]), None

    return Prepared(call)


def _openvino_onnx(x: Inputs, threads: int) -> Prepared:
    return _infer(_openvino_onnx_model(threads), [x.logits, x.mask, x.labels])


def _openvino_ir(x: Inputs, threads: int) -> Prepared:
    return _infer(_openvino_ir_model(threads), [x.logits, x.mask, x.labels])


# -- OpenVINO's native CTCLoss-4 -------------------------------------------------------------


@cache
def _openvino_native_model(threads: int) -> Any:
    ov = framework("openvino")
    opset4 = framework("openvino.opset4")
    ranks = (("logits", 3, np.float32), ("logit_length", 1, np.int64), ("labels", 2, np.int64))
    parameters = [opset4.parameter([-1] * rank, dtype, name=name) for name, rank, dtype in ranks]
    parameters.append(opset4.parameter([-1], np.int64, name="label_length"))
    node = opset4.ctc_loss(*parameters, preprocess_collapse_repeated=False, ctc_merge_repeated=True, unique=False)
    return ov.Core().compile_model(ov.Model([node], parameters), "CPU", _openvino_config(threads))


def _openvino_native(x: Inputs, threads: int) -> Prepared:
    logits, lengths, targets, target_lengths = openvino_native_inputs(x.logits, x.mask, x.labels)
    inputs = [logits, lengths.astype(np.int64), targets, target_lengths.astype(np.int64)]
    return _infer(_openvino_native_model(threads), inputs)


# -- PyTorch ---------------------------------------------------------------------------------


def _torch(threads: int) -> Any:
    torch = framework("torch")
    torch_threads(torch, threads)
    return torch


def _torch_targets(torch: Any, x: Inputs) -> tuple[Any, Any, Any]:
    _, lengths, targets, target_lengths = openvino_native_inputs(x.logits, x.mask, x.labels)
    width = max(1, int(target_lengths.max(initial=0)))
    return (
        torch.from_numpy(np.ascontiguousarray(targets[:, :width])),
        torch.from_numpy(lengths.astype(np.int64)),
        torch.from_numpy(target_lengths.astype(np.int64)),
    )


def _torch_forward(dtype: type[np.floating[Any]]) -> Callable[[Inputs, int], Prepared]:
    def prepare(x: Inputs, threads: int) -> Prepared:
        torch = _torch(threads)
        logits = torch.from_numpy(x.logits.astype(dtype))
        targets, lengths, target_lengths = _torch_targets(torch, x)
        ctc_loss, blank = torch.nn.functional.ctc_loss, _blank(x)

        def call() -> Result:
            with torch.no_grad():
                log_probs = torch.log_softmax(logits, 2)
                loss = ctc_loss(log_probs, targets, lengths, target_lengths, blank=blank, reduction="none")
            return loss.numpy(), None

        return Prepared(call)

    return prepare


def _torch_backward(x: Inputs, threads: int) -> Prepared:
    torch = _torch(threads)
    leaf = torch.from_numpy(x.logits.astype(np.float64)).requires_grad_(True)
    targets, lengths, target_lengths = _torch_targets(torch, x)
    ctc_loss, blank = torch.nn.functional.ctc_loss, _blank(x)

    def call() -> Result:
        leaf.grad = None
        loss = ctc_loss(torch.log_softmax(leaf, 2), targets, lengths, target_lengths, blank=blank, reduction="none")
        loss.sum().backward()
        return loss.detach().numpy(), leaf.grad.numpy()

    return Prepared(call)


# -- TensorFlow ------------------------------------------------------------------------------


@cache
def _tf_loss(threads: int) -> Any:
    """``tf.function`` of ``tf.nn.ctc_loss`` with sparse labels and the blank last: TensorFlow's
    CTC kernel (its dense-label path is TensorFlow code, several times slower on the CPU)."""
    tf = framework("tensorflow")
    tensorflow_threads(tf, threads)

    def loss(logits: Any, indices: Any, values: Any, shape: Any, lengths: Any) -> Any:
        labels = tf.SparseTensor(indices, values, shape)
        return tf.nn.ctc_loss(labels, logits, None, lengths, logits_time_major=True, blank_index=-1)

    return tf, tf.function(loss)


def _tensorflow(x: Inputs, threads: int) -> Prepared:
    tf, function = _tf_loss(threads)
    _, lengths, targets, target_lengths = openvino_native_inputs(x.logits, x.mask, x.labels)
    i, j = np.nonzero(np.arange(targets.shape[1])[None, :] < target_lengths[:, None])
    arguments = (
        tf.constant(x.logits),
        tf.constant(np.stack([i, j], axis=1).astype(np.int64)),
        tf.constant(targets[i, j].astype(np.int32)),
        tf.constant(np.array(targets.shape, dtype=np.int64)),
        tf.constant(lengths.astype(np.int32)),
    )
    start = time.perf_counter()
    concrete = function.get_concrete_function(*arguments)
    compile_s = time.perf_counter() - start
    return Prepared(lambda: (concrete(*arguments).numpy(), None), compile_s)


# -- optax (JAX) -----------------------------------------------------------------------------


def _optax(dtype: type[np.floating[Any]]) -> Callable[[Inputs, int], Prepared]:
    def prepare(x: Inputs, _: int) -> Prepared:
        jax, optax = framework("jax"), framework("optax")
        blank = _blank(x)
        logits, lengths, targets, target_lengths = openvino_native_inputs(x.logits, x.mask, x.labels)
        width = max(1, int(target_lengths.max(initial=0)))
        frames = np.arange(logits.shape[1])[None, :] >= lengths[:, None]
        positions = np.arange(width)[None, :] >= target_lengths[:, None]
        wide = dtype == np.float64
        with jax.enable_x64(wide):
            arrays = [
                jax.device_put(a)
                for a in (logits.astype(dtype), frames.astype(dtype), targets[:, :width].astype(np.int32))
            ]
            arrays.append(jax.device_put(positions.astype(dtype)))
            start = time.perf_counter()
            compiled = jax.jit(lambda a, b, c, d: optax.ctc_loss(a, b, c, d, blank_id=blank)).lower(*arrays).compile()
            compile_s = time.perf_counter() - start

        def call() -> Result:
            with jax.enable_x64(wide):
                return np.asarray(compiled(*arrays)), None

        return Prepared(call, compile_s)

    return prepare


# -- a floor ---------------------------------------------------------------------------------


def _exp_floor(x: Inputs, _: int) -> Prepared:
    """One float64 exp pass over the logits into a buffer allocated beforehand (numpy, one thread)."""
    out = np.empty(x.logits.shape, dtype=np.float64)
    return Prepared(lambda: (np.exp(x.logits, out=out, dtype=np.float64)[0, :, 0], None))


IMPLEMENTATIONS: dict[str, Implementation] = {
    implementation.name: implementation
    for implementation in (
        Implementation("ctcop", "ctcop", "ctcop.ctc_loss (float64 math on float32 input)", ("numpy",), _ctcop),
        Implementation(
            "ctcop-grad", "ctcop+g", "ctcop.ctc_loss_grad (loss and gradient)", ("numpy",), _ctcop_grad, True
        ),
        Implementation(
            "onnxruntime", "ort", "ctcop's ONNX export in onnxruntime (float32)", ("onnxruntime",), _onnxruntime(True)
        ),
        Implementation(
            "onnxruntime-no-arena",
            "ort-na",
            "the same without onnxruntime's CPU memory arena (enable_cpu_mem_arena = False)",
            ("onnxruntime",),
            _onnxruntime(False),
            default=False,
        ),
        Implementation(
            "openvino-onnx", "ov-onnx", "ctcop's ONNX export in OpenVINO (float32)", ("openvino",), _openvino_onnx
        ),
        Implementation(
            "openvino-ir",
            "ov-ir",
            "ctcop's lowered IR in OpenVINO (float32)",
            ("openvino",),
            _openvino_ir,
            default=False,
        ),
        Implementation(
            "torch-f32",
            "pt32",
            "PyTorch float32 forward (log_softmax + F.ctc_loss)",
            ("torch",),
            _torch_forward(np.float32),
            float32_peer=True,
        ),
        Implementation(
            "torch-f64",
            "pt64",
            "PyTorch float64 forward (log_softmax + F.ctc_loss)",
            ("torch",),
            _torch_forward(np.float64),
        ),
        Implementation(
            "torch-f64-grad", "pt64+b", "PyTorch float64 forward + backward", ("torch",), _torch_backward, True
        ),
        Implementation(
            "tensorflow",
            "tf32",
            "TensorFlow tf.nn.ctc_loss float32 (sparse labels, tf.function)",
            ("tensorflow",),
            _tensorflow,
            float32_peer=True,
        ),
        Implementation(
            "optax",
            "optax32",
            "optax.ctc_loss float32 (JAX, jitted)",
            ("jax", "optax"),
            _optax(np.float32),
            float32_peer=True,
        ),
        Implementation(
            "optax-f64",
            "optax64",
            "optax.ctc_loss float64 (JAX x64, jitted)",
            ("jax", "optax"),
            _optax(np.float64),
            default=False,
        ),
        Implementation(
            "openvino-native",
            "ov32",
            "OpenVINO native CTCLoss-4 (float32, inputs already laid out)",
            ("openvino",),
            _openvino_native,
            float32_peer=True,
        ),
        Implementation(
            "exp-floor",
            "exp64",
            "floor: one float64 exp pass over the logits (numpy, one thread)",
            ("numpy",),
            _exp_floor,
            checked=False,
        ),
    )
}


def default_names() -> list[str]:
    return [name for name, implementation in IMPLEMENTATIONS.items() if implementation.default]
