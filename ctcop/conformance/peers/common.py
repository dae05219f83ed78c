"""What every framework peer shares: the peer type and the layout conversions.

A peer is a conformance runtime (:mod:`ctcop.conformance.protocol`) that calls a training
framework's own CTC loss as its users call it. Its adapter converts layouts only (transpose,
mask -> lengths or paddings, pads -> lengths, dense -> sparse) and never validates or repairs:
for a case the spec rejects the framework gets the inputs as they are, and whatever it does is
the finding. Frameworks are imported by name (:func:`ctcop.process.frameworks.framework`) when a peer
first runs, so that importing this package loads numpy only; their objects are ``Any`` here.
Peers are judged like every runtime, by :func:`ctcop.conformance.verdict.judge`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...process.frameworks import framework, missing
from ..protocol import Outcome, Unsupported

if TYPE_CHECKING:
    from ..case import Case

THREADS = 2  # intra-op threads, set in every framework that has the knob

FLOAT_TYPES = ("float16", "bfloat16", "float32", "float64")

# What torch, tf.nn.ctc_loss and optax implement: targets used as given, repeats merged, no unique.
DEFAULT_ATTRIBUTES = (
    ("preprocess_collapse_repeated", False),
    ("merge_repeated", True),
    ("ctc_merge_repeated", True),
    ("unique", False),
)


@dataclass(frozen=True)
class Peer:
    """A framework's CTC loss as a conformance runtime. Subclasses give ``compute``; ``run``
    refuses what the framework cannot express (:class:`Unsupported`) and computes the rest."""

    name: str
    description: str
    modules: tuple[str, ...]
    dtypes: frozenset[str]  # logits element types the framework computes CTC in
    attributes: tuple[tuple[str, bool], ...]  # attribute values it implements (others: Unsupported)
    sampled: bool = False  # the default run runs a sample of the cases (ctcop.conformance.sampling)

    def available(self) -> str | None:
        """None when the framework is installed, else why the peer cannot run."""
        return missing(*self.modules)

    def load(self) -> None:
        """Import the framework now (the first ``run`` does it otherwise)."""
        for name in self.modules:
            framework(name)

    def run(self, case: Case) -> Outcome:
        self.check(case)
        return self.compute(case)

    def check(self, case: Case) -> None:
        dtype = logits(case).dtype.name
        if dtype in FLOAT_TYPES and dtype not in self.dtypes:
            raise Unsupported(f"{self.name} has no CTC loss for {dtype} logits")
        wanted = dict(self.attributes)
        for name, value in case.attributes.items():
            if name in wanted and value != wanted[name]:
                raise Unsupported(f"{self.name} has no {name}={str(value).lower()}")

    def compute(self, case: Case) -> Outcome:
        raise NotImplementedError


# -- layouts -------------------------------------------------------------------------------------


def logits(case: Case) -> np.ndarray:
    """The case's logits as stored: [T, N, C] (spec form) or [N, T, C] (released form)."""
    return case.inputs["inputs"] if case.form == "spec" else case.inputs["logits"]


def time_major(case: Case) -> bool:
    return case.form == "spec"


def frame_lengths(case: Case) -> np.ndarray:
    """[N] frame counts: the mask's column sums (spec form; a gapped mask is not looked at) or
    ``logit_length`` as given."""
    if case.form == "spec":
        lengths: np.ndarray = case.inputs["sequence_mask"].sum(axis=0)
        return lengths
    return case.inputs["logit_length"]


def frame_paddings(case: Case) -> np.ndarray:
    """[N, T] float32 padding flags (1 = no frame): ``1 - mask`` transposed, or from ``logit_length``."""
    if case.form == "spec":
        return np.ascontiguousarray((1 - case.inputs["sequence_mask"]).T.astype(np.float32))
    frames = case.inputs["logits"].shape[1]
    length = case.inputs["logit_length"]
    return (np.arange(frames)[None, :] >= np.reshape(length, (-1, 1))).astype(np.float32)


def dense_targets(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(targets [N, S], target lengths [N]). Spec form: each row's non-pad entries moved to its
    front (stable), the -1 pads after them, and counted (spec 7, last paragraph). Released
    form: ``labels`` and ``label_length`` as given (entries beyond a length untouched)."""
    if case.form == "released":
        return case.inputs["labels"], case.inputs["label_length"]
    labels = case.inputs["labels"]
    keep = labels != -1
    order = np.argsort(~keep, axis=-1, kind="stable")
    return np.take_along_axis(labels, order, axis=-1), keep.sum(axis=-1)


def label_paddings(case: Case) -> np.ndarray:
    """[N, S] float32 padding flags of :func:`dense_targets`' rows (1 beyond a row's length)."""
    targets, lengths = dense_targets(case)
    return (np.arange(targets.shape[-1])[None, :] >= np.reshape(lengths, (-1, 1))).astype(np.float32)


def blank(case: Case) -> Any:
    """The blank: C-1 in the spec form; ``blank_index`` as given in the released form (C-1 when
    absent), a Python int when it is a scalar and the array itself otherwise."""
    x = logits(case)
    classes = x.shape[-1]
    given = case.inputs.get("blank_index") if case.form == "released" else None
    if given is None:
        return classes - 1
    return int(given) if np.ndim(given) == 0 else given
