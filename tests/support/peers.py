"""The peers' tests' helpers (ctcop.conformance.peers): corpus cases, a peer's outcome or refusal
on one, and the cases each peer agrees with the reference on (``AGREE``)."""

import numpy as np

from ctcop.conformance import corpus
from ctcop.conformance.case import Case
from ctcop.conformance.peers import PEERS
from ctcop.conformance.protocol import Outcome

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
"""The representative valid cases of each peer: its loss and gradient pass ``verdict.judge``."""


def agree_cases(*names: str) -> list[tuple[str, str]]:
    """``(peer, case id)`` for each of ``AGREE``'s cases of the peers ``names``."""
    return [(name, case_id) for name in names for case_id in AGREE[name]]
