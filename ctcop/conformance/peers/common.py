"""What every framework peer shares: the peer type, the layout conversions and the verdict.

A peer is a conformance runtime (:mod:`ctcop.conformance.protocol`) that calls a training
framework's own CTC loss as its users call it. Its adapter converts layouts only (transpose,
mask -> lengths or paddings, pads -> lengths, dense -> sparse) and never validates or repairs:
for a case the spec rejects the framework gets the inputs as they are, and whatever it does is
the finding. Frameworks are imported by name through :func:`framework` when a peer first runs,
so that importing this package loads numpy only, and mypy neither needs the frameworks' stubs
(tensorflow ships none) nor analyses them (torch and jax are typed but huge): their objects are
``Any`` here.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...tolerance import compare
from ..protocol import Outcome, Unsupported, outcome

if TYPE_CHECKING:
    from ..corpus import CorpusCase

THREADS = 2  # intra-op threads, set in every framework that has the knob

# The gradient rule: d loss / d logits elementwise, per sample i,
#     |got - expected| <= eps(dtype) |expected| + GRAD_UNITS eps(wide) max(1, |loss_i|)
# with loss_i the reference's loss, wide = float64 for float64 and float32 otherwise, and NaN
# exactly where the reference has NaN; a sample with a non-finite loss has the scale 1 (its
# expected gradient is 0 or NaN). The first term is the rounding of a result to the case's type
# (the expected gradient is rounded once too). The second is the computation: the entries are
# differences of probabilities in [-1, 1], and the occupancies inherit as a relative error the
# absolute error of alpha + beta, a sum of about |loss_i| worth of log-probabilities (spec 5,
# accuracy limit 2), so an implementation computing in a type with unit roundoff eps errs by a
# small multiple of eps |loss_i|. Half types are held to a float32 computation rounded once, as
# their loss tolerances presume (in float16 itself the bound would say nothing at |loss| ~ 400).
# Measured on the corpus: at most 3.3 eps max(1, |loss_i|) (torch float32 and float64, tf v1 and
# optax float32; the largest at T = 150, loss 604: 2.4e-4 in float32), so 32 leaves a margin of
# about ten. No constant fits every length: float32 rtol 1e-4 / atol 1e-5 fails that case for
# every float32 peer, while 1e-3 would hide a wrong gradient on short sequences.
GRAD_UNITS = 32.0
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}  # machine epsilon
FLOAT_TYPES = tuple(EPS)

# What torch, tf.nn.ctc_loss and optax implement: targets used as given, repeats merged, no unique.
DEFAULT_ATTRIBUTES = (
    ("preprocess_collapse_repeated", False),
    ("merge_repeated", True),
    ("ctc_merge_repeated", True),
    ("unique", False),
)


def framework(name: str) -> Any:
    """The module ``name`` (imported on first use)."""
    return importlib.import_module(name)


def missing(*modules: str) -> str | None:
    """None when every module is importable, else the reason (without importing anything)."""
    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    return f"{', '.join(absent)} not installed" if absent else None


@dataclass(frozen=True)
class Peer:
    """A framework's CTC loss as a conformance runtime. Subclasses give ``compute``; ``run``
    refuses what the framework cannot express (:class:`Unsupported`) and computes the rest."""

    name: str
    description: str
    modules: tuple[str, ...]
    dtypes: frozenset[str]  # logits element types the framework computes CTC in
    attributes: tuple[tuple[str, bool], ...]  # attribute values it implements (others: Unsupported)

    def available(self) -> str | None:
        """None when the framework is installed, else why the peer cannot run."""
        return missing(*self.modules)

    def load(self) -> None:
        """Import the framework now (the first ``run`` does it otherwise)."""
        for name in self.modules:
            framework(name)

    def run(self, case: CorpusCase) -> Outcome:
        self.check(case)
        return self.compute(case)

    def check(self, case: CorpusCase) -> None:
        dtype = logits(case).dtype.name
        if dtype in FLOAT_TYPES and dtype not in self.dtypes:
            raise Unsupported(f"{self.name} has no CTC loss for {dtype} logits")
        wanted = dict(self.attributes)
        for name, value in case.attributes.items():
            if name in wanted and value != wanted[name]:
                raise Unsupported(f"{self.name} has no {name}={str(value).lower()}")

    def compute(self, case: CorpusCase) -> Outcome:
        raise NotImplementedError


# -- layouts -------------------------------------------------------------------------------------


def logits(case: CorpusCase) -> np.ndarray:
    """The case's logits as stored: [T, N, C] (spec form) or [N, T, C] (released form)."""
    return case.inputs["inputs"] if case.form == "spec" else case.inputs["logits"]


def time_major(case: CorpusCase) -> bool:
    return case.form == "spec"


def frame_lengths(case: CorpusCase) -> np.ndarray:
    """[N] frame counts: the mask's column sums (spec form; a gapped mask is not looked at) or
    ``logit_length`` as given."""
    if case.form == "spec":
        lengths: np.ndarray = case.inputs["sequence_mask"].sum(axis=0)
        return lengths
    return case.inputs["logit_length"]


def frame_paddings(case: CorpusCase) -> np.ndarray:
    """[N, T] float32 padding flags (1 = no frame): ``1 - mask`` transposed, or from ``logit_length``."""
    if case.form == "spec":
        return np.ascontiguousarray((1 - case.inputs["sequence_mask"]).T.astype(np.float32))
    frames = case.inputs["logits"].shape[1]
    length = case.inputs["logit_length"]
    return (np.arange(frames)[None, :] >= np.reshape(length, (-1, 1))).astype(np.float32)


def dense_targets(case: CorpusCase) -> tuple[np.ndarray, np.ndarray]:
    """(targets [N, S], target lengths [N]). Spec form: each row's non-pad entries moved to its
    front (stable), the -1 pads after them, and counted (spec 7, last paragraph). Released
    form: ``labels`` and ``label_length`` as given (entries beyond a length untouched)."""
    if case.form == "released":
        return case.inputs["labels"], case.inputs["label_length"]
    labels = case.inputs["labels"]
    keep = labels != -1
    order = np.argsort(~keep, axis=-1, kind="stable")
    return np.take_along_axis(labels, order, axis=-1), keep.sum(axis=-1)


def label_paddings(case: CorpusCase) -> np.ndarray:
    """[N, S] float32 padding flags of :func:`dense_targets`' rows (1 beyond a row's length)."""
    targets, lengths = dense_targets(case)
    return (np.arange(targets.shape[-1])[None, :] >= np.reshape(lengths, (-1, 1))).astype(np.float32)


def blank(case: CorpusCase) -> Any:
    """The blank: C-1 in the spec form; ``blank_index`` as given in the released form (C-1 when
    absent), a Python int when it is a scalar and the array itself otherwise."""
    x = logits(case)
    classes = x.shape[-1]
    given = case.inputs.get("blank_index") if case.form == "released" else None
    if given is None:
        return classes - 1
    return int(given) if np.ndim(given) == 0 else given


def sum_gradient(value: Any, dtype: np.dtype[Any]) -> np.ndarray:
    """A framework's gradient as a numpy array of the logits' element type."""
    return np.asarray(value).astype(dtype, copy=False)


# -- verdicts ------------------------------------------------------------------------------------


def grad_allowance(expected: np.ndarray, expected_loss: np.ndarray, dtype: str, sample_axis: int) -> np.ndarray:
    """The gradient rule's bound for each element of ``expected`` (see :data:`GRAD_UNITS`)."""
    loss = np.abs(np.asarray(expected_loss, dtype=np.float64))
    scale = np.where(np.isfinite(loss), np.maximum(loss, 1.0), 1.0)
    view = [1] * expected.ndim
    view[sample_axis] = -1
    wide = EPS["float64" if dtype == "float64" else "float32"]
    allowance: np.ndarray = EPS[dtype] * np.abs(np.nan_to_num(expected)) + GRAD_UNITS * wide * scale.reshape(view)
    return allowance


def compare_grad(
    got: np.ndarray | None, expected: np.ndarray, expected_loss: np.ndarray, dtype: str, sample_axis: int
) -> str | None:
    """None when ``got`` agrees with the reference gradient by the gradient rule (see
    :data:`GRAD_UNITS`), else the worst element and how many disagree, in one line.
    ``sample_axis``: 1 for the spec form's [T, N, C], 0 for the released form's [N, T, C]."""
    if got is None:
        return "no gradient"
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return f"grad shape {g.shape}, expected {e.shape}"
    if e.size == 0:
        return None
    with np.errstate(invalid="ignore"):
        error = np.where(np.isnan(e) & np.isnan(g), 0.0, np.abs(g - e))
        error = np.where(np.isnan(error), np.inf, error)
        bad = error > grad_allowance(e, expected_loss, dtype, sample_axis)
    if not bad.any():
        return None
    worst = np.unravel_index(int(np.argmax(np.where(bad, error, -1.0))), e.shape)
    where = list(map(int, worst))
    return f"grad{where}: got {float(g[worst])!r}, expected {float(e[worst])!r} ({int(bad.sum())} of {e.size} differ)"


def describe(error: BaseException) -> str:
    lines = str(error).strip().splitlines() or [""]
    first = next((line for line in lines if line.strip()), "")
    return f"{type(error).__name__}: {first.strip()[:200]}"


def judge(case: CorpusCase, result: Outcome | np.ndarray | BaseException) -> tuple[str, str]:
    """(verdict, detail): ``skip`` (Unsupported), ``pass``, ``fail`` or ``error``. A case the
    spec rejects passes when the peer raised and fails when it returned anything."""
    if isinstance(result, Unsupported):
        return "skip", str(result)
    if case.expect == "reject":
        if isinstance(result, BaseException):
            return "pass", "rejected: " + describe(result)
        loss = np.asarray(outcome(result).loss, dtype=np.float64).tolist()
        return "fail", f"returned {loss} for input the spec rejects ({case.rule})"
    if isinstance(result, BaseException):
        return "error", describe(result)
    answer = outcome(result)
    assert case.expected_loss is not None and case.tolerance is not None
    problem = compare(answer.loss, case.expected_loss, case.tolerance)
    if problem is not None:
        return "fail", "loss " + problem
    if case.expected_grad is not None:
        axis = 1 if case.form == "spec" else 0
        problem = compare_grad(answer.grad, case.expected_grad, case.expected_loss, case.tolerance, axis)
        if problem is not None:
            return "fail", problem
    return "pass", ""


def attempt(peer: Any, case: CorpusCase) -> Outcome | np.ndarray | BaseException:
    """The peer's answer for ``case``, or the exception it raised (any type: that is a finding)."""
    try:
        answer: Outcome | np.ndarray = peer.run(case)
    except Exception as error:
        return error
    return answer
