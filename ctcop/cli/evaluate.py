"""``ctcop eval``: what the CTCLoss layers of a user's IR or ONNX file compute, by the reference
and by the runtime (spec 13)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from ..files import checked_input_file, checked_output, fingerprint, refuse_overwriting_inputs, write_atomically
from ..process.frameworks import versions
from ..text import printable
from . import arguments
from .models import model_files
from .output import show
from .signals import interruption, raise_dropped

if TYPE_CHECKING:
    from ..layers.find import Layer
    from ..layers.model import OpenedModel
    from ..layers.result import LayerResult
    from .arguments import Commands

_VERSIONED = ("ctcop", "numpy", "onnx", "onnxruntime", "openvino")


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("eval", help="what the CTCLoss layers of an IR/ONNX file compute, and the runtime")
    parser.add_argument("model", help="an IR .xml (its .bin beside it) or an .onnx file")
    parser.add_argument("--inputs", metavar="FILE.npz", help="the model's inputs, keyed by input name")
    parser.add_argument(
        "--seed",
        type=arguments.integer(0, arguments.MAX_SEED),
        help="seed of the random inputs (without --inputs; default 0)",
    )
    parser.add_argument(
        "--layer", action="append", type=arguments.text("layer name"), help="only this layer (repeatable)"
    )
    parser.add_argument(
        "--runtime", choices=["openvino", "onnxruntime"], help="default: openvino for IR, onnxruntime for ONNX"
    )
    parser.add_argument(
        "--device", type=arguments.pattern("OpenVINO device", arguments.DEVICE), help="OpenVINO device (default CPU)"
    )
    parser.add_argument(
        "--precision",
        choices=["declared", "native"],
        help="OpenVINO's inference precision: the layer's declared type (default) or the device's default",
    )
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="also evaluate the native CTCLoss-4 kernels inside ctcop's lowerings (what they are fed, not the model)",
    )
    parser.add_argument("--json", help="write the results to this file")
    parser.set_defaults(run=run)


@dataclass
class _Evaluation:
    """What is known of the run as it goes: the runtime, the device and the results as they
    come, so that an interruption can report them."""

    model: str
    runtime: str
    device: str
    results: list[LayerResult] = field(default_factory=list)

    def document(self, interrupted_by: str | None) -> str:
        """The ``--json`` report of the results so far (:func:`ctcop.layers.report.document`)."""
        from ..layers import report

        return report.document(
            self.model, self.runtime, self.device, versions(_VERSIONED), self.results, interrupted_by=interrupted_by
        )


def _checked(args: argparse.Namespace) -> None:
    """Refuse the output path, the inputs file and options this combination would ignore."""
    if args.json is not None:
        given = [*model_files(args.model), *([args.inputs] if args.inputs is not None else [])]
        checked_output(args.json, "json")
        refuse_overwriting_inputs(args.json, "json", given)
    if args.inputs is not None:
        arguments.refuse_ignored(args, ["seed"], "with --inputs (it seeds the random inputs drawn without it)")
        checked_input_file(args.inputs, "inputs")
    if args.runtime == "onnxruntime":
        arguments.refuse_ignored(args, ["device"], "with --runtime onnxruntime (it is an OpenVINO device)")


def _selected_layers(opened: OpenedModel, names: list[str] | None) -> list[Layer]:
    if not names:
        return list(opened.layers)
    known = {printable(layer.name): layer for layer in opened.layers}  # as validate shows them
    for name in names:
        if name not in known:
            raise InvalidInputError("layer", f"no CTCLoss layer named {name!r}; have {', '.join(known)}")
    return [known[name] for name in names]


def _evaluate(args: argparse.Namespace, evaluation: _Evaluation) -> None:
    """Open the model, draw or check its inputs and evaluate its layers into ``evaluation``."""
    from ..layers import evaluate, feeds, files, model

    read = model_files(args.model)
    before = fingerprint(read)
    opened = model.open_model(args.model, args.kernels)
    layers = _selected_layers(opened, args.layer)
    runtime = args.runtime or ("openvino" if opened.file.kind == "ir" else "onnxruntime")
    if runtime == "onnxruntime" and opened.file.kind == "ir":
        raise InvalidInputError("runtime", "onnxruntime runs ONNX files only; an IR runs on openvino")
    evaluation.runtime = runtime
    if runtime == "onnxruntime":
        arguments.refuse_ignored(args, ["precision"], "with onnxruntime (it is OpenVINO's inference precision)")
    if runtime == "openvino":
        from ..openvino.files import checked_device

        checked_device(evaluation.device)
    if args.inputs:
        chosen = feeds.checked_feeds(files.load_inputs(args.inputs), opened.inputs)
    else:
        chosen = feeds.random_feeds(opened.inputs, list(opened.layers), 0 if args.seed is None else args.seed)
    precision = args.precision or "declared"
    kind, device, results = opened.file.kind, evaluation.device, evaluation.results
    evaluate.evaluate_layers(args.model, kind, layers, chosen, runtime, device, results, precision, args.kernels)
    if fingerprint(read) != before:  # the runtime's worker reads the files again: they must be the ones checked
        results.clear()
        raise InvalidInputError("model", f"{args.model!r} changed while ctcop eval read it; nothing is reported")


def run(args: argparse.Namespace) -> int:
    """Evaluate every CTCLoss layer of a user's model by the reference and by the runtime."""
    _checked(args)
    from ..layers import report

    evaluation = _Evaluation(args.model, args.runtime or "", args.device or "CPU")
    try:
        _evaluate(args, evaluation)
        raise_dropped()
    except BaseException as error:
        interrupted = interruption(error)
        if interrupted is None:
            raise
        if args.json:
            write_atomically(args.json, evaluation.document(interrupted.name))
            interrupted.report = args.json
        raise interrupted from None
    if args.json:  # before the table: a stdout that blocks or fails cannot cost the report
        write_atomically(args.json, evaluation.document(None))
    show(*report.format_table(evaluation.results))
    agree = all(result.verdict == "agree" for result in evaluation.results)
    return ExitCode.OK if agree else ExitCode.FAILURES
