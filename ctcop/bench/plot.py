"""``--plot``: median time against N per implementation, log-log, one panel per [T, C] shape
(matplotlib, from the ``[bench]`` extra). Cells whose check failed or that raised are left out."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ..files import atomic_output
from .implementations import IMPLEMENTATIONS
from .results import Results

MISSING = "matplotlib is not installed (pip install 'ctcop[bench]')"


def missing() -> str | None:
    """None when matplotlib is installed, else the one-line reason (nothing imported)."""
    return MISSING if importlib.util.find_spec("matplotlib") is None else None


def _style(name: str) -> dict[str, Any]:
    if name.startswith("ctcop"):
        return {"linestyle": "-", "linewidth": 2.4, "marker": "o"}
    if name.startswith(("onnxruntime", "openvino-onnx", "openvino-ir")):
        return {"linestyle": "--", "linewidth": 2.0, "marker": "s"}
    if name == "exp-floor":
        return {"linestyle": ":", "linewidth": 1.5, "marker": ".", "color": "0.45"}
    return {"linestyle": "-", "linewidth": 1.2, "marker": "^", "markersize": 4}


def _panel(axes: Any, results: Results, shape_name: str, title: str) -> None:
    rows = results.rows(shape_name)
    for index, name in enumerate(results.timed_names()):
        points = [(batch, row[name].median_s) for batch, row in rows if name in row and row[name].status == "ok"]
        if not points:
            continue
        style = {"color": f"C{index % 10}", **_style(name)}
        xs, ys = zip(*points, strict=True)
        axes.plot(xs, [s * 1e3 for s in ys if s is not None], label=IMPLEMENTATIONS[name].column, **style)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    batches = [batch for batch, _ in rows]
    if batches:
        axes.set_xticks(batches, [str(batch) for batch in batches], fontsize=8)
        axes.tick_params(axis="x", which="minor", bottom=False)
    axes.set_xlabel("batch size N")
    axes.set_ylabel("median ms per batch")
    axes.set_title(title, fontsize=10)
    axes.grid(True, which="both", alpha=0.25)


def write_plot(results: Results, path: str) -> None:
    """Write the figure to ``path`` (PNG), atomically."""
    matplotlib = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    pyplot = importlib.import_module("matplotlib.pyplot")
    shapes = results.shapes()
    figure, grid = pyplot.subplots(
        1, max(1, len(shapes)), figsize=(5.0 * max(1, len(shapes)) + 1.6, 4.4), squeeze=False
    )
    for axes, shape in zip(grid[0], shapes, strict=False):
        _panel(axes, results, shape.name, shape.title)
    handles, labels = grid[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="center right", fontsize=8, frameon=False)
    cpu, threads = results.machine["cpu"], results.settings.protocol.threads
    figure.suptitle(f"ctcop bench: {cpu}, {threads} thread(s), float32 logits", fontsize=11)
    figure.tight_layout(rect=(0.0, 0.0, 1.0 - 1.4 / figure.get_figwidth(), 1.0))
    try:
        with atomic_output(path, ".png") as temporary:
            figure.savefig(temporary, dpi=110, format="png")
    finally:
        pyplot.close(figure)
