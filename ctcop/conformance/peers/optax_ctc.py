"""JAX / optax: ``optax.ctc_loss(logits [N, T, C], logit_paddings, labels, label_paddings,
blank_id)`` with its default ``log_epsilon=-1e5``, gradient by ``jax.grad`` of the sum of the
losses with respect to the case's logits (the spec form's [T, N, C] is transposed inside the
function, so the gradient comes back in the case's layout).

Paddings are layout: ``1 - sequence_mask`` (transposed) or ``t >= logit_length``, and 1 beyond
each target's length (targets compacted as for every peer). float64 cases run under
``jax.enable_x64(True)``: without it JAX silently computes float64 inputs in float32. The other
types run under JAX's default (x64 off), as users call it; optax's recursion state is created
as default floats, so float16 and bfloat16 logits have their log-softmax in their own type and
the recursion in float32. optax is a deliberate approximation: ``log_epsilon`` stands for ln 0,
so a target with no aligned path gets a large finite loss instead of +inf. Any blank.
Unsupported: ``preprocess_collapse_repeated``, ``merge_repeated=false``, ``unique``. JAX has no
intra-op thread knob (XLA sizes its CPU pool from the cores).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ..protocol import Outcome
from .common import DEFAULT_ATTRIBUTES, Peer, blank, dense_targets, frame_paddings, framework, label_paddings, logits

if TYPE_CHECKING:
    from ..corpus import CorpusCase


@cache
def jax_and_optax() -> tuple[Any, Any]:
    return framework("jax"), framework("optax")


def losses_and_sum(logits: Any, paddings: Any, targets: Any, target_paddings: Any, blank: Any, spec: bool) -> Any:
    """(sum of the losses, [N] losses) of ``optax.ctc_loss`` for the case's logits."""
    jax, optax = jax_and_optax()
    batch_major = jax.numpy.swapaxes(logits, 0, 1) if spec else logits
    loss = optax.ctc_loss(batch_major, paddings, targets, target_paddings, blank_id=blank)
    return loss.sum(), loss


@cache
def compiled() -> Any:
    """``jax.jit(jax.value_and_grad(...))``, compiled once per shape, element type and blank (a
    fresh ``value_and_grad`` per call would compile optax's scan on every call)."""
    jax = jax_and_optax()[0]
    return jax.jit(jax.value_and_grad(losses_and_sum, has_aux=True), static_argnums=(4, 5))


class OptaxPeer(Peer):
    def load(self) -> None:
        jax_and_optax()

    def compute(self, case: CorpusCase) -> Outcome:
        jax = jax_and_optax()[0]
        x, given = logits(case), blank(case)
        with jax.enable_x64(x.dtype == np.float64):
            jnp = jax.numpy
            arguments = (
                jnp.asarray(x),
                jnp.asarray(frame_paddings(case)),
                jnp.asarray(dense_targets(case)[0]),
                jnp.asarray(label_paddings(case)),
                given,
                case.form == "spec",
            )
            # a blank_index that is not a scalar cannot be a static argument: called as given, unjitted
            function = compiled() if isinstance(given, int) else jax.value_and_grad(losses_and_sum, has_aux=True)
            (_, loss), grad = function(*arguments)
            return Outcome(np.asarray(loss), np.asarray(grad))


PEER = OptaxPeer(
    name="optax",
    description="optax.ctc_loss (JAX, CPU; log_epsilon=-1e5 stands for ln 0), jax.grad",
    modules=("jax", "optax"),
    dtypes=frozenset({"float16", "bfloat16", "float32", "float64"}),
    attributes=DEFAULT_ATTRIBUTES,
)
