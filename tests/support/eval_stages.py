"""``ctcop eval`` called in-process on a model and its inputs, read back as its JSON report's
layers (the tests of the stages eval reads: tests/unit/test_eval_stages.py and its framework parts),
on batches of ``N`` samples, ``T`` frames and ``C`` classes."""

import json

import numpy as np

from ctcop import cli

N, T, C = 3, 8, 5


def evaluated(capsys, tmp_path, model: str, inputs: dict[str, np.ndarray], *extra: str) -> tuple[int, list[dict]]:
    np.savez(tmp_path / "inputs.npz", **inputs)
    report = str(tmp_path / "report.json")
    code = cli.main(["eval", model, "--inputs", str(tmp_path / "inputs.npz"), "--json", report, *extra])
    capsys.readouterr()
    with open(report) as file:
        return code, json.load(file)["layers"]
