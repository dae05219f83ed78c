"""JAX / optax: ``optax.ctc_loss(logits [N, T, C], logit_paddings, labels, label_paddings,
blank_id)`` with its default ``log_epsilon=-1e5``, gradient by ``jax.grad`` of the sum of the
losses with respect to the case's logits (the spec form's [T, N, C] is transposed to [N, T, C]
and the gradient back, so it comes back in the case's layout).

Paddings are layout: ``1 - sequence_mask`` (transposed) or ``t >= logit_length``, and 1 beyond
each target's length (targets compacted as for every peer). float64 cases run under
``jax.enable_x64(True)``: without it JAX silently computes float64 inputs in float32. The other
types run under JAX's default (x64 off), as users call it; optax's recursion state is created
as default floats, so float16 and bfloat16 logits have their log-softmax in their own type and
the recursion in float32. optax is a deliberate approximation: ``log_epsilon`` stands for ln 0,
so a target with no aligned path gets a large finite loss instead of +inf. Any blank.
Unsupported: ``preprocess_collapse_repeated``, ``merge_repeated=false``, ``unique``. JAX has no
intra-op thread knob (XLA sizes its CPU pool from the cores).

**Compilations.** ``jax.jit`` compiles once per shape, element type and (static) blank, about
2.5 s each, which over the corpus's many small shapes cost minutes. So a small case
(:func:`bucketable`) is padded up to a bucket (:func:`bucket`: N from 4, T and the label width
from 16, C from 8, growing 4-fold below 512 and 2-fold from it; at most :data:`VOLUME_LIMIT`)
and computed by one compilation per bucket and element type, with no real sample's result
changed (over the corpus: the same bits, or one rounding apart where the log-softmax sums over
more classes in another order). Extra samples have every frame padded and no labels and are
dropped. Extra frames come first with padding 1: optax keeps its initial state through them
exactly. Extra label positions have padding 1 and a label equal to no other (optax compares
neighbouring labels). Extra classes have the logit ``lowest / 2`` of the type: their exp is
exactly 0, so they add nothing to the log-softmax and get no gradient. optax slices the blank
with a static index, so the classes are rotated to put the blank last (blank + 1, ..., C - 1, 0,
..., blank after the extra classes; a blank of C - 1 keeps the order) and the labels renumbered
with them (values outside [0, C) keep their equalities and stay outside). Non-finite logits are
no obstacle: the sample is NaN either way. Anything else (huge logits, T = 0, a blank outside
[0, C) or not a scalar, malformed inputs, large cases) is computed at its own shape, as given.

JAX's persistent compilation cache is turned on in ``$XDG_CACHE_HOME/ctcop/jax`` (``~/.cache``
by default) with every compilation kept, so that a later process compiles nothing; best effort,
and not where the process chose a folder already. A process compiling a shape first holds a
lock file of it beside the cache (``jax-compiling``), so that the runner's two workers, which
evaluate each case concurrently, compile it once.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from ..protocol import Outcome
from .common import DEFAULT_ATTRIBUTES, Peer, blank, dense_targets, frame_paddings, framework, label_paddings, logits

if TYPE_CHECKING:
    from ..corpus import CorpusCase

# Lowest finite value of each logits type: half of it is the logit of an extra class.
LOWEST = {
    "float16": -65504.0,
    "bfloat16": -3.3895313892515355e38,
    "float32": -3.4028234663852886e38,
    "float64": -1.7976931348623157e308,
}
CLASS_MARGIN = 1000.0  # an extra class stays this far below every row maximum and above lowest (see bucketable)
FLOORS = (4, 16, 16, 8)  # smallest bucket of N, T, label width and C
FINE_FROM = 512  # buckets grow 4-fold below this size and 2-fold from it
# Largest bucket N * T * label width * C (optax's one-hot einsum costs that many multiplications):
# beyond it the computation outweighs a compilation, and the case is computed as given.
VOLUME_LIMIT = 2**25
LABEL_TYPES = ("int32", "int64")
STEP = 1e6  # bound on what a frame adds to a state beyond twice the largest |logit| (log_epsilon terms, ln C)
STATE_LIMIT = {"float64": 1e300}  # bound the states must provably stay under (the others: float32 states)
FLOAT32_STATE_LIMIT = 1e30


@cache
def jax_and_optax() -> tuple[Any, Any]:
    jax = framework("jax")
    persistent_cache(jax)
    return jax, framework("optax")


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ctcop" / "jax"


def persistent_cache(jax: Any) -> None:
    """Turn on JAX's persistent compilation cache in :func:`cache_folder`, every compilation
    kept; nothing when the process chose a folder already or this one cannot be written."""
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


EXECUTABLES: dict[tuple[Any, ...], Any] = {}  # this process's compilations
LOCK_WAIT_S = 60.0  # longest wait for another process's compilation (then compile here too)


def executable(function: Any, arguments: Sequence[Any], statics: tuple[Any, ...] = ()) -> Any:
    """``function`` (a ``jax.jit``) compiled for ``arguments`` and the static ``statics`` (call it
    with ``arguments``): traced here, then compiled, or loaded from the persistent cache, under
    an exclusive lock on a file of that shape beside the cache, so that of two processes (the
    runner's workers evaluate each case twice, concurrently) one compiles while the other traces,
    and the other then loads. Best effort: without the cache or the lock, just the compilation."""
    key = (function, *((a.shape, a.dtype.name) for a in arguments), *statics)
    if key not in EXECUTABLES:
        lowered = function.lower(*arguments, *statics)
        with contextlib.ExitStack() as stack:
            if jax_and_optax()[0].config.jax_compilation_cache_dir == str(cache_folder()):
                with contextlib.suppress(Exception):
                    folder = cache_folder().with_name("jax-compiling")
                    folder.mkdir(exist_ok=True)
                    name = hashlib.sha256(repr(key[1:]).encode()).hexdigest()[:32]
                    lock(stack.enter_context(open(folder / name, "a")))
            EXECUTABLES[key] = lowered.compile()
    return EXECUTABLES[key]


def lock(handle: IO[str]) -> None:
    """An exclusive lock on ``handle``, waited for at most :data:`LOCK_WAIT_S` (POSIX only)."""
    fcntl = importlib.import_module("fcntl")
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)


def losses_and_sum(logits: Any, paddings: Any, targets: Any, target_paddings: Any, blank: Any, spec: bool) -> Any:
    """(sum of the losses, [N] losses) of ``optax.ctc_loss`` for the case's logits."""
    jax, optax = jax_and_optax()
    batch_major = jax.numpy.swapaxes(logits, 0, 1) if spec else logits
    loss = optax.ctc_loss(batch_major, paddings, targets, target_paddings, blank_id=blank)
    return loss.sum(), loss


def bucket_losses_and_sum(logits: Any, paddings: Any, targets: Any, target_paddings: Any) -> Any:
    """:func:`losses_and_sum` of batch-major logits whose blank is the last class."""
    optax = jax_and_optax()[1]
    loss = optax.ctc_loss(logits, paddings, targets, target_paddings, blank_id=logits.shape[-1] - 1)
    return loss.sum(), loss


@cache
def compiled() -> Any:
    """``jax.jit(jax.value_and_grad(...))``, compiled once per shape, element type and blank (a
    fresh ``value_and_grad`` per call would compile optax's scan on every call)."""
    jax = jax_and_optax()[0]
    return jax.jit(jax.value_and_grad(losses_and_sum, has_aux=True), static_argnums=(4, 5))


@cache
def compiled_bucket() -> Any:
    """``jax.jit(jax.value_and_grad(...))`` of :func:`bucket_losses_and_sum`: once per bucket."""
    jax = jax_and_optax()[0]
    return jax.jit(jax.value_and_grad(bucket_losses_and_sum, has_aux=True))


def bucket(size: int, floor: int) -> int:
    """The bucket of a dimension: ``floor`` times 4 while below :data:`FINE_FROM`, then times 2."""
    padded = floor
    while padded < size:
        padded *= 4 if padded < FINE_FROM else 2
    return padded


@dataclass(frozen=True)
class Batch:
    """A case in optax's layout: logits [N, T, C], paddings [N, T], targets and paddings [N, S]."""

    logits: np.ndarray
    paddings: np.ndarray
    targets: np.ndarray
    target_paddings: np.ndarray
    blank: int


def bucket_shape(batch: Batch) -> tuple[int, int, int, int]:
    """The bucket's (N, T, label width, C)."""
    samples, frames, classes = batch.logits.shape
    sizes = (samples, frames, batch.targets.shape[1], classes)
    n, t, s, c = (bucket(size, floor) for size, floor in zip(sizes, FLOORS, strict=True))
    return n, t, s, c


def bucketable(batch: Batch) -> bool:
    """Whether padding ``batch`` to its bucket provably leaves its real samples' results alone.

    A sample with a non-finite logit in any frame, masked or not, has a non-finite
    log-probability there, which optax's one-hot einsum (0 * inf) spreads to every label position
    of that frame and on to every later state: its loss is NaN and its gradient all NaN, padded
    or not. The other samples' states must be finite (:func:`states_bounded`), and the extra
    classes' exp must vanish: finite logits at most ``|lowest| / 2 - CLASS_MARGIN``, so that an
    extra class's log-softmax input, ``lowest / 2`` minus its row's maximum, lies between
    ``lowest + CLASS_MARGIN`` (finite) and ``-CLASS_MARGIN`` (exp exactly 0 in any type)."""
    x, targets, paddings = batch.logits, batch.targets, batch.paddings
    if x.ndim != 3 or x.dtype.name not in LOWEST or targets.ndim != 2 or targets.dtype.name not in LABEL_TYPES:
        return False
    samples, frames, classes = x.shape
    if frames == 0 or classes == 0 or targets.shape[1] == 0 or not 0 <= batch.blank < classes:
        return False
    if paddings.shape != (samples, frames) or targets.shape[0] != samples:
        return False
    if batch.target_paddings.shape != targets.shape or not np.isin(batch.target_paddings, (0, 1)).all():
        return False
    if np.prod(bucket_shape(batch), dtype=np.float64) > VOLUME_LIMIT:
        return False
    largest = float(np.abs(x[np.isfinite(x)]).max(initial=0))
    return largest <= -LOWEST[x.dtype.name] / 2 - CLASS_MARGIN and states_bounded(batch, largest)


def states_bounded(batch: Batch, largest: float) -> bool:
    """Whether every state of a sample with finite logits provably stays finite in its bucket.
    A frame mixes ``p * previous + (1 - p) * next`` (p its padding), next the previous plus at
    most 2 ``largest`` + :data:`STEP`, so after T frames ``|state| <= g^T (T step + 1e5)`` with
    ``g = max(|p| + |1 - p|)``, which is 1 for paddings in [0, 1]."""
    paddings = batch.paddings.astype(np.float64)
    if not np.isfinite(paddings).all():
        return False
    frames = bucket_shape(batch)[1]
    growth = float((np.abs(paddings) + np.abs(1 - paddings)).max(initial=1.0))
    step = 2 * largest + STEP
    bound = frames * np.log(growth) + np.log(frames * step + 1e5)
    return bool(bound < np.log(STATE_LIMIT.get(batch.logits.dtype.name, FLOAT32_STATE_LIMIT)))


def class_order(classes: int, padded: int, given: int) -> np.ndarray:
    """Each real class's index in the padded logits: the extra classes first, then the real ones
    rotated so that the blank is last."""
    return (padded - classes) + (np.arange(classes) - given - 1) % classes


def renumber(targets: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``targets`` with each class c as ``order[c]`` and the values outside [0, C) as -1, -2, ...
    (one per distinct value): optax compares labels and one-hot encodes them, nothing else."""
    classes = len(order)
    inside = (targets >= 0) & (targets < classes)
    outside = np.unique(targets[~inside], return_inverse=True)[1].reshape(-1)
    renumbered = order[np.where(inside, targets, 0)]
    renumbered[~inside] = -1 - outside
    return renumbered


def pad_batch(batch: Batch) -> tuple[Batch, np.ndarray]:
    """(``batch`` padded to its bucket with the blank last, the padded index of each real class).
    Extra frames come first: they keep optax's initial state exactly, whatever the real frames
    hold (after the real ones, 0 * next would turn an infinite state into NaN)."""
    x, targets = batch.logits, batch.targets
    (samples, frames, classes), width = x.shape, targets.shape[1]
    n, t, s, c = bucket_shape(batch)
    order = class_order(classes, c, batch.blank)
    padded = np.zeros((n, t, c), dtype=x.dtype)
    padded[:, :, : c - classes] = LOWEST[x.dtype.name] / 2
    padded[:samples, t - frames :, order] = x
    paddings = np.ones((n, t), dtype=batch.paddings.dtype)
    paddings[:samples, t - frames :] = batch.paddings
    labels = np.full((n, s), -1, dtype=targets.dtype)
    labels[:samples, :width] = renumber(targets, order)
    labels[:samples, width:] = labels.min() - 1
    target_paddings = np.ones((n, s), dtype=batch.target_paddings.dtype)
    target_paddings[:samples, :width] = batch.target_paddings
    return Batch(padded, paddings, labels, target_paddings, c - 1), order


def compute_bucketed(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
    """([N] losses, [N, T, C] gradient) of a :func:`bucketable` batch through its bucket."""
    jnp = jax_and_optax()[0].numpy
    padded, order = pad_batch(batch)
    arguments = [jnp.asarray(a) for a in (padded.logits, padded.paddings, padded.targets, padded.target_paddings)]
    (_, loss), grad = executable(compiled_bucket(), arguments)(*arguments)
    samples, frames = batch.logits.shape[:2]
    return np.asarray(loss)[:samples], np.asarray(grad)[:samples, grad.shape[1] - frames :][:, :, order]


class OptaxPeer(Peer):
    def load(self) -> None:
        jax_and_optax()

    def compute(self, case: CorpusCase) -> Outcome:
        jax = jax_and_optax()[0]
        x, given, spec = logits(case), blank(case), case.form == "spec"
        with jax.enable_x64(x.dtype == np.float64):
            batch = self.batch(case, x, given, spec)
            if batch is not None and bucketable(batch):
                loss, grad = compute_bucketed(batch)
                return Outcome(loss, np.swapaxes(grad, 0, 1) if spec else grad)
            return self.as_given(case, x, given, spec)

    def batch(self, case: CorpusCase, x: np.ndarray, given: Any, spec: bool) -> Batch | None:
        """The case in optax's layout, labels as JAX holds them (without x64, int64 ones wrap to
        int32); None where it is no 3-D case with a scalar blank or cannot be converted."""
        if not isinstance(given, int) or x.ndim != 3:
            return None
        try:
            paddings = frame_paddings(case)
            targets = np.asarray(jax_and_optax()[0].numpy.asarray(dense_targets(case)[0]))
            return Batch(np.swapaxes(x, 0, 1) if spec else x, paddings, targets, label_paddings(case), given)
        except Exception:  # computed as given, the case raises it again where optax's users meet it
            return None

    def as_given(self, case: CorpusCase, x: np.ndarray, given: Any, spec: bool) -> Outcome:
        """The case at its own shape and blank (static: one compilation for each)."""
        jnp = jax_and_optax()[0].numpy
        arguments = (
            jnp.asarray(x),
            jnp.asarray(frame_paddings(case)),
            jnp.asarray(dense_targets(case)[0]),
            jnp.asarray(label_paddings(case)),
            given,
            spec,
        )
        # a blank_index that is not a scalar cannot be a static argument: called as given, unjitted
        if not isinstance(given, int):
            (_, loss), grad = jax_and_optax()[0].value_and_grad(losses_and_sum, has_aux=True)(*arguments)
            return Outcome(np.asarray(loss), np.asarray(grad))
        (_, loss), grad = executable(compiled(), arguments[:4], (given, spec))(*arguments[:4])
        return Outcome(np.asarray(loss), np.asarray(grad))


PEER = OptaxPeer(
    name="optax",
    description="optax.ctc_loss (JAX, CPU; log_epsilon=-1e5 stands for ln 0), jax.grad",
    modules=("jax", "optax"),
    dtypes=frozenset({"float16", "bfloat16", "float32", "float64"}),
    attributes=DEFAULT_ATTRIBUTES,
)
