"""The warpctc peer (warp-ctc through ``paddle.nn.functional.ctc_loss``, ``ctcop.conformance.peers``)
against the reference.

The peer agrees with the reference (loss by the suite's rule, gradient by the suite's per-sample
gradient rule, both by :func:`ctcop.conformance.verdict.judge`) on representative valid cases, and
its departures (registry ids D44-D50, ``ctcop defects``) are checked against the installed version
through ``reproduces``: on the version the registry was measured on each must show in its exact
shape; on another one a departure that no longer shows is a re-measure warning (then the peer's
docstring and the README's table of peers can be revisited). The peer runs Paddle in child
processes, so Paddle is never imported here: the module is skipped when the peer says Paddle is not
installed; CI installs it, so nothing here is skipped there.
"""

import subprocess
import sys

import numpy as np
import pytest
from support.peers import agree_cases, case, refusal, run
from support.registered import reproduces

from ctcop.conformance import known, verdict
from ctcop.conformance.peers import PEERS, warpctc
from ctcop.conformance.protocol import Unsupported
from ctcop.process.workers import Failed
from ctcop.tolerance import compare

# the peer runs Paddle in child processes: importing it here, after TensorFlow, kills pytest
if PEERS["warpctc"].available() is not None:
    pytest.skip("paddle not installed", allow_module_level=True)


@pytest.mark.parametrize(("name", "case_id"), agree_cases("warpctc"))
def test_peer_agrees_with_the_reference(name: str, case_id: str) -> None:
    assert PEERS[name].available() is None
    chosen = case(case_id)
    result = verdict.judge(PEERS[name], chosen)
    assert (result.status, result.message) == ("pass", ""), f"{name} on {case_id}"


# -- warp-ctc through paddle.nn.functional.ctc_loss ----------------------------------------------


def test_warpctc_outside_its_semantics_is_a_skip() -> None:
    for case_id, reason in [
        ("spec/exactly_feasible_nomerge/float32", "merge_repeated=false"),
        ("spec/hand_worked/bfloat16", "bfloat16"),
        ("invalid/released/blank_index_rank_1", "blank_index has shape \\[1\\]"),
    ]:
        with pytest.raises(Unsupported, match=reason):
            PEERS["warpctc"].run(case(case_id))


def test_d44_warpctc_infeasible_target_gives_zero() -> None:
    # warp-ctc returns early when a target needs more frames than it has: loss 0, gradient 0
    chosen, got = run("warpctc", "spec/infeasible_too_long/float32")
    assert np.isinf(chosen.expected_loss[1:]).all()
    assert compare(got.loss[:1], chosen.expected_loss[:1], "float32") is None
    if reproduces("D44", bool((got.loss[1:] == 0).all())):
        assert not got.grad[:, 1:].any()


def test_d44_is_how_the_suite_classifies_it() -> None:
    chosen = case("spec/infeasible_too_long/float32")
    result = known.default().apply(verdict.judge(PEERS["warpctc"], chosen, "warpctc"), chosen.tags)
    if reproduces("D44", result.status == "xfail"):
        assert result.defect == "D44"


def test_d48_warpctc_softmax_floor() -> None:
    # every frame of the target's only path is below the smallest normal number: each costs 87.3
    chosen, got = run("warpctc", "spec/logits_1e4/float32")
    floor = -np.log(np.finfo(np.float32).tiny)
    if reproduces("D48", got.loss[0] < chosen.expected_loss[0] / 10):
        assert got.loss[0] <= chosen.inputs["sequence_mask"][:, 0].sum() * floor


@pytest.mark.parametrize("case_id", ["spec/no_frames/float32", "spec/empty_batch/float32"])
def test_d47_warpctc_refuses_empty_logits(case_id: str) -> None:
    message = refusal("warpctc", case_id, Failed)  # Paddle's ValueError, raised in its process
    if reproduces("D47", message is not None, case_id):
        assert "The input size can not be zero" in str(message)


def test_warpctc_calls_that_write_past_its_buffers_run_apart() -> None:
    spec = case("spec/zero_length_sequences/float32")  # sample 0: no frame, empty target
    arrays = {"logits": spec.inputs["inputs"], "frames": spec.inputs["sequence_mask"].sum(axis=0)}
    assert warpctc.unsafe({**arrays, "lengths": np.array([0, 1, 2])}, spec=True)
    assert not warpctc.unsafe({**arrays, "lengths": np.array([1, 1, 2])}, spec=True)
    assert warpctc.unsafe({**arrays, "lengths": np.array([1, -1, 2])}, spec=True)


def test_d45_warpctc_no_frame_and_no_label() -> None:
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
