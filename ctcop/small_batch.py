"""A small time-major batch in one compiled call, shared with a second thread that waits spinning
(spec/ctcloss4.md, sections 3 and 4; docs/design.md, "Small batches").

:func:`losses` and :func:`losses_and_grad` run the rule scan of :mod:`ctcop.rule_scan` (rules 3.1
and 3.3: the frame counts and the processed targets), then, where the batch's work is below the
limit the caller gives, the batch kernels of :mod:`ctcop.kernels` on every sample: a small batch
costs one call from Python. A faulty batch, or one whose work reaches the limit, is left to the
caller, for :mod:`ctcop.canonical` to scan again and name the fault or :mod:`ctcop.recursion` to
hand its samples to the pool (the scan is O(N T), a small part of a batch too large for one call).

The second thread. Handing a small batch to a pool thread costs more than computing it where a
sleeping thread has to be woken (tens of microseconds), so :mod:`ctcop.second_thread` keeps one
thread that, after each piece of work, waits in :func:`serve` spinning for SPINS rounds, then naps
between looks at the control block, then sleeps. While it spins or naps, a call with at least
SPLIT_WORK units of work posts its batch in chunks of consecutive samples (:func:`_chunk_size`) and
computes chunks itself from the last one down while the thread computes them from the first one up,
each claiming its next chunk with one compare-and-swap, so every chunk is computed once into the
results. The caller copies the thread's chunks (logits, frame counts, targets) into the thread's
boxes, in order, whenever the thread's claims come within AHEAD chunks of the last one copied, so
it copies about what the thread computes. A thread on a slower CPU (a virtual machine's CPUs run at
different speeds for stretches of a second or more), or one that comes late from a nap, takes fewer
chunks. The caller computes its chunks from its own arrays; when no chunk is left it waits for the
thread's last ones and copies their results out. Every sample is computed by the same kernel from
the same values (a box holds the logits in their own element type), so neither the chunks nor who
computes them changes a bit of any result.

The control block (int64): POSTED the number of the last batch posted; CLAIMS the claims on it in
one word (the low 23 bits of its number, then the next chunk from the front and the end of the
chunks not yet claimed from the back, 20 bits each: a claim swaps the whole word, so a claim on a
batch that is no longer posted fails, and one on a batch posted a multiple of 2**23 batches later,
whose word carries the same bits and ends, is handed back to that batch's caller); AVAILABLE how
many chunks are copied; FINISHED one more than the last chunk the thread finished or handed back;
FAILED the number of a batch of which the thread could not compute a chunk (its caller then
computes the thread's chunks); AWAKE 1 while the thread looks for batches (spinning, or napping
between looks: a batch posted while it naps is still shared, from the end of its nap); IN_USE 1
while a call shares its batch (one call at a time: the others compute alone); WANTED 1 after a call
that the thread, asleep, could have helped (the call's caller then wakes it: a computed batch
returns WAKE); and the posted batch's sizes, settings and chunk size.
"""

from __future__ import annotations

import numpy as np

from . import atomics
from .kernels import batch_grad, store_loss, work_units
from .lanes import LANES, MOST_CLASSES, batch_loss, lane_samples
from .logexp import compiled, entry
from .rule_scan import time_major_scan

COMPUTED = -1  # what the entries return when the results are written
WAKE = -2  # ... and the second thread was asleep when it could have taken part of them
NOT_HERE = -3  # (internal) a batch left to the caller
# Work (kernels.work_units) from which a batch is shared with the second thread: about 20 us.
SPLIT_WORK = 1 << 9
# Work of a chunk, at least (about 10 us for the loss, 20 for the gradient): a claim costs about a
# tenth of a microsecond, and the two threads end at most a chunk apart. The caller copies a
# chunk into the boxes only when the thread's claims come within AHEAD chunks of it.
CHUNK_WORK = 1 << 10
AHEAD = 4
# Rounds of the CPU's spin-wait hint the second thread waits for work before it naps (about 25 ns
# each on this machine's CPU, about 0.3 ms in all with the give-way calls; the hint's length
# varies by CPU, and it is nothing but a loop round on CPUs without one); its naps, in
# microseconds: the first, the longest (the most a batch posted meanwhile waits for it), and how
# long it naps before it sleeps in Python (where waking it needs the GIL: up to tens of
# milliseconds while the calling thread is busy).
SPINS = 1 << 13
# Every this many rounds a spinning thread gives way to a thread waiting for its CPU: where the
# scheduler has put both threads on one CPU (the other one busy), the spinning one would otherwise
# hold it for a whole time slice, milliseconds, while the other one has the work to do.
GIVE_WAY_ROUNDS = 1 << 6
NAP_FIRST_US, NAP_MOST_US, NAPPING_US = 50, 1_000, 1_000_000
# Indices into the control block.
POSTED, CLAIMS, AVAILABLE, FINISHED, FAILED, AWAKE, IN_USE, WANTED = 0, 1, 2, 3, 4, 5, 6, 7
SAMPLES, FRAMES, CLASSES, WIDTH, GRADIENT, MERGE, SEGMENT, DOUBLE, CHUNK = 8, 9, 10, 11, 12, 13, 14, 15, 16
CONTROL_SIZE = 17
# CLAIMS: a batch's number (its low NUMBER_BITS) above the front and the back (END_BITS each)
END_BITS, NUMBER_BITS = 20, 23
NUMBER_MASK = (1 << NUMBER_BITS) - 1
MOST_CHUNKS = (1 << END_BITS) - 1
# The control block and the boxes live in one byte array, the arena: the block first, then per logit
# of capacity 8 bytes each for the logits, the gradient, the losses and the log-likelihoods, and 24
# for the frame counts, target lengths and targets (int64).
CONTROL_BYTES = 8 * CONTROL_SIZE
ARENA_BYTES = 7 * 8


@compiled
def _scanned(
    mask: np.ndarray, labels: np.ndarray, classes: int, collapse: bool, work_limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """The rule scan's frame counts [N], processed targets [N, T] and their lengths [N], the
    longest target, and whether the batch is computed here: no fault, and one sample or
    :func:`ctcop.kernels.work_units` below ``work_limit``."""
    frames, samples = mask.shape
    lengths, targets = np.empty(samples, np.int64), np.empty((samples, frames), np.int64)
    target_lengths, fault = np.empty(samples, np.int64), np.empty(3, np.int64)
    longest = time_major_scan(mask, labels, classes, collapse, lengths, targets, target_lengths, fault)
    here = fault[0] == 0 and (samples <= 1 or work_units(samples, frames, classes, longest) < work_limit)
    return lengths, targets, target_lengths, longest, here


@compiled
def _store_losses(loglik: np.ndarray, out: np.ndarray, first: int) -> None:
    """``out[first + i] = -loglik[i]`` in ``out``'s element type, +0.0 where a rounding error
    would put it below 0 (spec 4.3); NaN stays NaN."""
    for i in range(loglik.shape[0]):
        store_loss(loglik[i], out, first + i)


@compiled
def _compute(
    logits: np.ndarray,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    settings: tuple[bool, int, bool],
    first: int,
    last: int,
    loglik: np.ndarray,
    out: np.ndarray,
    grad: np.ndarray,
) -> None:
    """Samples ``[first, last)`` of a [T, N, C] batch (blank C - 1); ``settings`` = (merge_repeated,
    segment_elements, gradient): the losses into ``out``, or with the gradient the
    log-likelihoods into ``loglik`` and the gradient into ``grad`` (zero on entry)."""
    merge_repeated, segment_elements, gradient = settings
    blank = logits.shape[2] - 1
    if gradient:
        arguments = (merge_repeated, segment_elements, first, last, loglik, grad)
        batch_grad(logits, False, lengths, targets, target_lengths, blank, *arguments)
    else:
        batch_loss(logits, False, lengths, targets, target_lengths, blank, merge_repeated, first, last, out)


@compiled
def _box_views(
    control: np.ndarray, logits_box: np.ndarray, index_box: np.ndarray, grad_box: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The posted batch in the boxes: logits [T, N, C], frame counts [N], targets [N, W], target
    lengths [N], and the gradient [T, N, C] (the gradient's box whole for the losses alone)."""
    samples, frames, classes, width = control[SAMPLES], control[FRAMES], control[CLASSES], control[WIDTH]
    size = frames * samples * classes
    logits = logits_box[:size].reshape((frames, samples, classes))
    grad = grad_box[:size].reshape((frames, samples, classes))
    lengths, target_lengths = index_box[:samples], index_box[samples : 2 * samples]
    targets = index_box[2 * samples : 2 * samples + samples * width].reshape((samples, width))
    return logits, lengths, targets, target_lengths, grad


@compiled
def _chunk_size(samples: int, frames: int, classes: int, longest: int, gradient: bool) -> int:
    """The samples of a chunk: CHUNK_WORK units of work or more, a whole number of lane groups
    where the losses are computed in lanes (:mod:`ctcop.lanes`), and at most half the batch (so
    that there are two chunks at least) and at least 1 / MOST_CHUNKS of it."""
    size = max(1, CHUNK_WORK // work_units(1, frames, classes, longest))
    if not gradient and classes <= MOST_CLASSES:
        size = LANES * -(-size // LANES)
    size = min(size, -(-samples // 2))
    return max(size, -(-samples // MOST_CHUNKS))


@compiled
def _chunks_keep_lanes(
    lengths: np.ndarray, target_lengths: np.ndarray, classes: int, gradient: bool, size: int
) -> bool:
    """Whether cutting the batch's samples into chunks of ``size`` leaves the losses as many samples
    in lanes (:func:`ctcop.lanes.lane_samples`) as the whole: a group of 16 in lanes costs about
    what 8 samples alone do, so a batch of 9 to 17 samples of one shape is computed faster whole
    on one thread than in two chunks on two (measured at T = 5, C = 11, N = 16: 31 against 36 µs)."""
    if gradient:
        return True
    samples = lengths.shape[0]
    chunked = 0
    for first in range(0, samples, size):
        chunked += lane_samples(lengths, target_lengths, classes, first, min(samples, first + size))
    return lane_samples(lengths, target_lengths, classes, 0, samples) <= chunked


@compiled
def _claims(number: int, front: int, back: int) -> int:
    """The CLAIMS word of batch ``number`` with chunks ``[front, back)`` not yet claimed."""
    value: int = ((number & NUMBER_MASK) << (2 * END_BITS)) | (front << END_BITS) | back
    return value


@compiled
def _claim(control: np.ndarray, number: int) -> int:
    """The second thread's next chunk of batch ``number``, claimed from the front once its caller
    has copied it (AVAILABLE); -1 when none is left, the batch is no longer posted, the next
    chunk is not copied within SPINS rounds (its caller then computes it: a caller that failed
    mid-batch never copies it), or the chunk claimed belongs to a later batch whose CLAIMS word
    carries the same bits (handed back: :func:`_claimed_own`)."""
    rounds = 0
    while True:
        word: int = atomics.load(control, CLAIMS)
        front, back = (word >> END_BITS) & MOST_CHUNKS, word & MOST_CHUNKS
        if word != _claims(number, front, back) or front >= back or rounds >= SPINS:
            return -1
        if front >= atomics.load(control, AVAILABLE):
            _spin(rounds)
            rounds += 1
        elif atomics.swap_if(control, CLAIMS, word, word + (1 << END_BITS)):
            return front if _claimed_own(control, number, front) else -1


@compiled
def _claimed_own(control: np.ndarray, number: int, front: int) -> bool:
    """Whether the chunk ``front`` just claimed belongs to batch ``number``, the one whose
    settings the thread read. CLAIMS holds only the low NUMBER_BITS of a batch's number, so a
    thread held up between reading a batch and claiming from it while its callers posted a
    multiple of 2**NUMBER_BITS more batches can claim from a later batch. That batch stays posted
    until the thread reports the chunk finished (its caller waits for it); the thread marks it
    FAILED, so that its caller computes the thread's chunks of it itself, and reports the chunk
    finished without writing it."""
    posted: int = atomics.load(control, POSTED)
    while posted & NUMBER_MASK != number & NUMBER_MASK:  # a batch's CLAIMS is stored just before its number
        atomics.pause()
        posted = atomics.load(control, POSTED)
    if posted == number:
        return True
    atomics.store(control, FAILED, posted)
    atomics.store(control, FINISHED, front + 1)  # after FAILED
    return False


@compiled
def _post(control: np.ndarray, logits: np.ndarray, width: int, settings: tuple[bool, int, bool], size: int) -> int:
    """A batch of ``logits``' shape and element type, targets of ``width``, posted in chunks of
    ``size`` samples, none of them copied yet: its number."""
    merge_repeated, segment_elements, gradient = settings
    frames, samples, classes = logits.shape
    control[SAMPLES], control[FRAMES], control[CLASSES], control[WIDTH] = samples, frames, classes, width
    control[MERGE], control[SEGMENT], control[GRADIENT] = merge_repeated, segment_elements, gradient
    control[DOUBLE], control[CHUNK] = logits.itemsize == 8, size
    number: int = control[POSTED] + 1
    atomics.store(control, AVAILABLE, 0)
    atomics.store(control, FINISHED, 0)
    atomics.store(control, CLAIMS, _claims(number, 0, -(-samples // size)))
    atomics.store(control, POSTED, number)  # after every write above
    return number


@compiled
def _copy_chunk(
    control: np.ndarray,
    inputs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    boxes: tuple[np.ndarray, np.ndarray, np.ndarray],
    chunk: int,
) -> None:
    """Chunk ``chunk`` of the posted batch's ``inputs`` (logits, frame counts, targets, target
    lengths) copied into ``boxes`` (logits, indices, gradient) and made AVAILABLE (chunks are
    copied in order)."""
    logits, lengths, targets, target_lengths = inputs
    box, box_lengths, box_targets, box_target_lengths = _box_views(control, *boxes)[:4]
    frames, samples, classes = logits.shape
    first = chunk * control[CHUNK]
    last = min(samples, first + control[CHUNK])
    for t in range(frames):
        for i in range(first, last):
            for c in range(classes):
                box[t, i, c] = logits[t, i, c]
    for i in range(first, last):
        box_lengths[i], box_target_lengths[i] = lengths[i], target_lengths[i]
        for j in range(box_targets.shape[1]):
            box_targets[i, j] = targets[i, j]
    atomics.store(control, AVAILABLE, chunk + 1)  # after the chunk's writes


@compiled
def _copy_out(
    control: np.ndarray,
    last: int,
    boxes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    outputs: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """The second thread's results for samples ``[0, last)`` copied out of ``boxes`` (logits,
    indices, log-likelihoods, losses, gradient) into ``outputs`` (log-likelihoods, losses,
    gradient)."""
    logits_box, index_box, loglik_box, out_box, grad_box = boxes
    loglik, out, grad = outputs
    if control[GRADIENT]:
        for i in range(last):
            loglik[i] = loglik_box[i]
        box_grad = _box_views(control, logits_box, index_box, grad_box)[4]
        for t in range(box_grad.shape[0]):
            for i in range(last):
                for c in range(box_grad.shape[2]):
                    grad[t, i, c] = box_grad[t, i, c]
    else:
        for i in range(last):
            out[i] = out_box[i]


@compiled
def _carve(
    arena: np.ndarray, template: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The boxes in ``arena`` for logits of ``template``'s element type: logits, indices (int64),
    log-likelihoods (float64), losses and gradient (the logits' type)."""
    part = 8 * ((arena.size - CONTROL_BYTES) // ARENA_BYTES)
    boxes = arena[CONTROL_BYTES:]
    return (
        boxes[:part].view(template.dtype),
        boxes[4 * part : 7 * part].view(np.int64),
        boxes[3 * part : 4 * part].view(np.float64),
        boxes[2 * part : 3 * part].view(template.dtype),
        boxes[part : 2 * part].view(template.dtype),
    )


@compiled
def _fits(arena: np.ndarray, size: int, count: int, width: int) -> bool:
    """Whether ``arena`` holds a batch of ``count`` samples and ``size`` logits, targets of ``width``."""
    capacity = (arena.size - CONTROL_BYTES) // ARENA_BYTES
    return size <= capacity and count * (2 + width) <= 3 * capacity


@compiled
def _split(
    logits: np.ndarray,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    settings: tuple[bool, int, bool],
    longest: int,
    outputs: tuple[np.ndarray, np.ndarray, np.ndarray],
    arena: np.ndarray,
    alone_limit: int,
) -> int:
    """Every sample of a scanned batch into ``outputs`` (log-likelihoods, losses, gradient, as
    :func:`_compute` writes them), shared in chunks with the second thread through the boxes in
    ``arena`` when the thread is AWAKE and free and the batch's work reaches SPLIT_WORK (an empty
    arena: no second thread); without the thread, only a batch whose work is below
    ``alone_limit``. Returns COMPUTED, WAKE, or NOT_HERE (WANTED set where the thread could help)."""
    loglik, out, grad = outputs
    control = _control_block(arena)
    frames, samples, classes = logits.shape
    work = work_units(samples, frames, classes, longest)
    gradient = settings[2]
    size = _chunk_size(samples, frames, classes, longest, gradient)
    shareable = control.size > 0 and samples > 1 and work >= SPLIT_WORK
    # the lanes' scans only for a batch that could be shared; one the pool would take (cut into
    # blocks too small for lanes) is shared all the same
    shareable = shareable and (
        work >= alone_limit or _chunks_keep_lanes(lengths, target_lengths, classes, gradient, size)
    )
    shared = shareable and _fits(arena, frames * samples * classes, samples, longest)
    awake = shared and atomics.load(control, AWAKE) == 1
    if shared and not awake:
        atomics.store(control, WANTED, 1)
    if not (awake and atomics.swap_if(control, IN_USE, 0, 1)):
        if work >= alone_limit and samples > 1:
            return NOT_HERE
        _compute(logits, lengths, targets, target_lengths, settings, 0, samples, loglik, out, grad)
        return WAKE if shared and not awake else COMPUTED
    boxes = _carve(arena, logits)
    number = _post(control, logits, longest, settings, size)
    inputs, posted = (logits, lengths, targets, target_lengths), (boxes[0], boxes[1], boxes[4])
    copied = 0
    while True:
        word = atomics.load(control, CLAIMS)
        taken, back = (word >> END_BITS) & MOST_CHUNKS, word & MOST_CHUNKS  # the thread's: [0, taken)
        if taken >= back:
            break
        if copied < min(back, taken + AHEAD):  # the thread's next chunks copied before it needs them
            _copy_chunk(control, inputs, posted, copied)
            copied += 1
        elif atomics.swap_if(control, CLAIMS, word, word - 1):  # the last chunk unclaimed: this thread's
            last = min(samples, back * size)
            _compute(logits, lengths, targets, target_lengths, settings, (back - 1) * size, last, loglik, out, grad)
    _wait_finished(control, taken)
    theirs = min(samples, taken * size)  # the samples of the thread's chunks
    if atomics.load(control, FAILED) == number:
        _compute(logits, lengths, targets, target_lengths, settings, 0, theirs, loglik, out, grad)
    else:
        _copy_out(control, theirs, boxes, outputs)
    atomics.store(control, IN_USE, 0)
    return COMPUTED


@compiled
def _wait_finished(control: np.ndarray, chunks: int) -> None:
    """Until the thread has finished ``chunks`` chunks of the posted batch: spinning, then napping
    (a thread taken off its CPU right after a claim gets one back)."""
    rounds = 0
    while atomics.load(control, FINISHED) != chunks:
        if rounds < SPINS:
            _spin(rounds)
            rounds += 1
        else:
            atomics.nap(NAP_FIRST_US)


@compiled
def _spin(rounds: int) -> None:
    """One round of a spinning wait: the spin-wait hint, and every GIVE_WAY_ROUNDS rounds the CPU
    to a thread waiting for it."""
    atomics.pause()
    if rounds % GIVE_WAY_ROUNDS == GIVE_WAY_ROUNDS - 1:
        atomics.give_way()


@compiled
def _serve_chunks(
    control: np.ndarray, boxes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], number: int
) -> None:
    """Chunks of batch ``number`` claimed from the front and computed from ``boxes`` (logits,
    indices, log-likelihoods, losses, gradient) of its logits' element type into them, until none
    is left; FINISHED counts the chunks up to the last one computed (the thread computes the
    chunks it claims in order, and one it handed back is counted already), and a chunk that
    fails sets FAILED."""
    logits_box, index_box, loglik_box, out_box, grad_box = boxes
    logits, lengths, targets, target_lengths, grad = _box_views(control, logits_box, index_box, grad_box)
    settings = (control[MERGE] != 0, control[SEGMENT], control[GRADIENT] != 0)
    size, samples = control[CHUNK], control[SAMPLES]
    chunk = _claim(control, number)
    while chunk >= 0:
        first, last = chunk * size, min(samples, (chunk + 1) * size)
        try:
            for t in range(grad.shape[0] if settings[2] else 0):
                for i in range(first, last):
                    for c in range(grad.shape[2]):
                        grad[t, i, c] = 0.0
            _compute(logits, lengths, targets, target_lengths, settings, first, last, loglik_box, out_box, grad)
        except Exception:
            atomics.store(control, FAILED, number)
        atomics.store(control, FINISHED, chunk + 1)  # after the chunk's writes
        chunk = _claim(control, number)


def control_block(arena: np.ndarray) -> np.ndarray:
    """The control block at the start of ``arena`` (empty for an empty arena), in compiled code
    and in Python alike."""
    block: np.ndarray = arena[:CONTROL_BYTES].view(np.int64)
    return block


_control_block = compiled(control_block)


@entry
def serve(arena: np.ndarray, spins: int, napping_us: int) -> None:
    """The second thread's wait (module docstring): AWAKE while it looks for posted batches, and
    claims and computes their chunks from the boxes in ``arena``. After ``spins`` rounds with
    nothing posted, nap between looks (NAP_FIRST_US, doubling up to NAP_MOST_US), spinning again
    after each batch; back to the caller after ``napping_us`` of naps."""
    control = _control_block(arena)
    seen = atomics.load(control, POSTED)
    atomics.store(control, WANTED, 0)
    atomics.store(control, AWAKE, 1)
    idle, napped, nap = 0, 0, NAP_FIRST_US
    while True:
        number = atomics.load(control, POSTED)
        if number != seen:
            seen, idle, napped, nap = number, 0, 0, NAP_FIRST_US
            _take(control, arena, number)
        elif idle < spins:
            _spin(idle)
            idle += 1
        elif napped >= napping_us:
            break
        else:
            atomics.nap(nap)
            napped, nap = napped + nap, min(2 * nap, NAP_MOST_US)
    atomics.store(control, AWAKE, 0)  # a batch posted meanwhile is computed by its caller alone


@compiled
def _take(control: np.ndarray, arena: np.ndarray, number: int) -> None:
    """Chunks of batch ``number`` (:func:`_serve_chunks`), unless its boxes cannot be read as
    posted: then FAILED is set, and its caller computes every chunk."""
    try:
        if control[DOUBLE]:
            _serve_chunks(control, _carve(arena, np.empty(0, np.float64)), number)
        else:
            _serve_chunks(control, _carve(arena, np.empty(0, np.float32)), number)
    except Exception:
        atomics.store(control, FAILED, number)


@entry
def losses(
    logits: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    collapse: bool,
    merge_repeated: bool,
    work_limit: int,
    alone_limit: int,
    out: np.ndarray,
    arena: np.ndarray,
) -> int:
    """``logits`` [T, N, C], ``mask`` [T, N] and ``labels`` [N, T] (int64) scanned as
    :func:`ctcop.rule_scan.time_major_scan` does; then, for a batch below ``work_limit``, the
    losses into ``out`` (of the logits' element type) as :func:`ctcop.lanes.batch_loss` writes them, shared
    with the second thread through ``arena`` (empty: on this thread alone; alone, only below
    ``alone_limit``). Returns COMPUTED, WAKE (computed, and the second thread should be woken), or
    the longest target when the batch is left to the caller (a fault, or too much work), who scans
    it again (:func:`ctcop.canonical.time_major_batch`): where a batch is computed here, no buffer
    of the scan is allocated, filled or handed over from Python."""
    classes = logits.shape[2]
    lengths, targets, target_lengths, longest, here = _scanned(mask, labels, classes, collapse, work_limit)
    if not here:
        return longest
    outputs = (np.empty(0), out, np.empty((0, 0, 0), logits.dtype))
    settings = (merge_repeated, 0, False)
    done = _split(logits, lengths, targets, target_lengths, settings, longest, outputs, arena, alone_limit)
    return longest if done == NOT_HERE else done


@entry
def losses_and_grad(
    logits: np.ndarray,
    mask: np.ndarray,
    labels: np.ndarray,
    collapse: bool,
    merge_repeated: bool,
    work_limit: int,
    alone_limit: int,
    segment_elements: int,
    out: np.ndarray,
    grad: np.ndarray,
    arena: np.ndarray,
) -> int:
    """As :func:`losses`, and the gradient into ``grad`` (zero on entry) as
    :func:`ctcop.kernels.batch_grad` writes it; the losses from its log-likelihoods, as
    :func:`ctcop.lanes.batch_loss` writes them."""
    classes = logits.shape[2]
    lengths, targets, target_lengths, longest, here = _scanned(mask, labels, classes, collapse, work_limit)
    if not here:
        return longest
    loglik = np.empty(mask.shape[1])
    settings = (merge_repeated, segment_elements, True)
    outputs = (loglik, out, grad)
    done = _split(logits, lengths, targets, target_lengths, settings, longest, outputs, arena, alone_limit)
    if done == NOT_HERE:
        return longest
    _store_losses(loglik, out, 0)
    return done
