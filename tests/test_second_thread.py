"""The second thread (ctcop/small_batch.py, ctcop/second_thread.py): a batch shared with it gives
the bits the calling thread gives alone, whoever computes each chunk, and chunks the thread cannot
compute are computed by their caller."""

import threading
import time

import numba
import numpy as np
import pytest
from test_core_hostile import concurrent_disagreements

import ctcop
from ctcop import canonical, recursion, second_thread, small_batch

CAPACITY = 1 << 12
LIMITS = (1 << 40, 1 << 40)  # every batch in one call


def arena(capacity: int = CAPACITY) -> np.ndarray:
    return np.zeros(small_batch.CONTROL_BYTES + capacity * small_batch.ARENA_BYTES, np.uint8)


def batch(seed: int, dtype: type = np.float32, samples: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ragged frame counts (0 included) and targets (empty, repeated, too long included)."""
    rng = np.random.default_rng(seed)
    frames, classes = 9, 6
    logits = (3 * rng.standard_normal((frames, samples, classes))).astype(dtype)
    lengths = rng.integers(0, frames + 1, samples)
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(np.int32)
    labels = np.full((samples, frames), -1, np.int64)
    for i, size in enumerate(rng.integers(0, frames + 1, samples)):
        labels[i, :size] = rng.integers(0, classes - 1, size)
    return logits, mask, labels


def one_call(space: np.ndarray, inputs: tuple, gradient: bool) -> tuple[np.ndarray, ...]:
    """``small_batch.losses`` (or with the gradient) of ``inputs`` sharing ``space``."""
    checked = canonical.time_major_inputs(*inputs, preprocess_collapse_repeated=False, merge_repeated=True)
    logits = checked.logits
    head = (logits, checked.mask_values, checked.label_values, False, True, *LIMITS)
    out = np.empty(logits.shape[1], logits.dtype)
    if gradient:
        grad = np.zeros(logits.shape, logits.dtype)
        settings = (*head, recursion.SEGMENT_ELEMENTS)
        done = small_batch.losses_and_grad(*settings, out, grad, space)
        assert done in (small_batch.COMPUTED, small_batch.WAKE)
        return out, grad
    assert small_batch.losses(*head, out, space) in (small_batch.COMPUTED, small_batch.WAKE)
    return (out,)


def alone(inputs: tuple, gradient: bool) -> tuple[np.ndarray, ...]:
    return one_call(second_thread.ALONE, inputs, gradient)


def serving(space: np.ndarray, spins: int = 1 << 24, napping_us: int = 0) -> threading.Thread:
    """A thread in ``serve`` on ``space``, awake when this returns (it spins for ``spins`` rounds,
    about 0.4 s by default, with nothing posted, then naps for ``napping_us``, then returns).
    ``serve`` is compiled here first (minutes on a cold cache and a loaded machine), so the wait
    below is only the thread's start."""
    small_batch.serve(np.zeros(small_batch.CONTROL_BYTES, np.uint8), 0, 0)
    thread = threading.Thread(target=small_batch.serve, args=(space, spins, napping_us), daemon=True)
    thread.start()
    control = small_batch.control_block(space)
    deadline = time.monotonic() + 60
    while control[small_batch.AWAKE] == 0:
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.001)
    return thread


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("gradient", [False, True], ids=["loss", "grad"])
def test_a_shared_batch_gives_the_bits_of_one_thread(dtype: type, gradient: bool) -> None:
    space = arena()
    control = small_batch.control_block(space)
    cases = [(batch(seed, dtype), alone(batch(seed, dtype), gradient)) for seed in range(12)]  # compiled first
    thread = serving(space)
    deadline = time.monotonic() + 120
    calls = helped = 0
    while calls < len(cases) or helped < 3:  # the thread computed chunks of three batches (it may be late)
        assert time.monotonic() < deadline, "the second thread computed chunks of fewer than three batches"
        inputs, expected = cases[calls % len(cases)]
        got = one_call(space, inputs, gradient)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
        calls += 1
        assert control[small_batch.POSTED] == calls
        helped += control[small_batch.FINISHED] > 0
    thread.join(60)
    assert not thread.is_alive() and control[small_batch.AWAKE] == 0


def test_chunks_nobody_takes_are_computed_by_their_caller() -> None:
    space = arena()
    control = small_batch.control_block(space)
    control[small_batch.AWAKE] = 1  # says awake, but no thread serves: the caller computes every chunk
    inputs = batch(3)
    for gradient in (False, True):
        got = one_call(space, inputs, gradient)
        for a, b in zip(got, alone(inputs, gradient), strict=True):
            np.testing.assert_array_equal(a, b)
    assert control[small_batch.POSTED] == 2 and control[small_batch.FINISHED] == 0


@pytest.mark.parametrize(
    ("samples", "frames", "posted"),
    [
        (16, 30, 0),  # two chunks of 8 would lose the group of 16 from lanes: computed whole
        (18, 30, 1),  # two chunks of 9 keep their samples in lanes: shared
        (16, 64, 1),  # above the pool's threshold: shared, not cut into the pool's blocks
    ],
)
def test_a_loss_batch_is_shared_only_where_its_chunks_keep_their_lanes(samples: int, frames: int, posted: int) -> None:
    """Samples of one shape (T = ``frames``, L = 2, C = 11) with the pool's real limits on two
    threads, against a control block that says the thread is awake (none serves: the caller
    computes every chunk of a posted batch): whether the batch was posted, and every loss computed
    here with its bits alone."""
    space = np.zeros(small_batch.CONTROL_BYTES + samples * frames * 11 * small_batch.ARENA_BYTES, np.uint8)
    control = small_batch.control_block(space)
    control[small_batch.AWAKE] = 1
    rng = np.random.default_rng(samples + frames)
    logits = rng.standard_normal((frames, samples, 11)).astype(np.float32)
    labels = np.full((samples, frames), -1, np.int64)
    labels[:, :2] = rng.integers(0, 10, (samples, 2))
    checked = canonical.time_major_inputs(
        logits, np.ones((frames, samples), np.int32), labels, preprocess_collapse_repeated=False, merge_repeated=True
    )
    out = np.empty(samples, np.float32)
    head = (checked.logits, checked.mask_values, checked.label_values, False, True)
    done = small_batch.losses(*head, recursion.PAIR_WORK, recursion.PARALLEL_WORK, out, space)
    assert done == small_batch.COMPUTED and control[small_batch.POSTED] == posted
    np.testing.assert_array_equal(out, alone((logits, np.ones((frames, samples), np.int32), labels), False)[0])


def test_a_batch_the_thread_cannot_compute_is_marked_failed_and_it_serves_on() -> None:
    space = arena()
    control = small_batch.control_block(space)
    thread = serving(space)
    # A batch larger than the boxes, its one chunk copied: the thread's views of it fail.
    control[small_batch.SAMPLES], control[small_batch.FRAMES], control[small_batch.CLASSES] = CAPACITY, 4, 4
    control[small_batch.WIDTH], control[small_batch.CHUNK], control[small_batch.DOUBLE] = 1, CAPACITY, 0
    number = control[small_batch.POSTED] + 1
    control[small_batch.CLAIMS] = (number << 2 * small_batch.END_BITS) | 1  # chunks [0, 1) unclaimed
    control[small_batch.AVAILABLE], control[small_batch.FINISHED] = 1, 0
    control[small_batch.POSTED] = number
    deadline = time.monotonic() + 60
    while control[small_batch.FAILED] != number:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert control[small_batch.CLAIMS] == (number << 2 * small_batch.END_BITS) | 1  # it claimed nothing
    for gradient in (False, True):  # it serves on: shared batches, computed by whichever thread
        inputs = batch(5)
        expected = alone(inputs, gradient)
        while True:
            assert time.monotonic() < deadline and thread.is_alive()
            for a, b in zip(one_call(space, inputs, gradient), expected, strict=True):
                np.testing.assert_array_equal(a, b)
            if control[small_batch.FINISHED] > 0:
                break
    assert control[small_batch.FAILED] == number
    thread.join(60)


def test_a_chunk_its_caller_never_copies_does_not_hold_the_thread() -> None:
    """A batch posted with two chunks, none copied, and the arena left in use (as a caller that
    failed mid-batch leaves them): the thread stops waiting for the copy, claims nothing, and ends
    its wait as usual."""
    space = arena()
    control = small_batch.control_block(space)
    thread = serving(space)  # spins about 0.4 s with nothing posted, then returns
    control[small_batch.SAMPLES], control[small_batch.FRAMES], control[small_batch.CLASSES] = 2, 4, 4
    control[small_batch.WIDTH], control[small_batch.CHUNK], control[small_batch.DOUBLE] = 1, 1, 0
    number = control[small_batch.POSTED] + 1
    unclaimed = (number << 2 * small_batch.END_BITS) | 2  # chunks [0, 2) unclaimed
    control[small_batch.CLAIMS], control[small_batch.AVAILABLE], control[small_batch.FINISHED] = unclaimed, 0, 0
    control[small_batch.IN_USE], control[small_batch.POSTED] = 1, number
    thread.join(60)
    assert not thread.is_alive(), "the thread still waits for a chunk its caller never copies"
    assert control[small_batch.CLAIMS] == unclaimed and control[small_batch.FINISHED] == 0


def test_calls_from_many_threads_share_the_second_thread_and_agree() -> None:
    recursion.set_num_threads(2)
    inputs = [batch(seed, samples=64) for seed in range(4)]
    recursion.set_num_threads(1)
    expected = [ctcop.ctc_loss_grad(*x) for x in inputs]
    recursion.set_num_threads(2)
    try:
        failures = concurrent_disagreements(inputs, expected, 200)
    finally:
        recursion.set_num_threads(recursion._default_threads())
    assert not failures


def test_back_to_back_calls_on_two_threads_use_the_second_thread() -> None:
    recursion.set_num_threads(2)
    try:
        inputs = batch(7, samples=64)
        ctcop.ctc_loss(*inputs)
        control = small_batch.control_block(second_thread.shared(recursion.PAIR_WORK))
        deadline, posted = time.monotonic() + 120, int(control[small_batch.POSTED])
        # the thread wakes after the first call that wanted it
        while control[small_batch.POSTED] == posted or control[small_batch.FINISHED] == 0:
            assert time.monotonic() < deadline, "the second thread computed no chunk in two minutes"
            ctcop.ctc_loss(*inputs)
    finally:
        recursion.set_num_threads(recursion._default_threads())


def test_a_napping_thread_takes_chunks_of_a_batch_posted_during_its_nap() -> None:
    space = arena(1 << 15)
    control = small_batch.control_block(space)
    inputs = batch(9, samples=400)
    expected = alone(inputs, True)  # compiled first
    thread = serving(space, spins=0, napping_us=2_000_000)  # naps from the start, between looks
    deadline = time.monotonic() + 60
    while True:  # each batch is posted (the thread is awake); it takes chunks when its nap ends in time
        assert time.monotonic() < deadline, "a napping thread took no chunk of a batch posted meanwhile"
        for a, b in zip(one_call(space, inputs, True), expected, strict=True):
            np.testing.assert_array_equal(a, b)
        assert control[small_batch.AWAKE] == 1 and control[small_batch.WANTED] == 0
        if control[small_batch.FINISHED] > 0:
            break
    thread.join(60)
    assert not thread.is_alive() and control[small_batch.AWAKE] == 0


def test_read_only_inputs_reuse_the_compiled_one_call_kernels() -> None:
    logits, mask, labels = batch(11, samples=8)
    expected = ctcop.ctc_loss(logits, mask, labels), ctcop.ctc_loss_grad(logits, mask, labels)
    compiled = len(small_batch.losses.signatures) + len(small_batch.losses_and_grad.signatures)
    logits.setflags(write=False)
    labels.setflags(write=False)
    np.testing.assert_array_equal(ctcop.ctc_loss(logits, mask, labels), expected[0])
    for got, want in zip(ctcop.ctc_loss_grad(logits, mask, labels), expected[1], strict=True):
        np.testing.assert_array_equal(got, want)
    assert len(small_batch.losses.signatures) + len(small_batch.losses_and_grad.signatures) == compiled


@numba.njit
def claim(control: np.ndarray, number: int) -> int:
    return small_batch._claim(control, number)


@numba.njit
def take(control: np.ndarray, space: np.ndarray, number: int) -> None:
    small_batch._take(control, space, number)


def claims(number: int, front: int, back: int) -> int:
    """The CLAIMS word of batch ``number`` with chunks ``[front, back)`` unclaimed."""
    low = number % (1 << small_batch.NUMBER_BITS)
    return (low << 2 * small_batch.END_BITS) | (front << small_batch.END_BITS) | back


def test_a_claim_on_a_later_batch_with_the_same_low_bits_goes_back_to_its_caller() -> None:
    """A thread that read batch ``number`` and claims only once 2**NUMBER_BITS more batches were
    posted finds the CLAIMS word of the batch now posted carrying the same bits: its claim goes
    back to that batch's caller (FAILED, the chunk reported finished), computed by no one else."""
    later = 5 + (1 << small_batch.NUMBER_BITS)
    for number, own in ((5, False), (later, True)):
        control = small_batch.control_block(arena())
        control[small_batch.CLAIMS] = claims(later, 0, 3)
        control[small_batch.AVAILABLE], control[small_batch.POSTED] = 3, later
        assert claim(control, number) == (0 if own else -1)
        assert control[small_batch.CLAIMS] == claims(later, 1, 3)  # chunk 0 claimed either way
        assert control[small_batch.FAILED] == (0 if own else later)
        assert control[small_batch.FINISHED] == (0 if own else 1)


def test_after_a_chunk_handed_back_the_thread_reports_every_chunk_claimed_finished() -> None:
    """The batch whose chunk 0 a stale claim handed back (FINISHED 1) is then served as usual:
    the thread claims chunks 1 and 2 (samples with no frames and no targets) and reports all three
    finished, the count its caller waits for."""
    space = arena()
    control = small_batch.control_block(space)
    later = 5 + (1 << small_batch.NUMBER_BITS)
    control[small_batch.SAMPLES], control[small_batch.FRAMES], control[small_batch.CLASSES] = 3, 4, 4
    control[small_batch.WIDTH], control[small_batch.CHUNK], control[small_batch.DOUBLE] = 1, 1, 0
    control[small_batch.MERGE], control[small_batch.SEGMENT] = 1, recursion.SEGMENT_ELEMENTS
    control[small_batch.CLAIMS], control[small_batch.AVAILABLE] = claims(later, 1, 3), 3
    control[small_batch.FINISHED], control[small_batch.FAILED], control[small_batch.POSTED] = 1, later, later
    take(control, space, later)
    assert control[small_batch.CLAIMS] == claims(later, 3, 3)
    assert control[small_batch.FINISHED] == 3
