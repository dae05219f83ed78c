"""Deliberately wrong runtimes for the runner's tests
(``--runtime-module tests/support/bad_runtimes.py:BAD``).

Each follows the protocol of :mod:`ctcop.conformance.protocol` on spec-form cases (released-form
cases are :class:`Unsupported`) and is wrong in one known way.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ctcop import ctc_loss, ctc_loss_grad
from ctcop.conformance.protocol import Outcome, Unsupported


def _spec(case: Any) -> dict[str, np.ndarray]:
    if case.form != "spec":
        raise Unsupported("spec form only")
    return case.inputs


def _reference(case: Any, inputs: np.ndarray | None = None) -> np.ndarray:
    x = _spec(case)
    return ctc_loss(x["inputs"] if inputs is None else inputs, x["sequence_mask"], x["labels"], **case.attributes)


@dataclass(frozen=True)
class BlankOffByOne:
    """Reads the blank from class C-2 (its logits rolled by one class)."""

    name: str = "blank-off-by-one"
    description: str = "the blank read from the wrong class"

    def run(self, case: Any) -> np.ndarray:
        return _reference(case, np.roll(_spec(case)["inputs"], 1, axis=-1))


@dataclass(frozen=True)
class Probabilities:
    """Returns the likelihood p instead of -ln p."""

    name: str = "probabilities"
    description: str = "probabilities instead of log space"

    def run(self, case: Any) -> np.ndarray:
        with np.errstate(over="ignore"):
            return np.exp(-_reference(case))


@dataclass(frozen=True)
class Abort:
    """The reference, but the process aborts on a case with an empty target row."""

    name: str = "abort"
    description: str = "os.abort() on empty targets"

    def run(self, case: Any) -> np.ndarray:
        labels = _spec(case)["labels"]
        if labels.size and (labels == -1).all(axis=-1).any():
            os.abort()
        return _reference(case)


_CORRUPTED = [False]  # what Corrupting's "write outside its buffers" left in its process


@dataclass(frozen=True)
class Corrupting:
    """The reference, but a case with an empty target row corrupts the process without killing it:
    every later evaluation in that process is off by one."""

    name: str = "corrupting"
    description: str = "corrupts its process on empty targets"

    def run(self, case: Any) -> np.ndarray:
        labels = _spec(case)["labels"]
        if labels.size and (labels == -1).all(axis=-1).any():
            _CORRUPTED[0] = True
            return _reference(case)
        return _reference(case) + (1.0 if _CORRUPTED[0] else 0.0)


@dataclass(frozen=True)
class Noise:
    """Random noise, different at each call."""

    name: str = "noise"
    description: str = "random numbers"

    def run(self, case: Any) -> np.ndarray:
        return np.random.default_rng().normal(size=_spec(case)["labels"].shape[0])


@dataclass(frozen=True)
class Sleepy:
    """Never answers: waits forever, whatever the timeout and the machine's speed."""

    name: str = "sleepy"
    description: str = "sleeps forever"

    def run(self, case: Any) -> np.ndarray:
        threading.Event().wait()
        return _reference(case)


@dataclass(frozen=True)
class BadGradient:
    """The right loss with a gradient off by 0.01 everywhere."""

    name: str = "bad-gradient"
    description: str = "a wrong gradient"

    def run(self, case: Any) -> Outcome:
        x = _spec(case)
        loss, grad = ctc_loss_grad(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)
        return Outcome(loss, grad + np.asarray(0.01, grad.dtype))


@dataclass(frozen=True)
class NotInstalled:
    name: str = "not-installed"
    description: str = "a runtime whose library is missing"

    def available(self) -> str | None:
        return "nosuchlib not installed"

    def run(self, case: Any) -> np.ndarray:
        raise AssertionError("must not run")


BAD = [BlankOffByOne(), Probabilities(), Abort(), Noise(), Sleepy(), BadGradient(), NotInstalled(), Corrupting()]


def make() -> list[Any]:
    """The zero-argument callable form."""
    return [Noise()]


# -- runtimes that misbehave towards the runner itself -------------------------------------------


@dataclass(frozen=True)
class Careless:
    """The right loss, then it "cleans up" its inputs in place (the padding of labels made 0)."""

    name: str = "careless"
    description: str = "writes into the inputs it was handed"

    def run(self, case: Any) -> np.ndarray:
        loss = _reference(case)
        labels = _spec(case)["labels"]
        labels[labels == -1] = 0
        return loss


class NotAnArray:
    """What a tensor that refuses numpy conversion looks like (torch's, when it requires grad)."""

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")


@dataclass(frozen=True)
class RequiresGrad:
    name: str = "requires-grad"
    description: str = "answers an object that numpy cannot convert"

    def run(self, case: Any) -> Outcome:
        _spec(case)
        return Outcome(NotAnArray())  # type: ignore[arg-type]


@dataclass(frozen=True)
class Interrupting:
    name: str = "interrupting"
    description: str = "raises KeyboardInterrupt"

    def run(self, case: Any) -> np.ndarray:
        _spec(case)
        raise KeyboardInterrupt


@dataclass(frozen=True)
class Exiting:
    name: str = "exiting"
    description: str = "raises SystemExit"

    def run(self, case: Any) -> np.ndarray:
        _spec(case)
        raise SystemExit(3)


@dataclass(frozen=True)
class Objects:
    name: str = "objects"
    description: str = "the right numbers in an object array"

    def run(self, case: Any) -> np.ndarray:
        return np.array(list(_reference(case)), dtype=object)


class BrokenDescription:
    name = "broken-description"

    @property
    def description(self) -> str:
        raise RuntimeError("no description today")

    def run(self, case: Any) -> np.ndarray:
        return _reference(case)


class ExitingAvailable:
    name = "exiting-available"
    description = "available() calls sys.exit(3)"

    def available(self) -> str | None:
        raise SystemExit(3)

    def run(self, case: Any) -> np.ndarray:
        return _reference(case)


HOSTILE = [Careless()]
MISANSWERING = [RequiresGrad(), Interrupting(), Exiting(), Objects()]
BROKEN_LISTING = [BrokenDescription(), ExitingAvailable()]
