"""onnxruntime session options for ctcop's exported models (imports onnxruntime lazily)."""

from __future__ import annotations

from typing import Any


def session_options(threads: int = 0, *, spinning: bool = True, arena: bool = True) -> Any:
    """``onnxruntime.SessionOptions`` for running ctcop's exports: onnxruntime's defaults except
    the thread count, with warnings and below not logged.

    ``threads``: intra-op threads (0: onnxruntime's default, one per core); one inter-op thread.
    ``spinning``: whether idle pool threads spin waiting for work (faster when the cores are
    free; turn it off when other processes share them). ``arena``: onnxruntime's CPU memory
    arena, on by default: the export never makes a tensor of the logits' size (with more than
    32 classes the frame terms are computed a cache-sized chunk of frames at a time), so its
    peak memory stays a small fraction of the logits' bytes either way, and the arena is faster.
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = arena
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options
