"""The optax peer (``optax.ctc_loss`` on jax, ``ctcop.conformance.peers``) against the reference.

The peer agrees with the reference (loss by the suite's rule, gradient by the suite's per-sample
gradient rule, both by :func:`ctcop.conformance.verdict.judge`) on representative valid cases, and
its departures (registry ids D39-D43, ``ctcop defects``) are checked against the installed version
through ``reproduces``: on the version the registry was measured on each must show in its exact
shape; on another one a departure that no longer shows is a re-measure warning (then the peer's
docstring and the README's table of peers can be revisited). optax and jax are imported through
``pytest.importorskip`` only; CI installs them, so nothing here is skipped there.
"""

import numpy as np
import pytest
from support.peers import agree_cases, case, refusal, run
from support.registered import reproduces

from ctcop.conformance import verdict
from ctcop.conformance.peers import PEERS
from ctcop.conformance.protocol import Unsupported

pytest.importorskip("optax")
jax = pytest.importorskip("jax")


@pytest.mark.parametrize(("name", "case_id"), agree_cases("optax"))
def test_peer_agrees_with_the_reference(name: str, case_id: str) -> None:
    assert PEERS[name].available() is None
    chosen = case(case_id)
    result = verdict.judge(PEERS[name], chosen)
    assert (result.status, result.message) == ("pass", ""), f"{name} on {case_id}"


# -- optax.ctc_loss ------------------------------------------------------------------------------


def test_d39_optax_infeasible_target_gives_about_1e5() -> None:
    # log_epsilon = -1e5 stands for ln 0 (a deliberate approximation of optax's): no aligned path
    # costs about 1e5 plus the path's own cost, and the gradient of those samples is not 0
    chosen, got = run("optax", "spec/infeasible_too_long/float32")
    assert np.isinf(chosen.expected_loss[1:]).all()
    if reproduces("D39", bool(np.isfinite(got.loss[1:]).any())):
        assert (np.abs(got.loss[1:] - 1e5) < 1000).all()
        assert np.abs(got.grad[:, 1:]).max() > 0.1


def test_d40_optax_nan_in_masked_frames_poisons_the_loss() -> None:
    chosen, got = run("optax", "spec/nan_in_masked_frames/float32")
    assert np.isfinite(chosen.expected_loss).all()
    reproduces("D40", bool(np.isnan(got.loss[1])), "the loss")


def test_d40_optax_nan_sample_gradient_is_nan_in_masked_frames() -> None:
    chosen, got = run("optax", "spec/inf_in_active_frame/float32")
    masked = chosen.inputs["sequence_mask"][:, 2] == 0
    assert masked.any() and not chosen.expected_grad[masked, 2].any()
    if reproduces("D40", bool(np.isnan(got.grad[masked, 2]).any()), "the gradient"):
        assert np.isnan(got.grad[:, 2]).all()


def test_d41_optax_refuses_zero_frames() -> None:
    reproduces("D41", refusal("optax", "spec/no_frames/float32", IndexError) is not None)


def test_optax_takes_a_scalar_blank_only() -> None:
    message = refusal("optax", "invalid/released/blank_index_rank_1", Unsupported)
    assert message == "optax's blank_id is an int, the case's blank_index has shape [1]"


def test_optax_compilations_are_kept_for_later_processes() -> None:
    run("optax", "spec/hand_worked/float64")
    assert jax.config.jax_compilation_cache_dir
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
