"""PyTorch's ``ctc_loss`` expressed with CTCLoss-4 (spec section 14): the argument mapping.

``torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
reduction, zero_infinity)`` (and ``torch.ctc_loss``, ``torch.nn.CTCLoss``) differs from the
spec's op in five ways, each mapped exactly: it does not normalise ``log_probs`` (the loss is
corrected by each active frame's log-sum-exp, :func:`log_sums`); a -inf log-probability is a
probability of zero to it and a non-finite frame to the spec (:func:`stand_ins`); its blank is
any class and only the classes a path can read matter to it (:func:`compacted`); lengths and
targets come as lengths and padded or concatenated targets (:func:`label_rows`); and it applies
``zero_infinity`` and ``reduction`` (:func:`reduced`). This module holds the static half (which
calls can be exported, as :class:`TorchCtcCall`) and :func:`reference_loss`, the mapping in numpy
on top of :func:`ctcop.ctc_loss_or_nan`; the ONNX graph (:mod:`ctcop.torch.onnx_graph`) and the
OpenVINO conversion rule (:mod:`ctcop.torch.openvino_frontend`) build the same steps from
operators. Imports numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InvalidInputError
from ..reference import ctc_loss_or_nan

# PyTorch's reduction enum (torch.nn._reduction.get_enum): the order of this tuple.
REDUCTIONS = ("none", "mean", "sum")
# A -inf log-probability is fed to CTCLoss-4 as its frame's maximum minus this ...
STAND_IN_GAP = 2.0**100
# ... and a corrected loss at or above this means no aligned path of nonzero probability: +inf.
DEAD_LOSS = 2.0**99
LOG_PROB_TYPES = ("float16", "float32", "float64")
LENGTH_TYPES = ("int8", "int16", "int32", "int64", "uint8")
LENGTH_NAMES = ("input_lengths", "target_lengths")


@dataclass(frozen=True)
class TorchCtcCall:
    """The static arguments of one ``ctc_loss`` call: what an exported graph fixes."""

    blank: int
    reduction: str
    zero_infinity: bool
    batched: bool  # log_probs [T, N, C]; else [T, C], one sample and a scalar 'none' result
    concatenated: bool  # targets 1-D (runs of target_lengths[i]); else padded [N, S]

    def attributes(self) -> dict[str, int]:
        """The call as integer node attributes (the ONNX placeholder node's)."""
        return {
            "blank": self.blank,
            "reduction": REDUCTIONS.index(self.reduction),
            "zero_infinity": int(self.zero_infinity),
            "batched": int(self.batched),
            "concatenated": int(self.concatenated),
        }

    @classmethod
    def from_attributes(cls, values: Mapping[str, int]) -> TorchCtcCall:
        return cls(
            blank=int(values["blank"]),
            reduction=REDUCTIONS[int(values["reduction"])],
            zero_infinity=bool(values["zero_infinity"]),
            batched=bool(values["batched"]),
            concatenated=bool(values["concatenated"]),
        )


def reduction_name(reduction: Any) -> str:
    """PyTorch's ``reduction`` argument (a name, or the enum value ``torch.ctc_loss`` takes)."""
    if isinstance(reduction, str) and reduction in REDUCTIONS:
        return reduction
    if isinstance(reduction, int) and not isinstance(reduction, bool) and 0 <= reduction < len(REDUCTIONS):
        return REDUCTIONS[reduction]
    raise InvalidInputError("reduction", f"{reduction!r} is not one of {', '.join(REDUCTIONS)}")


@dataclass(frozen=True)
class ArgumentFacts:
    """What an exporter knows statically about the tensor arguments of a call: ranks (None when
    unknown), element type names, the class count when static, and which lengths are lists."""

    ranks: tuple[int | None, ...]  # log_probs, targets, input_lengths, target_lengths
    log_prob_type: str
    length_types: tuple[str, ...]  # input_lengths, target_lengths
    classes: int | None = None
    lists: tuple[bool, ...] = (False, False)


def _check_lengths(facts: ArgumentFacts, batched: bool) -> None:
    for name, is_list, rank, dtype in zip(LENGTH_NAMES, facts.lists, facts.ranks[2:], facts.length_types, strict=True):
        if is_list:
            raise InvalidInputError(
                name,
                "a Python list of ints would become a constant of the exported graph, while PyTorch reads "
                "it anew on every call: pass an integer tensor",
            )
        if rank not in (0, 1):
            shape = "[N] (or a scalar when N is 1)" if batched else "a scalar or [1]"
            raise InvalidInputError(name, f"rank {rank}: PyTorch's ctc_loss takes {shape} here")
        if dtype not in LENGTH_TYPES:
            raise InvalidInputError(name, f"element type {dtype}: PyTorch requires an integral type")


def checked_call(blank: Any, reduction: Any, zero_infinity: Any, facts: ArgumentFacts) -> TorchCtcCall:
    """The call's static arguments, or an :class:`InvalidInputError` naming the argument that
    PyTorch would refuse or that no exported graph can honour."""
    log_probs_rank, targets_rank = facts.ranks[:2]
    if log_probs_rank not in (2, 3):
        raise InvalidInputError("log_probs", f"rank {log_probs_rank}: PyTorch's ctc_loss takes [T, N, C] or [T, C]")
    if facts.log_prob_type not in LOG_PROB_TYPES:
        raise InvalidInputError("log_probs", f"element type {facts.log_prob_type}: one of {', '.join(LOG_PROB_TYPES)}")
    if targets_rank not in (1, 2):
        raise InvalidInputError("targets", f"rank {targets_rank}: padded [N, S] or concatenated 1-D")
    batched = log_probs_rank == 3
    _check_lengths(facts, batched)
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)):
        raise InvalidInputError("blank", f"{blank!r} is not an int")
    if blank < 0 or (facts.classes is not None and blank >= facts.classes):
        raise InvalidInputError("blank", f"{blank} is outside the classes [0, {facts.classes})")
    if not isinstance(zero_infinity, (bool, np.bool_)):
        raise InvalidInputError("zero_infinity", f"{zero_infinity!r} is not a bool")
    return TorchCtcCall(int(blank), reduction_name(reduction), bool(zero_infinity), batched, targets_rank == 1)


def label_rows(
    targets: np.ndarray, target_lengths: np.ndarray, frames: int, concatenated: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Target values laid out as rows [N, T] of int64 (entry j of row i is target j of sample i,
    for j < min(target_lengths[i], T); any value elsewhere) and the samples whose targets cannot
    be located [N]: a negative length, a length over S (padded) or, for the concatenation,
    lengths that do not add up to its size (every sample).

    The mapping: ``input_lengths`` becomes the mask; the first ``target_lengths[i]`` entries of row
    i (padded [N, S]) or of the i-th run of the concatenation (1-D) become label row i, the rest
    -1; a target longer than the time axis is +inf (it is longer than its frames)."""
    n = target_lengths.shape[0]
    columns = np.arange(frames)
    if concatenated:
        offsets = np.cumsum(target_lengths) - target_lengths
        source = np.concatenate([targets.astype(np.int64), [-1]])
        rows = source[np.clip(offsets[:, None] + columns[None, :], 0, targets.shape[0])]
        faults = np.full(n, (target_lengths < 0).any() or target_lengths.sum() != targets.shape[0])
    else:
        width = targets.shape[1]
        rows = np.full((n, frames), -1, np.int64)
        rows[:, : min(width, frames)] = targets[:, :frames].astype(np.int64)
        faults = target_lengths > width
    return rows, faults | (target_lengths < 0)


def relabelled(rows: np.ndarray, inside: np.ndarray, blank: int) -> np.ndarray:
    """Label rows [N, T] over the C classes: inside the target its classes as they are, ``blank``
    and negative values -2 (invalid labels: NaN by rule 3.3, as is a value >= C), -1 outside.
    PyTorch's blank is any class; CTCLoss-4's is the last column (:func:`compacted`)."""
    return np.where(inside, np.where((rows < 0) | (rows == blank), -2, rows), -1)


def compacted(labels: np.ndarray, classes: int, blank: int) -> tuple[np.ndarray, np.ndarray]:
    """The columns fed to CTCLoss-4 and its labels: ``columns`` [N, D + 1], the class each column
    reads (sample i's distinct target classes in ascending order, then copies of ``blank`` up to
    column D, its CTCLoss-4 blank), and the label rows [N, T] relabelled by column (-1 and -2
    kept, a class >= ``classes`` -2), from :func:`relabelled` ``labels``.

    Only the classes a path can read (the targets and the blank) matter to PyTorch. D is the batch's
    largest count of distinct classes; a sample with fewer fills its spare columns with copies of
    the blank. The correction (:func:`log_sums`) is taken over these columns, so no unread class
    enters it, and CTCLoss-4's softmax runs over D + 1 columns, not C. A NaN or +inf among a
    frame's other classes still makes an active frame non-finite (spec 4.4): NaN, read off the
    frame's sum over the C classes (:func:`non_finite_frames`)."""
    valid = (labels >= 0) & (labels < classes)
    distinct = [np.unique(row[keep], return_inverse=True) for row, keep in zip(labels, valid, strict=True)]
    columns = np.full((labels.shape[0], max((d[0].size for d in distinct), default=0) + 1), blank, np.int64)
    relabelled_rows = np.where(labels < 0, labels, -2)
    for i, (found, column) in enumerate(distinct):
        columns[i, : found.size] = found
        relabelled_rows[i, valid[i]] = column
    return columns, relabelled_rows


def non_finite_frames(x: np.ndarray) -> np.ndarray:
    """[T, N]: the frames of ``x`` [T, N, C] holding NaN or +inf in any class (spec 4.4), read
    off their sum over the classes (as the graphs read them: NaN or +inf; also for finite values
    that sum past the largest finite value)."""
    with np.errstate(invalid="ignore", over="ignore"):
        total = x.sum(axis=2)
    flags: np.ndarray = np.isnan(total) | np.isposinf(total)
    return flags


def frame_tops(logits: np.ndarray) -> np.ndarray:
    """Each frame's maximum over the columns [T, N, 1]; 0 for a frame of -inf only (NaN
    propagates)."""
    with np.errstate(invalid="ignore"):
        top = np.max(logits, axis=2, keepdims=True)
    return np.where(np.isneginf(top), 0.0, top)


def stand_ins(logits: np.ndarray, top: np.ndarray) -> np.ndarray:
    """``logits`` [T, N, C] with every -inf replaced by its frame's top minus STAND_IN_GAP.

    A -inf log-probability is a probability of zero to PyTorch and a non-finite frame (NaN) to the
    spec; the stand-in's paths are 2**100 less probable than any other, and a loss of DEAD_LOSS
    or more (every aligned path went through one) is +inf."""
    return np.where(np.isneginf(logits), top - STAND_IN_GAP, logits)


def log_sums(logits: np.ndarray, top: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The sum over the active frames of each frame's log-sum-exp over the columns, [N], with
    ``top`` [T, N, 1] the shift: about -STAND_IN_GAP when an active frame held -inf only (the
    corrected loss is then past DEAD_LOSS: +inf), NaN when it holds NaN or +inf.

    PyTorch does not normalise ``log_probs``: a path's probability is ``exp(sum_t x[t, s_t])``,
    while CTCLoss-4 applies a softmax. Since ``ln softmax(x)[c] = x[c] - lse(x)``, with ``lse`` the
    log-sum-exp over the columns fed to CTCLoss-4 (:func:`compacted`),
    ``loss_torch[i] = loss_ctcop[i] - sum_{t < T_i} lse(x'[t, i, :])`` for any finite ``x``."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        lse = top[..., 0] + np.log(np.sum(np.exp(logits - top), axis=2))
    sums: np.ndarray = np.where(active, lse, 0.0).sum(axis=0)
    return sums


def reduced(loss: np.ndarray, target_lengths: np.ndarray, call: TorchCtcCall) -> np.ndarray:
    """zero_infinity (+inf becomes 0), then the reduction (float64): 'none', 'sum' or 'mean' (each
    loss divided by its target length clamped to 1, then averaged)."""
    if call.zero_infinity:
        loss = np.where(loss == np.inf, 0.0, loss)
    if call.reduction == "sum":
        return np.asarray(loss.sum())
    if call.reduction == "mean":
        return np.asarray(np.mean(loss / np.maximum(target_lengths, 1)))
    return loss if call.batched else loss[0]


def _facts(x: np.ndarray, targets: np.ndarray, lengths: tuple[np.ndarray, np.ndarray]) -> ArgumentFacts:
    ranks = (x.ndim, targets.ndim, lengths[0].ndim, lengths[1].ndim)
    return ArgumentFacts(ranks, x.dtype.name, tuple(v.dtype.name for v in lengths), x.shape[-1])


def reference_loss(
    log_probs: npt.ArrayLike,
    targets: npt.ArrayLike,
    input_lengths: npt.ArrayLike,
    target_lengths: npt.ArrayLike,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> np.ndarray:
    """What PyTorch's ``ctc_loss`` computes, through CTCLoss-4 (:func:`ctcop.ctc_loss_or_nan`,
    float64) and the mapping of this module, in the element type of ``log_probs``. Where PyTorch
    raises for a sample's lengths or targets, that sample is NaN (spec 14)."""
    x, tg = np.asarray(log_probs), np.asarray(targets)
    lengths = (np.asarray(input_lengths), np.asarray(target_lengths))
    call = checked_call(blank, reduction, zero_infinity, _facts(x, tg, lengths))
    logits = (x if call.batched else x[:, None, :]).astype(np.float64)
    il, tl = (np.asarray(v, np.int64).reshape(-1) for v in lengths)
    frames = logits.shape[0]
    rows, faults = label_rows(tg, tl, frames, call.concatenated)
    inside = np.arange(frames)[None, :] < tl[:, None]
    active = np.arange(frames)[:, None] < il[None, :]
    columns, labels = compacted(relabelled(rows, inside, blank), logits.shape[2], blank)
    read = np.take_along_axis(logits, np.broadcast_to(columns[None], (frames, *columns.shape)), axis=2)
    fed = stand_ins(read, frame_tops(read))
    core = ctc_loss_or_nan(fed, active.astype(np.int32), labels)
    loss = core - log_sums(fed, frame_tops(fed), active)
    compute = np.float64 if x.dtype == np.float64 else np.float32  # the graphs' sum
    loss[(non_finite_frames(logits.astype(compute)) & active).any(axis=0)] = np.nan
    loss = np.where(loss >= DEAD_LOSS, np.inf, loss)
    loss = np.where((tl > il) & ~np.isnan(loss), np.inf, loss)
    loss[faults | (il < 0) | (il > frames)] = np.nan
    result: np.ndarray = reduced(loss, tl, call).astype(x.dtype)
    return result
