"""The files a model argument names, which no output of the command may overwrite."""

from __future__ import annotations

import os


def model_files(path: str) -> list[str]:
    """A model file and the files it brings: an IR's ``.bin``, an ONNX file's external data."""
    if path.endswith(".xml"):
        return [path, path[:-4] + ".bin"]
    if path.endswith(".onnx") and os.path.isfile(path):
        from ..onnx.files import external_data_files

        return [path, *external_data_files(path)]
    return [path]
