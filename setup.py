"""The wheel carries numba's cache of the core's compiled kernels (docs/design.md, "First call").

After setuptools has copied the package into its build directory, ``python -m ctcop.precompile``
runs on that copy, so numba compiles the kernels into ``ctcop/__pycache__`` there and the wheel
holds them; an installed package then loads them on its first call instead of compiling. Where that
cannot run (numba missing from the build environment, an unusual platform) the wheel is built
without the cache and the kernels compile on first use, as they would anyway.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKernels(build_py):
    """setuptools' ``build_py``, then the kernels compiled into the built package's cache."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install compiles into the source tree on first use
            return
        # numba writes next to the sources it compiles: the built copy's, imported from its folder,
        # into a cache emptied first (a build folder left by an earlier build holds stale entries)
        shutil.rmtree(os.path.join(self.build_lib, "ctcop", "__pycache__"), ignore_errors=True)
        # (the folder is the first entry of sys.path; PYTHONPATH, kept, is how pip's isolated build
        # environment reaches numpy and numba)
        env = {name: value for name, value in os.environ.items() if name != "NUMBA_CACHE_DIR"}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        command = [sys.executable, "-m", "ctcop.precompile"]
        done = subprocess.run(command, cwd=self.build_lib, env=env, check=False)
        if done.returncode != 0:
            self.warn("the compiled kernels are not in this wheel: they compile on first use")


setup(cmdclass={"build_py": BuildPyWithKernels})
