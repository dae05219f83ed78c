"""A small acoustic model whose forward returns CTC losses, and batches for it (tests of ctcop.torch).

``LossModel`` runs features [N, F, T] through Conv1d + ReLU + Linear + log_softmax to
log-probabilities [T, N, C] and returns one loss per configuration of ``CONFIGS`` (every reduction,
zero_infinity on and off, blank 0 and C-1; through ``F.ctc_loss``, ``nn.CTCLoss``,
``torch.ctc_loss`` and ctcop's drop-in ``CTCLoss``), plus PyTorch's loss of the raw Linear output
(unnormalised log-probabilities) and of log-probabilities with -inf entries. One export covers
them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import ctcop.torch

FEATURES, HIDDEN, CLASSES = 8, 16, 6
INPUT_NAMES = ("features", "targets", "input_lengths", "target_lengths")


@dataclass(frozen=True)
class Config:
    """One ctc_loss call: its static arguments and how the model calls it."""

    blank: int
    reduction: str
    zero_infinity: bool
    call: str = "functional"  # functional | module | native | ctcop | raw | masked

    @property
    def name(self) -> str:
        return f"{self.call}_blank{self.blank}_{self.reduction}_zi{int(self.zero_infinity)}"


CALLS = ("functional", "module", "native", "ctcop")
CONFIGS = (
    *(
        Config(blank, reduction, zero_infinity, CALLS[k % len(CALLS)])
        for k, (blank, reduction, zero_infinity) in enumerate(
            (blank, reduction, zero_infinity)
            for blank in (0, CLASSES - 1)
            for reduction in ("none", "sum", "mean")
            for zero_infinity in (False, True)
        )
    ),
    Config(0, "none", False, "raw"),
    Config(CLASSES - 1, "none", False, "masked"),
)
# Every reduction, zero_infinity on and off, both blanks and every kind of call, in six losses.
FEW_CONFIGS = (*(CONFIGS[k] for k in (1, 2, 7, 10)), *CONFIGS[-2:])


class AcousticModel(nn.Module):
    """features [N, F, T] -> scores [T, N, C] (Conv1d, ReLU, Linear)."""

    def __init__(self, features: int = FEATURES, hidden: int = HIDDEN, classes: int = CLASSES) -> None:
        super().__init__()
        self.conv = nn.Conv1d(features, hidden, kernel_size=3, padding=1)
        self.linear = nn.Linear(hidden, classes)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.conv(features)).permute(2, 0, 1)
        scores: torch.Tensor = self.linear(hidden)
        return scores


def log_probs_for(config: Config, scores: torch.Tensor) -> torch.Tensor:
    """What ``config``'s call gets as log-probabilities: log_softmax of the scores, the raw
    scores (unnormalised), or log_softmax with -inf below each frame's mean (some paths dead)."""
    if config.call == "raw":
        return scores
    log_probs = F.log_softmax(scores, dim=-1)
    if config.call == "masked":
        return log_probs.masked_fill(log_probs < log_probs.mean(-1, keepdim=True) - 0.05, float("-inf"))
    return log_probs


def _loss(
    config: Config, scores: torch.Tensor, targets: torch.Tensor, lengths: tuple[torch.Tensor, ...]
) -> torch.Tensor:
    log_probs = log_probs_for(config, scores)
    arguments = (log_probs, targets, *lengths)
    if config.call == "module":
        return nn.CTCLoss(config.blank, config.reduction, config.zero_infinity)(*arguments)
    if config.call == "native":
        reduction = ("none", "mean", "sum").index(config.reduction)
        return torch.ctc_loss(*arguments, config.blank, reduction, config.zero_infinity)
    if config.call == "ctcop":
        return ctcop.torch.CTCLoss(config.blank, config.reduction, config.zero_infinity)(*arguments)
    return F.ctc_loss(*arguments, config.blank, config.reduction, config.zero_infinity)


class LossModel(nn.Module):
    """forward(features, targets, input_lengths, target_lengths) -> one loss per config."""

    def __init__(self, configs: tuple[Config, ...] = CONFIGS, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.acoustic = AcousticModel()
        self.configs = configs

    def forward(
        self, features: torch.Tensor, targets: torch.Tensor, input_lengths: torch.Tensor, target_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        scores = self.acoustic(features)
        lengths = (input_lengths, target_lengths)
        return tuple(_loss(config, scores, targets, lengths) for config in self.configs)


@dataclass(frozen=True)
class Batch:
    """Inputs of LossModel as numpy arrays, in INPUT_NAMES order."""

    features: np.ndarray
    targets: np.ndarray
    input_lengths: np.ndarray
    target_lengths: np.ndarray

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.features, self.targets, self.input_lengths, self.target_lengths)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(torch.from_numpy(a) for a in self.arrays())

    def feeds(self) -> dict[str, np.ndarray]:
        return dict(zip(INPUT_NAMES, self.arrays(), strict=True))


def batch(seed: int, n: int, frames: int, concatenated: bool, longest: int = 5) -> Batch:
    """A random batch: variable lengths (one full-length sample), targets of classes 1..C-2 (no
    blank of either config), sample 0 an empty target, sample 1 an infeasible one (a target longer
    than its frames), repeats allowed."""
    rng = np.random.default_rng(seed)
    input_lengths = rng.integers(max(1, frames // 2), frames + 1, size=n)
    input_lengths[-1] = frames
    target_lengths = np.minimum(rng.integers(1, longest + 1, size=n), input_lengths // 2)
    target_lengths[0] = 0
    if n > 1:
        input_lengths[1], target_lengths[1] = 2, 3
    padded = rng.integers(1, CLASSES - 1, size=(n, longest))
    targets = np.concatenate([padded[i, : target_lengths[i]] for i in range(n)]) if concatenated else padded
    features = rng.normal(size=(n, FEATURES, frames)).astype(np.float32)
    return Batch(features, targets.astype(np.int64), input_lengths.astype(np.int64), target_lengths.astype(np.int64))
