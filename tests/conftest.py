import contextlib
import hashlib
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# numba keys a cached kernel by its own source file only, while a kernel links the functions it
# calls from the other modules of ctcop/core: the tests compile into a cache named by the digest
# of every core source, so an edit to any of them is compiled, never met with stale machine code
# (set before numba is imported here or in a child process, which inherits it).
_CORE = sorted((Path(__file__).parents[1] / "ctcop" / "core").glob("*.py"))
_DIGEST = hashlib.sha256(b"".join(path.read_bytes() for path in _CORE)).hexdigest()[:16]
os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(tempfile.gettempdir(), f"ctcop-numba-{_DIGEST}"))

# TensorFlow 2.21 and Triton (torch's dependency, imported by torch.export) segfault in one process
# when Triton is imported second; tests/integration/tf/test_peers_tf.py imports TensorFlow before
# tests/integration/torch/test_torch_export.py exports, so Triton is loaded first here when it is
# installed.
with contextlib.suppress(ImportError):
    import triton.runtime.autotuner  # noqa: F401

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
# The fuzz set's long profile (tests/support/fuzz_strategies.py holds each fuzz test's budget in
# both): random seeds, so that every long run explores new inputs; a failure prints the blob to
# replay it.
settings.register_profile(
    "fuzz-long",
    max_examples=1000,
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


def selects_fuzz_only(markexpr: str) -> bool:
    """``-m fuzz`` (or an expression naming fuzz other than ``not fuzz``)."""
    return bool(re.search(r"\bfuzz\b", markexpr)) and not re.search(r"\bnot\s+fuzz\b", markexpr)


def pytest_configure(config: pytest.Config) -> None:
    """The long fuzz profile for ``pytest -m fuzz`` or ``CTCOP_FUZZ=long``; bounded otherwise.

    Runs before the test modules are imported, so tests/support/fuzz_strategies.py reads the
    choice from the environment when it is first imported.
    """
    if selects_fuzz_only(config.getoption("markexpr", "") or ""):
        os.environ["CTCOP_FUZZ"] = "long"
    if os.environ.get("CTCOP_FUZZ") == "long":
        settings.load_profile("fuzz-long")


TIERS = ("unit", "integration", "system")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's tier is its folder: ``unit``, ``integration`` (and its framework's subfolder:
    ``torch``, ``tf``, ``jax``, ``paddle``) or ``system``. ``slow`` is every tier but unit, so the
    quick loop ``-m "not slow"`` is the unit tier."""
    for item in items:
        parts = item.path.relative_to(Path(__file__).parent).parts
        tier = parts[0]
        assert tier in TIERS, f"{item.nodeid}: a test module belongs in one of the tier folders {TIERS}"
        item.add_marker(tier)
        if tier != "unit":
            item.add_marker("slow")
        if tier == "integration":
            item.add_marker(parts[1])


@pytest.fixture
def every_batch_threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of any size go to the core's thread pool (below ``PARALLEL_WORK`` a batch otherwise
    runs on the calling thread), so that a test of the threads reaches them."""
    from ctcop.core import scheduler

    monkeypatch.setattr(scheduler, "PARALLEL_WORK", 0)
