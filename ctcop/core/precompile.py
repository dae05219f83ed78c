"""The core's compiled kernels, compiled once so that numba's on-disk cache holds them.

``python -m ctcop.core.precompile`` makes the calls a user meets first — :func:`ctcop.ctc_loss`,
:func:`ctcop.ctc_loss_grad`, :func:`ctcop.ctc_loss_or_nan`, both released-form functions and
:func:`ctcop.greedy_decode` — for every logits dtype (float16, float32, float64) and every label and
length type (int32, int64) the spec admits (sections 2 and 7), on one sample and on a batch
computed in lanes. numba saves what they compile next to the sources (``ctcop/core/__pycache__``,
or under ``NUMBA_CACHE_DIR``), so later processes load the kernels instead of compiling them on
their first call. It is a warm-up to run where a first call must be quick (an image, a service);
numba reads a cache entry only where numba's version, Python's version and the CPU match, and
compiles and saves as usual anywhere else.
"""

from __future__ import annotations

import numpy as np

from ..decode import greedy_decode
from ..reference import ctc_loss, ctc_loss_grad, ctc_loss_or_nan, openvino_ctc_loss, openvino_ctc_loss_grad
from .lanes import LANES

LOGITS_TYPES = (np.float16, np.float32, np.float64)
INDEX_TYPES = (np.int32, np.int64)
# [T, N, C]: one sample (the one-sample kernels), and LANES samples of one shape (the loss in lanes)
SHAPES = ((3, 1, 4), (3, LANES, 4))


def _ramp(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Logits of ``shape`` and ``dtype``, rising evenly from -2 to 2."""
    return np.linspace(-2.0, 2.0, int(np.prod(shape))).reshape(shape).astype(dtype)


def _time_major(shape: tuple[int, int, int], logits_type: type, index_type: type) -> None:
    """Every time-major entry point on one problem of ``shape`` (spec section 2)."""
    steps, batch = shape[:2]
    logits = _ramp(shape, logits_type)
    mask = np.ones((steps, batch), dtype=bool)
    labels: np.ndarray = np.full((batch, steps), -1, dtype=index_type)
    labels[:, 0] = 0
    labels[:, 1] = 1
    for merge in (True, False):
        ctc_loss(logits, mask, labels, merge_repeated=merge)
        ctc_loss_grad(logits, mask, labels, merge_repeated=merge)
    ctc_loss_or_nan(logits, mask, labels)
    greedy_decode(logits, mask)


def _released(shape: tuple[int, int, int], logits_type: type, index_type: type) -> None:
    """Both released-form entry points (spec section 7) on one problem of ``shape``."""
    steps, batch, classes = shape
    logits = _ramp((batch, steps, classes), logits_type)
    lengths: np.ndarray = np.full(batch, steps, dtype=index_type)
    labels: np.ndarray = np.zeros((batch, steps), dtype=index_type)
    labels[:, 1] = 1
    label_lengths: np.ndarray = np.full(batch, 2, dtype=index_type)
    openvino_ctc_loss(logits, lengths, labels, label_lengths)
    openvino_ctc_loss_grad(logits, lengths, labels, label_lengths)


def precompile() -> None:
    """Make every call of this module's list once, so numba compiles and caches every kernel."""
    for shape in SHAPES:
        for logits_type in LOGITS_TYPES:
            for index_type in INDEX_TYPES:
                _time_major(shape, logits_type, index_type)
                _released(shape, logits_type, index_type)


if __name__ == "__main__":
    precompile()
