"""The framework peers (``ctcop.conformance.peers``) against the reference.

For every installed framework: its peer agrees with the reference (loss by the suite's rule,
gradient by the suite's per-sample gradient rule, both by
:func:`ctcop.conformance.verdict.judge`) on representative valid cases, and its departures
(registry ids D21-D50, ``ctcop defects``) are checked against the installed version through
``reproduces``: on the version the registry was measured on each must show in its exact shape; on
another one a departure that no longer shows is a re-measure warning (then the peer's docstring
and the README's table of peers can be revisited). Frameworks are imported through
``pytest.importorskip`` only (TensorFlow once, for both of its peers); CI installs them, so nothing
here is skipped there.
"""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from support.registered import reproduces

from ctcop.conformance import corpus, known, verdict
from ctcop.conformance.case import Case
from ctcop.conformance.peers import PEERS, warpctc
from ctcop.conformance.peers.tf_ctc import sparse_targets
from ctcop.conformance.protocol import Outcome, Unsupported
from ctcop.process.workers import Failed
from ctcop.tolerance import compare

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = corpus.default_root()


def case(case_id: str) -> Case:
    return corpus.load(corpus.case_folder(ROOT, case_id))


def run(name: str, case_id: str) -> tuple[Case, Outcome]:
    chosen = case(case_id)
    return chosen, PEERS[name].run(chosen)


def refusal(name: str, case_id: str, kind: type[Exception]) -> str | None:
    """The message of the ``kind`` error the peer ``name`` raises on the case, None when it runs."""
    try:
        PEERS[name].run(case(case_id))
    except kind as error:
        return str(error)
    return None


def numbers(name: str, case_id: str) -> np.ndarray | None:
    """The losses the peer ``name`` gives on an invalid case; None when it refuses the case (raises,
    as a release that checks its input would) or gives no finite loss."""
    try:
        loss = PEERS[name].run(case(case_id)).loss
    except Exception:  # a refusal, whatever the framework raises
        return None
    return loss if np.isfinite(loss).any() else None


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def jax():
    pytest.importorskip("optax")
    return pytest.importorskip("jax")


@pytest.fixture(scope="module")
def paddle() -> None:
    # the peer runs Paddle in child processes: importing it here, after TensorFlow, kills pytest
    if PEERS["warpctc"].available() is not None:
        pytest.skip("paddle not installed")


AGREE = {
    "torch": [
        "spec/hand_worked/float64",
        "spec/long_sequence/float32",
        "spec/logits_1e4/float32",
        "released/blank_first/int64/float64",
        "released/junk_after_length/int32/float32",
    ],
    "tensorflow": [
        "spec/hand_worked/float32",
        "spec/exactly_feasible/float32",
        "spec/interior_pads/bfloat16",
        "released/blank_middle/int32/float32",
    ],
    "tensorflow-v1": [
        "spec/hand_worked/float32",
        "spec/exactly_feasible_collapse_nomerge/float32",
        "spec/seed_example_uniform_no_merge/float16",
        "released/flags_collapse_nomerge/int32/float32",
    ],
    "optax": ["spec/hand_worked/float64", "spec/interior_pads/float32", "released/blank_first/int32/float32"],
    "warpctc": [
        "spec/hand_worked/float32",
        "spec/long_sequence/float64",
        "spec/interior_pads/float32",
        "spec/nan_in_masked_frames/float32",
        "released/blank_first/int64/float64",
        "released/junk_after_length/int32/float32",
    ],
}
FRAMEWORK = {"torch": "torch", "tensorflow": "tf", "tensorflow-v1": "tf", "optax": "jax", "warpctc": "paddle"}


@pytest.mark.parametrize(("name", "case_id"), [(name, case_id) for name, ids in AGREE.items() for case_id in ids])
def test_peer_agrees_with_the_reference(name: str, case_id: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue(FRAMEWORK[name])
    assert PEERS[name].available() is None
    chosen = case(case_id)
    result = verdict.judge(PEERS[name], chosen)
    assert (result.status, result.message) == ("pass", ""), f"{name} on {case_id}"


def test_importing_the_peers_loads_no_framework() -> None:
    heavy = "{'torch', 'tensorflow', 'jax', 'optax', 'paddle'}"
    code = f"import sys, ctcop.conformance.peers; print(sorted({heavy} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "[]", result.stderr


def test_the_gradient_rule() -> None:
    expected = np.zeros((2, 2, 3))
    expected[:, 1] = np.nan
    loss = np.array([600.0, np.nan])
    got = expected.copy()
    got[0, 0, 0] = 32 * 2.0**-52 * 600 * 0.99  # within 32 eps max(1, |loss|)
    assert verdict.compare_grad(got, expected, loss, "float64", sample_axis=1) is None
    got[0, 0, 0] *= 1.02
    assert verdict.compare_grad(got, expected, loss, "float64", sample_axis=1).startswith("gradient at [0, 0, 0]")
    got[0, 0, 0], got[1, 1, 2] = 0.0, 0.0  # NaN expected, a number given
    assert "1 of 12 entries off" in verdict.compare_grad(got, expected, loss, "float64", sample_axis=1)


# -- torch.nn.functional.ctc_loss ----------------------------------------------------------------


def test_torch_outside_its_semantics_is_a_skip(torch) -> None:
    for case_id, reason in [
        ("spec/exactly_feasible_nomerge/float32", "merge_repeated=false"),
        ("spec/exactly_feasible_collapse/float32", "preprocess_collapse_repeated=true"),
        ("released/flags_unique/int32/float32", "unique=true"),
        ("spec/hand_worked/float16", "float16"),
    ]:
        with pytest.raises(Unsupported, match=reason):
            PEERS["torch"].run(case(case_id))
    for dtype in (torch.float16, torch.bfloat16):  # the reason for the last one, still true?
        log_probs = torch.zeros((2, 1, 3), dtype=dtype).log_softmax(2)
        with pytest.raises(NotImplementedError, match="ctc_loss_cpu"):
            torch.nn.functional.ctc_loss(log_probs, torch.tensor([[0]]), torch.tensor([2]), torch.tensor([1]), blank=2)


def test_d21_torch_infeasible_sample_has_nan_gradient(torch) -> None:
    # spec 5: a +inf sample has gradient 0; with zero_infinity=False torch gives NaN in its active frames
    chosen, got = run("torch", "spec/infeasible_too_long/float64")
    assert np.array_equal(got.loss, chosen.expected_loss)  # [11.14, inf, inf]
    assert not chosen.expected_grad[:, 1:].any()
    active = chosen.inputs["sequence_mask"].astype(bool)
    if reproduces("D21", bool(np.isnan(got.grad[:, 1:]).any())):
        for i in (1, 2):
            assert np.isnan(got.grad[active[:, i], i]).all() and not got.grad[~active[:, i], i].any()
    assert np.isfinite(got.grad[:, 0]).all()


def test_d22_torch_nan_in_masked_frames_poisons_the_gradient(torch) -> None:
    chosen, got = run("torch", "spec/nan_in_masked_frames/float32")
    assert compare(got.loss, chosen.expected_loss, "float32") is None  # the loss is right
    junk = np.isnan(chosen.inputs["inputs"]).any(axis=2)
    masked = chosen.inputs["sequence_mask"] == 0
    assert junk.any() and (junk <= masked).all() and not chosen.expected_grad[masked].any()
    if reproduces("D22", bool(np.isnan(got.grad[junk]).any())):
        assert np.isnan(got.grad[junk]).all()
    assert np.isfinite(got.grad[~junk]).all()


@pytest.mark.parametrize("case_id", ["spec/no_frames/float32", "spec/empty_batch/float32"])
def test_d23_torch_refuses_empty_logits(torch, case_id: str) -> None:
    message = refusal("torch", case_id, RuntimeError)
    if reproduces("D23", message is not None, case_id):
        assert "log_probs tensor must not be empty" in str(message)


def test_d24_torch_checks_no_label(torch) -> None:
    blank_as_label = numbers("torch", "invalid/single_class_label")  # C = 1, label 0 is the blank
    if reproduces("D24", blank_as_label is not None, "invalid/single_class_label"):
        assert (blank_as_label < 0).all()
    too_large = numbers("torch", "invalid/label_at_least_c")  # label C: read past the row
    if reproduces("D24", too_large is not None, "invalid/label_at_least_c"):
        assert np.isfinite(too_large).all()


# -- tf.nn.ctc_loss (v2, dense labels) -----------------------------------------------------------


def test_d27_tf2_infeasible_target_gives_a_finite_loss(tf) -> None:
    # ctc_state_log_probs stands ln(1e-307) = -706.9 for ln 0: no aligned path costs ~707, not +inf
    chosen, got = run("tensorflow", "spec/infeasible_too_long/float32")
    assert np.isinf(chosen.expected_loss[1:]).all()
    if reproduces("D27", bool(np.isfinite(got.loss[1:]).any())):
        assert (np.abs(got.loss[1:] - 710) < 10).all()


def test_d28_tf2_ln0_stand_in_leaks_at_large_logits(tf) -> None:
    chosen, got = run("tensorflow", "spec/logits_1e4/float32")
    if reproduces("D28", not np.isclose(got.loss[1], chosen.expected_loss[1], rtol=1e-5)):
        assert got.loss[1] < chosen.expected_loss[1] - 1000  # 21466 for 22970


def test_d29_tf2_nan_in_masked_frames_poisons_the_loss(tf) -> None:
    chosen, got = run("tensorflow", "spec/nan_in_masked_frames/float32")
    assert np.isfinite(chosen.expected_loss).all()
    reproduces("D29", bool(np.isnan(got.loss[1])), "the loss")


def test_d29_tf2_nan_sample_gradient_is_nan_in_masked_frames(tf) -> None:
    chosen, got = run("tensorflow", "spec/inf_in_active_frame/float32")
    assert np.isnan(got.loss[2])
    masked = chosen.inputs["sequence_mask"][:, 2] == 0
    assert masked.any() and not chosen.expected_grad[masked, 2].any()
    if reproduces("D29", bool(np.isnan(got.grad[masked, 2]).any()), "the gradient"):
        assert np.isnan(got.grad[:, 2]).all()


def test_d30_tf2_reads_any_blank_index(tf) -> None:
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
def test_d25_d26_d31_d32_tf_raises(tf, runtime: str, defect_id: str, case_id: str, message: str) -> None:
    # tensorflow-v1 raises for the whole batch when one sample is empty or too long (D31)
    got = refusal(runtime, case_id, tf.errors.InvalidArgumentError)
    if reproduces(defect_id, got is not None, case_id):
        assert message in str(got)


def test_tf1_ignoring_too_long_targets_gives_zero(tf) -> None:
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


def test_d34_tf1_infeasible_by_repeats_has_softmax_gradient(tf) -> None:
    chosen, got = run("tensorflow-v1", "spec/infeasible_repeats/float64")  # target (1, 1, 1, 1), 6 frames
    assert np.array_equal(got.loss, chosen.expected_loss) and np.isinf(got.loss[0])
    assert not chosen.expected_grad[:, 0].any()
    active = chosen.inputs["sequence_mask"][:, 0].astype(bool)
    if reproduces("D34", bool(got.grad[:, 0].any())):
        p = softmax(chosen.inputs["inputs"][active, 0])
        assert np.abs(got.grad[active, 0] - p).max() < 1e-12


def test_d35_tf1_softmax_underflows_at_large_logits(tf) -> None:
    chosen, got = run("tensorflow-v1", "spec/logits_1e4/float64")
    assert np.isfinite(chosen.expected_loss).all()
    if reproduces("D35", bool(np.isinf(got.loss).any())):
        assert np.isinf(got.loss).all()


def test_d33_tf1_float64_has_float32_accuracy(tf) -> None:
    chosen, got = run("tensorflow-v1", "spec/two_classes/float64")
    error = np.abs(got.loss - chosen.expected_loss) / chosen.expected_loss
    if reproduces("D33", error.max() > 1e-9):
        assert error.max() < 1e-6


def test_d38_tf1_reads_the_blank_as_a_label(tf) -> None:
    loss = numbers("tensorflow-v1", "invalid/label_is_blank")
    if reproduces("D38", loss is not None):
        assert np.isfinite(loss).all()


@pytest.mark.slow
def test_d37_tf1_crashes_on_zero_classes(tf) -> None:
    code = (
        "from ctcop.conformance import corpus; from ctcop.conformance.peers import PEERS; "
        "PEERS['tensorflow-v1'].run(corpus.load(corpus.case_folder(corpus.default_root(), 'invalid/zero_classes')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    if reproduces("D37", result.returncode < 0):
        assert result.returncode == -signal.SIGSEGV, result.stderr


# -- optax.ctc_loss ------------------------------------------------------------------------------


def test_d39_optax_infeasible_target_gives_about_1e5(jax) -> None:
    # log_epsilon = -1e5 stands for ln 0 (a deliberate approximation of optax's): no aligned path
    # costs about 1e5 plus the path's own cost, and the gradient of those samples is not 0
    chosen, got = run("optax", "spec/infeasible_too_long/float32")
    assert np.isinf(chosen.expected_loss[1:]).all()
    if reproduces("D39", bool(np.isfinite(got.loss[1:]).any())):
        assert (np.abs(got.loss[1:] - 1e5) < 1000).all()
        assert np.abs(got.grad[:, 1:]).max() > 0.1


def test_d40_optax_nan_in_masked_frames_poisons_the_loss(jax) -> None:
    chosen, got = run("optax", "spec/nan_in_masked_frames/float32")
    assert np.isfinite(chosen.expected_loss).all()
    reproduces("D40", bool(np.isnan(got.loss[1])), "the loss")


def test_d40_optax_nan_sample_gradient_is_nan_in_masked_frames(jax) -> None:
    chosen, got = run("optax", "spec/inf_in_active_frame/float32")
    masked = chosen.inputs["sequence_mask"][:, 2] == 0
    assert masked.any() and not chosen.expected_grad[masked, 2].any()
    if reproduces("D40", bool(np.isnan(got.grad[masked, 2]).any()), "the gradient"):
        assert np.isnan(got.grad[:, 2]).all()


def test_d41_optax_refuses_zero_frames(jax) -> None:
    reproduces("D41", refusal("optax", "spec/no_frames/float32", IndexError) is not None)


def test_optax_takes_a_scalar_blank_only(jax) -> None:
    message = refusal("optax", "invalid/released/blank_index_rank_1", Unsupported)
    assert message == "optax's blank_id is an int, the case's blank_index has shape [1]"


def test_optax_compilations_are_kept_for_later_processes(jax) -> None:
    run("optax", "spec/hand_worked/float64")
    assert jax.config.jax_compilation_cache_dir
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0


# -- warp-ctc through paddle.nn.functional.ctc_loss ----------------------------------------------


def test_warpctc_outside_its_semantics_is_a_skip(paddle) -> None:
    for case_id, reason in [
        ("spec/exactly_feasible_nomerge/float32", "merge_repeated=false"),
        ("spec/hand_worked/bfloat16", "bfloat16"),
        ("invalid/released/blank_index_rank_1", "blank_index has shape \\[1\\]"),
    ]:
        with pytest.raises(Unsupported, match=reason):
            PEERS["warpctc"].run(case(case_id))


def test_d44_warpctc_infeasible_target_gives_zero(paddle) -> None:
    # warp-ctc returns early when a target needs more frames than it has: loss 0, gradient 0
    chosen, got = run("warpctc", "spec/infeasible_too_long/float32")
    assert np.isinf(chosen.expected_loss[1:]).all()
    assert compare(got.loss[:1], chosen.expected_loss[:1], "float32") is None
    if reproduces("D44", bool((got.loss[1:] == 0).all())):
        assert not got.grad[:, 1:].any()


def test_d44_is_how_the_suite_classifies_it(paddle) -> None:
    chosen = case("spec/infeasible_too_long/float32")
    result = known.default().apply(verdict.judge(PEERS["warpctc"], chosen, "warpctc"), chosen.tags)
    if reproduces("D44", result.status == "xfail"):
        assert result.defect == "D44"


def test_d48_warpctc_softmax_floor(paddle) -> None:
    # every frame of the target's only path is below the smallest normal number: each costs 87.3
    chosen, got = run("warpctc", "spec/logits_1e4/float32")
    floor = -np.log(np.finfo(np.float32).tiny)
    if reproduces("D48", got.loss[0] < chosen.expected_loss[0] / 10):
        assert got.loss[0] <= chosen.inputs["sequence_mask"][:, 0].sum() * floor


@pytest.mark.parametrize("case_id", ["spec/no_frames/float32", "spec/empty_batch/float32"])
def test_d47_warpctc_refuses_empty_logits(paddle, case_id: str) -> None:
    message = refusal("warpctc", case_id, Failed)  # Paddle's ValueError, raised in its process
    if reproduces("D47", message is not None, case_id):
        assert "The input size can not be zero" in str(message)


def test_warpctc_calls_that_write_past_its_buffers_run_apart(paddle) -> None:
    spec = case("spec/zero_length_sequences/float32")  # sample 0: no frame, empty target
    arrays = {"logits": spec.inputs["inputs"], "frames": spec.inputs["sequence_mask"].sum(axis=0)}
    assert warpctc.unsafe({**arrays, "lengths": np.array([0, 1, 2])}, spec=True)
    assert not warpctc.unsafe({**arrays, "lengths": np.array([1, 1, 2])}, spec=True)
    assert warpctc.unsafe({**arrays, "lengths": np.array([1, -1, 2])}, spec=True)


def test_d45_warpctc_no_frame_and_no_label(paddle) -> None:
    # the throwaway process gives a wrong loss (+inf as measured; the spec's is 0), or dies of the
    # heap it corrupted and takes its caller along (SIGABRT as measured)
    code = (
        "from ctcop.conformance import corpus; from ctcop.conformance.peers import PEERS; "
        "print(PEERS['warpctc'].run(corpus.load(corpus.case_folder(corpus.default_root(), "
        "'spec/zero_length_sequences/float32'))).loss[0])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    wrong = result.returncode == 0 and float(result.stdout.split()[-1]) != 0.0
    reproduces("D45", wrong or result.returncode < 0)
