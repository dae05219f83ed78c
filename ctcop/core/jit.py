"""numba's two ways of compiling the core's kernels, typed for mypy.

Both cache what they compile on disk (numba's own ``cache=True``: next to the sources, or under
``NUMBA_CACHE_DIR``), release the GIL, and use numpy's error model (a division by zero gives inf
or NaN, as in numpy, instead of raising). ``python -m ctcop.core.precompile`` fills the cache ahead
of a first call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., Any])


def compiled(function: F) -> F:
    """numba's ``njit`` for a function called only from compiled code: without the wrappers that
    would make it callable from Python."""
    options: dict[str, Any] = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy", **options)(function))


def entry(function: F) -> F:
    """numba's ``njit`` for a kernel called from Python."""
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(function))
