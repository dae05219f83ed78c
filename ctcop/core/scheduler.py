"""The forward-backward core over a batch (spec/ctcloss4.md, sections 4.5 and 5).

A :class:`~ctcop.canonical.CanonicalBatch` is cut into blocks of samples, and each block runs in
the compiled kernels of :mod:`ctcop.core.lanes` and :mod:`ctcop.core.kernels` on the calling thread
or one of a pool of threads (a batch below PARALLEL_WORK runs whole on the calling thread). Every
sample is computed on its own, so neither the batch around it nor the thread count changes a bit
of its result. Once a call has returned, the pool's idle threads block on its queue.

Threads: :func:`set_num_threads`, or ``CTCOP_NUM_THREADS`` read at the first call; by default the
CPUs this process may run on, at most MAX_THREADS. Where the system cannot start the threads asked
for, the call raises InvalidInputError once the blocks handed out have finished, so a smaller count
works. Memory per running sample: ``S * (T / K + K)`` float64 for the gradient (K below), O(C + T)
for the loss; only float16 and bfloat16 logits are copied (to float32, which holds them exactly).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import canonical
from ..canonical import CanonicalBatch, TimeMajorInputs
from ..errors import InvalidInputError
from ..process.cpus import MAX_THREADS, usable_cpus
from . import kernels, lanes
from .rounding import round_once

FloatArray = npt.NDArray[np.float64]
# The gradient stores the whole table of forward variables when S * T is at most this many float64
# (8 MiB per running sample); beyond it, one checkpoint every max(ceil(sqrt(T)), this / S) frames.
SEGMENT_ELEMENTS = 1 << 20
# Samples handed to a thread at a time: enough blocks per thread to even out unequal lengths.
BLOCKS_PER_THREAD = 4
# Work (:func:`_work`: frames times classes and lattice states; counted
# GRADIENT_WORK times for the gradient) below which a batch runs on the calling thread alone: below
# it, handing blocks to the pool's threads costs more than the work it shares.
PARALLEL_WORK = 1 << 14
# A unit of the gradient's work costs about twice one of the loss's: its work is counted twice.
GRADIENT_WORK = 2
# The environment variable that sets the thread count (read at the first call).
THREADS_VARIABLE = "CTCOP_NUM_THREADS"

_pool_lock = threading.Lock()  # held only to read or replace the two values below, never while computing
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (its thread count, the pool)
_threads: int | None = None


def _after_fork_in_child() -> None:
    """In a forked child the parent's pool threads do not exist and the lock may have been held by
    a thread that does not exist either: start both anew."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _default_threads() -> int:
    text = os.environ.get(THREADS_VARIABLE, "").strip()
    if text:
        if not text.isdigit() or not 1 <= int(text) <= MAX_THREADS:
            message = f"must be a positive integer, at most {MAX_THREADS}; got {text!r}"
            raise InvalidInputError(THREADS_VARIABLE, message)
        return int(text)
    return min(usable_cpus(), MAX_THREADS)


def set_num_threads(threads: int) -> None:
    """Run the core on ``threads`` threads (results are the same for any number)."""
    global _pool, _threads
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise InvalidInputError("threads", f"must be a positive integer, at most {MAX_THREADS}; got {threads!r}")
    with _pool_lock:
        # The old pool is not shut down: a call running on it finishes there, and its threads end
        # when the last call lets go of it.
        _pool, _threads = None, threads


def get_num_threads() -> int:
    """The number of threads the core runs on."""
    global _threads
    threads = _threads  # set once, or by set_num_threads: one read, no lock
    if threads is not None:
        return threads
    with _pool_lock:
        if _threads is None:
            _threads = _default_threads()
        return _threads


def _run_blocks(samples: int, work: int, block: Callable[[int, int], None]) -> None:
    """``block(first, last)`` over the samples: at once on this thread when there is one thread,
    one sample or less than PARALLEL_WORK of ``work``; otherwise cut into contiguous blocks that
    the pool's threads and this one take in turn."""
    global _pool
    threads = get_num_threads()
    if threads == 1 or samples <= 1 or work < PARALLEL_WORK:
        block(0, samples)
        return
    with _pool_lock:
        if _pool is None or _pool[0] != threads:
            _pool = (threads, ThreadPoolExecutor(threads - 1, thread_name_prefix="ctcop"))
        pool = _pool[1]
    count = min(samples, threads * BLOCKS_PER_THREAD)
    edges = [samples * k // count for k in range(count + 1)]
    taken = itertools.count()  # next() on it is atomic: each block is taken by one thread

    def blocks() -> None:
        k = next(taken)
        while k < count:
            block(edges[k], edges[k + 1])
            k = next(taken)

    futures: list[Future[None]] = []
    try:
        for _ in range(threads - 1):
            futures.append(pool.submit(blocks))
    except RuntimeError as error:  # a thread could not be started ("can't start new thread")
        _discard(pool, futures)
        raise InvalidInputError("threads", f"could not start {threads} threads ({error}): set fewer") from None
    try:
        blocks()
    finally:
        # A thread that has not started by now would find no block left: it is not waited for.
        wait([future for future in futures if not future.cancel()])
    for future in futures:
        if not future.cancelled():
            future.result()


def _discard(pool: ThreadPoolExecutor, futures: list[Future[None]]) -> None:
    """After a failed thread start: let the blocks handed out finish, end the pool's threads and
    forget the pool, so that the next call (with this or another count) starts from nothing."""
    global _pool
    wait(futures)
    pool.shutdown(wait=True)
    with _pool_lock:
        if _pool is not None and _pool[1] is pool:
            _pool = None


def _kernel_logits(batch: CanonicalBatch) -> np.ndarray:
    """The logits as the kernels read them: C-contiguous float32 or float64 in the machine's byte
    order (copied only when they are not; float16 and bfloat16, which numba cannot compute with,
    are copied to float32, which holds them exactly)."""
    dtype = batch.logits.dtype
    native = dtype.newbyteorder("=") if dtype.kind == "f" and dtype.itemsize in (4, 8) else np.dtype(np.float32)
    return np.ascontiguousarray(batch.logits, dtype=native)


def _kernel_arguments(batch: CanonicalBatch, logits: np.ndarray) -> tuple[Any, ...]:
    """The batch as the kernels' first seven arguments (logits, layout, frame counts, targets,
    their lengths, blank, merge flag)."""
    return (
        logits,
        batch.time_axis == 1,
        batch.lengths,
        np.ascontiguousarray(batch.targets),
        batch.target_lengths,
        batch.blank,
        batch.merge_repeated,
    )


def _work(batch: CanonicalBatch) -> int:
    """An upper bound of the batch's work, for deciding whether threads pay: N * T * (C + S + 2)
    with S = 2L + 1 for the longest target L (the classes and the lattice states a frame reads)."""
    classes, longest = int(batch.logits.shape[2]), int(batch.targets.shape[1])
    return batch.batch_size * batch.num_frames * (classes + 2 * longest + 3)


def _losses(batch: CanonicalBatch, dtype: np.dtype) -> np.ndarray:
    """The batch's losses computed in float64 and rounded once to ``dtype`` (float32 or float64)."""
    arguments = _kernel_arguments(batch, _kernel_logits(batch))
    out = np.empty(batch.batch_size, dtype)
    classes, states = int(batch.logits.shape[2]), 2 * int(batch.targets.shape[1]) + 1
    fewest = lanes.fewest_samples(classes, states) if classes <= lanes.MOST_CLASSES else batch.batch_size + 1

    grouped: Callable[..., None] = lanes.batch_loss
    alone: Callable[..., None] = kernels.batch_loss

    def block(first: int, last: int) -> None:
        if last - first >= fewest:
            grouped(*arguments, fewest, first, last, out)
        else:
            alone(*arguments, first, last, out)

    _run_blocks(batch.batch_size, _work(batch), block)
    return out


def losses(batch: CanonicalBatch) -> np.ndarray:
    """Minus the ln of the summed probability of all aligned paths, per sample (spec 4.3; +0.0
    for a certain path, NaN for non-finite input), rounded once to the logits' element type."""
    dtype = batch.logits.dtype
    if dtype.kind != "f" or dtype.itemsize not in (4, 8):  # float16, bfloat16
        return round_once(_losses(batch, np.dtype(np.float64)), dtype)
    if dtype.isnative:
        return _losses(batch, dtype)  # rounded by the kernel
    return _losses(batch, dtype.newbyteorder("=")).astype(dtype)


def log_likelihood(batch: CanonicalBatch) -> FloatArray:
    """ln of the summed probability of all aligned paths, per sample, in float64 (at most 0; NaN for
    non-finite input)."""
    loglik: FloatArray = 0.0 - _losses(batch, np.dtype(np.float64))
    return loglik


def time_major_losses(checked: TimeMajorInputs) -> np.ndarray:
    """:func:`losses` of the batch of ``checked`` (:func:`ctcop.canonical.time_major_batch`, whose
    fault it raises)."""
    return losses(canonical.time_major_batch(checked))


def time_major_losses_and_grad(checked: TimeMajorInputs) -> tuple[np.ndarray, np.ndarray]:
    """:func:`losses_and_grad` of the batch of ``checked``, as :func:`time_major_losses`."""
    return losses_and_grad(canonical.time_major_batch(checked))


def losses_and_grad(batch: CanonicalBatch) -> tuple[np.ndarray, np.ndarray]:
    """The losses (:func:`losses`) and :func:`log_likelihood_and_grad`'s gradient."""
    loglik, grad = log_likelihood_and_grad(batch)
    loss = np.subtract(0.0, loglik, out=loglik)
    # +0.0 (never -0.0, never a rounding error below 0) for a certain path; NaN stays NaN
    return round_once(np.maximum(loss, 0.0, out=loss), batch.logits.dtype), grad


def log_likelihood_and_grad(batch: CanonicalBatch) -> tuple[FloatArray, np.ndarray]:
    """Log-likelihood [N] and d(loss)/d(logits) in the logits' layout and element type.

    The gradient is softmax minus the posterior state occupancy (spec section 5); it is 0 in
    inactive frames and for samples with no aligned path, and NaN in the active frames of
    samples whose active frames hold a non-finite value. Each sample's gradient is formed in
    float64 and rounded once to the logits' type. Forward variables are kept every K frames,
    K = max(ceil(sqrt(T_i)), SEGMENT_ELEMENTS // (S_i + 2)) (at most T_i).
    """
    logits = _kernel_logits(batch)
    direct = batch.logits.dtype == logits.dtype
    grad = np.zeros(logits.shape, dtype=logits.dtype if direct else np.float64)
    out = np.empty(batch.batch_size)
    arguments = (*_kernel_arguments(batch, logits), SEGMENT_ELEMENTS)

    def block(first: int, last: int) -> None:
        kernel: Callable[..., None] = kernels.batch_grad
        kernel(*arguments, first, last, out, grad)

    _run_blocks(batch.batch_size, GRADIENT_WORK * _work(batch), block)
    return out, grad if direct else round_once(grad, batch.logits.dtype)
