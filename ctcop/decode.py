"""Best-path (greedy) decoding of time-major logits (spec/ctcloss4.md, section 8)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .attributes import flag
from .canonical import time_major_frames
from .errors import InvalidInputError, refusing_memory_errors


@refusing_memory_errors("inputs")
def greedy_decode(inputs: npt.ArrayLike, sequence_mask: npt.ArrayLike, *, merge_repeated: bool = True) -> np.ndarray:
    """Labels [N, T] int64 padded with -1: per active frame the arg-max class (lowest index on
    ties), repeats merged when ``merge_repeated``, blanks (class C-1) dropped.

    A NaN in an active frame has no arg-max and raises :class:`ctcop.InvalidInputError`.
    """
    logits, lengths = time_major_frames(inputs, sequence_mask)
    merge_repeated = flag(merge_repeated, "merge_repeated")
    frames, n, classes = logits.shape
    active = np.arange(frames)[:, None] < lengths[None, :]
    nan = np.isnan(logits).any(axis=2) & active
    if nan.any():
        t, i = (int(v) for v in np.argwhere(nan)[0])
        raise InvalidInputError("inputs", "NaN in an active frame has no arg-max (rule 8)", (t, i))
    best = logits.argmax(axis=2).T if frames else np.zeros((n, 0), dtype=np.int64)
    keep = active.T & (best != classes - 1)
    if merge_repeated:
        keep[:, 1:] &= best[:, 1:] != best[:, :-1]
    out = np.full((n, frames), -1, dtype=np.int64)
    order = np.argsort(~keep, axis=1, kind="stable")
    counts = keep.sum(axis=1)
    filled = np.arange(frames)[None, :] < counts[:, None]
    out[filled] = np.take_along_axis(best, order, axis=1)[filled]
    return out
