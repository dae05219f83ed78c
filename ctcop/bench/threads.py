"""One thread count for every implementation ``ctcop bench`` times.

Where each library takes it: ctcop's core from ``CTCOP_NUM_THREADS`` (read when the core first
runs) or ``ctcop.set_num_threads`` where it exists; PyTorch ``set_num_threads`` and
``set_num_interop_threads``; TensorFlow's intra- and inter-op pools; XLA (JAX) through
``XLA_FLAGS`` (``intra_op_parallelism_threads``; best effort, read when JAX's CPU backend starts);
onnxruntime ``intra_op_num_threads`` and OpenVINO ``INFERENCE_NUM_THREADS`` per session or
compiled model (see :mod:`.implementations`). A library that was started earlier in the process
keeps its own setting; :func:`report` says what each one ended up with.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any

import ctcop

from ..core import scheduler

ENV = scheduler.THREADS_VARIABLE


def _core(name: str) -> Any:
    """``ctcop.<name>`` or, before the facade exports it, the core's own; None if neither has it."""
    found = getattr(ctcop, name, None) or getattr(scheduler, name, None)
    return found if callable(found) else None


def before_imports(threads: int) -> None:
    """Settings that must be in the environment before a library starts."""
    os.environ[ENV] = str(threads)
    setter = _core("set_num_threads")
    if setter is not None:
        setter(threads)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags and "jax" not in sys.modules:
        multi = "true" if threads > 1 else "false"
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen={multi} intra_op_parallelism_threads={threads}"


def torch_threads(torch: Any, threads: int) -> None:
    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # once inter-op work has started it cannot change
        torch.set_num_interop_threads(threads)


def tensorflow_threads(tf: Any, threads: int) -> None:
    with contextlib.suppress(RuntimeError):  # the runtime started before: it keeps its pools
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def report(threads: int) -> dict[str, Any]:
    """The thread count each loaded library reports (or was given), for the JSON report."""
    found: dict[str, Any] = {"ctcop": int(os.environ.get(ENV, threads))}
    getter = _core("get_num_threads")
    if getter is not None:
        found["ctcop"] = getter()
    if "torch" in sys.modules:
        torch = importlib.import_module("torch")
        found["torch"] = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    if "tensorflow" in sys.modules:
        threading = importlib.import_module("tensorflow").config.threading
        found["tensorflow"] = {
            "intra_op": threading.get_intra_op_parallelism_threads(),
            "inter_op": threading.get_inter_op_parallelism_threads(),
        }
    if "jax" in sys.modules:
        found["jax"] = {"XLA_FLAGS": os.environ.get("XLA_FLAGS", "").strip()}
    for name in ("onnxruntime", "openvino"):
        if name in sys.modules:
            found[name] = threads
    return found
