"""Hostile tests of the compiled core (ctcop/core/kernels.py, ctcop/core/logexp.py, ctcop/core/scheduler.py).

The first group reproduces defects found by attacking the numba core (each test fails until the
defect is fixed); the rest are strong checks that held and are worth keeping: exactness against a
high-precision enumeration, bit-identity across checkpoint segmentations, threads, batch
composition and input layouts, exact shift invariance, and non-finite isolation.
"""

import itertools
import math
import subprocess
import sys
import textwrap
import threading
import time

import ml_dtypes
import mpmath
import numpy as np
import pytest

import ctcop
from ctcop.core import scheduler

# -- defects -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("every_batch_threaded")
def test_set_num_threads_while_other_threads_compute_raises_nothing() -> None:
    """set_num_threads shuts the pool down while another thread holds a reference to it between
    ``pool = _pool`` and ``pool.submit``: that call dies with "RuntimeError: cannot schedule new
    futures after shutdown" (spec: results are the same for any thread count; changing it must
    not break a concurrent call)."""
    rng = np.random.default_rng(4)
    frames, n, classes = 2, 64, 3
    inputs = rng.normal(size=(frames, n, classes))
    mask = np.ones((frames, n), np.int8)
    labels = rng.integers(-1, classes - 1, size=(n, frames))
    before = ctcop.get_num_threads()
    errors: list[str] = []
    done = threading.Event()
    start = threading.Barrier(4)
    interval = sys.getswitchinterval()
    try:
        sys.setswitchinterval(1e-6)  # frequent GIL hand-overs: the race shows within a few calls
        ctcop.set_num_threads(7)
        expected = ctcop.ctc_loss(inputs, mask, labels)

        def worker() -> None:
            start.wait()
            try:
                while not done.is_set():
                    if not np.array_equal(ctcop.ctc_loss(inputs, mask, labels), expected):
                        errors.append("result differs")
            except Exception as exc:  # any exception is the finding
                errors.append(repr(exc))

        def switcher() -> None:
            start.wait()
            try:
                for k in range(500):
                    ctcop.set_num_threads(7 + k % 2)
                    time.sleep(0.0005)  # let the workers take the pool's lock in between
                    if errors:
                        break
            finally:
                done.set()

        threads = [threading.Thread(target=worker) for _ in range(3)] + [threading.Thread(target=switcher)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
        ctcop.set_num_threads(before)
    assert errors == []


FORK_WHILE_LOCKED = textwrap.dedent(
    """
    import os, sys, threading, time
    import numpy as np
    import ctcop
    from ctcop.core import scheduler
    rng = np.random.default_rng(0)
    big = rng.standard_normal((2000, 12, 8))  # a few seconds of gradient on two threads
    big_mask, big_labels = np.ones((2000, 12), np.int8), np.full((12, 2000), -1)
    big_labels[:, :500] = rng.integers(0, 7, size=(12, 500))
    small = rng.standard_normal((4, 2, 3))
    small_mask, small_labels = np.ones((4, 2), np.int8), np.array([[0, 1, -1, -1], [-1, -1, -1, -1]])
    ctcop.set_num_threads(2)
    expected = ctcop.ctc_loss(small, small_mask, small_labels)
    # one thread keeps the pool busy; another changes the thread count, which holds the pool's
    # lock while it waits for the busy pool to drain; the main thread forks meanwhile
    busy = threading.Thread(target=ctcop.ctc_loss_grad, args=(big, big_mask, big_labels))
    busy.start()
    time.sleep(0.2)
    switch = threading.Thread(target=ctcop.set_num_threads, args=(2,))
    switch.start()
    deadline = time.monotonic() + 120
    while not scheduler._pool_lock.locked() and switch.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    print("lock held at fork:", scheduler._pool_lock.locked())
    pid = os.fork()
    if pid == 0:
        try:
            ok = np.array_equal(ctcop.ctc_loss(small, small_mask, small_labels), expected)
        finally:
            os._exit(0 if ok else 3)
    deadline = time.monotonic() + 300  # a hung child never answers; a slow one does
    status = None
    while time.monotonic() < deadline:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
            break
        time.sleep(0.01)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("forked child hung in ctcop.ctc_loss")
        status = 2
    busy.join()
    switch.join()
    sys.exit(status)
    """
)


def test_a_child_forked_while_the_pool_lock_is_held_computes() -> None:
    """The fork handler forgets the pool but not ``_pool_lock``: a child forked while another
    thread is inside set_num_threads (which holds the lock through ``pool.shutdown(wait=True)``)
    or get_num_threads inherits a locked lock and hangs forever in its first ctc_loss."""
    result = subprocess.run([sys.executable, "-c", FORK_WHILE_LOCKED], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_bfloat16_loss_is_rounded_once() -> None:
    """Spec 6: computed in float64 and rounded once. ml_dtypes casts float64 -> bfloat16 through
    float32, so a float64 loss just above a bfloat16 midpoint rounds down twice."""
    bfloat16 = ml_dtypes.bfloat16
    inputs = np.array([[[1.0859375, 0.302734375, -1.4609375, -1.3125]], [[3.3125, 1.625, -2.359375, 0.71875]]]).astype(
        bfloat16
    )
    mask, labels = np.ones((2, 1), np.int8), np.array([[-1, 2]])
    exact = ctcop.ctc_loss(inputs.astype(np.float64), mask, labels)[0]  # bfloat16 -> float64 is exact
    assert 5.765625 < exact < 5.765625 + 2.0**-20  # just above the midpoint of 5.75 and 5.78125
    assert float(ctcop.ctc_loss(inputs, mask, labels)[0]) == 5.78125  # got 5.75
    assert float(ctcop.ctc_loss_grad(inputs, mask, labels)[0][0]) == 5.78125


def test_bfloat16_gradient_is_rounded_once() -> None:
    """Spec 5: the gradient is rounded once to the logits' type; bfloat16's goes through float32."""
    bfloat16 = ml_dtypes.bfloat16
    inputs = np.array([[[-0.185546875, 1.140625, 0.369140625]]]).astype(bfloat16)
    mask, labels = np.ones((1, 1), np.int8), np.array([[-1]])
    exact = ctcop.ctc_loss_grad(inputs.astype(np.float64), mask, labels)[1][0, 0, 2]
    assert -0.732421875 < exact < -0.732421875 + 2.0**-26  # just inside the midpoint of the two neighbours
    assert float(ctcop.ctc_loss_grad(inputs, mask, labels)[1][0, 0, 2]) == -0.73046875  # got -0.734375


def test_a_loss_is_never_negative() -> None:
    """-ln of a probability is >= 0; T = 2, C = 2, target (0), logits [30, 0] twice: the true loss
    is -log1p(-q^2) = 8.8e-27 with q = 1 / (1 + e^30); the core returns -1.26e-29."""
    inputs = np.array([[[30.0, 0.0]], [[30.0, 0.0]]])
    mask, labels = np.ones((2, 1), np.int8), np.array([[0, -1]])
    loss = ctcop.ctc_loss(inputs, mask, labels)[0]
    assert loss >= 0.0
    assert ctcop.ctc_loss_grad(inputs, mask, labels)[0][0] >= 0.0


@pytest.mark.parametrize(
    ("inputs", "labels", "expected", "rel"),
    [
        # empty target over one frame: -ln p(blank) = log1p(e^-40); the core returned 0.0
        ([[[-40.0, 0.0]]], [[-1]], math.log1p(math.exp(-40.0)), 1e-15),
        # target (0) over two frames, p(blank) = q: loss -log1p(-q^2) = 8.76e-27; the core returned
        # -1.26e-29, now 8.63e-27: the loss is the difference of ln(1 - q) and log1p(q), each
        # -9.4e-14 to 1e-16 relative, so about 1e-29 absolute is all float64 log space can give
        ([[[30.0, 0.0]], [[30.0, 0.0]]], [[0, -1]], -math.log1p(-((1.0 / (1.0 + math.exp(30.0))) ** 2)), 2e-2),
        # the same at logits [10, 0]: 2.0609664848e-09; the core returned 3e-8 relative, now 2e-11
        ([[[10.0, 0.0]], [[10.0, 0.0]]], [[0, -1]], -math.log1p(-((1.0 / (1.0 + math.exp(10.0))) ** 2)), 1e-10),
    ],
)
def test_small_losses_are_relatively_accurate(inputs: list, labels: list, expected: float, rel: float) -> None:
    """Losses near 0 (a confident, correct model): the log-softmax and every sum of terms take the
    excess over their largest term through log1p, so a loss keeps the relative accuracy that the
    log-probabilities it is made of allow (spec 4.5): about u |ln p| absolute per frame."""
    values = np.array(inputs)
    loss = ctcop.ctc_loss(values, np.ones(values.shape[:2], np.int8), np.array(labels))[0]
    assert loss == pytest.approx(expected, rel=rel, abs=0.0)


def test_gradient_of_a_sample_whose_loss_overflows_float64() -> None:
    """T = 1, C = 2, target (0), finite logits [-1e308, 1e308]: the loss 2e308 rounds to +inf.
    Spec 5 decides: a loss of +inf, from no aligned path or from float64 overflow alike, has
    gradient 0 (the gradient p - onehot(0) = [-1, 1] of the overflowing case is not computed)."""
    inputs = np.array([[[-1e308, 1e308]]])
    loss, grad = ctcop.ctc_loss_grad(inputs, np.ones((1, 1), np.int8), np.array([[0]]))
    assert loss[0] == np.inf
    np.testing.assert_array_equal(grad[0, 0], [0.0, 0.0])


# -- checks that held ------------------------------------------------------------------------------


def _decode(path: tuple[int, ...], blank: int, merge: bool) -> tuple[int, ...]:
    out, previous = [], None
    for symbol in path:
        if not (merge and symbol == previous) and symbol != blank:
            out.append(symbol)
        previous = symbol
    return tuple(out)


def _exact_loss_grad(frames: np.ndarray, target: list[int], blank: int, merge: bool) -> tuple[float, np.ndarray]:
    """Loss and gradient by enumeration in 60-digit arithmetic (mpmath)."""
    with mpmath.workdps(60):
        count, classes = frames.shape
        log_probs = []
        for row in frames:
            values = [mpmath.mpf(float(v)) for v in row]
            top = max(values)
            norm = mpmath.log(mpmath.fsum(mpmath.exp(v - top) for v in values))
            log_probs.append([v - top - norm for v in values])
        terms = [
            (path, mpmath.fsum(log_probs[t][path[t]] for t in range(count)))
            for path in itertools.product(range(classes), repeat=count)
            if _decode(path, blank, merge) == tuple(target)
        ]
        if not terms:
            return math.inf, np.zeros(frames.shape)
        top = max(value for _, value in terms)
        weights = [(path, mpmath.exp(value - top)) for path, value in terms]
        total = mpmath.fsum(w for _, w in weights)
        grad = [[mpmath.exp(log_probs[t][c]) for c in range(classes)] for t in range(count)]
        for path, weight in weights:
            for t in range(count):
                grad[t][path[t]] -= weight / total
        return float(-(top + mpmath.log(total))), np.array([[float(v) for v in row] for row in grad])


def test_random_small_cases_against_high_precision_enumeration() -> None:
    """Losses within 1e-13 relative (losses above 1e-3) and gradients within 2e-15 absolute of a
    60-digit enumeration, over scales from 0.5 to 1e19 mixed within a frame, both decoding rules,
    repeated labels and pads anywhere."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        frames, classes = int(rng.integers(1, 5)), int(rng.integers(2, 4))
        scale = 10.0 ** rng.integers(0, 20, size=(frames, 1, classes)) if rng.random() < 0.3 else rng.choice([0.5, 3])
        inputs = rng.normal(size=(frames, 1, classes)) * scale
        labels = np.where(rng.random((1, frames)) < 0.4, -1, rng.integers(0, classes - 1, size=(1, frames)))
        merge = bool(rng.integers(2))
        loss, grad = ctcop.ctc_loss_grad(inputs, np.ones((frames, 1), np.int8), labels, merge_repeated=merge)
        target = [int(v) for v in labels[0] if v != -1]
        exact_loss, exact_grad = _exact_loss_grad(inputs[:, 0], target, classes - 1, merge)
        if exact_loss > 1e-3:
            assert loss[0] == pytest.approx(exact_loss, rel=1e-13)
        elif math.isinf(exact_loss):
            assert loss[0] == math.inf
        np.testing.assert_allclose(grad[:, 0], exact_grad, rtol=0, atol=2e-15)


def test_extreme_logit_magnitudes_against_high_precision_enumeration() -> None:
    """Spec 5's example at 1e4 .. 1.7e308 and its mirror, huge mixed gaps, subnormal logits."""
    cases = []
    for big in (1e4, 1e12, 1e16, 1e300, 1.7e308):
        cases += [([[[0, big]], [[0, big]]], [[0, -1]]), ([[[0, -big]], [[0, -big]]], [[0, -1]])]
    cases += [
        ([[[1e4, -1e4, 0]], [[-1e4, 1e4, 3]], [[700, 0, -800]], [[0, 1e6, -1e6]]], [[0, 1, 0, 1]]),
        ([[[5e-324, 0, -5e-324]], [[1e-310, 2e-310, 0]]], [[0, -1]]),
    ]
    for values, labels in cases:
        inputs = np.array(values, dtype=np.float64)
        for merge in (True, False):
            loss, grad = ctcop.ctc_loss_grad(inputs, np.ones(inputs.shape[:2], np.int8), labels, merge_repeated=merge)
            target = [v for v in labels[0] if v != -1]
            exact_loss, exact_grad = _exact_loss_grad(inputs[:, 0], target, inputs.shape[2] - 1, merge)
            assert loss[0] == pytest.approx(exact_loss, rel=1e-15, abs=1e-300)
            np.testing.assert_allclose(grad[:, 0], exact_grad, rtol=0, atol=1e-16)


def _random_batch(rng: np.random.Generator, frames: int, n: int, classes: int) -> tuple[np.ndarray, ...]:
    inputs = rng.normal(size=(frames, n, classes)) * rng.choice([1.0, 10.0])
    mask = (np.arange(frames)[:, None] < rng.integers(0, frames + 1, n)[None, :]).astype(np.int8)
    labels = np.where(rng.random((n, frames)) < 0.6, -1, rng.integers(0, classes - 1, size=(n, frames)))
    return inputs, mask, labels


def test_checkpoint_segmentation_changes_no_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any SEGMENT_ELEMENTS (1 segment per frame up to one segment for all) gives the same bits."""
    rng = np.random.default_rng(6)
    for _ in range(40):
        batch = _random_batch(rng, int(rng.integers(1, 40)), int(rng.integers(1, 5)), int(rng.integers(2, 5)))
        merge = bool(rng.integers(2))
        loss, grad = ctcop.ctc_loss_grad(*batch, merge_repeated=merge)
        for elements in (1, 3, 7, 20, 100):
            monkeypatch.setattr(scheduler, "SEGMENT_ELEMENTS", elements)
            other = ctcop.ctc_loss_grad(*batch, merge_repeated=merge)
            monkeypatch.undo()
            np.testing.assert_array_equal(other[0], loss)
            np.testing.assert_array_equal(other[1], grad)


def test_batch_composition_changes_no_bit() -> None:
    """A sample alone, inside a batch, permuted, and with trailing inactive frames: same bits."""
    rng = np.random.default_rng(8)
    inputs, mask, labels = _random_batch(rng, 25, 23, 5)
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    np.testing.assert_array_equal(ctcop.ctc_loss(inputs, mask, labels), loss)
    order = rng.permutation(23)
    permuted = ctcop.ctc_loss_grad(inputs[:, order], mask[:, order], labels[order])
    np.testing.assert_array_equal(permuted[0], loss[order])
    np.testing.assert_array_equal(permuted[1], grad[:, order])
    for i in range(0, 23, 5):
        alone = ctcop.ctc_loss_grad(inputs[:, i : i + 1], mask[:, i : i + 1], labels[i : i + 1])
        np.testing.assert_array_equal(alone[0], loss[i : i + 1])
        np.testing.assert_array_equal(alone[1], grad[:, i : i + 1])
    longer = np.concatenate([inputs, rng.normal(size=(10, 23, 5))])
    longer_mask = np.concatenate([mask, np.zeros((10, 23), np.int8)])
    longer_labels = np.concatenate([labels, np.full((23, 10), -1)], axis=1)
    padded = ctcop.ctc_loss_grad(longer, longer_mask, longer_labels)
    np.testing.assert_array_equal(padded[0], loss)
    np.testing.assert_array_equal(padded[1][:25], grad)
    assert not padded[1][25:].any()


def concurrent_disagreements(batches: list[tuple], expected: list[tuple], calls: int) -> list[str]:
    """One Python thread per batch, all at once, each calling ``ctc_loss_grad`` ``calls`` times:
    the batches whose loss or gradient was ever not bit-identical to ``expected``."""
    failures: list[str] = []

    def worker(k: int) -> None:
        for _ in range(calls):
            loss, grad = ctcop.ctc_loss_grad(*batches[k])
            if not (np.array_equal(loss, expected[k][0]) and np.array_equal(grad, expected[k][1])):
                failures.append(f"batch {k}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(batches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_concurrent_callers_get_the_serial_bits() -> None:
    """Four Python threads computing at once on a shared pool of 3 get bit-identical results."""
    rng = np.random.default_rng(9)
    batches = [_random_batch(rng, 30, 17, 6) for _ in range(4)]
    before = ctcop.get_num_threads()
    try:
        ctcop.set_num_threads(3)
        serial = [ctcop.ctc_loss_grad(*batch) for batch in batches]
        failures = concurrent_disagreements(batches, serial, 15)
    finally:
        ctcop.set_num_threads(before)
    assert failures == []


def test_exact_constant_shifts_change_no_bit() -> None:
    """Logits on a 2^-20 grid shifted by 4e5 (per batch or per frame) stay exact: same bits."""
    rng = np.random.default_rng(10)
    inputs, mask, labels = _random_batch(rng, 6, 5, 4)
    inputs = np.round(inputs * 2**20) / 2**20
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    for shift in (4e5, -4e5, 1e9, np.round(rng.normal(size=(6, 5, 1)) * 4e5)):
        shifted = ctcop.ctc_loss_grad(inputs + shift, mask, labels)
        np.testing.assert_array_equal(shifted[0], loss)
        np.testing.assert_array_equal(shifted[1], grad)


def test_layouts_and_byte_orders_change_no_bit(tmp_path) -> None:
    """Big-endian, strided, Fortran-ordered, reversed, read-only, broadcast and memory-mapped
    logits give the bits of the plain array (float64 and float32)."""
    rng = np.random.default_rng(11)
    inputs, mask, labels = _random_batch(rng, 7, 4, 5)
    for dtype in (np.float64, np.float32):
        plain = inputs.astype(dtype)
        loss, grad = ctcop.ctc_loss_grad(plain, mask, labels)
        wide = np.zeros((7, 4, 10), dtype)
        wide[:, :, ::2] = plain
        readonly = plain.copy()
        readonly.flags.writeable = False
        mapped = np.memmap(tmp_path / f"{np.dtype(dtype).name}.bin", dtype=dtype, mode="w+", shape=plain.shape)
        mapped[:] = plain
        variants = [
            plain.astype(np.dtype(dtype).newbyteorder(">")),
            wide[:, :, ::2],
            np.asfortranarray(plain),
            np.ascontiguousarray(plain[:, :, ::-1])[:, :, ::-1],
            readonly,
            mapped,
        ]
        for variant in variants:
            other = ctcop.ctc_loss_grad(variant, mask, labels)
            np.testing.assert_array_equal(other[0].astype(dtype), loss)
            np.testing.assert_array_equal(other[1].astype(dtype), grad)
            np.testing.assert_array_equal(ctcop.ctc_loss(variant, mask, labels).astype(dtype), loss)
        first = np.broadcast_to(plain[:1], plain.shape)
        np.testing.assert_array_equal(
            ctcop.ctc_loss_grad(first, mask, labels)[1], ctcop.ctc_loss_grad(first.copy(), mask, labels)[1]
        )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_touches_only_its_own_active_sample(bad: float) -> None:
    rng = np.random.default_rng(12)
    inputs, mask, labels = _random_batch(rng, 6, 5, 4)
    mask[:, 2] = 0
    mask[:, 0] = 1
    loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels)
    lengths = mask.sum(axis=0)
    for t, i in itertools.product(range(6), range(5)):
        spoiled = inputs.copy()
        spoiled[t, i, int(rng.integers(4))] = bad
        other_loss, other_grad = ctcop.ctc_loss_grad(spoiled, mask, labels)
        np.testing.assert_array_equal(ctcop.ctc_loss(spoiled, mask, labels), other_loss)
        np.testing.assert_array_equal(ctcop.ctc_loss_or_nan(spoiled, mask, labels), other_loss)
        rest = [j for j in range(5) if j != i]
        np.testing.assert_array_equal(other_loss[rest], loss[rest])
        np.testing.assert_array_equal(other_grad[:, rest], grad[:, rest])
        if t < lengths[i]:
            assert np.isnan(other_loss[i])
            assert np.isnan(other_grad[: lengths[i], i]).all()
            assert not other_grad[lengths[i] :, i].any()
        else:
            assert other_loss[i] == loss[i]
            np.testing.assert_array_equal(other_grad[:, i], grad[:, i])


def test_gradient_against_central_differences() -> None:
    rng = np.random.default_rng(13)
    for _ in range(12):
        frames, classes = int(rng.integers(1, 5)), int(rng.integers(2, 4))
        inputs = rng.normal(size=(frames, 2, classes)) * rng.choice([0.5, 2.0, 8.0])
        mask = np.ones((frames, 2), np.int8)
        labels = np.where(rng.random((2, frames)) < 0.5, -1, rng.integers(0, classes - 1, size=(2, frames)))
        options = {"merge_repeated": bool(rng.integers(2)), "preprocess_collapse_repeated": bool(rng.integers(2))}
        loss, grad = ctcop.ctc_loss_grad(inputs, mask, labels, **options)
        step = 1e-6
        for index in np.ndindex(inputs.shape):
            if loss[index[1]] == np.inf:
                assert not grad[:, index[1]].any()
                continue
            up, down = inputs.copy(), inputs.copy()
            up[index] += step
            down[index] -= step
            higher = ctcop.ctc_loss(up, mask, labels, **options)[index[1]]
            lower = ctcop.ctc_loss(down, mask, labels, **options)[index[1]]
            assert (higher - lower) / (2 * step) == pytest.approx(grad[index], abs=2e-8)
