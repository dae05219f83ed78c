"""The frameworks' CTC losses as the bench calls them: PyTorch (float32 and float64 forward,
float64 forward and backward), TensorFlow's ``tf.nn.ctc_loss`` (sparse labels: its CTC kernel),
optax (jitted), warp-ctc through PaddlePaddle (float32 loss and gradient) and OpenVINO's native
CTCLoss-4. Each is prepared as its users hold it before a
loss is computed (tensors built, layout converted, compiled) and imported by name on first use."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import numpy as np

from ..conformance.peers.warpctc import paddle
from ..process.frameworks import framework
from ..process.native_stderr import native_stderr_silenced
from .prepared import Layout, Prepare, Prepared, Result, layout, openvino_config, openvino_infer
from .shapes import Inputs
from .threads import tensorflow_threads, torch_threads

# -- OpenVINO's native CTCLoss-4 -------------------------------------------------------------


@cache
def _openvino_native_model(threads: int) -> Any:
    ov, opset4 = framework("openvino"), framework("openvino.opset4")
    ports = (("logits", 3, np.float32), ("logit_length", 1, np.int64), ("labels", 2, np.int64))
    parameters = [opset4.parameter([-1] * rank, dtype, name=name) for name, rank, dtype in ports]
    parameters.append(opset4.parameter([-1], np.int64, name="label_length"))
    node = opset4.ctc_loss(*parameters, preprocess_collapse_repeated=False, ctc_merge_repeated=True, unique=False)
    return ov.Core().compile_model(ov.Model([node], parameters), "CPU", openvino_config(threads))


def openvino_native(x: Inputs, threads: int) -> Prepared:
    """The released form's inputs, laid out beforehand (spec 7), to OpenVINO's CTCLoss-4."""
    ready = layout(x)
    inputs = [ready.batch_major, ready.lengths, ready.targets, ready.target_lengths]
    return openvino_infer(_openvino_native_model(threads), inputs)


# -- PyTorch ---------------------------------------------------------------------------------


def _torch(threads: int) -> Any:
    torch = framework("torch")
    torch_threads(torch, threads)
    return torch


def _torch_targets(torch: Any, ready: Layout) -> tuple[Any, Any, Any]:
    targets = torch.from_numpy(ready.narrow_targets)
    return targets, torch.from_numpy(ready.lengths), torch.from_numpy(ready.target_lengths)


def torch_forward(dtype: type[np.floating[Any]]) -> Prepare:
    """``log_softmax`` then ``F.ctc_loss`` of time-major logits in ``dtype``, without autograd."""

    def prepare(x: Inputs, threads: int) -> Prepared:
        torch, ready = _torch(threads), layout(x)
        logits = torch.from_numpy(x.logits.astype(dtype))
        targets, lengths, target_lengths = _torch_targets(torch, ready)
        ctc_loss, blank = torch.nn.functional.ctc_loss, ready.blank

        def call() -> Result:
            with torch.no_grad():
                log_probs = torch.log_softmax(logits, 2)
                loss = ctc_loss(log_probs, targets, lengths, target_lengths, blank=blank, reduction="none")
            return loss.numpy(), None

        return Prepared(call, turn=lambda: torch_threads(torch, threads))

    return prepare


def torch_backward(x: Inputs, threads: int) -> Prepared:
    """float64 forward, then ``backward`` of the sum: the gradient with respect to the logits."""
    torch, ready = _torch(threads), layout(x)
    leaf = torch.from_numpy(x.logits.astype(np.float64)).requires_grad_(True)
    targets, lengths, target_lengths = _torch_targets(torch, ready)
    ctc_loss, blank = torch.nn.functional.ctc_loss, ready.blank

    def call() -> Result:
        leaf.grad = None
        loss = ctc_loss(torch.log_softmax(leaf, 2), targets, lengths, target_lengths, blank=blank, reduction="none")
        loss.sum().backward()
        return loss.detach().numpy(), leaf.grad.numpy()

    return Prepared(call, turn=lambda: torch_threads(torch, threads))


# -- TensorFlow ------------------------------------------------------------------------------


@cache
def _tf_loss(threads: int) -> Any:
    """``tf.function`` of ``tf.nn.ctc_loss`` with sparse labels and the blank last: TensorFlow's
    CTC kernel (its dense-label path is TensorFlow code, several times slower on the CPU)."""
    with native_stderr_silenced():
        tf = framework("tensorflow")
        tensorflow_threads(tf, threads)

    def loss(logits: Any, indices: Any, values: Any, shape: Any, lengths: Any) -> Any:
        labels = tf.SparseTensor(indices, values, shape)
        return tf.nn.ctc_loss(labels, logits, None, lengths, logits_time_major=True, blank_index=-1)

    return tf, tf.function(loss)


def tensorflow(x: Inputs, threads: int) -> Prepared:
    """Time-major float32 logits, sparse int32 labels; tracing is the compilation."""
    (tf, function), ready = _tf_loss(threads), layout(x)
    i, j = np.nonzero(np.arange(ready.targets.shape[1])[None, :] < ready.target_lengths[:, None])
    indices, values = np.stack([i, j], axis=1).astype(np.int64), ready.targets[i, j].astype(np.int32)
    host = (x.logits, indices, values, np.array(ready.targets.shape, dtype=np.int64), ready.lengths.astype(np.int32))
    with native_stderr_silenced():  # the first tensor starts TensorFlow's runtime
        arguments = tuple(tf.constant(array) for array in host)
        start = time.perf_counter()
        concrete = function.get_concrete_function(*arguments)
        compile_s = time.perf_counter() - start
    return Prepared(lambda: (concrete(*arguments).numpy(), None), compile_s)


# -- warp-ctc (PaddlePaddle) -------------------------------------------------------------------


def warpctc(x: Inputs, _: int) -> Prepared:
    """``paddle.nn.functional.ctc_loss`` (warp-ctc: its own softmax, loss and gradient in one
    pass, one CPU thread whatever the bench's count) of time-major float32 logits, then
    ``backward`` of the sum: the gradient with respect to the logits."""
    p, ready = paddle(), layout(x)
    leaf = p.to_tensor(x.logits, stop_gradient=False)
    labels = p.to_tensor(ready.narrow_targets.astype(np.int32))
    lengths, target_lengths = p.to_tensor(ready.lengths), p.to_tensor(ready.target_lengths)
    ctc_loss, blank = p.nn.functional.ctc_loss, ready.blank

    def call() -> Result:
        leaf.clear_gradient()
        loss = ctc_loss(leaf, labels, lengths, target_lengths, blank=blank, reduction="none")
        loss.sum().backward()
        return loss.numpy(), leaf.grad.numpy()

    return Prepared(call)


# -- optax (JAX) -----------------------------------------------------------------------------


def optax(dtype: type[np.floating[Any]]) -> Prepare:
    """``jax.jit`` of ``optax.ctc_loss`` on batch-major logits in ``dtype`` (float64 under x64),
    compiled for the shape beforehand; the call waits for the result."""

    def prepare(x: Inputs, _: int) -> Prepared:
        jax, optax_module, ready = framework("jax"), framework("optax"), layout(x)
        frames = np.arange(ready.batch_major.shape[1])[None, :] >= ready.lengths[:, None]
        targets = ready.narrow_targets
        positions = np.arange(targets.shape[1])[None, :] >= ready.target_lengths[:, None]
        wide, blank = dtype == np.float64, ready.blank
        host = (
            ready.batch_major.astype(dtype),
            frames.astype(dtype),
            targets.astype(np.int32),
            positions.astype(dtype),
        )
        with jax.enable_x64(wide):
            arrays = [jax.device_put(a) for a in host]
            start = time.perf_counter()
            function = jax.jit(lambda a, b, c, d: optax_module.ctc_loss(a, b, c, d, blank_id=blank))
            compiled = function.lower(*arrays).compile()
            compile_s = time.perf_counter() - start

        def call() -> Result:
            with jax.enable_x64(wide):
                return np.asarray(compiled(*arrays)), None

        return Prepared(call, compile_s)

    return prepare
