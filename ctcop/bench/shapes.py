"""The shapes ``ctcop bench`` times and the inputs it draws for them.

warp-ctc's benchmark (seed 001): T = 150 frames, (L = 40 labels, C = 28 classes) and (L = 20,
C = 5000), minibatches N = 1, 16, 32, 64, 128. The TensorFlow.js write-up (seed 000): a batch
sweep on a small [T = 5, C = 11] problem with N = 1, 2, 4, ..., 1024; its label length is not
given, so ctcop uses L = 2 (feasible with room for a repeated label). ``--quick`` keeps a few
batch sizes of each. Every frame is active and every target has exactly L labels drawn
uniformly from the non-blank classes, so every target is feasible (L plus its repeats <= T).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEED = 0


@dataclass(frozen=True)
class Shape:
    """A [T, C] problem with L labels per target, timed at each of ``batches``."""

    name: str
    frames: int
    length: int
    classes: int
    batches: tuple[int, ...]

    @property
    def title(self) -> str:
        return f"T={self.frames} L={self.length} C={self.classes}"

    def logits_bytes(self, batch: int) -> int:
        """Bytes of the float32 [T, N, C] logits at ``batch``."""
        return 4 * self.frames * batch * self.classes

    def with_batches(self, batches: tuple[int, ...]) -> Shape:
        return Shape(self.name, self.frames, self.length, self.classes, batches)


WARP_CTC_BATCHES = (1, 16, 32, 64, 128)
SWEEP_BATCHES = tuple(2**k for k in range(11))

FULL = (
    Shape("warp-ctc-c28", 150, 40, 28, WARP_CTC_BATCHES),
    Shape("warp-ctc-c5000", 150, 20, 5000, WARP_CTC_BATCHES),
    Shape("seed000-sweep", 5, 2, 11, SWEEP_BATCHES),
)
QUICK = (
    FULL[0].with_batches((1, 16)),
    FULL[1].with_batches((1, 16)),
    FULL[2].with_batches((1, 32, 1024)),
)


@dataclass(frozen=True)
class Inputs:
    """The spec form's inputs: float32 logits [T, N, C], int32 mask [T, N], int64 labels [N, T]."""

    logits: np.ndarray
    mask: np.ndarray
    labels: np.ndarray


def draw(shape: Shape, batch: int, seed: int = SEED) -> Inputs:
    """Standard normal logits, every frame active, targets of exactly ``shape.length`` labels."""
    rng = np.random.default_rng([seed, shape.frames, shape.classes, batch])
    logits = rng.standard_normal(size=(shape.frames, batch, shape.classes), dtype=np.float32)
    mask = np.ones((shape.frames, batch), dtype=np.int32)
    labels = np.full((batch, shape.frames), -1, dtype=np.int64)
    labels[:, : shape.length] = rng.integers(0, shape.classes - 1, size=(batch, shape.length))
    return Inputs(logits, mask, labels)
