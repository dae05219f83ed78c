"""The wheel carries the compiled kernels (docs/design.md, "First call"): built from this checkout
and installed into a fresh folder, the package computes the same bits as the checkout without
compiling anything and without loading numba's compiler registries (numpy's linear algebra, SciPy),
and a kernel whose source changed is compiled instead of loaded."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# Loss and gradient of one float32 and one float64 problem, printed as hex bits, then whether
# numba loaded its implementation registries (a compilation does; a load from the cache need not).
PROGRAM = """
import sys
import numpy as np, ctcop
rng = np.random.default_rng(7)
for dtype in (np.float32, np.float64):
    logits = rng.standard_normal((6, 3, 5)).astype(dtype)
    mask = np.ones((6, 3), dtype=bool)
    labels = np.array([[0, 1, -1, -1, -1, -1], [2, 2, -1, -1, -1, -1], [-1] * 6])
    loss, grad = ctcop.ctc_loss_grad(logits, mask, labels)
    print(ctcop.ctc_loss(logits, mask, labels).tobytes().hex(), loss.tobytes().hex(), grad.tobytes().hex())
print("[registries]", "numba.np.arraymath" in sys.modules)
"""


def _without_cache_dir() -> dict[str, str]:
    """This process's environment without NUMBA_CACHE_DIR, so numba caches beside the sources."""
    return {name: value for name, value in os.environ.items() if name != "NUMBA_CACHE_DIR"}


@functools.cache
def _expected() -> str:
    """The program's values as this checkout computes them, in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(PROGRAM, {})
    return _values(out.getvalue())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built into a wheel from this checkout and installed into a fresh folder."""
    folder = tmp_path_factory.mktemp("wheel")
    env = _without_cache_dir()
    # pip's isolated build, as `pip install .` does it: the build environment has only the build
    # requirements (pyproject.toml), fetched from the package index
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(folder)]
    subprocess.run([*build, str(ROOT)], check=True, env=env, cwd=folder)
    (wheel,) = folder.glob("ctcop-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        cached = [name for name in archive.namelist() if name.startswith("ctcop/__pycache__/kernels.")]
    assert any(name.endswith(".nbi") for name in cached) and any(name.endswith(".nbc") for name in cached)
    target = folder / "site"
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)]
    subprocess.run(install, check=True, env=env, cwd=folder)
    return target


# numba with its private loader under another name, its own load_overload reading through it: the
# package must load through numba's own load there (and not treat every entry as unreadable)
WITHOUT_PRIVATE_LOADER = """
import numba.core.caching as caching
private = caching.Cache._load_overload
del caching.Cache._load_overload
def load_overload(self, sig, target_context):
    target_context.refresh()
    return private(self, sig, target_context)
caching.Cache.load_overload = load_overload
"""


def _values(stdout: str) -> str:
    """The program's hex lines, without numba's cache messages and the registries' line."""
    return "".join(line + "\n" for line in stdout.splitlines() if not line.startswith("["))


def _loads_and_compiles_nothing(done: subprocess.CompletedProcess[str]) -> None:
    debug = [line for line in done.stdout.splitlines() if line.startswith("[cache]")]
    assert [line for line in debug if "data loaded" in line]
    assert not [line for line in debug if "data saved" in line]


def _run(target: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    env = _without_cache_dir()
    env.update(PYTHONPATH=str(target), NUMBA_DEBUG_CACHE="1", PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-c", prelude + PROGRAM]
    return subprocess.run(command, env=env, cwd=target, capture_output=True, text=True, check=True, timeout=600)


def test_installed_wheel_loads_its_kernels_and_compiles_nothing(installed: Path) -> None:
    done = _run(installed)
    _loads_and_compiles_nothing(done)
    assert "[registries] False" in done.stdout.splitlines()
    assert _values(done.stdout) == _expected()


def test_a_changed_source_is_compiled_not_loaded(installed: Path, tmp_path: Path) -> None:
    # logexp.py's functions are inlined into the kernels of kernels.py: a change to it (any core
    # module) compiles those kernels anew, though numba keys each by its own file only.
    copy = tmp_path / "site"
    shutil.copytree(installed, copy)
    inlined = copy / "ctcop" / "logexp.py"
    inlined.write_text(inlined.read_text() + "\n# changed\n")
    done = _run(copy)
    assert [line for line in done.stdout.splitlines() if "data saved" in line and "kernels." in line]
    assert "[registries] True" in done.stdout.splitlines()
    assert _values(done.stdout) == _expected()


def test_a_numba_without_the_private_loader_loads_through_its_own(installed: Path) -> None:
    done = _run(installed, WITHOUT_PRIVATE_LOADER)
    _loads_and_compiles_nothing(done)
    assert "[registries] True" in done.stdout.splitlines()  # numba's own load refreshes the contexts
    assert _values(done.stdout) == _expected()
