"""Where frame ``t`` of sample ``i`` lives in the two layouts of the op (spec sections 2 and 7).

The spec's form holds logits time-major ([T, N, C], time axis 0), the released form batch-major
([N, T, C], time axis 1). The recursion core reads, and writes gradients, through
:func:`time_major_view` so it never copies the caller's logits into the other layout. Core module.
"""

from __future__ import annotations

import numpy as np


def time_major_view(array: np.ndarray, time_axis: int, start: int, stop: int) -> np.ndarray:
    """Frames ``start:stop`` of a [T, N, C] (``time_axis`` 0) or [N, T, C] array, as a [stop-start,
    N, C] view (writable when ``array`` is)."""
    if time_axis == 0:
        return array[start:stop]
    return array[:, start:stop].transpose(1, 0, 2)
