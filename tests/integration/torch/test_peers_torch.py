"""The torch peer (``torch.nn.functional.ctc_loss``, ``ctcop.conformance.peers``) against the reference.

The peer agrees with the reference (loss by the suite's rule, gradient by the suite's per-sample
gradient rule, both by :func:`ctcop.conformance.verdict.judge`) on representative valid cases, and
its departures (registry ids D21-D24, ``ctcop defects``) are checked against the installed version
through ``reproduces``: on the version the registry was measured on each must show in its exact
shape; on another one a departure that no longer shows is a re-measure warning (then the peer's
docstring and the README's table of peers can be revisited). PyTorch is imported through
``pytest.importorskip`` only; CI installs it, so nothing here is skipped there.
"""

import numpy as np
import pytest
from support.peers import agree_cases, case, numbers, refusal, run
from support.registered import reproduces

from ctcop.conformance import verdict
from ctcop.conformance.peers import PEERS
from ctcop.conformance.protocol import Unsupported
from ctcop.tolerance import compare

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(("name", "case_id"), agree_cases("torch"))
def test_peer_agrees_with_the_reference(name: str, case_id: str) -> None:
    assert PEERS[name].available() is None
    chosen = case(case_id)
    result = verdict.judge(PEERS[name], chosen)
    assert (result.status, result.message) == ("pass", ""), f"{name} on {case_id}"


# -- torch.nn.functional.ctc_loss ----------------------------------------------------------------


def test_torch_outside_its_semantics_is_a_skip() -> None:
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


def test_d21_torch_infeasible_sample_has_nan_gradient() -> None:
    # spec 5: a +inf sample has gradient 0; with zero_infinity=False torch gives NaN in its active frames
    chosen, got = run("torch", "spec/infeasible_too_long/float64")
    assert np.array_equal(got.loss, chosen.expected_loss)  # [11.14, inf, inf]
    assert not chosen.expected_grad[:, 1:].any()
    active = chosen.inputs["sequence_mask"].astype(bool)
    if reproduces("D21", bool(np.isnan(got.grad[:, 1:]).any())):
        for i in (1, 2):
            assert np.isnan(got.grad[active[:, i], i]).all() and not got.grad[~active[:, i], i].any()
    assert np.isfinite(got.grad[:, 0]).all()


def test_d22_torch_nan_in_masked_frames_poisons_the_gradient() -> None:
    chosen, got = run("torch", "spec/nan_in_masked_frames/float32")
    assert compare(got.loss, chosen.expected_loss, "float32") is None  # the loss is right
    junk = np.isnan(chosen.inputs["inputs"]).any(axis=2)
    masked = chosen.inputs["sequence_mask"] == 0
    assert junk.any() and (junk <= masked).all() and not chosen.expected_grad[masked].any()
    if reproduces("D22", bool(np.isnan(got.grad[junk]).any())):
        assert np.isnan(got.grad[junk]).all()
    assert np.isfinite(got.grad[~junk]).all()


@pytest.mark.parametrize("case_id", ["spec/no_frames/float32", "spec/empty_batch/float32"])
def test_d23_torch_refuses_empty_logits(case_id: str) -> None:
    message = refusal("torch", case_id, RuntimeError)
    if reproduces("D23", message is not None, case_id):
        assert "log_probs tensor must not be empty" in str(message)


def test_d24_torch_checks_no_label() -> None:
    blank_as_label = numbers("torch", "invalid/single_class_label")  # C = 1, label 0 is the blank
    if reproduces("D24", blank_as_label is not None, "invalid/single_class_label"):
        assert (blank_as_label < 0).all()
    too_large = numbers("torch", "invalid/label_at_least_c")  # label C: read past the row
    if reproduces("D24", too_large is not None, "invalid/label_at_least_c"):
        assert np.isfinite(too_large).all()
