"""The onnx.reference and onnxruntime defects of spec 11.4 (registry ids D12-D20, D51, D59), each
on its smallest input.

Each test checks a registered defect against the installed version (``reproduces``): on the
version the registry was measured on the defect must show, on another one a defect that no longer
shows is a re-measure warning. The ONNX function is shaped around these defects; a re-measure
warning means its workaround can be reconsidered.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from support.registered import reproduces


def _model(
    nodes: list[onnx.NodeProto], inputs: list[tuple[str, int]], output: str, kind: int = TensorProto.DOUBLE
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "defect",
        [helper.make_tensor_value_info(name, kind, None) for name, kind in inputs],
        [helper.make_tensor_value_info(output, kind, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _session(model: onnx.ModelProto, optimized: bool = True) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _error(run: Callable[[], object]) -> str | None:
    """The message of what ``run`` raises, None when it returns."""
    try:
        run()
    except Exception as error:  # onnxruntime raises its own Fail, onnx.reference ValueError
        return str(error)
    return None


def test_d12_onnx_reference_log_softmax_underflows() -> None:
    model = _model([helper.make_node("LogSoftmax", ["x"], ["y"])], [("x", TensorProto.DOUBLE)], "y")
    with np.errstate(divide="ignore"):
        (got,) = ReferenceEvaluator(model).run(None, {"x": np.array([0.0, -800.0])})
    if reproduces("D12", got[1] != -800.0):
        assert got[0] == 0.0 and got[1] == -np.inf  # exact: -800


def test_d14_onnx_reference_gather_elements_fails_beyond_64_choices() -> None:
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=0)
    model = _model([node], [("x", TensorProto.DOUBLE), ("i", TensorProto.INT64)], "y")
    feeds = {"x": np.arange(65.0), "i": np.array([64])}
    assert _session(model).run(None, feeds)[0].tolist() == [64.0]
    message = _error(lambda: ReferenceEvaluator(model).run(None, feeds))
    if reproduces("D14", message is not None):
        assert "Need at least 0 and at most 64 array objects" in str(message)


def test_d18_onnx_reference_loop_stacks_scan_outputs_without_new_axis() -> None:
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c"], ["c_out"]),
            helper.make_node("ConstantOfShape", ["shape"], ["row"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("row", TensorProto.FLOAT, None),
        ],
    )
    loop = helper.make_node("Loop", ["n", "cond"], ["rows"], body=body)
    model = _model(
        [loop],
        [("n", TensorProto.INT64), ("cond", TensorProto.BOOL), ("shape", TensorProto.INT64)],
        "rows",
        TensorProto.FLOAT,
    )
    feeds = {"n": np.array(2), "cond": np.array(True), "shape": np.array([2, 3])}
    (reference,) = ReferenceEvaluator(model).run(None, feeds)
    (onnxruntime,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    assert onnxruntime.shape == (2, 2, 3)
    if reproduces("D18", reference.shape != (2, 2, 3)):
        assert reference.shape == (4, 3)


def test_d13_onnxruntime_scan_fails_on_empty_scan_axis() -> None:
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s_out"])],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
        ],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1])],
    )
    scan = helper.make_node("Scan", ["s0", "xs"], ["total"], body=body, num_scan_inputs=1)
    model = _model([scan], [("s0", TensorProto.FLOAT), ("xs", TensorProto.FLOAT)], "total", TensorProto.FLOAT)
    session = _session(model)
    assert session.run(None, {"s0": np.zeros(1, np.float32), "xs": np.ones((2, 1), np.float32)})[0].tolist() == [2.0]
    message = _error(lambda: session.run(None, {"s0": np.zeros(1, np.float32), "xs": np.zeros((0, 1), np.float32)}))
    if reproduces("D13", message is not None):
        assert "Invalid dim0_offset of 0" in str(message)


def test_d15_onnxruntime_drops_an_added_zero_and_keeps_negative_zero() -> None:
    # Its optimizer removes ``x + 0`` (NoopElimination), which turns -0.0 into +0.0 in IEEE
    # arithmetic; the function writes its loss as ``0 - ln(mass)`` instead of Neg then + 0 (11.5).
    nodes = [
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.DOUBLE, [], [0.0])),
        helper.make_node("Neg", ["x"], ["negated"]),
        helper.make_node("Add", ["negated", "zero"], ["plus_zero"]),
        helper.make_node("Identity", ["plus_zero"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "defect",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    (unoptimized,) = _session(model, optimized=False).run(None, {"x": np.array([0.0])})
    assert unoptimized[0] == 0.0 and not np.signbit(unoptimized[0])
    (got,) = _session(model).run(None, {"x": np.array([0.0])})
    if reproduces("D15", bool(np.signbit(got[0]))):
        assert got[0] == 0.0  # -0.0


def test_d16_onnxruntime_plans_buffers_from_declared_dim_params() -> None:
    # Two inputs declared [T, N] but fed different shapes: a buffer planned for one is reused for
    # the other and the run fails. The function's first operator on the mask and the labels is a
    # Slice (an output of no inferred shape), so shapes that disagree give NaN, not this error.
    floats, ints = TensorProto.FLOAT, TensorProto.INT32
    nodes = [
        helper.make_node("Abs", ["a"], ["u"]),
        helper.make_node("Neg", ["u"], ["v"]),
        helper.make_node("ReduceSum", ["v"], ["sum_v"], keepdims=0),
        helper.make_node("Cast", ["b"], ["w"], to=floats),
        helper.make_node("ReduceSum", ["w"], ["sum_w"], keepdims=0),
        helper.make_node("Add", ["sum_v", "sum_w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "defect",
        [helper.make_tensor_value_info("a", floats, ["T", "N"]), helper.make_tensor_value_info("b", ints, ["T", "N"])],
        [helper.make_tensor_value_info("y", floats, [])],
    )
    session = _session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9))
    assert session.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((2, 3), np.int32)})[0] == 0.0
    message = _error(lambda: session.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((1, 3), np.int32)}))
    if reproduces("D16", message is not None):
        assert "Shape mismatch attempting to re-use buffer" in str(message)


def test_d17_onnxruntime_log_depends_on_where_the_element_lies() -> None:
    # Its float32 Log runs 4-wide vector code and a scalar log for the tail, and the two differ
    # in the last bit: a sample's loss alone can differ from its loss in a batch by rounding
    # (spec 11.5 claims bit identity only against the other samples' values).
    session = _session(
        _model([helper.make_node("Log", ["x"], ["y"])], [("x", TensorProto.FLOAT)], "y", TensorProto.FLOAT)
    )
    (got,) = session.run(None, {"x": np.full(5, 2.0924041, np.float32)})
    if reproduces("D17", got[0] != got[4]):
        assert (got[:4] == got[0]).all() and abs(got[4] - got[0]) == np.spacing(got[0])


def _if_folding_model(dims: list[int | str]) -> onnx.ModelProto:
    """``y = x + 3 (-x)`` for x of shape ``dims``: an If whose condition (the size of x is 2) is
    constant once every dimension is fixed; its kept branch computes ``v = -x`` and holds a second
    such If, whose kept branch is a Loop of 3 iterations adding ``v`` (read from the outer branch)."""
    vi = helper.make_tensor_value_info
    floats = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Add", ["s", "v"], ["s_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("s", floats, None)],
        [vi("c_out", TensorProto.BOOL, []), vi("s_out", floats, None)],
    )

    def branch(name: str, nodes: list[onnx.NodeProto], output: str) -> onnx.GraphProto:
        return helper.make_graph(nodes, name, [], [vi(output, floats, None)])

    inner = helper.make_node(
        "If",
        ["cond"],
        ["t"],
        then_branch=branch("inner_then", [helper.make_node("Loop", ["n", "", "x"], ["looped"], body=body)], "looped"),
        else_branch=branch("inner_else", [helper.make_node("Identity", ["x"], ["kept"])], "kept"),
    )
    outer = helper.make_node(
        "If",
        ["cond"],
        ["y"],
        then_branch=branch("outer_then", [helper.make_node("Neg", ["x"], ["v"]), inner], "t"),
        else_branch=branch("outer_else", [helper.make_node("Identity", ["x"], ["e"])], "e"),
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("ReduceSum", ["shape"], ["size"], keepdims=0),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [], [2])),
        helper.make_node("Equal", ["size", "two"], ["cond"]),
        helper.make_node("Constant", [], ["n"], value=helper.make_tensor("three", TensorProto.INT64, [], [3])),
        outer,
    ]
    graph = helper.make_graph(nodes, "if_folding", [vi("x", floats, dims)], [vi("y", floats, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def test_d19_onnxruntime_folding_an_if_loses_the_names_a_nested_loop_reads() -> None:
    # ctcop's export avoids this (its Loops come after the emission If and read only values of the
    # outer graph), so the defect is shown on a raw model of two nested Ifs and a Loop.
    feeds = {"x": np.array([1.0, 2.0], np.float32)}
    expected = [-2.0, -4.0]
    assert _session(_if_folding_model(["N"])).run(None, feeds)[0].tolist() == expected
    fixed = _if_folding_model([2])
    assert _session(fixed, optimized=False).run(None, feeds)[0].tolist() == expected
    session = _session(fixed)
    message = _error(lambda: session.run(None, feeds))
    if reproduces("D19", message is not None):
        assert "Missing Input: v" in str(message)
    else:
        assert session.run(None, feeds)[0].tolist() == expected


def _reduce_sum(axis: int) -> ort.InferenceSession:
    """float64 ReduceSum over ``axis``."""
    axes = helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [axis]))
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    return _session(_model([axes, node], [("x", TensorProto.DOUBLE)], "y"))


def test_d20_onnxruntime_middle_axis_reduction_rounds_by_batch_size() -> None:
    # float64 [P, C, N] summed over C: one sample's sums alone (N = 1) and in a batch of 32 differ
    # in the last bits (P >= 2; C = 300 classes). The same values as rows of classes ([P, N, C]
    # over the last axis, as the function reduces) give the same bits for any N.
    x = np.random.default_rng(0).standard_normal((2, 300, 32))
    middle = _reduce_sum(1)
    alone, batch = (middle.run(None, {"x": np.ascontiguousarray(x[:, :, :n])})[0][:, 0] for n in (1, 32))
    rows = np.ascontiguousarray(x.transpose(0, 2, 1))
    last = _reduce_sum(2)
    assert np.array_equal(
        last.run(None, {"x": np.ascontiguousarray(rows[:, :1])})[0][:, 0], last.run(None, {"x": rows})[0][:, 0]
    )
    if reproduces("D20", not np.array_equal(alone, batch)):
        assert np.allclose(alone, batch, rtol=1e-14, atol=0)


def _reversing_model(descending_range: bool) -> onnx.ModelProto:
    """``x[:, ::-1]`` for int64 ``x`` [N, L], L read from its shape: a Gather of Range(L - 1, -1,
    -1), or (``descending_range`` false, as the function reverses targets) of L - 1 - Range(0, L, 1)."""

    def const(name: str, value: int) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [], [value]))

    axes = helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [0]))
    nodes = [axes, const("zero", 0), const("one", 1), const("minus_one", -1)]
    nodes += [
        helper.make_node("Shape", ["x"], ["dims"], start=1, end=2),
        helper.make_node("Squeeze", ["dims", "axes"], ["width"]),
    ]
    nodes.append(helper.make_node("Sub", ["width", "one"], ["last"]))
    if descending_range:
        nodes.append(helper.make_node("Range", ["last", "minus_one", "minus_one"], ["index"]))
    else:
        nodes.append(helper.make_node("Range", ["zero", "width", "one"], ["positions"]))
        nodes.append(helper.make_node("Sub", ["last", "positions"], ["index"]))
    nodes.append(helper.make_node("Gather", ["x", "index"], ["y"], axis=1))
    return _model(nodes, [("x", TensorProto.INT64)], "y", TensorProto.INT64)


def test_d51_onnxruntime_optimizer_empties_a_gather_of_a_descending_range() -> None:
    x = np.arange(6, dtype=np.int64).reshape(3, 2)
    expected = x[:, ::-1]
    descending = _reversing_model(descending_range=True)
    assert np.array_equal(_session(descending, optimized=False).run(None, {"x": x})[0], expected)
    assert np.array_equal(_session(_reversing_model(descending_range=False)).run(None, {"x": x})[0], expected)
    got = _session(descending).run(None, {"x": x})[0]
    if reproduces("D51", not np.array_equal(got, expected)):
        assert got.size == 0


def _nested_loop_model() -> onnx.ModelProto:
    """A Loop in the else branch of an If in the else branch of an If (both conditions false),
    whose body reads ``frames`` (a top-level constant) and ``chunk`` (the branch's Identity of a
    Shape): for i in 0..3, acc[min(i + C, 4)] = 1 on zeros [5, 1]."""

    def const(name: str, dims: list[int], values: list, kind: int = TensorProto.INT64) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, kind, dims, values))

    info = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            const("one", [1], [1]),
            helper.make_node("Reshape", ["i", "one"], ["i1"]),
            helper.make_node("Add", ["i1", "chunk"], ["end"]),
            helper.make_node("Min", ["end", "frames"], ["stop"]),
            helper.make_node("Unsqueeze", ["stop", "one"], ["index"]),
            const("value", [1, 1], [1.0], TensorProto.FLOAT),
            helper.make_node("ScatterND", ["acc_in", "index", "value"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            info("i", TensorProto.INT64, []),
            info("cond_in", TensorProto.BOOL, []),
            info("acc_in", TensorProto.FLOAT, [None, None]),
        ],
        [info("cond_out", TensorProto.BOOL, []), info("acc_out", TensorProto.FLOAT, [None, None])],
    )
    nodes = [
        helper.make_node("Identity", ["c"], ["chunk"]),
        helper.make_node("Squeeze", ["frames"], ["trip"]),
        const("true", [], [True], TensorProto.BOOL),
        const("acc", [5, 1], [0.0] * 5, TensorProto.FLOAT),
        helper.make_node("Loop", ["trip", "true", "acc"], ["out0"], body=body),
    ]
    for level in (1, 2):
        then = helper.make_graph(
            [const(f"t{level}", [1, 1], [0.0], TensorProto.FLOAT)],
            f"then{level}",
            [],
            [info(f"t{level}", TensorProto.FLOAT, [None, None])],
        )
        orelse = helper.make_graph(
            nodes, f"else{level}", [], [info(f"out{level - 1}", TensorProto.FLOAT, [None, None])]
        )
        nodes = [
            const(f"no{level}", [], [False], TensorProto.BOOL),
            helper.make_node("If", [f"no{level}"], [f"out{level}"], then_branch=then, else_branch=orelse),
        ]
    top = [const("frames", [1], [4]), helper.make_node("Shape", ["x"], ["c"], start=2, end=3), *nodes]
    graph = helper.make_graph(
        top, "defect", [info("x", TensorProto.FLOAT, [5, 2, 40])], [info("out2", TensorProto.FLOAT, [None, None])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


D59_CHILD = (
    "import sys, numpy as np, onnxruntime as ort; "
    "off = ['ConstantFolding'] if sys.argv[2] == 'off' else None; "
    "s = ort.InferenceSession(open(sys.argv[1], 'rb').read(), providers=['CPUExecutionProvider'], "
    "disabled_optimizers=off); "
    "print(s.run(None, {'x': np.zeros((5, 2, 40), np.float32)})[0].ravel().tolist())"
)


def test_d59_onnxruntime_constant_folding_crashes_on_a_loop_in_nested_folded_ifs(tmp_path) -> None:
    # A use-after-free: whether it faults depends on the heap's layout, so up to three tries.
    model = _nested_loop_model()
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "nested.onnx"
    path.write_bytes(model.SerializeToString())
    assert ReferenceEvaluator(model).run(None, {"x": np.zeros((5, 2, 40), np.float32)})[0].ravel().tolist() == [
        0,
        0,
        0,
        0,
        1,
    ]

    def run(folding: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", D59_CHILD, str(path), folding], capture_output=True, text=True, timeout=600
        )

    without = run("off")
    assert without.returncode == 0 and without.stdout.split() == ["[0.0,", "0.0,", "0.0,", "0.0,", "1.0]"], (
        without.stderr
    )
    codes = [run("on").returncode for _ in range(3)]
    reproduces("D59", -signal.SIGSEGV in codes, f"return codes {codes}")
