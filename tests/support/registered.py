"""Tests of upstream defects against the registry (ctcop/data/defects.json).

``reproduces(defect_id, shown)`` is how a test states that a registered defect still shows: on
the version the registry was measured on it must (the test fails otherwise: the registry or the
test is wrong); on another installed version a defect that no longer shows is a re-measure
warning, not a failure, so a newer upstream release cannot turn CI red by fixing something.
"""

from __future__ import annotations

import warnings

import pytest

from ctcop.defects import defect, remeasure_note


class ReMeasure(UserWarning):
    """A registered defect does not reproduce on the installed (newer or older) version."""


def reproduces(defect_id: str, shown: bool, detail: str = "") -> bool:
    """Whether ``defect_id`` showed (``shown``); fails on the measured version when it did not,
    warns :class:`ReMeasure` on another version. The result lets a test skip what follows from
    the defect (a guard's comparison still runs)."""
    entry = defect(defect_id)
    if shown:
        return True
    installed = entry.library.installed()
    note = remeasure_note(entry, detail)
    if installed == entry.library.measured:
        pytest.fail(
            f"{defect_id} does not reproduce on {entry.library.name} {installed}, the version it was measured on"
        )
    warnings.warn(note, ReMeasure, stacklevel=2)
    return False
