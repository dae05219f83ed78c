"""One evaluation of one case by one runtime, judged: the loss by :func:`ctcop.tolerance.mismatch`
(spec section 10), the gradient by :func:`grad_mismatch`, a case that must be rejected by
:func:`rejected`. Runs in a worker process; what it returns is a :class:`~.result.Result`, whose
:class:`~ctcop.tolerance.Mismatch` says how a value departs (its message is rendered from it).

**Rejection** (:func:`rejected`): a runtime conforms when it raises (any exception but
:class:`~.protocol.Unsupported`) or returns NaN for every offending sample (how a total function
refuses, spec 11.5); a finite value for an offending sample is accepting invalid input, a ``fail``.

**Gradient** (:func:`grad_mismatch`): when the runtime gives a gradient and the case has an
expected one, a loss that passes is followed by the gradient, elementwise, by the same rule as the
loss (spec 10.2) measured per sample on the reference's loss of that sample.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import canonical
from ..text import ends, one_line
from ..tolerance import Mismatch, describe, max_errors, mismatch, reduced_allowance, reduced_range, tolerance
from ..tolerance import allowance as tolerance_allowance
from .protocol import Outcome, Unsupported
from .result import Raised, Result

if TYPE_CHECKING:
    from .case import Case

SHOWN = 8  # loss values quoted in a message


def number(value: Any) -> str:
    """A number as plain text: the shortest repr in its own element type ("1.25", "inf", "nan")."""
    if isinstance(value, np.generic):
        return str(value)
    return repr(float(value)) if isinstance(value, (float, np.floating)) else str(value)


def sample_axis(case: Case) -> int:
    """The sample axis of ``case``'s logits and gradient: 1 for [T, N, C] (spec form), 0 for [N, T, C]."""
    return 1 if case.form == "spec" else 0


def grad_mismatch(
    got: npt.ArrayLike,
    expected: npt.ArrayLike,
    expected_loss: npt.ArrayLike,
    dtype: str,
    sample_axis: int,
    reduced: npt.ArrayLike | None = None,
) -> Mismatch | None:
    """None when the gradient ``got`` conforms to ``expected`` by the gradient rule
    (``expected_loss`` the reference's [N] loss, ``sample_axis`` the gradient's sample axis);
    otherwise the worst disagreement (kind ``"gradient"``, or ``"gradient-shape"``). ValueError
    when ``expected`` has no sample axis of N (the reference's gradient and loss disagree).

    The rule: d loss / d logits, elementwise, by the same rule as the loss (:mod:`ctcop.tolerance`,
    spec 10.2), measured per sample ``i`` on the reference's loss of that sample: ``eps(dtype)
    |expected| + UNITS eps(wide) max(1, |loss_i|)``; NaN (and an infinity) exactly where the
    reference has one. The entries are differences of probabilities in [-1, 1], and the
    occupancies inherit as a relative error the absolute error of alpha + beta, so no constant
    tolerance fits every length: one loose enough for long sequences would hide a wrong gradient
    on short ones. The sample axis is 1 for the spec form's [T, N, C], 0 for the released form's
    [N, T, C] (:func:`sample_axis`). ``reduced``: spec 10.5's bounds d_i on the losses of a
    gradient computed at a reduced precision; an entry's bound is then at least min(2, e^d_i - 1),
    the occupancies' relative error when alpha + beta is off by d_i."""
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return Mismatch("gradient-shape", shape=g.shape, expected_shape=e.shape)
    if e.size == 0:
        return None
    samples = np.asarray(expected_loss).size
    if e.ndim <= sample_axis or e.shape[sample_axis] != samples:
        raise ValueError(f"the expected gradient {list(e.shape)} has no sample axis {sample_axis} of {samples} samples")
    view = [1] * e.ndim
    view[sample_axis] = -1
    allowance = tolerance_allowance(e, np.asarray(expected_loss, dtype=np.float64).reshape(view), dtype)
    if reduced is not None:
        occupancy = np.minimum(2.0, np.expm1(np.asarray(reduced, dtype=np.float64))).reshape(view)
        allowance = np.maximum(allowance, occupancy)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (np.isnan(g) & np.isnan(e)) | (np.isinf(e) & (g == e))
        off = np.where(same, 0.0, np.abs(g - e))
        off[np.isnan(off)] = np.inf
        bad = off > allowance
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.where(bad, off / allowance, -1.0))), e.shape))
    return Mismatch(
        "gradient",
        sample=where[sample_axis],
        got=float(g[where]),
        expected=float(e[where]),
        entry=where,
        allowed=float(allowance[where]),
        off=int(bad.sum()),
        entries=int(bad.size),
    )


def describe_grad(found: Mismatch, dtype: str) -> str:
    """A ``"gradient"`` or ``"gradient-shape"`` mismatch of a ``dtype`` case in one line that starts
    with "gradient"."""
    if found.kind == "gradient-shape":
        return f"gradient: shape {list(found.shape)}, expected {list(found.expected_shape)}"
    error = abs(found.got - found.expected)
    return (
        f"gradient at {list(found.entry)}: got {number(found.got)}, expected {number(found.expected)} "
        f"({found.off} of {found.entries} entries off; error {number(math.inf if math.isnan(error) else error)}, "
        f"allowed {number(found.allowed)} = eps({dtype}) |expected| + {tolerance(dtype).units:g} eps max(1, |loss|))"
    )


def compare_grad(
    got: npt.ArrayLike, expected: npt.ArrayLike, expected_loss: npt.ArrayLike, dtype: str, sample_axis: int
) -> str | None:
    """None when the gradient ``got`` conforms to ``expected`` by the gradient rule; otherwise the
    worst disagreement in one line that starts with "gradient" (:func:`grad_mismatch`, described)."""
    found = grad_mismatch(got, expected, expected_loss, dtype, sample_axis)
    return None if found is None else describe_grad(found, dtype)


def offending(case: Case) -> npt.NDArray[np.bool_] | None:
    """The samples whose own inputs break a rule ([N] bools), or None when the fault is the
    batch's or every sample's (every sample must answer NaN)."""
    x = case.inputs
    try:
        if case.form == "spec":
            faults = canonical.time_major_faults(x["inputs"], x["sequence_mask"], x["labels"])[3]
        else:
            logits, frames, labels, lengths = (x[k] for k in ("logits", "logit_length", "labels", "label_length"))
            faults = canonical.openvino_faults(logits, frames, labels, lengths, x.get("blank_index"), **case.attributes)
    except ValueError:  # a rank or an element type: the batch's
        return None
    return None if faults.all() else faults


def rejected(loss: np.ndarray, case: Case) -> Mismatch | None:
    """None when ``loss`` refuses the invalid ``case`` (NaN for every offending sample); else the
    number it accepted (kind ``"accepted-invalid-input"``). The offending samples
    (:func:`offending`) are those whose own inputs break a per-sample rule (spec 3.1 and 3.3 in the
    time-major form, 7.1 and 7.2 in the released form), or every sample when the fault is the
    batch's (a shape, an element type, C = 0, ``blank_index``) or when every sample offends, as
    the core finds them (:func:`ctcop.canonical.time_major_faults`,
    :func:`ctcop.canonical.openvino_faults`). A raised exception is the other way to refuse
    (:func:`judge`)."""
    faults = offending(case)
    values = np.asarray(loss, dtype=np.float64)
    if faults is None:
        if values.size and np.isnan(values).all():
            return None
        numbers = values.ravel()[~np.isnan(values.ravel())]
        return Mismatch("accepted-invalid-input", got=float(numbers[0]) if numbers.size else math.nan)
    if values.shape != faults.shape:
        return Mismatch("accepted-invalid-input", shape=values.shape, expected_shape=faults.shape)
    wrong = faults & ~np.isnan(values)
    if not wrong.any():
        return None
    first = int(np.argmax(wrong))
    return Mismatch("accepted-invalid-input", sample=first, got=float(values[first]))


def describe_refusal(found: Mismatch, loss: np.ndarray, case: Case) -> str:
    """An ``"accepted-invalid-input"`` mismatch of ``loss`` on ``case`` in one line that names the
    rule ``case`` breaks and quotes the numbers in their own element type."""
    if found.expected_shape:
        return (
            f"accepted invalid input (rule {case.rule}): loss shape {list(found.shape)}, "
            f"expected {list(found.expected_shape)}"
        )
    broken = f"accepted invalid input (rule {case.rule}: {case.error})"
    if found.sample < 0:
        return f"{broken}: got {shown(loss)}, NaN expected everywhere"
    faults = offending(case)
    samples = [] if faults is None else np.flatnonzero(faults).tolist()
    return (
        f"{broken}: sample {found.sample} got {number(np.asarray(loss).ravel()[found.sample])}, "
        f"NaN expected for samples {samples}"
    )


def shown(values: np.ndarray) -> str:
    flat = np.asarray(values).ravel()
    text = " ".join(number(v) for v in flat[:SHOWN])
    return f"[{text}{' ...' if flat.size > SHOWN else ''}]" + (f" ({flat.size} values)" if flat.size > SHOWN else "")


def bits(array: np.ndarray | None) -> str:
    """A digest of ``array``'s element type, shape and bytes, every NaN made one NaN (so two
    results are identical when they are bit for bit, NaN == NaN)."""
    if array is None:
        return ""
    a = np.ascontiguousarray(array)
    if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
        a = a.copy()
        a[np.isnan(a.astype(np.float64))] = np.nan
    digest = hashlib.sha256(f"{a.dtype.name}{a.shape}".encode())
    digest.update(a.tobytes())
    return digest.hexdigest()[:32]


def _raised(error: BaseException) -> Raised:
    """The exception's type and its message in one printable line (:func:`ctcop.text.ends`)."""
    return Raised(type(error).__name__, ends(error))


def real(array: np.ndarray) -> bool:
    """Whether ``array`` holds real numbers by value (bool, integer, float, or an ``ml_dtypes``
    float such as bfloat16); a complex, object, string, date or structured array does not."""
    kind, dtype = array.dtype.kind, array.dtype
    return kind in "biuf" or (kind == "V" and dtype.names is None and dtype.type.__module__ == "ml_dtypes")


class InvalidAnswer(Exception):
    """A runtime's return value that is not a loss (and gradient) as numeric arrays."""


def _answer_arrays(value: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """The loss and gradient of a runtime's return value as numeric arrays; :class:`InvalidAnswer`
    (one line) saying what is wrong with an answer that is not one."""
    answer = value if isinstance(value, Outcome) else Outcome(value)  # a bare answer is the loss
    parts: list[np.ndarray | None] = []
    if answer.loss is None:
        raise InvalidAnswer("there is no loss (None)")
    for what, part in (("loss", answer.loss), ("gradient", answer.grad)):
        if part is None:
            parts.append(None)
            continue
        try:
            array = np.asarray(part)
        except Exception as error:
            raise InvalidAnswer(f"the {what} ({type(part).__name__}) is not an array: {_raised(error)}") from None
        if not real(array):
            raise InvalidAnswer(f"the {what} has element type {array.dtype}, not a real number type")
        parts.append(array)
    loss, grad = parts
    assert loss is not None  # checked above
    return loss, grad


def frame_facts(case: Case) -> tuple[np.ndarray, np.ndarray, int]:
    """Per sample of ``case``: its active frames T_i and the largest finite logit magnitude X_i
    over them; and C, the classes (spec 10.5's inputs)."""
    x = case.inputs
    if case.form == "spec":
        logits = np.asarray(x["inputs"], dtype=np.float64).transpose(1, 0, 2)  # [N, T, C]
        active = np.asarray(x["sequence_mask"]).T != 0
    else:
        logits = np.asarray(x["logits"], dtype=np.float64)
        lengths = np.clip(np.asarray(x["logit_length"], dtype=np.int64), 0, logits.shape[1])
        active = np.arange(logits.shape[1])[None, :] < lengths[:, None]
    with np.errstate(invalid="ignore"):
        magnitude = np.where(np.isfinite(logits), np.abs(logits), 0.0).max(axis=2, initial=0.0)
    largest = np.where(active, magnitude, 0.0).max(axis=1, initial=0.0)
    return active.sum(axis=1), largest, int(logits.shape[2])


def reduced_bounds(case: Case, expected: np.ndarray, precision: str) -> np.ndarray:
    """Spec 10.5's bound on each sample's loss of ``case`` computed at ``precision``."""
    frames, largest, classes = frame_facts(case)
    return reduced_allowance(expected, frames, largest, classes, precision)


def _value_verdict(
    answer: Result, case: Case, loss: np.ndarray, grad: np.ndarray | None, reduced: str | None
) -> Result:
    """``answer`` (a value's) judged: its status, mismatch, message and the loss's errors; by spec
    10.5's bound where the value was computed at a ``reduced`` precision."""
    if case.expect == "reject":
        refused = rejected(loss, case)
        if refused is None:
            return replace(answer, status="pass", message=f"rejected: NaN for the offending samples, got {shown(loss)}")
        return replace(answer, status="fail", mismatch=refused, message=describe_refusal(refused, loss, case))
    expected = case.expected_loss
    assert expected is not None
    dtype = case.tolerance or "float64"
    worst_abs, worst_rel = max_errors(loss, expected)
    answer = replace(answer, max_abs_err=worst_abs, max_rel_err=worst_rel)
    bounds = None if reduced is None else reduced_bounds(case, np.asarray(expected), reduced)
    if reduced is not None and (frame_facts(case)[1] > reduced_range(reduced)).any():
        why = f"not judged at {reduced}: active logits lie beyond its range (spec 10.5)"
        return replace(answer, status="skip", message=why)
    found = mismatch(loss, expected, dtype, bounds)
    if found is not None:
        return replace(answer, status="fail", mismatch=found, message=describe(found))
    if grad is not None and case.expected_grad is not None:
        found = grad_mismatch(grad, case.expected_grad, expected, dtype, sample_axis(case), bounds)
        if found is not None:
            return replace(answer, status="fail", mismatch=found, message=describe_grad(found, dtype))
    return replace(answer, status="pass")


def judge(runtime: Any, case: Case, name: str = "", reduced: str | None = None) -> Result:
    """Evaluate ``case`` with ``runtime`` (called ``name``) once: a :class:`~.result.Result` with
    ``answer`` value, raised or skip, its status and message, the loss's errors and
    :class:`~ctcop.tolerance.Mismatch` or what the runtime raised, the loss's first values as text
    and the digests of the loss and the gradient.

    The runtime gets :meth:`~.corpus.Case.handed` (fresh read-only inputs), so nothing it
    does changes the case for the verdict or a later evaluation. Whatever it raises (any
    ``BaseException``, ``KeyboardInterrupt`` and ``SystemExit`` too: this runs in a worker, which
    ignores SIGINT, so they are the runtime's own) is its answer, and so is an answer that is not
    a numeric array. ``reduced``: the precision narrower than float32 (``bf16``, ``f16``) the
    runtime computed at, which spec 10.5's bound judges."""
    try:
        loss, grad = _answer_arrays(runtime.run(case.handed()))
    except Unsupported as why:
        return Result(case.id, name, "skip", one_line(why) or "unsupported", answer="skip", loss_bits="skip")
    except InvalidAnswer as wrong:
        return Result(case.id, name, "error", f"not a valid answer: {wrong}", answer="raised", loss_bits="invalid")
    except BaseException as error:  # whatever a runtime raises is its answer (see above)
        raised = _raised(error)
        status = "pass" if case.expect == "reject" and isinstance(error, Exception) else "error"
        message = f"rejected: {raised}" if status == "pass" else str(raised)
        return Result(case.id, name, status, message, raised=raised, answer="raised", loss_bits=raised.type)
    answer = Result(case.id, name, "pass", answer="value")
    try:  # an answer too big to copy (a broadcast view of 2^40 elements) cannot even be compared
        values = tuple(number(v) for v in loss.ravel()[:4096])
        answer = replace(answer, loss=values, loss_bits=bits(loss), grad_bits=bits(grad))
        return _value_verdict(answer, case, loss, grad, reduced)
    except Exception as error:
        return replace(answer, status="fail", message=f"result not comparable: {_raised(error)}")
