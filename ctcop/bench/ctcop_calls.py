"""ctcop's side of the bench: its evaluator (loss, and loss with gradient), its float32 ONNX
export in onnxruntime and in OpenVINO (and the lowered IR), and a floor (one float64 exp pass
over the logits). Models are built once per process and thread count."""

from __future__ import annotations

import os
import tempfile
from functools import cache
from typing import Any

import numpy as np

import ctcop

from ..process.frameworks import framework
from ..schema import form
from .prepared import Prepare, Prepared, Result, openvino_config, openvino_infer
from .shapes import Inputs

# -- the evaluator ---------------------------------------------------------------------------


def ctcop_forward(x: Inputs, _: int) -> Prepared:
    return Prepared(lambda: (ctcop.ctc_loss(x.logits, x.mask, x.labels), None))


def ctcop_grad(x: Inputs, _: int) -> Prepared:
    def call() -> Result:
        loss, grad = ctcop.ctc_loss_grad(x.logits, x.mask, x.labels)
        return loss, grad

    return Prepared(call)


# -- ctcop's exports -------------------------------------------------------------------------


@cache
def _onnx_bytes() -> bytes:
    from ..onnx import onnx_model

    return bytes(onnx_model(dtype="float32", mask_dtype="int32", labels_dtype="int64").SerializeToString())


@cache
def onnxruntime_session(threads: int, arena: bool = True) -> Any:
    """onnxruntime's CPU session of ctcop's float32 export with the options ctcop documents
    (``ctcop.onnx.session_options``): ``threads`` intra-op threads, the CPU memory arena unless
    ``arena`` is False."""
    from ..onnx import session_options

    ort = framework("onnxruntime")
    options = session_options(threads, arena=arena)
    return ort.InferenceSession(_onnx_bytes(), options, providers=["CPUExecutionProvider"])


def onnxruntime(arena: bool) -> Prepare:
    def prepare(x: Inputs, threads: int) -> Prepared:
        session = onnxruntime_session(threads, arena)
        feeds = dict(zip(form("time_major").input_names, (x.logits, x.mask, x.labels), strict=True))
        return Prepared(lambda: (session.run(None, feeds)[0], None))

    return prepare


@cache
def _openvino_onnx_model(threads: int) -> Any:
    from ..openvino import openvino_core

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ctc_loss.onnx")
        with open(path, "wb") as file:
            file.write(_onnx_bytes())
        core = openvino_core()
        return core.compile_model(core.read_model(path), "CPU", openvino_config(threads))


@cache
def _openvino_ir_model(threads: int) -> Any:
    from ..openvino import ir_model

    model = ir_model(form="lowered", dtype="float32", mask_dtype="int32", labels_dtype="int64")
    return framework("openvino").Core().compile_model(model, "CPU", openvino_config(threads))


def openvino_onnx(x: Inputs, threads: int) -> Prepared:
    return openvino_infer(_openvino_onnx_model(threads), [x.logits, x.mask, x.labels])


def openvino_ir(x: Inputs, threads: int) -> Prepared:
    return openvino_infer(_openvino_ir_model(threads), [x.logits, x.mask, x.labels])


# -- a floor ---------------------------------------------------------------------------------


def exp_floor(x: Inputs, _: int) -> Prepared:
    """One float64 exp pass over the logits into a buffer allocated beforehand (numpy, one thread)."""
    out = np.empty(x.logits.shape, dtype=np.float64)
    return Prepared(lambda: (np.exp(x.logits, out=out, dtype=np.float64)[0, :, 0], None))
