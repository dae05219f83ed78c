"""The runtime side of ``ctcop eval``, in a worker process of its own (:func:`evaluate`, run by
:class:`ctcop.process.workers.Worker`).

For each requested layer from ``start`` on it writes ``K.precision.json`` (the inference precision
OpenVINO compiled the model at, under the request's ``precision``: spec 13), ``K.inputs.npz`` (the
layer's input values, computed by the runtime from the model's inputs) and then ``K.loss.npy`` (the
layer's output) or ``K.error.txt``. A runtime that kills the process (OpenVINO's kernel on an empty
target, spec 12.2 D1) leaves the inputs without a loss: the parent reports a crash and starts a
fresh worker after that layer.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import numpy as np

from ..text import ends


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
    """The values of ``outputs`` and the inference precision OpenVINO compiled them at. Each value
    is read by a tensor name of its own: a device may return outputs in another order (HETERO)."""
    import openvino
    import openvino.opset15 as ops

    from ..openvino.files import openvino_core
    from ..openvino.precision import compiled_precision

    names = [_value_name(model, output) for output in outputs]
    sub = openvino.Model([ops.result(output) for output in outputs], model.get_parameters())
    unranked = {  # the CPU plugin compiles no input of dynamic rank: it takes the fed array's
        parameter.output(0): openvino.PartialShape(list(feeds[name].shape))
        for parameter in sub.get_parameters()
        if parameter.get_output_partial_shape(0).rank.is_dynamic
        for name in [n for n in sorted(parameter.output(0).get_names()) if n in feeds][:1]
    }
    if unranked:
        sub.reshape(unranked)
    compiled = openvino_core().compile_model(sub, device, config)
    result = compiled(_fed(compiled, feeds))
    return [np.asarray(result[name]) for name in names], compiled_precision(compiled)


_VALUE = "ctcop.value."
_ADDED: set[str] = set()  # the names this worker gave tensors
_TAKEN: dict[int, set[str]] = {}  # by id(model): the tensor names of the model, read once


def _value_name(model: Any, output: Any) -> str:
    """A tensor name of ``output`` that no other tensor of ``model`` has (added once, then kept)."""
    own: list[str] = sorted(name for name in output.get_names() if name in _ADDED)
    if own:
        return own[0]
    if id(model) not in _TAKEN:
        _TAKEN[id(model)] = {name for op in model.get_ops() for out in op.outputs() for name in out.get_names()}
    taken = _TAKEN[id(model)]
    name = f"{_VALUE}{len(_ADDED)}"
    while name in taken:
        name += "_"
    output.get_tensor().add_names({name})
    taken.add(name)
    _ADDED.add(name)
    return name


def _fed(compiled: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``feeds`` by a name of each input of ``compiled`` (a name added since need not come first)."""
    chosen = {}
    for port in compiled.inputs:
        name = next((name for name in sorted(port.get_names()) if name in feeds), port.get_any_name())
        chosen[name] = feeds[name]
    return chosen


def _ir_layers(request: dict[str, Any], feeds: dict[str, np.ndarray]) -> None:
    from .files import load_ir_model
    from .find import openvino_endpoints

    model = load_ir_model(request["model"])
    layers = openvino_endpoints(model, request["kernels"])
    for index in request["layers"][request["start"] :]:
        layer = layers[index]
        try:  # the runtime's refusal, of the layer's inputs or of the layer, is a finding
            config = _config(request, layer.inputs[0].get_element_type())
            inputs, precision = _openvino_values(model, list(layer.inputs), feeds, request["device"], config)
            _write(request, index, "precision.json", precision)
            _write(request, index, "inputs.npz", inputs)
            (loss,), _ = _openvino_values(model, [layer.output], feeds, request["device"], config)
        except Exception as error:
            _write(request, index, "error.txt", error)
            continue
        _write(request, index, "loss.npy", loss)


def _onnx_values(
    model: Any,
    names: list[str],
    feeds: dict[str, np.ndarray],
    request: dict[str, Any],
    declared: str,
    inferred: dict[str, Any],
) -> tuple[list[Any], str | None]:
    """The values of ``names`` and the inference precision OpenVINO compiled them at (None for
    onnxruntime, which computes the model's own types); ``declared`` is the layers' logits' type,
    ``inferred`` the model's value infos by name (shape inference, run once)."""
    import onnx

    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    present = {o.name for o in extended.graph.output}
    for name in dict.fromkeys(names):
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
    result = compiled(_fed(compiled, feeds))
    return [np.asarray(result[name]) for name in names], compiled_precision(compiled)


def _onnx_layers(request: dict[str, Any], feeds: dict[str, np.ndarray]) -> None:
    """Each requested ONNX layer's inputs and output. With ``request["batch"]`` the layers of one
    logits type share one session over the whole model (eval's cost linear in layers); a session
    that fails is retried layer by layer, so that a refusal is the finding of its own layer (the
    parent runs a worker that died in a batch again without it, so a crash is placed too)."""

    from ..onnx.files import inferred_shapes
    from .files import load_onnx_model
    from .find import onnx_layers

    model = load_onnx_model(request["model"])
    layers = onnx_layers(model)
    inferred = {v.name: v for v in inferred_shapes(model).graph.value_info}
    pending = [layers[index] for index in request["layers"][request["start"] :]]
    wanted = {
        layer.index: [*(p.value for p in layer.ports if p.constant is None and p.value not in feeds), layer.output]
        for layer in pending
    }
    batches: dict[str, tuple[dict[str, Any], str | None]] = {}
    for declared in dict.fromkeys(layer.ports[0].dtype for layer in pending) if request.get("batch") else ():
        names = list(
            dict.fromkeys(n for layer in pending if layer.ports[0].dtype == declared for n in wanted[layer.index])
        )
        with contextlib.suppress(Exception):  # each layer alone then says which the runtime refuses
            found, precision = _onnx_values(model, names, feeds, request, declared, inferred)
            batches[declared] = dict(zip(names, found, strict=True)), precision
    for layer in pending:
        index = layer.index
        if layer.ports[0].dtype in batches:
            values, precision = batches[layer.ports[0].dtype]
        else:
            try:
                found, precision = _onnx_values(model, wanted[index], feeds, request, layer.ports[0].dtype, inferred)
            except Exception as error:  # the runtime's refusal is a finding
                _write(request, index, "error.txt", error)
                continue
            values = dict(zip(wanted[index], found, strict=True))
        _write(request, index, "precision.json", precision)
        inputs = [
            p.constant if p.constant is not None else feeds.get(p.value, values.get(p.value)) for p in layer.ports
        ]
        odd = next((p.name for p, v in zip(layer.ports, inputs, strict=True) if np.asarray(v).dtype.hasobject), None)
        if odd is not None:  # a sparse tensor, a sequence: what the layer reads is not a tensor
            _write(request, index, "error.txt", TypeError(f"the runtime gives the layer's {odd} as no tensor"))
            continue
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
        with open(path, "w", encoding="utf-8") as file:
            file.write(f"{type(value).__name__}: {ends(value)}")


def evaluate(request: dict[str, Any]) -> None:
    """Write the files of the requested layers (module docstring); the answer is the files."""
    with np.load(request["feeds"], allow_pickle=False) as archive:
        feeds = {name: archive[f"arr_{k}"] for k, name in enumerate(request["feed_names"])}
    (_ir_layers if request["kind"] == "ir" else _onnx_layers)(request, feeds)
