"""``ctcop bench``: its report, its checks, its options. No timed assertion: only that times are
finite and positive, that every implementation computes what ctcop computes on the bench's own
inputs, and that what the bench reports about itself is right."""

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import ctcop
from ctcop import cli
from ctcop.bench import implementations, memory, plot, run, shapes, threads, timing
from ctcop.bench.implementations import IMPLEMENTATIONS, Implementation
from ctcop.bench.prepared import Prepared
from ctcop.cli import bench as bench_command

PNG = b"\x89PNG\r\n\x1a\n"
# Every shape of --quick at N = 2, every implementation, one timed run each: what the bench checks
# (each implementation against ctcop.ctc_loss) on its own inputs, without the time of a real run.
SMALL_RUN = ["--quick", "--batches", "2", "--repeat", "1", "--warmup", "0", "--min-time", "0.000001"]


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict, bytes]:
    folder = tmp_path_factory.mktemp("bench")
    json_path, png_path = folder / "bench.json", folder / "bench.png"
    command = [sys.executable, "-m", "ctcop", "bench", *SMALL_RUN, "--implementations", "all"]
    command += ["--json", str(json_path), "--plot", str(png_path), "--no-memory", "--threads", "2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)  # a hang guard, not a bound
    return result, json.loads(json_path.read_text()), png_path.read_bytes()


def test_the_json_report_has_every_cell_with_finite_positive_times(full_report) -> None:
    result, report, _ = full_report
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["schema"] == "ctcop-bench" and report["schema_version"] == 3
    assert report["settings"]["passes"] == 1 and report["settings"]["rounds"] == 1
    assert report["machine"]["cpu"] and report["machine"]["cores"] >= 1
    assert report["settings"]["threads"] == 2 and report["settings"]["quick"] is True
    assert report["versions"]["ctcop"] == ctcop.__version__ and "numpy" in report["versions"]
    assert report["interrupted_by"] is None and report["wall_s"] > 0
    timed = [entry["name"] for entry in report["implementations"] if entry["status"] == "timed"]
    assert {"ctcop", "ctcop-grad", "onnxruntime", "openvino-onnx", "openvino-native"} <= set(timed)
    assert [entry["name"] for entry in report["implementations"]] == list(IMPLEMENTATIONS)
    cells = report["cells"]
    expected = {(s.name, 2, name) for s in shapes.QUICK for name in timed}
    assert {(c["shape"], c["N"], c["implementation"]) for c in cells} == expected
    for cell in cells:
        assert cell["runs"] >= 1 and cell["pass_medians_s"] == [cell["median_s"]]
        assert 0 < cell["min_s"] <= cell["median_s"] <= cell["max_s"] < math.inf
        assert cell["first_call_s"] > 0 and cell["prepare_s"] >= 0
    assert report["ratios"] and all(r["value"] is None or r["value"] > 0 for r in report["ratios"])
    assert report["threads"]["ctcop"] == 2


def test_every_implementation_agrees_with_ctcop_on_the_bench_inputs(full_report) -> None:
    # The bench checks each cell before timing it; a disagreement is status "wrong" and exit 1.
    result, report, _ = full_report
    problems = [(c["shape"], c["N"], c["implementation"], c["message"]) for c in report["cells"] if c["status"] != "ok"]
    assert not problems
    assert "!" not in result.stdout.split("T=150 L=40 C=28", 1)[1].split("wall time")[0]


def test_the_table_prints_the_head_a_block_per_shape_and_the_ratios(full_report) -> None:
    result, _, _ = full_report
    out = result.stdout
    assert out.startswith("ctcop bench --quick: ") and "2 thread(s) for every implementation" in out
    for shape in shapes.QUICK:
        assert f"\n{shape.title}\n" in out
    assert "ort/f32" in out and "| " in out
    # the columns and lines of the peers appear where the peers are installed (the peers extra)
    if importlib.util.find_spec("torch") is not None:
        assert "c/pt64" in out
    else:
        assert "torch-f32 (torch not installed)" in out
    if importlib.util.find_spec("optax") is not None:
        assert "optax32" in out and "compilation per shape and N" in out
    assert result.stderr.count("Traceback") == 0


def test_plot_writes_a_png(full_report) -> None:
    _, _, png = full_report
    assert png.startswith(PNG) and len(png) > 10_000


@pytest.fixture(autouse=True)
def restored_threads():
    """In-process runs set the environment and the core's thread count: put them back after."""
    saved = {name: os.environ.get(name) for name in ("CTCOP_NUM_THREADS", "XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL")}
    getter, setter = threads._core("get_num_threads"), threads._core("set_num_threads")
    before = getter() if getter is not None else None
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if setter is not None and before is not None:
        setter(before)


def bench(*args: str) -> int:
    return cli.main(["bench", *args])


def test_a_missing_peer_is_listed_as_not_installed(monkeypatch, capsys, tmp_path) -> None:
    def absent(*modules: str) -> str | None:
        return "torch not installed" if "torch" in modules else None

    monkeypatch.setattr(implementations, "missing", absent)
    out = tmp_path / "b.json"
    chosen = "exp-floor,torch-f64"  # the floor computes no loss: no check, no JIT compilation here
    code = bench(*SMALL_RUN, "--shapes", "seed000-sweep", "--implementations", chosen, "--json", str(out))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "not installed: torch-f64 (torch not installed)" in captured.out
    report = json.loads(out.read_text())
    status = {entry["name"]: (entry["status"], entry["reason"]) for entry in report["implementations"]}
    assert status == {"torch-f64": ("not installed", "torch not installed"), "exp-floor": ("timed", None)}
    assert {cell["implementation"] for cell in report["cells"]} == {"exp-floor"}


def wrong_ctcop(x: shapes.Inputs, threads: int) -> Prepared:
    return Prepared(lambda: (ctcop.ctc_loss(x.logits, x.mask, x.labels) * np.float32(1.01), None))


def test_a_wrong_result_is_reported_and_exits_1(monkeypatch, capsys, tmp_path) -> None:
    fake = Implementation("ctcop", "ctcop", "wrong on purpose", ("numpy",), wrong_ctcop)
    monkeypatch.setitem(IMPLEMENTATIONS, "ctcop", fake)
    out = tmp_path / "b.json"
    code = bench(*SMALL_RUN, "--shapes", "seed000-sweep", "--implementations", "ctcop,exp-floor", "--json", str(out))
    captured = capsys.readouterr()
    assert code == 1
    assert "! ctcop wrong result at T=5 L=2 C=11 N=2: loss at the float32 tolerance: sample 0" in captured.out
    cells = json.loads(out.read_text())["cells"]
    assert {cell["status"] for cell in cells if cell["implementation"] == "ctcop"} == {"wrong"}
    assert all(cell["median_s"] > 0 for cell in cells)  # a wrong cell is still timed


def test_the_check_rejects_a_wrong_gradient() -> None:
    inputs = shapes.draw(shapes.FULL[0], 2)
    reference = timing.Reference(inputs)
    loss, grad = ctcop.ctc_loss_grad(inputs.logits, inputs.mask, inputs.labels)
    assert timing.check((loss, grad), reference) is None
    grad = grad.copy()
    grad[3, 1, 2] += 0.1
    assert timing.check((loss, grad), reference).startswith("gradient at [3, 1, 2]")


def test_an_implementation_that_raises_is_an_error_cell() -> None:
    def broken(x: shapes.Inputs, threads: int) -> Prepared:
        raise RuntimeError("no kernel\nfor this")

    inputs = shapes.draw(shapes.FULL[2], 2)
    protocol = timing.Protocol(1, 1, 0, 0.0, rounds=3)
    broken_one = Implementation("x", "x", "x", (), broken)
    [cell] = timing.measure([broken_one], shapes.FULL[2], 2, timing.Reference(inputs), protocol)
    assert (cell.status, cell.message, cell.timing) == ("error", "RuntimeError: no kernel for this", None)


def recording(name: str, log: list[str], fail_at: int | None = None) -> Implementation:
    """An implementation whose calls append ``name`` to ``log`` (the ``fail_at``-th call raises)
    and return ctcop's own losses."""

    def prepare(x: shapes.Inputs, threads: int) -> Prepared:
        losses = ctcop.ctc_loss(x.logits, x.mask, x.labels)

        def call() -> tuple[np.ndarray, None]:
            log.append(name)
            if len(log) == fail_at:
                raise RuntimeError("gone")
            return losses, None

        log.append(f"prepare {name}")
        return Prepared(call)

    return Implementation(name, name, name, (), prepare)


def test_a_rows_columns_take_turns_and_each_pass_is_the_median_of_all_its_runs(monkeypatch) -> None:
    # Three rounds, one run and one warm-up call a turn: a, b, a, b, a, b, each prepared once,
    # the checked call only in the first turn, each later turn after the column's own settings
    # are set again (``turn``). The clock moves 1 ms a call of a, 2 of b.
    log: list[str] = []
    clock = [0.0]
    monkeypatch.setattr(timing, "settle", lambda: log.append("settle"))
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    steps = {"a": 0.001, "b": 0.002}

    def ticking(name: str) -> Implementation:
        inner = recording(name, log)

        def prepare(x: shapes.Inputs, threads: int) -> Prepared:
            prepared = inner.prepare(x, threads)
            tick = lambda: (clock.__setitem__(0, clock[0] + steps[name]), prepared.call())[1]  # noqa: E731
            return Prepared(tick, turn=lambda: log.append(f"turn {name}"))

        return Implementation(name, name, name, (), prepare)

    shape = shapes.FULL[2]
    protocol = timing.Protocol(1, repeat=3, warmup=1, min_time_s=0.0, rounds=3)
    cells = timing.measure([ticking("a"), ticking("b")], shape, 2, timing.Reference(shapes.draw(shape, 2)), protocol)
    turn = ["turn a", "settle", "a", "a"]  # settings, settled, a warm-up call, a timed one
    assert (
        log
        == ["prepare a", "settle", "a", "a", "a", "prepare b", "settle", "b", "b", "b"]
        + [
            *turn,
            *[name.replace("a", "b") for name in turn],
        ]
        * 2
    )
    assert [(cell.status, cell.timing.runs, cell.timing.median_s) for cell in cells] == [
        ("ok", 3, pytest.approx(0.001)),
        ("ok", 3, pytest.approx(0.002)),
    ]


def test_a_large_cell_is_timed_a_column_at_a_time_and_a_failing_turn_makes_an_error(monkeypatch) -> None:
    # Above INTERLEAVE_MAX_BYTES of logits one turn each: a's ends before b is prepared.
    log: list[str] = []
    monkeypatch.setattr(timing, "settle", lambda: 0.0)
    large = shapes.Shape("large", 5, 2, 11, (1,))
    batch = timing.INTERLEAVE_MAX_BYTES // large.logits_bytes(1) + 1
    protocol = timing.Protocol(1, repeat=2, warmup=0, min_time_s=0.0, rounds=3)
    assert protocol.cell_rounds(large, batch) == 1 and protocol.cell_rounds(large, batch - 1) == 3
    reference = timing.Reference(shapes.draw(large, batch))
    cells = timing.measure([recording("a", log), recording("b", log)], large, batch, reference, protocol)
    assert log == ["prepare a", "a", "a", "a", "prepare b", "b", "b", "b"]
    assert [cell.timing.runs for cell in cells] == [2, 2]
    # In three rounds (one run a turn) a call of b that raises in the second ends b's cell; a
    # keeps its turns.
    log.clear()
    columns = [recording("a", log), recording("b", log, fail_at=8)]
    cells = timing.measure(columns, large, 2, timing.Reference(shapes.draw(large, 2)), protocol)
    assert log == ["prepare a", "a", "a", "prepare b", "b", "b", "a", "b", "a"]
    assert [(cell.status, cell.message) for cell in cells] == [("ok", None), ("error", "RuntimeError: gone")]
    assert cells[0].timing.runs == 3 and cells[1].timing is None


def test_settle_waits_while_the_process_keeps_a_core_busy(monkeypatch) -> None:
    # A fake clock: each 5 ms slice the process uses 4 ms of CPU for the first three slices (a
    # pool spinning), then none; settle waits four slices. Busy for ever: it stops at SETTLE_MAX_S.
    clock = {"wall": 0.0, "cpu": 0.0}
    busy = [3]

    def sleep(seconds: float) -> None:
        clock["wall"] += seconds
        if busy[0] > 0:
            clock["cpu"] += 0.8 * seconds
            busy[0] -= 1

    fake = types.SimpleNamespace(perf_counter=lambda: clock["wall"], process_time=lambda: clock["cpu"], sleep=sleep)
    monkeypatch.setattr(timing, "time", fake)
    assert timing.settle() == pytest.approx(4 * timing.SETTLE_SLICE_S)
    busy[0] = 10**6
    assert timing.settle() == pytest.approx(timing.SETTLE_MAX_S)


def test_timing_runs_at_least_repeat_times_and_until_the_minimum_time(monkeypatch) -> None:
    calls = []
    result = timing.Timing.of(timing.timed(lambda: calls.append(1), 5, 0.0))
    assert result.runs == 5 == len(calls) and result.min_s <= result.median_s <= result.max_s
    # On a clock that each call moves by 4 ms (a real clock would make the count depend on the
    # machine's speed), a minimum of 10 ms takes three runs where one was asked for.
    clock = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    slow = timing.timed(lambda: clock.__setitem__(0, clock[0] + 0.004), 1, 0.01)
    assert slow == pytest.approx([0.004] * 3)


def test_a_cells_time_is_the_median_of_its_passes(tmp_path) -> None:
    # Three passes of at least one run each (repeat 3 over 3 passes): each cell holds three pass
    # medians, its median is theirs, and min and max bound every run of every pass.
    json_path = tmp_path / "b.json"
    command = [sys.executable, "-m", "ctcop", "bench", "--shapes", "seed000-sweep", "--batches", "1,4"]
    command += ["--implementations", "ctcop,ctcop-grad", "--passes", "3", "--repeat", "3", "--warmup", "0"]
    command += ["--min-time", "0.000001", "--no-memory", "--threads", "1", "--json", str(json_path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(json_path.read_text())
    assert report["settings"]["passes"] == 3 and len(report["cells"]) == 4
    for cell in report["cells"]:
        medians = cell["pass_medians_s"]
        assert len(medians) == 3 and cell["runs"] >= 3 and cell["status"] == "ok"
        assert cell["median_s"] == sorted(medians)[1]
        assert cell["min_s"] <= min(medians) and max(medians) <= cell["max_s"]
    assert "median of 3 passes over the sweep, each the median of at least 1 runs" in result.stdout


def test_a_later_pass_that_raises_makes_the_cell_an_error() -> None:
    shape = shapes.FULL[2]
    first = timing.Cell("x", shape, 2, "ok", timing=timing.Timing(2.0, 1.0, 3.0, 5, (2.0,)))
    first.join(timing.Cell("x", shape, 2, "ok", timing=timing.Timing(4.0, 0.5, 6.0, 4, (4.0,))))
    assert first.timing == timing.Timing(3.0, 0.5, 6.0, 9, (2.0, 4.0))
    first.join(timing.Cell("x", shape, 2, "error", "RuntimeError: gone"))
    assert (first.status, first.message, first.timing) == ("error", "RuntimeError: gone", None)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "--threads"),
        (["--threads", "\u0663"], "--threads"),
        (["--repeat", "x"], "--repeat"),
        (["--warmup", "-1"], "--warmup"),
        (["--passes", "0"], "--passes"),
        (["--rounds", "21"], "--rounds"),
        (["--min-time", "0"], "--min-time"),
        (["--batches", "0"], "--batches"),
        (["--batches", "1,,2"], "--batches"),
        (["--implementations", "ctcop,nosuch"], "implementations: unknown 'nosuch'"),
        (["--implementations", ","], "implementations: empty list"),
        (["--shapes", "warp-ctc-c9"], "shapes: unknown 'warp-ctc-c9'"),
        (["--plot", "{tmp}/p.svg"], "plot: "),
        (["--plot", "{tmp}"], "plot: "),
        (["--json", "{tmp}/no/such/dir/b.json"], "json: "),
        (["--json", "{tmp}/b.png", "--plot", "{tmp}/b.png"], "the same file"),
        (["--quick", "--quick", "extra"], "unrecognized arguments"),
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, tmp_path, args: list[str], message: str) -> None:
    code = bench(*(arg.replace("{tmp}", str(tmp_path)) for arg in args))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("ctcop: "), captured.err
    assert message in captured.err, captured.err
    assert list(tmp_path.iterdir()) == []


def test_plot_without_matplotlib_exits_2_before_any_work(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(plot, "missing", lambda: plot.MISSING)
    code = bench("--quick", "--plot", str(tmp_path / "b.png"))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == f"ctcop: invalid input: plot: {plot.MISSING}\n"


def test_peak_memory_is_measured_in_a_child_process() -> None:
    if memory.available() is not None:
        pytest.skip(memory.available())
    shape = shapes.Shape("small", 50, 5, 2000, (8,))
    found = memory.measure("onnxruntime-no-arena", shape, 8, 1)
    assert found.error is None, found.error
    assert found.first is not None and found.later is not None
    assert 0 <= found.first < 100 and 0 <= found.later < 100


def test_memory_is_planned_where_the_logits_are_large_enough() -> None:
    settings = cli.build_parser().parse_args(["bench"])
    planned = run.memory_plan(bench_command.checked_settings(settings), list(IMPLEMENTATIONS))
    assert {(shape.name, batch) for _, shape, batch in planned} == {("warp-ctc-c5000", 64)}
    assert [name for name, _, _ in planned] == list(run.MEMORY_IMPLEMENTATIONS)


# ``ctcop bench`` with one line more on stdout, "measuring N=<batch>", as each cell's measurement
# starts: the moment to interrupt, seen rather than guessed.
ANNOUNCING = """
import sys

from ctcop import cli
from ctcop.bench import run

measure = run.measure


def announced(implementation: object, shape: object, batch: int, *rest: object) -> object:
    print(f"measuring N={batch}", flush=True)
    return measure(implementation, shape, batch, *rest)


run.measure = announced
sys.exit(cli.main(sys.argv[1:]))
"""


def read_until(process: subprocess.Popen, wanted: str, hang_s: float = 600) -> list[str]:
    """The lines of ``process``'s stdout up to and including ``wanted``; fails if it ends first
    (or is still silent after ``hang_s``, a guard against a hang, not a judgement of speed)."""
    assert process.stdout is not None
    guard = threading.Timer(hang_s, process.kill)
    guard.start()
    try:
        lines: list[str] = []
        while not lines or lines[-1] != wanted:
            line = process.stdout.readline()
            assert line, f"ended before {wanted!r}: {lines}"
            lines.append(line.rstrip("\n"))
        return lines
    finally:
        guard.cancel()


def test_an_interruption_exits_130_with_a_partial_report(tmp_path) -> None:
    # N = 1 takes about a second, N = 64 minutes (1000 runs): the signal goes once N = 64 starts.
    out = tmp_path / "b.json"
    command = [sys.executable, "-c", ANNOUNCING, "bench", "--implementations", "exp-floor"]
    command += ["--shapes", "warp-ctc-c5000", "--batches", "1,64", "--repeat", "1000", "--no-memory"]
    command += ["--json", str(out)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        lines = read_until(process, "measuring N=64")
        assert lines[0].startswith("ctcop bench: ") and "measuring N=1" in lines
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 130, stderr
    assert stderr == f"ctcop: interrupted by SIGINT; partial report in {out}\n"
    report = json.loads(out.read_text())
    assert report["interrupted_by"] == "SIGINT"
    assert [(cell["N"], cell["status"]) for cell in report["cells"]] == [(1, "ok")]  # what finished
    assert "interrupted by SIGINT" in stdout
