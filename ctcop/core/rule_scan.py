"""Rules 3.1 and 3.3 of spec/ctcloss4.md over a whole time-major batch, in one compiled pass.

:func:`ctcop.canonical.from_time_major` hands the mask and the labels (as int64) to
:func:`time_major_scan`, which finds the first fault in the order in which the rules are read
(labels, then mask values, then gaps in a mask column, each in row-major order) and, when there is
none, writes the frame counts and the processed targets (spec 3.2, 3.4) that the recursion reads.
:mod:`ctcop.canonical` turns a fault into its message; this module holds no text.
"""

from __future__ import annotations

import numpy as np

from .jit import entry

LABEL = 1  # a label that is neither the pad -1 nor a class in [0, C-2] (rule 3.3), at [i, j]
MASK_VALUE = 2  # a mask value other than 0 and 1 (rule 3.1), at [t, i]
MASK_GAP = 3  # a 1 after a 0 in a mask column (rule 3.1), the 1 at [t, i]


@entry
def time_major_scan(
    mask: np.ndarray,
    labels: np.ndarray,
    classes: int,
    collapse: bool,
    lengths: np.ndarray,
    targets: np.ndarray,
    target_lengths: np.ndarray,
    fault: np.ndarray,
) -> int:
    """``mask`` [T, N] and ``labels`` [N, T] (int64) checked: ``fault`` [3] = (kind, row, column)
    of the first fault (kind 0: none). When there is none, ``lengths`` [N] holds the frame
    counts, ``targets[i, :target_lengths[i]]`` the target with pads removed and, if ``collapse``,
    runs merged, and the rest of ``targets`` [N, T] the blank C-1. Returns the longest target."""
    frames, samples = mask.shape
    fault[0] = 0
    for i in range(samples):
        for j in range(frames):
            value = labels[i, j]
            if value != -1 and not 0 <= value < classes - 1:
                fault[0], fault[1], fault[2] = LABEL, i, j
                return 0
    for t in range(frames):
        for i in range(samples):
            if mask[t, i] != 0 and mask[t, i] != 1:
                fault[0], fault[1], fault[2] = MASK_VALUE, t, i
                return 0
    for t in range(1, frames):
        for i in range(samples):
            if mask[t, i] > mask[t - 1, i]:
                fault[0], fault[1], fault[2] = MASK_GAP, t, i
                return 0
    for i in range(samples):
        lengths[i] = 0
    for t in range(frames):
        for i in range(samples):
            lengths[i] += mask[t, i]
    longest = 0
    for i in range(samples):
        kept = 0
        for j in range(frames):
            value = labels[i, j]
            if value != -1 and not (collapse and kept > 0 and targets[i, kept - 1] == value):
                targets[i, kept] = value
                kept += 1
        target_lengths[i] = kept
        longest = max(longest, kept)
        for j in range(kept, frames):
            targets[i, j] = classes - 1
    return longest
