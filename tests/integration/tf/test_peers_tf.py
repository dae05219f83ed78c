"""The TensorFlow peers (``tf.nn.ctc_loss`` as tensorflow, ``tf.compat.v1.nn.ctc_loss`` as
tensorflow-v1, ``ctcop.conformance.peers``) against the reference.

Each peer agrees with the reference (loss by the suite's rule, gradient by the suite's per-sample
gradient rule, both by :func:`ctcop.conformance.verdict.judge`) on representative valid cases, and
their departures (registry ids D25-D38, ``ctcop defects``) are checked against the installed
version through ``reproduces``: on the version the registry was measured on each must show in its
exact shape; on another one a departure that no longer shows is a re-measure warning (then the
peer's docstring and the README's table of peers can be revisited). TensorFlow is imported through
``pytest.importorskip`` only, once, for both of its peers; CI installs it, so nothing here is
skipped there.
"""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from support.peers import agree_cases, case, numbers, refusal, run, softmax
from support.registered import reproduces

from ctcop.conformance import verdict
from ctcop.conformance.peers import PEERS
from ctcop.conformance.peers.tf_ctc import sparse_targets

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")


@pytest.mark.parametrize(("name", "case_id"), agree_cases("tensorflow", "tensorflow-v1"))
def test_peer_agrees_with_the_reference(name: str, case_id: str) -> None:
    assert PEERS[name].available() is None
    chosen = case(case_id)
    result = verdict.judge(PEERS[name], chosen)
    assert (result.status, result.message) == ("pass", ""), f"{name} on {case_id}"


# -- tf.nn.ctc_loss (v2, dense labels) -----------------------------------------------------------


def test_d27_tf2_infeasible_target_gives_a_finite_loss() -> None:
    # ctc_state_log_probs stands ln(1e-307) = -706.9 for ln 0: no aligned path costs ~707, not +inf
    chosen, got = run("tensorflow", "spec/infeasible_too_long/float32")
    assert np.isinf(chosen.expected_loss[1:]).all()
    if reproduces("D27", bool(np.isfinite(got.loss[1:]).any())):
        assert (np.abs(got.loss[1:] - 710) < 10).all()


def test_d28_tf2_ln0_stand_in_leaks_at_large_logits() -> None:
    chosen, got = run("tensorflow", "spec/logits_1e4/float32")
    if reproduces("D28", not np.isclose(got.loss[1], chosen.expected_loss[1], rtol=1e-5)):
        assert got.loss[1] < chosen.expected_loss[1] - 1000  # 21466 for 22970


def test_d29_tf2_nan_in_masked_frames_poisons_the_loss() -> None:
    chosen, got = run("tensorflow", "spec/nan_in_masked_frames/float32")
    assert np.isfinite(chosen.expected_loss).all()
    reproduces("D29", bool(np.isnan(got.loss[1])), "the loss")


def test_d29_tf2_nan_sample_gradient_is_nan_in_masked_frames() -> None:
    chosen, got = run("tensorflow", "spec/inf_in_active_frame/float32")
    assert np.isnan(got.loss[2])
    masked = chosen.inputs["sequence_mask"][:, 2] == 0
    assert masked.any() and not chosen.expected_grad[masked, 2].any()
    if reproduces("D29", bool(np.isnan(got.grad[masked, 2]).any()), "the gradient"):
        assert np.isnan(got.grad[:, 2]).all()


def test_d30_tf2_reads_any_blank_index() -> None:
    for case_id in ("invalid/released/blank_index_negative", "invalid/released/blank_index_out_of_range"):
        loss = numbers("tensorflow", case_id)
        if reproduces("D30", loss is not None, case_id):
            assert np.isfinite(loss).all()


# -- tf.compat.v1.nn.ctc_loss (the CTCLoss kernel) -----------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "defect_id", "case_id", "message"),
    [
        ("tensorflow", "D25", "spec/hand_worked/float64", "expected to be a double tensor but is a float tensor"),
        ("tensorflow", "D26", "spec/empty_batch/float32", "Indices and updates specified for empty output shape"),
        ("tensorflow-v1", "D31", "spec/empty_targets/float32", "Labels length is zero in batch 0"),
        ("tensorflow-v1", "D31", "spec/infeasible_too_long/float32",
         "Not enough time for target transition sequence (required: 5"),
        ("tensorflow-v1", "D32", "spec/no_frames/float32", "Max time or first dimension of input cannot be 0"),
        ("tensorflow-v1", "D32", "spec/empty_batch/float32", "batch_size must not be 0"),
    ],
)  # fmt: skip
def test_d25_d26_d31_d32_tf_raises(runtime: str, defect_id: str, case_id: str, message: str) -> None:
    # tensorflow-v1 raises for the whole batch when one sample is empty or too long (D31)
    got = refusal(runtime, case_id, tf.errors.InvalidArgumentError)
    if reproduces(defect_id, got is not None, case_id):
        assert message in str(got)


def test_tf1_ignoring_too_long_targets_gives_zero() -> None:
    chosen = case("spec/infeasible_too_long/float32")
    x = tf.constant(chosen.inputs["inputs"])
    labels = tf.SparseTensor(*sparse_targets(chosen))
    lengths = tf.constant(chosen.inputs["sequence_mask"].sum(axis=0).astype(np.int32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.compat.v1.nn.ctc_loss(labels, x, lengths, ignore_longer_outputs_than_inputs=True)
        total = tf.reduce_sum(loss)
    grad = tape.gradient(total, x).numpy()
    assert loss.numpy()[0] == pytest.approx(chosen.expected_loss[0], rel=1e-5)
    assert (loss.numpy()[1:] == 0).all() and not grad[:, 1:].any()  # spec: +inf, gradient 0


def test_d34_tf1_infeasible_by_repeats_has_softmax_gradient() -> None:
    chosen, got = run("tensorflow-v1", "spec/infeasible_repeats/float64")  # target (1, 1, 1, 1), 6 frames
    assert np.array_equal(got.loss, chosen.expected_loss) and np.isinf(got.loss[0])
    assert not chosen.expected_grad[:, 0].any()
    active = chosen.inputs["sequence_mask"][:, 0].astype(bool)
    if reproduces("D34", bool(got.grad[:, 0].any())):
        p = softmax(chosen.inputs["inputs"][active, 0])
        assert np.abs(got.grad[active, 0] - p).max() < 1e-12


def test_d35_tf1_softmax_underflows_at_large_logits() -> None:
    chosen, got = run("tensorflow-v1", "spec/logits_1e4/float64")
    assert np.isfinite(chosen.expected_loss).all()
    if reproduces("D35", bool(np.isinf(got.loss).any())):
        assert np.isinf(got.loss).all()


def test_d33_tf1_float64_has_float32_accuracy() -> None:
    chosen, got = run("tensorflow-v1", "spec/two_classes/float64")
    error = np.abs(got.loss - chosen.expected_loss) / chosen.expected_loss
    if reproduces("D33", error.max() > 1e-9):
        assert error.max() < 1e-6


def test_d38_tf1_reads_the_blank_as_a_label() -> None:
    loss = numbers("tensorflow-v1", "invalid/label_is_blank")
    if reproduces("D38", loss is not None):
        assert np.isfinite(loss).all()


def test_d37_tf1_crashes_on_zero_classes() -> None:
    code = (
        "from ctcop.conformance import corpus; from ctcop.conformance.peers import PEERS; "
        "PEERS['tensorflow-v1'].run(corpus.load(corpus.case_folder(corpus.default_root(), 'invalid/zero_classes')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    if reproduces("D37", result.returncode < 0):
        assert result.returncode == -signal.SIGSEGV, result.stderr
