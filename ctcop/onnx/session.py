"""onnxruntime session options for ctcop's exported models (imports onnxruntime lazily)."""

from __future__ import annotations

from typing import Any


def session_options(threads: int = 0, *, arena: bool = False, spinning: bool = True) -> Any:
    """``onnxruntime.SessionOptions`` for running ctcop's exports.

    ``threads``: intra-op threads (0: onnxruntime's default, one per core). ``arena``: onnxruntime's
    CPU memory arena; off by default, so a call's peak memory stays near twice the logits' bytes
    instead of growing the arena by several times that. ``spinning``: whether idle pool threads
    spin (faster when the cores are free; turn it off when other processes share them).
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
