"""The op alone run in onnxruntime with its batch split over threads (spec 11; imports onnxruntime
lazily).

onnxruntime runs a graph's CPU operators one after another (its parallel executor no longer runs
independent nodes at once) and splits an elementwise operator over its intra-op threads only above
about 64k values, so the recursion of :mod:`.function`, 2 + S rows by 2N lanes a step, runs on one
thread whatever ``intra_op_num_threads`` says. Its samples are independent, which is where the
other threads can work: :class:`BatchParallelSession` runs a batch as parts of consecutive samples,
one single-threaded session a part, at once. A sample's loss is the one onnxruntime gives it in its
part's batch: equal to the whole batch's up to the rounding that onnxruntime's float32 ``Log`` and
``ReduceSum`` take from where an element lies in memory (docs/onnx-function.md).
"""

from __future__ import annotations

import os
import threading
from itertools import pairwise
from typing import Any

import numpy as np
import onnx

from ..errors import InvalidInputError
from ..schema import form
from .session import session_options

# A batch is split where its work, N * T * (2L + 3 + C) (the states the recursion steps through
# and the logits it reads), gives every part at least PART_WORK. Measured on 2 cores, T = 150: at
# L = 40, C = 28 two parts took 0.85x one run's time at N = 16 (2.6e5 units) and 1.1-1.8x at N = 8;
# at L = 5, C = 28, N = 64 (3.9e5 units) 0.7-0.8x.
PART_WORK = 125_000
# Nor is a batch split where the logits outweigh the states by more than this: reading them is bound
# by memory, which the parts share (L = 20, C = 5000, N = 64: 1.2x one run's time with two parts;
# L = 20, C = 100 and L = 40, C = 200: 0.8x and 0.65x).
READ_RATIO = 4

_NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
    "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8,
}


def _model_bytes(model: onnx.ModelProto | bytes) -> bytes:
    """The serialized ``model``, refused unless it is the op alone in the time-major form."""
    proto = model if isinstance(model, onnx.ModelProto) else None
    if proto is None:
        if not isinstance(model, bytes):
            raise InvalidInputError("model", f"must be an onnx.ModelProto or its bytes, not {type(model).__name__}")
        try:
            proto = onnx.load_from_string(model)
        except Exception as error:  # protobuf's DecodeError and others: the bytes are not a model
            raise InvalidInputError("model", f"is not an ONNX model ({type(error).__name__})") from None
    spec = form("time_major")
    names = tuple(value.name for value in proto.graph.input)
    if names != spec.input_names or len(proto.graph.output) != 1:
        raise InvalidInputError(
            "model", f"must be the op alone with inputs {', '.join(spec.input_names)} and one output"
        )
    return model if isinstance(model, bytes) else proto.SerializeToString()


class BatchParallelSession:
    """ctcop's op-alone ONNX model (:func:`ctcop.onnx.onnx_model`) in onnxruntime, a batch run in
    parts of consecutive samples on up to ``threads`` threads at once.

    Args:
        model: the model (time-major form: ``inputs`` [T, N, C], ``sequence_mask`` [T, N],
            ``labels`` [N, T]; one output [N]), or its bytes.
        threads: the most parts run at once (0: one per CPU).
        arena: onnxruntime's CPU memory arena (see :func:`.session_options`).

    A batch too small to gain (see PART_WORK, READ_RATIO), or whose inputs disagree on N (the
    model's batch-wide rule then decides), runs as one call of a session with ``threads``
    intra-op threads.
    """

    def __init__(self, model: onnx.ModelProto | bytes, threads: int = 0, *, arena: bool = True) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise InvalidInputError("threads", f"must be a whole number >= 0, not {threads!r}")
        import onnxruntime

        self._bytes = _model_bytes(model)
        self._threads = threads or os.cpu_count() or 1
        self._arena = arena
        self._whole = onnxruntime.InferenceSession(
            self._bytes, session_options(self._threads, arena=arena), providers=["CPUExecutionProvider"]
        )
        declared = self._whole.get_inputs()
        self._inputs = [(value.name, _NUMPY_TYPES.get(value.type), len(value.shape)) for value in declared]
        self._parts: list[Any] = []
        self._lock = threading.Lock()

    def parts(self, inputs: np.ndarray, sequence_mask: np.ndarray, labels: np.ndarray) -> int:
        """How many parts :meth:`run` splits this batch into (1: one call, not split)."""
        self._check(inputs, sequence_mask, labels)
        frames, batch, classes = inputs.shape
        if sequence_mask.shape[1] != batch or labels.shape[0] != batch or batch < 2:
            return 1
        longest = int(np.count_nonzero(labels != -1, axis=1).max()) if labels.size else 0
        states = 2 * longest + 3
        if classes > READ_RATIO * states:
            return 1
        work = batch * frames * (states + classes)
        return int(max(1, min(self._threads, batch, work // PART_WORK)))

    def run(self, inputs: np.ndarray, sequence_mask: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """The model's output [N] for these inputs (numpy arrays of the model's ranks and element
        types; :class:`~ctcop.InvalidInputError` otherwise)."""
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
        parts = [_Part(session, feed) for session, feed in zip(others, feeds[1:], strict=True)]
        return np.concatenate([first.run(None, feeds[0])[0], *(part.result() for part in parts)])

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
        for array, (name, dtype, rank) in zip(arrays, self._inputs, strict=True):
            if not isinstance(array, np.ndarray) or array.ndim != rank or (dtype is not None and array.dtype != dtype):
                kind = np.dtype(dtype).name if dtype is not None else "the model's element type"
                raise InvalidInputError(name, f"must be a {rank}-D numpy array of {kind}")

    def _feeds(self, *arrays: np.ndarray) -> dict[str, np.ndarray]:
        return {name: array for (name, _, _), array in zip(self._inputs, arrays, strict=True)}

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
    """One part of a batch run on its session's pool thread."""

    def __init__(self, session: Any, feed: dict[str, np.ndarray]) -> None:
        self._done = threading.Event()
        self._output: np.ndarray | None = None
        self._error = ""
        session.run_async(None, feed, self._finish, None)

    def _finish(self, outputs: list[np.ndarray], _: object, error: str) -> None:
        self._output, self._error = (outputs[0] if outputs else None), error
        self._done.set()

    def result(self) -> np.ndarray:
        self._done.wait()
        if self._output is None:
            raise RuntimeError(f"onnxruntime failed on a part of the batch: {self._error}")
        return self._output
