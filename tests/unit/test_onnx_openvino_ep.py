"""The exports under onnxruntime's OpenVINO execution provider (onnxruntime-openvino, its own
package): the forms of the graph that let it load and run them, checked on the graph everywhere,
and the losses and D58 where the provider is installed."""

from collections import Counter

import numpy as np
import onnx
import onnxruntime
import openvino
import pytest
from support.docs import docs_blocks
from support.registered import reproduces

import ctcop
from ctcop.conformance.case import Case
from ctcop.conformance.cases import edge_cases, random_cases
from ctcop.onnx import onnx_model, released_model
from ctcop.onnx.function.constants import SUBGRAPH

EXPORTS = {
    "default": lambda: onnx_model(),
    "fixed C": lambda: onnx_model(dims=("T", "N", 28)),
    "inline": lambda: onnx_model(inline=True),
    "inline, fixed C": lambda: onnx_model(dims=("T", "N", 40), inline=True),
    "static": lambda: onnx_model(dims=(30, 4, 28), inline=True, static=True),
    "released": lambda: released_model(blank_index=True),
}
PROVIDER = "OpenVINOExecutionProvider"


def _graphs(model: onnx.ModelProto) -> list[onnx.GraphProto | onnx.FunctionProto]:
    """The model's graph, its functions and every subgraph under them."""
    found: list[onnx.GraphProto | onnx.FunctionProto] = [model.graph, *model.functions]
    for graph in list(found):
        stack = list(graph.node)
        while stack:
            node = stack.pop()
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    found.append(attribute.g)
                    stack += attribute.g.node
    return found


@pytest.mark.parametrize("export", EXPORTS)
def test_every_subgraph_has_the_name_the_provider_takes_whole(export: str) -> None:
    subgraphs = _graphs(EXPORTS[export]())[1:]
    bodies = [g for g in subgraphs if isinstance(g, onnx.GraphProto)]
    assert bodies and {g.name for g in bodies} == {SUBGRAPH}
    assert all(g.doc_string for g in bodies)


@pytest.mark.parametrize("export", EXPORTS)
def test_no_reduction_alone_reads_a_concat(export: str) -> None:
    # OpenVINO 2025.4 fuses ReduceMax(Concat(a, b)), the Concat read by nothing else, into an
    # elementwise Maximum of a and b.
    for graph in _graphs(EXPORTS[export]()):
        readers = Counter(name for node in graph.node for name in node.input)
        concats = {node.output[0] for node in graph.node if node.op_type == "Concat" and readers[node.output[0]] == 1}
        assert not [n.output[0] for n in graph.node if n.op_type.startswith("Reduce") and n.input[0] in concats]


def test_a_loop_outside_any_subgraph_has_typed_outputs() -> None:
    # OpenVINO's CPU plugin takes no input of unknown rank, and ONNX infers none for a Loop's outputs.
    model = onnx_model(dims=("T", "N", 40), inline=True)
    loops = [node for node in model.graph.node if node.op_type == "Loop"]
    typed = {info.name: len(info.type.tensor_type.shape.dim) for info in model.graph.value_info}
    assert loops and all(typed.get(name, 0) >= 2 for loop in loops for name in loop.output)


@pytest.mark.parametrize("export", EXPORTS)
def test_no_loop_carries_a_value_that_grows_by_concat(export: str) -> None:
    # D58: the OpenVINO inside onnxruntime-openvino 1.24.1 keeps only the last iteration's part.
    loops = [n for g in _graphs(EXPORTS[export]()) for n in g.node if n.op_type == "Loop"]
    for loop in loops:
        (body,) = [a.g for a in loop.attribute if a.name == "body"]
        carried = {i.name for i in body.input[2:]}
        assert not [n.name for n in body.node if n.op_type == "Concat" and carried & set(n.input)], body.doc_string


def _session(model: onnx.ModelProto) -> onnxruntime.InferenceSession:
    if PROVIDER not in onnxruntime.get_available_providers():
        pytest.skip(f"{PROVIDER} is not here: onnxruntime-openvino replaces onnxruntime (a venv of its own)")
    return onnxruntime.InferenceSession(
        model.SerializeToString(), providers=[PROVIDER], provider_options=[{"device_type": "CPU"}]
    )


def _reported() -> dict:
    """The names D58's report in docs/defects.md defines: model, feeds, expected."""
    names: dict = {}
    exec(docs_blocks()[("defects.md", "import numpy as np")], names)
    return names


def test_d58s_reported_model_is_right_on_onnxruntime_and_openvino() -> None:
    d58 = _reported()
    session = onnxruntime.InferenceSession(d58["model"].SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, d58["feeds"])[0], d58["expected"])
    core = openvino.Core()
    compiled = core.compile_model(core.read_model(d58["model"].SerializeToString(), b""), "CPU")
    np.testing.assert_array_equal(compiled(d58["feeds"])[0], d58["expected"])


def test_d58_the_provider_keeps_only_the_last_iteration_of_a_growing_carried_value() -> None:
    d58 = _reported()
    (got,) = _session(d58["model"]).run(None, d58["feeds"])
    reproduces("D58", got.tolist() == [[[8.0]], [[11.0]]], f"gives {got.tolist()}")


def _cases():
    # The last two read their frame terms in more than one chunk (T * N * C > 2^18, C > 32).
    rng = np.random.default_rng(5)
    chunked = [
        Case.spec(f"chunked {t},{n},{c}", *_random_batch(rng, t, n, c)) for t, n, c in [(60, 2, 5000), (9, 1, 40000)]
    ]
    return [*edge_cases(), *random_cases(5, 16, max_t=40, max_c=40, max_n=5), *chunked]


def _random_batch(rng: np.random.Generator, t: int, n: int, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    labels = np.full((n, t), -1, np.int64)
    labels[:, : t // 3] = rng.integers(0, c - 1, size=(n, t // 3))
    return (rng.normal(size=(t, n, c)) * 3).astype(np.float32), np.ones((t, n), np.int32), labels


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("inline", [False, True], ids=["function", "inline"])
def test_the_dynamic_export_agrees_with_the_reference_on_the_provider(dtype: str, inline: bool) -> None:
    by_attributes: dict[tuple[bool, bool], list] = {}
    for case in _cases():
        by_attributes.setdefault(tuple(case.attributes.values()), []).append(case)
    for cases in by_attributes.values():
        attributes = dict(cases[0].attributes)
        session = _session(onnx_model(dtype=dtype, attributes=attributes, inline=inline))
        for case in cases:
            feeds = {**case.inputs, "inputs": case.inputs["inputs"].astype(dtype)}
            expected = ctcop.ctc_loss_or_nan(feeds["inputs"], feeds["sequence_mask"], feeds["labels"], **attributes)
            (got,) = session.run(None, feeds)
            assert got.dtype == expected.dtype, case.id
            # Float32 rounding at most (float64 models run on the CPU provider: the plugin has no float64).
            np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-4, err_msg=case.id)


def test_the_released_form_agrees_with_the_reference_on_the_provider() -> None:
    rng = np.random.default_rng(3)
    session = _session(released_model())
    for n, t, c in [(4, 30, 28), (3, 7, 5), (5, 45, 40), (2, 0, 4), (0, 4, 3), (3, 6, 1)]:
        logits = (rng.normal(size=(n, t, c)) * 3).astype(np.float32)
        logit_length = rng.integers(0, t + 1, size=n)
        label_length = np.array([rng.integers(0, length // 2 + 1) for length in logit_length], np.int64)
        labels = rng.integers(0, max(c - 1, 1), size=(n, t))
        expected = ctcop.openvino_ctc_loss_or_nan(logits, logit_length, labels, label_length)
        feeds = {"logits": logits, "logit_length": logit_length, "labels": labels, "label_length": label_length}
        (got,) = session.run(None, feeds)
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-4, err_msg=str((n, t, c)))
