"""A plain CTCLoss-4 of both forms, written from the spec's text, in which each rule is one decision
that a mutant can break (:mod:`.mutants` names them).

It is a runtime of the conformance protocol (:mod:`ctcop.conformance.protocol`). It returns the loss
and the gradient, and raises on invalid input. The lattice, forward and backward recursions are
:mod:`ctcop.forward_backward`'s (spec 4.5, 5). The checks of sections 3, 6 and 7, target
processing, the softmax, the edge cases of 4.4 and the gradient's conventions are restated here,
so that a mutant can break any of them alone. ``Plain()`` breaks none. ``Plain(bug)`` breaks the
one rule ``bug`` names, and computes as a real implementation with that bug would.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...forward_backward import backward, forward, gradient, lattice
from ..protocol import Outcome
from .mutants import MUTANTS
from .score import PLAIN, mutant_name

FLOATS = ("float16", "bfloat16", "float32", "float64")
TINY = 1e-307  # a stand-in for probability 0 (ln 0) that some implementations use


class Refused(ValueError):
    """Invalid input (spec 3, 6, 7.1, 7.2), named by its rule."""


@dataclass(frozen=True)
class Plain:
    """CTCLoss-4 from the spec's text; ``bug`` names the one rule it breaks ("" for none)."""

    bug: str = ""

    def __post_init__(self) -> None:
        if self.bug and self.bug not in MUTANTS:
            raise ValueError(f"no mutant {self.bug!r}")

    @property
    def name(self) -> str:
        return mutant_name(self.bug) if self.bug else PLAIN

    @property
    def description(self) -> str:
        return MUTANTS[self.bug].what if self.bug else "plain numpy CTCLoss-4 from the spec's text"

    def broken(self, rule: str) -> bool:
        return self.bug == rule

    def check(self, holds: bool, rule: str, message: str) -> None:
        """Refuse the input unless ``holds``; a mutant that breaks ``rule`` accepts it."""
        if not holds and not self.broken(rule):
            raise Refused(message)

    def run(self, case: Any) -> Outcome:
        found = (
            self._spec(case.inputs, case.attributes)
            if case.form == "spec"
            else self._released(case.inputs, case.attributes)
        )
        if self.broken("nondeterministic"):
            _flip_a_last_bit(found.loss)
        return found

    # -- the time-major form (spec 2, 3) -----------------------------------------------------

    def _spec(self, x: Any, attributes: Any) -> Outcome:
        inputs, mask, labels = (np.asarray(x[name]) for name in ("inputs", "sequence_mask", "labels"))
        self.check(inputs.dtype.name in FLOATS, "element_types", f"inputs: {inputs.dtype} is no float type (6)")
        self.check(inputs.ndim == 3, "shapes", f"inputs: rank {inputs.ndim}, not 3 (2)")
        if inputs.ndim != 3:  # a mutant that reads any rank as [T, 1, C]
            inputs = inputs.reshape(inputs.shape[0] if inputs.ndim else 1, 1, -1)
        frames_total, batch, classes = inputs.shape
        self.check(classes >= 1, "zero_classes", "inputs: C = 0 (6)")
        if classes == 0:
            return Outcome(np.zeros(batch, inputs.dtype))
        self.check(mask.dtype.kind in "biu", "element_types", f"sequence_mask: {mask.dtype} (6)")
        self.check(labels.dtype.kind in "iu", "element_types", f"labels: {labels.dtype} (6)")
        mask = self._fitted(mask.astype(np.int64), (frames_total, batch), 0, "sequence_mask")
        labels = self._fitted(labels.astype(np.int64), (batch, frames_total), -1, "labels")
        self.check(bool(np.isin(mask, (0, 1)).all()), "mask_values", "sequence_mask: a value other than 0 and 1 (3.1)")
        ones = mask != 0
        self.check(bool((ones[1:] <= ones[:-1]).all()), "mask_gaps", "sequence_mask: a 1 after a 0 (3.1)")
        frames = ones.sum(axis=0)
        if self.broken("masked_frames_computed"):
            frames = np.full(batch, frames_total)
        if self.broken("lengths_of_the_first_sample") and batch:
            frames = np.full(batch, frames[0])
        blank = classes - 1
        targets = []
        for i in range(batch):
            row = labels[i]
            checked = row[: frames[i]] if self.broken("labels_beyond_frames_unchecked") else row
            self.check(not (checked == blank).any(), "label_is_blank", f"labels[{i}]: the blank (3.3)")
            self.check(not (checked >= classes).any(), "label_at_least_c", f"labels[{i}]: a value >= C (3.3)")
            self.check(not (checked < -1).any(), "label_below_pad", f"labels[{i}]: a value below -1 (3.3)")
            targets.append(self._target(row, attributes["preprocess_collapse_repeated"], classes))
        logits = np.moveaxis(inputs, 0, 1)  # [N, T, C]
        loss, grad = self._batch(logits, frames, targets, blank, attributes["merge_repeated"])
        return Outcome(self._typed(loss, inputs.dtype), self._typed(np.moveaxis(grad, 0, 1), inputs.dtype))

    def _fitted(self, values: np.ndarray, shape: tuple[int, int], fill: int, name: str) -> np.ndarray:
        """``values`` of ``shape`` (spec 2); a mutant that skips the shape check cuts or pads them."""
        self.check(values.shape == shape, "shapes", f"{name}: shape {list(values.shape)}, not {list(shape)} (2)")
        if values.shape == shape:
            return values
        fitted = np.full(shape, fill, dtype=np.int64)
        flat = values.reshape(values.shape[0] if values.ndim else 1, -1)
        rows, cols = min(shape[0], flat.shape[0]), min(shape[1], flat.shape[1])
        fitted[:rows, :cols] = flat[:rows, :cols]
        return fitted

    def _target(self, row: np.ndarray, collapse: bool, classes: int) -> np.ndarray:
        """Spec 3.3, 3.4: every pad removed, then runs collapsed if asked."""
        if self.broken("trailing_pads_only"):
            pads = np.flatnonzero(row == -1)
            kept = row[: pads[0]] if pads.size else row
        elif self.broken("collapse_before_pads"):
            kept = row[_run_starts(row)] if collapse else row
            kept = kept[kept != -1]
            collapse = False
        else:
            kept = row[row != -1]
        kept = np.where(kept < -1, -1, kept)  # a mutant that accepts labels below -1 reads them as pads
        kept = kept[kept != -1] % max(classes, 1)  # and one that accepts labels >= C reads them modulo C
        if collapse and not self.broken("collapse_ignored"):
            kept = kept[_run_starts(kept)]
        return np.asarray(kept)

    # -- the released form (spec 7) ------------------------------------------------------------

    def _released(self, x: Any, attributes: Any) -> Outcome:
        logits = np.asarray(x["logits"])
        self.check(logits.dtype.name in FLOATS, "element_types", f"logits: {logits.dtype} (6)")
        batch, frames_total, classes = logits.shape
        lengths = self._lengths(np.asarray(x["logit_length"]), batch, frames_total, "logit_length")
        label_lengths = self._lengths(np.asarray(x["label_length"]), batch, frames_total, "label_length")
        labels = np.asarray(x["labels"]).astype(np.int64)
        blank = classes - 1
        if "blank_index" in x and not self.broken("blank_index_ignored"):
            given = np.asarray(x["blank_index"])
            self.check(given.ndim == 0, "shapes", f"blank_index: rank {given.ndim}, not a scalar (7)")
            blank = int(given.reshape(-1)[0])
            self.check(0 <= blank < classes, "blank_index_unchecked", f"blank_index: {blank} not in [0, C-1] (7.1)")
            blank %= classes
        elif self.broken("default_blank_is_zero"):
            blank = 0
        if self.broken("masked_frames_computed"):
            lengths = np.full(batch, frames_total)
        targets = []
        for i in range(batch):
            stop = frames_total if self.broken("label_length_ignored") else label_lengths[i]
            prefix = labels[i, :stop]
            if self.broken("junk_after_length_checked"):
                prefix = labels[i]
            bad = (prefix < 0) | (prefix >= classes) | (prefix == blank)
            self.check(
                not bad.any(), "prefix_labels_unchecked", f"labels[{i}]: a prefix entry not a class or the blank (7.2)"
            )
            target = labels[i, :stop] % classes
            if attributes["preprocess_collapse_repeated"] and not self.broken("collapse_ignored"):
                target = target[_run_starts(target)]
            if attributes["unique"] and not self.broken("unique_ignored"):
                target = self._unique(target)
            targets.append(target)
        loss, grad = self._batch(logits, lengths, targets, blank, attributes["ctc_merge_repeated"])
        return Outcome(self._typed(loss, logits.dtype), self._typed(grad, logits.dtype))

    def _lengths(self, values: np.ndarray, batch: int, frames_total: int, name: str) -> np.ndarray:
        """``logit_length`` or ``label_length``: [N] integers in [0, T] (spec 7.1)."""
        self.check(values.shape == (batch,), "shapes", f"{name}: shape {list(values.shape)}, not [{batch}] (7)")
        values = np.resize(values.astype(np.int64).reshape(-1), batch) if values.size else np.zeros(batch, np.int64)
        inside = (values >= 0) & (values <= frames_total)
        self.check(bool(inside.all()), "lengths_unchecked", f"{name}: a value outside [0, T] (7.1)")
        return np.asarray(np.clip(values, 0, frames_total))

    def _unique(self, target: np.ndarray) -> np.ndarray:
        """Spec 7.3: the first occurrence of each class, in order of first occurrence."""
        order = target[::-1] if self.broken("unique_keeps_last") else target
        _, first = np.unique(order, return_index=True)
        kept = order[np.sort(first)]
        return kept[::-1] if self.broken("unique_keeps_last") else kept

    # -- the computation (spec 4, 5) -----------------------------------------------------------

    def _batch(
        self, logits: np.ndarray, frames: np.ndarray, targets: list[np.ndarray], blank: int, merge: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Losses [N] and gradient [N, T, C], float64, of ``logits`` [N, T, C]."""
        wide = np.asarray(logits, dtype=np.float64)
        loss, grad = np.zeros(len(targets)), np.zeros(wide.shape)
        if self.broken("empty_batch_refused"):
            self.check(wide.size > 0, "", "logits: an empty tensor")
        merge = (merge or self.broken("merge_always")) and not self.broken("merge_never")
        for i, target in enumerate(targets):
            active = wide[i, : frames[i]]
            if self.broken("no_frames_refused"):
                self.check(frames[i] > 0, "", f"sample {i}: no frames")
            loss[i], grad[i, : frames[i]] = self._sample(active, target, blank, merge, wide[i])
            if self.broken("nan_gradient_everywhere") and np.isnan(loss[i]):
                grad[i] = np.nan
            if self.broken("inactive_frames_gradient") and np.isfinite(wide[i, frames[i] :]).all():
                grad[i, frames[i] :] = np.exp(self._log_softmax(wide[i, frames[i] :]))
        if self.broken("nan_poisons_the_batch") and np.isnan(loss).any():
            loss[:] = np.nan
        return loss, grad

    def _sample(
        self, logits: np.ndarray, target: np.ndarray, blank: int, merge: bool, every_frame: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """One sample's loss and gradient [T_i, C] from its active frames ``logits`` (spec 4, 5)."""
        seen = every_frame if self.broken("masked_frames_read") else logits
        if self.broken("nan_as_zero_probability"):
            logits = np.where(np.isnan(logits), -np.inf, logits)
            seen = np.where(np.isnan(seen), 0.0, seen)
        if self.broken("neg_inf_as_zero_probability"):
            seen = np.where(np.isneginf(seen), 0.0, seen)
        if self.broken("pos_inf_as_certain"):
            logits = np.where(np.isposinf(logits), 1e300, logits)
            seen = np.where(np.isposinf(seen), 0.0, seen)
        if not np.isfinite(seen).all():  # spec 4.4: NaN, and NaN in the active frames
            grad = np.full(logits.shape, np.nan)
            return np.nan, grad
        log_p = self._log_softmax(logits)
        if target.size == 0 and self.broken("empty_target_zero"):
            return 0.0, np.zeros(logits.shape)
        classes, stay, skip = lattice(target.astype(np.int64), blank, merge)
        if self.broken("skip_between_repeats"):
            skip[3::2] = True
        emission = log_p[:, classes]
        alpha = forward(emission, stay, skip)
        final = alpha[-1, -1:] if self.broken("final_blank_only") else alpha[-1, max(0, len(classes) - 2) :]
        log_likelihood = float(np.logaddexp.reduce(final))
        if log_likelihood == -np.inf:
            return self._infeasible(log_p)
        grad = gradient(log_p, classes, alpha, backward(emission, stay, skip))
        if self.broken("gradient_sign"):
            grad = -grad
        if self.broken("loss_is_the_log_likelihood"):
            return log_likelihood, grad
        return max(0.0, -log_likelihood), grad

    def _log_softmax(self, logits: np.ndarray) -> np.ndarray:
        """Spec 4.1: ``ln p`` over exactly the C classes, shifted by each frame's maximum."""
        if self.broken("softmax_in_float32"):
            logits = logits.astype(np.float32)
        if self.broken("softmax_without_shift"):
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return np.asarray(logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)), dtype=np.float64)
        top = logits.max(axis=1, keepdims=True) if logits.size else np.zeros((len(logits), 1))
        terms = np.exp(logits - top)
        if self.broken("softmax_without_the_last_class"):
            terms = terms[:, :-1]
        total = terms.sum(axis=1, keepdims=True)
        if self.broken("softmax_one_term_too_many"):
            total = total + np.exp(-top)  # the seed's bound read literally: a class of logit 0 more
        with np.errstate(divide="ignore"):
            return np.asarray((logits - top) - np.log(total), dtype=np.float64)

    def _infeasible(self, log_p: np.ndarray) -> tuple[float, np.ndarray]:
        """Spec 4.4 and 5: no aligned path, +inf and a zero gradient."""
        if self.broken("infeasible_zero"):
            return 0.0, np.zeros(log_p.shape)
        if self.broken("infeasible_finite"):
            return -len(log_p) * np.log(TINY), np.zeros(log_p.shape)
        if self.broken("infeasible_gradient_nan"):
            return np.inf, np.full(log_p.shape, np.nan)
        if self.broken("infeasible_gradient_softmax"):
            return np.inf, np.exp(log_p)
        return np.inf, np.zeros(log_p.shape)

    def _typed(self, values: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Computed in float64, rounded once to the logits' type (spec 6)."""
        if self.broken("overflow_saturates") and dtype.kind == "f":
            largest = float(np.finfo(dtype).max)  # float16, float32, float64: bfloat16's kind is not "f"
            values = np.where(np.isposinf(values), values, np.minimum(values, largest))
            return np.asarray(values).astype(dtype)
        with np.errstate(over="ignore"):
            return np.asarray(values).astype(dtype)


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal adjacent values starts."""
    if values.size == 0:
        return np.zeros(0, dtype=bool)
    return np.concatenate(([True], values[1:] != values[:-1]))


def _flip_a_last_bit(loss: np.ndarray) -> None:
    """The last bit of one finite loss, chosen at random (a different one from run to run)."""
    finite = np.flatnonzero(np.isfinite(loss) & (loss != 0))
    if finite.size:
        bits = loss.view(np.dtype(f"u{loss.dtype.itemsize}"))
        bits[finite[int.from_bytes(os.urandom(2), "little") % finite.size]] ^= 1
