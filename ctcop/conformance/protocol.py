"""The runtime protocol of the conformance suite: what every runtime adapter implements.

A runtime is any object with a ``name`` (str), a ``description`` (str) and a method ``run(case) ->
Outcome | numpy.ndarray``. ``case`` is a :class:`ctcop.conformance.corpus.Case`: ``case.form`` is
``"spec"`` (inputs ``inputs`` [T, N, C], ``sequence_mask`` [T, N], ``labels`` [N, T]) or
``"released"`` (``logits`` [N, T, C], ``logit_length`` [N], ``labels`` [N, T], ``label_length`` [N],
optional scalar ``blank_index``); ``case.inputs`` maps those names to arrays, fresh read-only copies
for each call (a runtime copies one before writing into it: writing raises numpy's ``ValueError``,
the runtime's ``error``), and ``case.attributes`` holds the form's boolean attributes. ``run``
returns the [N] loss or an :class:`Outcome`. A case outside the runtime's semantics raises
:class:`Unsupported` (a ``skip``); any other exception (``KeyboardInterrupt`` and ``SystemExit``
included), and an answer that is not numeric arrays, is the runtime's ``error``. For ``expect ==
"reject"`` cases a clean exception is the conforming answer. Adapters convert layouts only: they
never repair a result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class Unsupported(Exception):
    """The runtime does not implement what the case asks for (the message says what); the case is
    then a ``skip``."""


@dataclass(frozen=True)
class Outcome:
    """A runtime's answer for one case: the [N] loss and, for a runtime that can differentiate,
    d loss / d logits in the logits' layout."""

    loss: np.ndarray
    grad: np.ndarray | None = None


def outcome(value: Outcome | np.ndarray) -> Outcome:
    """A runtime's return value as an :class:`Outcome` (a bare array is the loss)."""
    if isinstance(value, Outcome):
        return value
    return Outcome(np.asarray(value))
