"""The core's thread pool: results independent of the thread count, and usable in a child that a
program forks after it has used the core (ctcop's own workers are spawned, :mod:`ctcop.process.workers`)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ctcop

FORK = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import ctcop
    x = np.random.default_rng(0).standard_normal((20, 8, 5))
    mask, labels = np.ones((20, 8), np.int8), np.full((8, 20), -1)
    labels[:, :3] = 1
    ctcop.set_num_threads(2)
    parent = ctcop.ctc_loss(x, mask, labels)  # the pool's threads exist in the parent only
    pid = os.fork()
    if pid == 0:
        os._exit(0 if np.array_equal(ctcop.ctc_loss_grad(x, mask, labels)[0], parent) else 1)
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """
)

pytestmark = pytest.mark.usefixtures("every_batch_threaded")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_computes_with_a_new_pool() -> None:
    result = subprocess.run([sys.executable, "-c", FORK], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_results_do_not_depend_on_the_thread_count(threads: int) -> None:
    rng = np.random.default_rng(5)
    inputs = rng.normal(size=(40, 13, 7)).astype(np.float32) * 4
    lengths = rng.integers(0, 41, size=13)
    mask = (np.arange(40)[:, None] < lengths[None, :]).astype(np.int8)
    labels = np.where(rng.random((13, 40)) < 0.3, rng.integers(0, 6, size=(13, 40)), -1)
    before = ctcop.get_num_threads()
    try:
        ctcop.set_num_threads(1)
        one = ctcop.ctc_loss_grad(inputs, mask, labels)
        ctcop.set_num_threads(threads)
        many = ctcop.ctc_loss_grad(inputs, mask, labels)
        loss = ctcop.ctc_loss(inputs, mask, labels)
    finally:
        ctcop.set_num_threads(before)
    np.testing.assert_array_equal(many[0], one[0])
    np.testing.assert_array_equal(many[1], one[1])
    np.testing.assert_array_equal(loss, one[0])
