"""The op alone run in onnxruntime with its batch split over threads (spec 11; imports onnxruntime
lazily).

onnxruntime runs a graph's CPU operators one after another (its parallel executor no longer runs
independent nodes at once) and splits an elementwise operator over its intra-op threads only above
about 64k values, so the recursion of :mod:`.function`, 2 + S rows by 2N lanes a step, runs on one
thread whatever ``intra_op_num_threads`` says. Its samples are independent, which is where the
other threads can work: :class:`BatchParallelSession` runs a batch as parts of consecutive samples,
one session a part, at once. A sample's loss is the one onnxruntime gives it in its
part's batch: equal to the whole batch's up to the rounding that onnxruntime's float32 ``Log`` and
``ReduceSum`` take from where an element lies in memory (docs/onnx-function.md).
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import onnx

from ..errors import InvalidInputError
from ..process.cpus import MAX_THREADS, usable_cpus
from ..schema import form
from . import function
from .session import session_options
from .types import numpy_type

# A batch is split where its work, N * T * (2L + 3 + C) (the states the recursion steps through
# and the logits it reads), gives every part at least PART_WORK. Measured on 2 cores, T = 150: at
# L = 40, C = 28 two parts took 0.85x one run's time at N = 16 (2.7e5 units) and 1.1-1.8x at N = 8;
# at L = 5, C = 28, N = 64 (3.9e5 units) 0.7-0.8x.
PART_WORK = 125_000
# Nor is a batch split where the logits outweigh the states by more than this: reading them is bound
# by memory, which the parts share (L = 20, C = 5000, N = 64: 1.2x one run's time with two parts;
# L = 20, C = 100 and L = 40, C = 200: 0.8x and 0.65x).
READ_RATIO = 4


@dataclass(frozen=True)
class _Port:
    """A graph input as the model declares it: its numpy element type (None where numpy has none)
    and its dims (an int where fixed)."""

    name: str
    dtype: np.dtype[Any] | None
    dims: tuple[int | None, ...]


def _port(value: onnx.ValueInfoProto) -> _Port:
    tensor = value.type.tensor_type
    dims = tuple(dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim)
    return _Port(value.name, numpy_type(tensor.elem_type), dims)


def _op_alone(model: onnx.ModelProto | bytes) -> onnx.ModelProto:
    """``model`` (or the model of these bytes), refused unless it is the op alone as
    :func:`ctcop.onnx.onnx_model` writes it: one ``ai.ctcop.CTCLoss`` node over the time-major
    inputs, its function carried, its output of rank 1 (a sample's loss depends on that sample's
    inputs only, spec 3, which is what lets a batch be split)."""
    proto = model if isinstance(model, onnx.ModelProto) else None
    if proto is None:
        if not isinstance(model, bytes):
            raise InvalidInputError("model", f"must be an onnx.ModelProto or its bytes, not {type(model).__name__}")
        try:
            proto = onnx.load_from_string(model)
        except Exception as error:  # protobuf's DecodeError and others: the bytes are not a model
            raise InvalidInputError("model", f"is not an ONNX model ({type(error).__name__})") from None
    spec, graph = form("time_major"), proto.graph
    nodes = [(node.domain, node.op_type, tuple(node.input), tuple(node.output)) for node in graph.node]
    outputs = [(value.name, len(value.type.tensor_type.shape.dim)) for value in graph.output]
    attributes = {attribute.name for node in graph.node for attribute in node.attribute}
    if (
        nodes != [(function.DOMAIN, function.OP_TYPE, spec.input_names, (spec.output_name,))]
        or not attributes <= set(spec.attributes)
        or tuple(value.name for value in graph.input) != spec.input_names
        or outputs != [(spec.output_name, 1)]
        or not _carries_own_function(proto)
    ):
        raise InvalidInputError(
            "model",
            f"must be the op alone as ctcop.onnx.onnx_model writes it: one {function.DOMAIN}.{function.OP_TYPE} node "
            f"with this ctcop's function (not inlined), inputs {', '.join(spec.input_names)}, "
            f"output {spec.output_name} [N]",
        )
    return proto


def _carries_own_function(proto: onnx.ModelProto) -> bool:
    """Whether ``proto`` carries the ``ai.ctcop.CTCLoss`` function this ctcop writes for its opset
    and logits' type (an edited body could make a sample's loss depend on the others)."""
    opset = next((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), 0)
    if not function.MIN_OPSET <= opset <= onnx.defs.onnx_opset_version() or not proto.graph.input:
        return False
    double = proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    own = function.ctc_loss_function(opset, "float64" if double else "float32").SerializeToString()
    carried = [f for f in proto.functions if (f.domain, f.name) == (function.DOMAIN, function.OP_TYPE)]
    return len(carried) == 1 and carried[0].SerializeToString() == own


def _thread_count(threads: Any) -> int:
    """``threads`` as a count of threads (0: the CPUs this process may run on)."""
    try:
        count = operator.index(threads)
    except TypeError:
        count = -1
    if isinstance(threads, bool) or not 0 <= count <= MAX_THREADS:
        raise InvalidInputError("threads", f"must be a whole number in [0, {MAX_THREADS}], not {threads!r}")
    return count or usable_cpus()


class BatchParallelSession:
    """ctcop's op-alone ONNX model (:func:`ctcop.onnx.onnx_model`) in onnxruntime, a batch run in
    parts of consecutive samples on up to ``threads`` threads at once.

    Args:
        model: the model (time-major form: ``inputs`` [T, N, C], ``sequence_mask`` [T, N],
            ``labels`` [N, T]; output ``loss`` [N]; the function form, not inlined), or its bytes.
        threads: the most parts run at once (0: one per CPU this process may run on).
        arena: onnxruntime's CPU memory arena (see :func:`.session_options`).

    A batch too small to gain (see PART_WORK, READ_RATIO), of a model whose N is fixed, or whose
    inputs disagree on N (the model's batch-wide rule then decides), runs as one call of a session
    with ``threads`` intra-op threads.
    """

    def __init__(self, model: onnx.ModelProto | bytes, threads: int = 0, *, arena: bool = True) -> None:
        import onnxruntime

        proto = _op_alone(model)
        self._threads = _thread_count(threads)
        self._bytes = model if isinstance(model, bytes) else proto.SerializeToString()
        self._ports = [_port(value) for value in proto.graph.input]
        self._arena = arena
        self._whole = onnxruntime.InferenceSession(
            self._bytes, session_options(self._threads, arena=arena), providers=["CPUExecutionProvider"]
        )
        self._parts: list[Any] = []
        self._lock = threading.Lock()

    def parts(self, inputs: np.ndarray, sequence_mask: np.ndarray, labels: np.ndarray) -> int:
        """How many parts :meth:`run` splits this batch into (1: one call, not split)."""
        self._check(inputs, sequence_mask, labels)
        frames, batch, classes = inputs.shape
        fixed = any(port.dims[axis] is not None for port, axis in zip(self._ports, (1, 1, 0), strict=True))
        if fixed or sequence_mask.shape[1] != batch or labels.shape[0] != batch or batch < 2:
            return 1
        longest = int(np.count_nonzero(labels != -1, axis=1).max()) if labels.size else 0
        states = 2 * longest + 3
        if classes > READ_RATIO * states:
            return 1
        work = batch * frames * (states + classes)
        return int(max(1, min(self._threads, batch, work // PART_WORK)))

    def run(self, inputs: np.ndarray, sequence_mask: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """The model's output [N] for these inputs (numpy arrays of the model's element types,
        ranks and fixed dims; :class:`~ctcop.InvalidInputError` otherwise). Returns once every
        part has finished, also when one fails or the call is interrupted."""
        count = self.parts(inputs, sequence_mask, labels)
        if count == 1:
            return np.asarray(self._whole.run(None, self._feeds(inputs, sequence_mask, labels))[0])
        batch = inputs.shape[1]
        edges = [batch * k // count for k in range(count + 1)]
        feeds = [
            self._feeds(inputs[:, start:end], sequence_mask[:, start:end], labels[start:end])
            for start, end in pairwise(edges)
        ]
        first, *others = self._sessions(count)
        started: list[_Part] = []
        try:
            for session, feed in zip(others, feeds[1:], strict=True):
                started.append(_Part(session, feed))
            outputs = [first.run(None, feeds[0])[0]]
        finally:
            # onnxruntime reads a part's arrays while it runs: none is left running past here,
            # and an interruption is raised once every part has ended.
            interruption = next((error for error in [part.ended() for part in started] if error is not None), None)
            if interruption is not None:
                raise interruption
        return np.concatenate([*outputs, *(part.result() for part in started)])

    def close(self) -> None:
        """Releases the sessions of the parts and their threads (a later :meth:`run` makes them
        again)."""
        with self._lock:
            self._parts = []

    def __enter__(self) -> BatchParallelSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, *arrays: np.ndarray) -> None:
        for array, port in zip(arrays, self._ports, strict=True):
            kind = port.dtype.name if port.dtype is not None else "the model's element type"
            typed = isinstance(array, np.ndarray) and (port.dtype is None or array.dtype == port.dtype)
            if not typed or array.ndim != len(port.dims):
                raise InvalidInputError(port.name, f"must be a {len(port.dims)}-D numpy array of {kind}")
            for axis, (size, declared) in enumerate(zip(array.shape, port.dims, strict=True)):
                if declared is not None and size != declared:
                    raise InvalidInputError(
                        port.name, f"has {size} along axis {axis}; the model fixes it at {declared}"
                    )

    def _feeds(self, *arrays: np.ndarray) -> dict[str, np.ndarray]:
        return {port.name: array for port, array in zip(self._ports, arrays, strict=True)}

    def _sessions(self, count: int) -> list[Any]:
        """The sessions of ``count`` parts: the first single-threaded, for the calling thread; the
        others with one pool thread each, which runs its part (``run_async``) and spins between
        calls as onnxruntime's pool threads do, so a part does not wait for a thread to wake."""
        import onnxruntime

        with self._lock:
            while len(self._parts) < count:
                options = session_options(2 if self._parts else 1, arena=self._arena)
                self._parts.append(
                    onnxruntime.InferenceSession(self._bytes, options, providers=["CPUExecutionProvider"])
                )
            return self._parts[:count]


class _Part:
    """One part of a batch run on its session's pool thread; it holds its arrays until it ends."""

    def __init__(self, session: Any, feed: dict[str, np.ndarray]) -> None:
        self._feed = feed
        self._done = threading.Event()
        self._output: np.ndarray | None = None
        self._error = ""
        session.run_async(None, feed, self._finish, None)

    def _finish(self, outputs: list[np.ndarray], _: object, error: str) -> None:
        self._output, self._error = (outputs[0] if outputs else None), error
        self._done.set()

    def ended(self) -> BaseException | None:
        """Waits until the part has ended, through any interruption (KeyboardInterrupt), which it
        returns for the caller to raise."""
        interruption: BaseException | None = None
        while not self._done.is_set():
            try:
                self._done.wait()
            except BaseException as error:  # waited for again, and handed back
                interruption = interruption or error
        return interruption

    def result(self) -> np.ndarray:
        """The part's output, once ended (every part has when :meth:`run` reads it)."""
        self._done.wait()
        if self._output is None:
            raise RuntimeError(f"onnxruntime failed on a part of the batch: {self._error}")
        return self._output
