"""Time the float32 ONNX export in onnxruntime against the float32 peers, in one process, and
measure its peak memory; optionally profile the export with onnxruntime's profiler.

Shapes: warp-ctc's, T = 150, N = 64, (L = 40, C = 28) and (L = 20, C = 5000), as in ``ctcop bench``.
Every runtime runs with the same thread count (``--threads``, default 2): onnxruntime through
``ctcop.onnx.session_options``, PyTorch ``set_num_threads``, TensorFlow's intra-op pool,
OpenVINO ``INFERENCE_NUM_THREADS``, JAX/XLA through ``XLA_FLAGS`` (set before JAX loads).
Peers: PyTorch ``log_softmax`` + ``F.ctc_loss`` (float32 forward, no grad), optax ``ctc_loss``
(jitted), ``tf.nn.ctc_loss`` (sparse labels, in a ``tf.function``), OpenVINO's native CTCLoss-4
(inputs already laid out). Each is warmed up and timed in a block of calls; the blocks take
turns over several passes, and the table shows the range of the passes' medians. The load average
is printed before and after (other processes on the cores slow the two-thread peers more than the
export, whose Loop body runs on one thread); ``--cpu`` adds the minimum CPU time of the calling
thread per call, which other processes disturb less than wall time (for comparing exports: a
peer's other threads are not counted).

Memory (``--memory``, :mod:`ctcop.process.memory_probe`): a fresh worker process per (shape, options)
builds its inputs and the session, then measures the first call's peak RSS above the RSS before it
(arena growth included) and, reset, the peak of three more calls above the RSS before them: what a
call needs in steady state, beyond the inputs and what the session already holds; both over the
logits' bytes.

Run: python benchmarks/onnx_profile.py [--passes 7] [--repeat 7] [--peers torch,optax,tf,openvino]
     [--also old_{C}.onnx] [--cpu] [--memory] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SHAPES = ((40, 28), (20, 5000))
FRAMES, BATCH = 150, 64


def case(frames: int, batch: int, length: int, classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The benchmark's inputs (as ``ctcop bench``): every target non-empty."""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(frames, batch, classes)).astype(np.float32)
    mask = np.ones((frames, batch), dtype=np.int32)
    labels = np.full((batch, frames), -1, dtype=np.int64)
    labels[:, :length] = rng.integers(0, classes - 1, size=(batch, length))
    return inputs, mask, labels


def _released(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, ...]:
    """Batch-major logits, frame counts, pad-free targets and their lengths."""
    frames = mask.sum(axis=0).astype(np.int64)
    lengths = (labels >= 0).sum(axis=1).astype(np.int64)
    targets = np.zeros_like(labels)
    for n, row in enumerate(labels):
        kept = row[row >= 0]
        targets[n, : kept.size] = kept
    return np.ascontiguousarray(inputs.transpose(1, 0, 2)), frames, targets, lengths


def ort_runner(
    inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, threads: int, model: bytes | None = None, **kw: Any
) -> Callable[[], Any]:
    """The float32 export (or ``model``, a serialized export) in onnxruntime with ctcop's options."""
    import onnxruntime

    from ctcop.onnx import onnx_model, session_options

    if model is None:
        model = onnx_model(dtype="float32", dims=("T", "N", inputs.shape[2])).SerializeToString()
    options = session_options(threads=threads, **kw)
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feeds = {"inputs": inputs, "sequence_mask": mask, "labels": labels}
    return lambda: session.run(None, feeds)[0]


def torch_runner(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, threads: int) -> Callable[[], Any]:
    import torch

    torch.set_num_threads(threads)
    _, frames, targets, lengths = _released(inputs, mask, labels)
    x = torch.from_numpy(inputs)
    t_frames, t_targets, t_lengths = (torch.from_numpy(a) for a in (frames, targets, lengths))
    blank = inputs.shape[2] - 1

    def run() -> Any:
        with torch.no_grad():
            logp = torch.log_softmax(x, dim=2)
            return torch.nn.functional.ctc_loss(
                logp, t_targets, t_frames, t_lengths, blank=blank, reduction="none", zero_infinity=False
            ).numpy()

    return run


def optax_runner(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, threads: int) -> Callable[[], Any]:
    import jax
    import jax.numpy as jnp
    import optax

    logits, frames, targets, lengths = _released(inputs, mask, labels)
    t_steps = logits.shape[1]
    logit_pad = (np.arange(t_steps)[None, :] >= frames[:, None]).astype(np.float32)
    label_pad = (np.arange(targets.shape[1])[None, :] >= lengths[:, None]).astype(np.float32)
    blank = inputs.shape[2] - 1
    fn = jax.jit(lambda a, b, c, d: optax.ctc_loss(a, b, c, d, blank_id=blank))
    args = [jnp.asarray(a) for a in (logits, logit_pad, targets.astype(np.int32), label_pad)]
    return lambda: fn(*args).block_until_ready()


def tf_runner(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, threads: int) -> Callable[[], Any]:
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass  # already initialised by the first shape
    _, frames, targets, lengths = _released(inputs, mask, labels)
    indices = [(n, i) for n in range(targets.shape[0]) for i in range(lengths[n])]
    values = [targets[n, i] for n, i in indices]
    sparse = tf.SparseTensor(np.array(indices, np.int64), np.array(values, np.int32), targets.shape)
    x = tf.constant(inputs)
    t_frames = tf.constant(frames.astype(np.int32))
    fn = tf.function(
        lambda: tf.nn.ctc_loss(sparse, x, None, t_frames, logits_time_major=True, blank_index=inputs.shape[2] - 1)
    )
    return lambda: fn().numpy()


def openvino_runner(inputs: np.ndarray, mask: np.ndarray, labels: np.ndarray, threads: int) -> Callable[[], Any]:
    import openvino
    import openvino.opset4 as opset4

    logits, frames, targets, lengths = _released(inputs, mask, labels)
    params = [
        opset4.parameter([-1, -1, -1], np.float32),
        opset4.parameter([-1], np.int64),
        opset4.parameter([-1, -1], np.int64),
        opset4.parameter([-1], np.int64),
        opset4.parameter([], np.int64),
    ]
    model = openvino.Model([opset4.ctc_loss(*params)], params)
    compiled = openvino.Core().compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads})
    request = compiled.create_infer_request()
    feeds = [logits, frames, targets, lengths, np.array(inputs.shape[2] - 1, np.int64)]
    return lambda: request.infer(feeds)


PEERS: dict[str, Callable[..., Callable[[], Any]]] = {
    "torch": torch_runner,
    "optax": optax_runner,
    "tf": tf_runner,
    "openvino": openvino_runner,
}


def timings(
    runners: dict[str, Callable[[], Any]], repeat: int, passes: int, warmup: int = 3
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per runner, ``passes`` medians of ``repeat`` calls (seconds), and the least CPU time of the
    calling thread over all calls. Each runner is timed in a block after ``warmup`` calls
    (interleaving single calls lets one runtime's spinning pool threads slow the next), and the
    blocks take turns over the passes."""
    medians: dict[str, list[float]] = {name: [] for name in runners}
    cpu = dict.fromkeys(runners, float("inf"))
    for _ in range(passes):
        for name, run in runners.items():
            for _ in range(warmup):
                run()
            times = []
            for _ in range(repeat):
                start, start_cpu = time.perf_counter(), time.thread_time()
                run()
                cpu[name] = min(cpu[name], time.thread_time() - start_cpu)
                times.append(time.perf_counter() - start)
            medians[name].append(statistics.median(times))
    return medians, cpu


def memory_child(request: dict[str, Any]) -> dict[str, float]:
    """In a fresh worker: peak RSS of the first call and of later calls over the logits' bytes."""
    from ctcop.process import memory_probe

    inputs, mask, labels = case(FRAMES, BATCH, request["length"], request["classes"])
    run = ort_runner(inputs, mask, labels, request["threads"], arena=request["arena"])
    first = memory_probe.peak(run)
    later = memory_probe.peak(run, 3)
    return {"first": first / inputs.nbytes, "later": later / inputs.nbytes, "logits_mb": inputs.nbytes / 2**20}


def memory(threads: int) -> None:
    from ctcop.process import memory_probe

    print("peak RSS over the logits' bytes (fresh process each; first call / later calls)")
    for length, classes in SHAPES:
        for arena in (True, False):
            request = {"length": length, "classes": classes, "threads": threads, "arena": arena}
            result = memory_probe.measure("onnx_profile:memory_child", request)
            print(
                f"  C={classes:>5} arena={'on ' if arena else 'off'}: first {result['first']:.2f}x, "
                f"later {result['later']:.2f}x (logits {result['logits_mb']:.1f} MiB)"
            )


def profile(folder: str, threads: int) -> None:
    """onnxruntime's profile of a few calls per shape, summarised by operator type (inside the Loop
    body too: onnxruntime reports the subgraph's nodes with their own names)."""
    import onnxruntime

    from ctcop.onnx import onnx_model, session_options

    for length, classes in SHAPES:
        inputs, mask, labels = case(FRAMES, BATCH, length, classes)
        options = session_options(threads=threads)
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, f"ort_C{classes}")
        model = onnx_model(dtype="float32", dims=("T", "N", classes))
        print(f"C={classes}: {_body_size(model)}")
        session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feeds = {"inputs": inputs, "sequence_mask": mask, "labels": labels}
        calls = 5
        for _ in range(calls + 2):
            session.run(None, feeds)
        path = session.end_profiling()
        with open(path) as file:
            events = json.load(file)
        per_op: dict[tuple[str, str], list[float]] = {}
        runs = [e for e in events if e.get("name") == "model_run"]
        for event in events:
            if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
                continue
            name = event["name"][: -len("_kernel_time")]
            op = event.get("args", {}).get("op_name", "?")
            per_op.setdefault((op, name), []).append(event["dur"])
        total_run = statistics.median(e["dur"] for e in runs[2:]) if len(runs) > 2 else float("nan")
        print(f"C={classes}: model_run median {total_run / 1e3:.2f} ms (profiled); per call, by node:")
        rows = sorted(per_op.items(), key=lambda kv: -sum(kv[1]))
        by_type: dict[str, float] = {}
        count_type: dict[str, int] = {}
        for (op, _), durs in rows:
            by_type[op] = by_type.get(op, 0.0) + sum(durs) / (calls + 2)
            count_type[op] = count_type.get(op, 0) + len(durs) // (calls + 2)
        for (op, name), durs in rows[:25]:
            print(f"  {sum(durs) / (calls + 2) / 1e3:8.3f} ms  {len(durs) // (calls + 2):5d}x  {op:<16} {name}")
        print("  by operator type:")
        for op, total in sorted(by_type.items(), key=lambda kv: -kv[1])[:20]:
            print(f"  {total / 1e3:8.3f} ms  {count_type[op]:6d} calls  {op}")


def _body_size(model: Any) -> str:
    """The operators of the forward Loop bodies (constants aside) per block of UNROLL steps."""
    import onnx

    from ctcop.onnx import function

    def bodies(graph: Any) -> list[Any]:
        found = []
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    found += [attribute.g, *bodies(attribute.g)]
        return found

    sizes = sorted(
        {
            sum(node.op_type != "Constant" for node in body.node)
            for body in bodies(model.functions[0])
            if body.name == "ctc_forward_step"
        }
    )
    return f"forward Loop bodies: {'/'.join(map(str, sizes))} operators per block of {function.UNROLL} steps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--passes", type=int, default=7)
    parser.add_argument("--peers", default="torch,optax,tf,openvino")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--profile", metavar="DIR")
    parser.add_argument("--shapes", default="28,5000", help="which C of the two shapes to time")
    parser.add_argument("--cpu", action="store_true", help="also show the least CPU time of the calling thread")
    parser.add_argument(
        "--also", action="append", default=[], metavar="PATH", help="an ONNX export to time too ({C}: the classes)"
    )
    args = parser.parse_args()
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={args.threads}")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        profile(args.profile, args.threads)
        return
    if args.memory:
        memory(args.threads)
        return
    peers = [name for name in args.peers.split(",") if name]
    wanted = {int(c) for c in args.shapes.split(",")}
    runs = f"range (median) of {args.passes} passes' medians of {args.repeat} calls"
    print(f"T={FRAMES}, N={BATCH}, float32, {args.threads} threads, {runs}, ms; load average {_load()}")
    for length, classes in SHAPES:
        if classes not in wanted:
            continue
        inputs, mask, labels = case(FRAMES, BATCH, length, classes)
        runners = {"export/ort": ort_runner(inputs, mask, labels, args.threads)}
        for path in args.also:
            with open(path.replace("{C}", str(classes)), "rb") as file:
                runners[os.path.basename(path)] = ort_runner(inputs, mask, labels, args.threads, model=file.read())
        runners.update({name: PEERS[name](inputs, mask, labels, args.threads) for name in peers})
        medians, cpu = timings(runners, args.repeat, args.passes)
        cells = "  ".join(f"{name} {_range(values)}" for name, values in medians.items())
        if args.cpu:
            cells += "  | least thread CPU: " + "  ".join(f"{name} {value * 1e3:.2f}" for name, value in cpu.items())
        # Per pass: the export's median over the fastest peer's median in that pass (the machine's
        # speed drifts; one pass's runners are timed within seconds of each other).
        ratios = [
            medians["export/ort"][i] / min(medians[name][i] for name in peers) for i in range(args.passes) if peers
        ]
        ratio = f"{min(ratios):.2f}-{max(ratios):.2f} (median {statistics.median(ratios):.2f})" if ratios else "-"
        print(f"L={length:>2} C={classes:>4}: {cells}  | export / fastest peer, per pass: {ratio}")
    print(f"load average after: {_load()}")


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _range(values: list[float]) -> str:
    low, high, mid = min(values) * 1e3, max(values) * 1e3, statistics.median(values) * 1e3
    return f"{low:.1f}-{high:.1f} ({mid:.1f})"


if __name__ == "__main__":
    main()
