"""JAX / optax: ``optax.ctc_loss(logits [N, T, C], logit_paddings, labels, label_paddings,
blank_id)`` with its default ``log_epsilon=-1e5``, gradient by ``jax.value_and_grad`` of the sum
of the losses with respect to the logits, both in one ``jax.jit`` (the blank static), as a
training step calls it.

Layout only (:class:`OptaxPeer`): the inputs are converted, never the result repaired. optax is a
deliberate approximation: ``log_epsilon`` stands for ln 0, so a target with no aligned path gets a
large finite loss instead of +inf. float64 cases run under ``jax.enable_x64(True)``: without it
JAX silently computes float64 inputs in float32. Unsupported: ``preprocess_collapse_repeated``,
``merge_repeated=false``, ``unique``, and a ``blank_index`` that is not a scalar.

``jax.jit`` compiles once per shape, element type and blank; JAX's persistent compilation cache
(:func:`persistent_cache`) lets a later process load what an earlier one compiled.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ...process.frameworks import framework
from ..protocol import Outcome, Unsupported
from .common import (
    DEFAULT_ATTRIBUTES,
    Peer,
    blank,
    dense_targets,
    frame_paddings,
    label_paddings,
    logits,
    time_major,
)

if TYPE_CHECKING:
    from ..case import Case


@cache
def jax_and_optax() -> tuple[Any, Any]:
    jax = framework("jax")
    persistent_cache(jax)
    return jax, framework("optax")


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ctcop" / "jax"


def persistent_cache(jax: Any) -> None:
    """Turn on JAX's persistent compilation cache in :func:`cache_folder` (``$XDG_CACHE_HOME/ctcop/jax``,
    ``~/.cache`` by default), every compilation kept, so that a later process loads what an earlier
    one compiled (it still traces); best effort: nothing when the process chose a folder already or
    this one cannot be written."""
    try:
        if jax.config.jax_compilation_cache_dir:
            return
        folder = cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            return
        jax.config.update("jax_compilation_cache_dir", str(folder))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except Exception:  # best effort: a cache is never a reason to fail
        return


@cache
def loss_and_gradient() -> Any:
    """``jax.jit(jax.value_and_grad(...))`` of the sum of ``optax.ctc_loss``'s losses, the losses
    as its auxiliary output, ``blank_id`` static (optax slices the logits with it)."""
    jax, optax = jax_and_optax()

    def total(logits: Any, logit_paddings: Any, labels: Any, label_paddings: Any, blank_id: int) -> Any:
        loss = optax.ctc_loss(logits, logit_paddings, labels, label_paddings, blank_id=blank_id)
        return loss.sum(), loss

    return jax.jit(jax.value_and_grad(total, has_aux=True), static_argnames="blank_id")


class OptaxPeer(Peer):
    """Layout only: the spec form's [T, N, C] logits are transposed to [N, T, C] and the gradient
    back, so it comes back in the case's layout; the paddings are ``1 - sequence_mask``
    (transposed) or ``t >= logit_length``, and 1 beyond each target's length (targets compacted as
    for every peer); the blank is ``blank_id``, any scalar blank as given (``blank_id`` is a Python
    int). Labels are handed over as numpy holds them: without x64, JAX holds int64 as int32, as it
    does for its users. float64 cases run under ``jax.enable_x64(True)``; the other types under
    JAX's default (x64 off): optax's recursion state is created as default floats, so float16 and
    bfloat16 logits have their log-softmax in their own type and the recursion in float32. JAX has
    no intra-op thread knob (XLA sizes its CPU pool from the cores)."""

    def load(self) -> None:
        jax_and_optax()

    def check(self, case: Case) -> None:
        super().check(case)
        given = blank(case)
        if not isinstance(given, int):
            shape = list(np.shape(given))
            raise Unsupported(f"{self.name}'s blank_id is an int, the case's blank_index has shape {shape}")

    def compute(self, case: Case) -> Outcome:
        x, spec = logits(case), time_major(case)
        with jax_and_optax()[0].enable_x64(x.dtype == np.float64):
            (_, loss), grad = loss_and_gradient()(
                np.swapaxes(x, 0, 1) if spec else x,
                frame_paddings(case),
                dense_targets(case)[0],
                label_paddings(case),
                blank_id=blank(case),
            )
        grad = np.asarray(grad)
        return Outcome(np.asarray(loss), np.swapaxes(grad, 0, 1) if spec else grad)


PEER = OptaxPeer(
    name="optax",
    description="optax.ctc_loss (JAX, CPU; log_epsilon=-1e5 stands for ln 0), jax.grad",
    modules=("jax", "optax"),
    dtypes=frozenset({"float16", "bfloat16", "float32", "float64"}),
    attributes=DEFAULT_ATTRIBUTES,
    sampled=True,
)
