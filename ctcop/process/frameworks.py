"""Training frameworks and runtimes imported by name on first use.

The conformance peers (:mod:`ctcop.conformance.peers`) and the bench (:mod:`ctcop.bench`) call
PyTorch, TensorFlow, JAX / optax, onnxruntime and OpenVINO through :func:`framework`, so that
importing them loads numpy only and mypy neither needs the frameworks' stubs (tensorflow ships
none) nor analyses them (torch and jax are typed but huge): their objects are ``Any``.
:func:`missing` says which are not installed without importing any, :func:`versions` which
versions of a list of distributions are installed (for reports).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any


def framework(name: str) -> Any:
    """The module ``name`` (imported on first use)."""
    return importlib.import_module(name)


def missing(*modules: str) -> str | None:
    """None when every module is importable, else the reason (without importing anything)."""
    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    return f"{', '.join(absent)} not installed" if absent else None


def versions(distributions: Iterable[str]) -> dict[str, str]:
    """The installed version of each of ``distributions`` (those not installed left out)."""
    found = {}
    for distribution in distributions:
        try:
            found[distribution] = version(distribution)
        except PackageNotFoundError:
            continue
    return found
