"""The runtime side of ``ctcop eval``, in its own process (``python -m ctcop.layers.worker REQUEST``).

For each requested layer from ``start`` on it writes ``K.precision.json`` (the inference precision
OpenVINO compiled the model at, under the request's ``precision``: spec 13), ``K.inputs.npz`` (the
layer's input values, computed by the runtime from the model's inputs) and then ``K.loss.npy`` (the
layer's output) or ``K.error.txt``, printing one line after each file. A runtime that kills the
process (OpenVINO's kernel on an empty target, spec 12.2 D1) leaves the inputs without a loss: the
parent reports a crash and starts a fresh worker after that layer.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import numpy as np


def _config(request: dict[str, Any], element_type: Any) -> dict[str, str]:
    """The compile config of ``--precision``: the layer's declared precision (``element_type``, its
    logits' type) or, for ``native``, the device's default (spec 13)."""
    if request["precision"] == "native":
        return {}
    from ..openvino.files import openvino_core
    from ..openvino.precision import declared_precision_config

    return declared_precision_config(openvino_core(), request["device"], element_type)


def _openvino_values(
    model: Any, outputs: list[Any], feeds: dict[str, np.ndarray], device: str, config: dict[str, str]
) -> tuple[list[np.ndarray], str | None]:
    """The values of ``outputs`` and the inference precision OpenVINO compiled them at."""
    import openvino
    import openvino.opset15 as ops

    from ..openvino.files import openvino_core
    from ..openvino.precision import compiled_precision

    sub = openvino.Model([ops.result(output) for output in outputs], model.get_parameters())
    compiled = openvino_core().compile_model(sub, device, config)
    result = compiled({i.get_any_name(): feeds[i.get_any_name()] for i in compiled.inputs})
    return [np.asarray(result[compiled.output(k)]) for k in range(len(outputs))], compiled_precision(compiled)


def _ir_layers(request: dict[str, Any], feeds: dict[str, np.ndarray]) -> None:
    from ..openvino.files import load_ir
    from .find import openvino_layer_nodes

    model = load_ir(request["model"])
    nodes = openvino_layer_nodes(model)
    for index in request["layers"][request["start"] :]:
        node = nodes[index]
        config = _config(request, node.get_input_element_type(0))
        inputs, precision = _openvino_values(model, list(node.input_values()), feeds, request["device"], config)
        _write(request, index, "precision.json", precision)
        _write(request, index, "inputs.npz", inputs)
        try:
            (loss,), _ = _openvino_values(model, [node.output(0)], feeds, request["device"], config)
        except Exception as error:  # the runtime's refusal is a finding
            _write(request, index, "error.txt", error)
            continue
        _write(request, index, "loss.npy", loss)


def _onnx_values(
    model: Any, names: list[str], feeds: dict[str, np.ndarray], request: dict[str, Any], declared: str
) -> tuple[list[Any], str | None]:
    """The values of ``names`` and the inference precision OpenVINO compiled them at (None for
    onnxruntime, which computes the model's own types); ``declared`` is the layer's logits' type."""
    import onnx

    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    present = {o.name for o in extended.graph.output}
    for name in names:
        if name not in present:
            extended.graph.output.append(inferred.get(name) or onnx.helper.make_empty_tensor_value_info(name))
    if request["runtime"] == "onnxruntime":
        import onnxruntime

        from ..onnx import session_options

        options = session_options()
        session = onnxruntime.InferenceSession(
            extended.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        return list(session.run(names, {i.name: feeds[i.name] for i in session.get_inputs()})), None
    from ..openvino.files import openvino_core
    from ..openvino.precision import compiled_precision

    core = openvino_core()
    config = _config(request, declared)
    compiled = core.compile_model(core.read_model(extended.SerializeToString(), b""), request["device"], config)
    result = compiled({i.get_any_name(): feeds[i.get_any_name()] for i in compiled.inputs})
    return [np.asarray(result[name]) for name in names], compiled_precision(compiled)


def _onnx_layers(request: dict[str, Any], feeds: dict[str, np.ndarray]) -> None:
    from .files import load_onnx_model
    from .find import onnx_layers

    model = load_onnx_model(request["model"])
    layers = onnx_layers(model)
    for index in request["layers"][request["start"] :]:
        layer = layers[index]
        wanted = [*(p.value for p in layer.ports if p.constant is None and p.value not in feeds), layer.output]
        try:
            found, precision = _onnx_values(model, wanted, feeds, request, layer.ports[0].dtype)
        except Exception as error:  # the runtime's refusal is a finding
            _write(request, index, "error.txt", error)
            continue
        values = dict(zip(wanted, found, strict=True))
        _write(request, index, "precision.json", precision)
        inputs = [
            p.constant if p.constant is not None else feeds.get(p.value, values.get(p.value)) for p in layer.ports
        ]
        _write(request, index, "inputs.npz", inputs)
        _write(request, index, "loss.npy", values[layer.output])


def _write(request: dict[str, Any], index: int, kind: str, value: Any) -> None:
    path = os.path.join(request["out"], f"{index}.{kind}")
    if kind == "inputs.npz":
        np.savez(path, *value)
    elif kind == "loss.npy":
        np.save(path, value)
    elif kind == "precision.json":
        with open(path, "w", encoding="utf-8") as file:
            json.dump({"compiled": value}, file)
    else:
        lines = str(value).strip().splitlines() or [type(value).__name__]
        with open(path, "w", encoding="utf-8") as file:
            file.write(f"{type(value).__name__}: {lines[-1][:300]}")
    print(json.dumps({"index": index, "wrote": kind}), flush=True)


def main(request_path: str) -> None:
    # A Ctrl-C reaches the whole process group: the parent stops this worker itself and reports.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with open(request_path, encoding="utf-8") as file:
        request = json.load(file)
    with np.load(request["feeds"], allow_pickle=False) as archive:
        feeds = {name: archive[name] for name in archive.files}
    (_ir_layers if request["kind"] == "ir" else _onnx_layers)(request, feeds)


if __name__ == "__main__":
    main(sys.argv[1])
