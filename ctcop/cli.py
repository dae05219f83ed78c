"""The ``ctcop`` command line. Invalid input ends in one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .attributes import Attributes
from .errors import InvalidInputError
from .examples import worked_examples
from .reference import ctc_loss
from .schema import form


def _example(_: argparse.Namespace) -> int:
    """Evaluate the worked examples of spec/ctcloss4.md section 9 and print them."""
    for example in worked_examples():
        loss = ctc_loss(example.inputs, example.sequence_mask, example.labels, **example.attributes)
        print(f"spec {example.section} {example.name} [{example.attributes.label()}]:")
        print(f"  ctcop loss {loss[0]:.16g}   by hand {example.closed_form} = {example.expected:.16g}")
    return 0


def _dims(text: str) -> tuple[int | str, ...]:
    return tuple(int(part) if part.strip().lstrip("-").isdigit() else part.strip() for part in text.split(","))


def _attributes(args: argparse.Namespace) -> Attributes:
    return Attributes.of({name: getattr(args, name) for name in form("time_major").attributes})


def _export(args: argparse.Namespace) -> int:
    """Write the op, or a model with the op attached, as ONNX or OpenVINO IR."""
    common: dict[str, Any] = {
        "mask_dtype": args.mask_dtype,
        "labels_dtype": args.labels_dtype,
        "attributes": _attributes(args),
    }
    if args.attach:
        for option, value in (("dtype", args.dtype), ("dims", args.dims)):
            if value is not None:
                raise InvalidInputError(option, "with --attach it comes from the model's logits output")
    else:
        common |= {"dtype": args.dtype or "float32", "dims": _dims(args.dims or "T,N,C")}
    if args.format == "onnx":
        from . import onnx as wing

        if args.attach:
            model = wing.attach_onnx(wing.load_onnx(args.attach), args.logits_output, opset=args.opset, **common)
        else:
            model = wing.onnx_model(opset=args.opset, **common)
        wing.save_onnx(model, args.output)
    else:
        from . import openvino as ov_wing

        if args.attach:
            logits: str | int = int(args.logits_output) if args.logits_output.isdigit() else args.logits_output
            model = ov_wing.attach_openvino(ov_wing.load_ir(args.attach), logits, form=args.form, **common)
        else:
            model = ov_wing.ir_model(form=args.form, **common)
        ov_wing.save_ir(model, args.output)
    print(f"wrote {args.output}")
    return 0


def _conformance(args: argparse.Namespace) -> int:
    """Measure the installed runtimes against the reference on the bundled corpus."""
    from .conformance import report, runner

    if args.write_corpus:
        try:
            count = runner.write_corpus(args.write_corpus)
        except OSError as error:
            raise InvalidInputError("write_corpus", f"cannot write {args.write_corpus!r}: {error.strerror}") from None
        print(f"wrote {count} cases to {args.write_corpus}")
        return 0
    available = runner.available_runtimes()
    chosen = args.runtimes.split(",") if args.runtimes else available
    unknown = [name for name in chosen if name not in available]
    if unknown:
        raise InvalidInputError(
            "runtimes", f"unknown or not installed: {', '.join(unknown)}; have {', '.join(available)}"
        )
    total = len(runner.corpus(args.cases))
    if total == 0:
        raise InvalidInputError("cases", f"{args.cases!r} matches no case of the corpus")
    reports = [runner.run_runtime(name, args.cases) for name in chosen]
    print(report.format_report(reports, total, details=args.details))
    if args.json:
        document = {r.runtime: r.outcomes for r in reports}
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1)
    failing = [r.runtime for r in reports if r.count("pass") != total]
    return 1 if args.strict and failing else 0


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("ctcop", "numpy", "onnx", "onnxruntime", "openvino"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def _selected_layers(opened: Any, names: list[str] | None) -> list[Any]:
    if not names:
        return list(opened.layers)
    known = {layer.name: layer for layer in opened.layers}
    for name in names:
        if name not in known:
            raise InvalidInputError("layer", f"no CTCLoss layer named {name!r}; have {', '.join(known)}")
    return [known[name] for name in names]


def _eval(args: argparse.Namespace) -> int:
    """Evaluate every CTCLoss layer of a user's model by the reference and by the runtime."""
    from .layers import evaluate, feeds, files, model, report

    opened = model.open_model(args.model)
    layers = _selected_layers(opened, args.layer)
    runtime = args.runtime or ("openvino" if opened.file.kind == "ir" else "onnxruntime")
    if runtime == "onnxruntime" and opened.file.kind == "ir":
        raise InvalidInputError("runtime", "onnxruntime runs ONNX files only; an IR runs on openvino")
    if args.inputs:
        chosen = feeds.checked_feeds(files.load_inputs(args.inputs), opened.inputs)
    else:
        chosen = feeds.random_feeds(opened.inputs, list(opened.layers), args.seed)
    results = evaluate.evaluate_layers(args.model, opened.file.kind, layers, chosen, runtime, args.device)
    print(report.format_table(results))
    if args.json:
        text = report.document(args.model, runtime, args.device, _versions(), results)
        try:
            with open(args.json, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError as error:
            raise InvalidInputError("json", f"cannot write {args.json!r}: {error.strerror}") from None
    return 0 if all(result.verdict == "agree" for result in results) else 1


def _validate(args: argparse.Namespace) -> int:
    """List the CTCLoss layers of a model and check each against the spec and the schema."""
    from .layers import model, validate

    opened = model.open_model(args.model)
    errors = 0
    for layer in opened.layers:
        flags = ",".join(f"{k}={v}" for k, v in layer.attributes.items())
        print(f"layer {layer.name} [{layer.form}] {flags}")
        for port in layer.ports:
            shape = (
                "?" if port.shape is None else "[" + ",".join("?" if d is None else str(d) for d in port.shape) + "]"
            )
            constant = f" = {port.constant.tolist()}" if port.constant is not None and port.constant.size <= 8 else ""
            print(f"  {port.name:<16}{port.dtype:<9}{shape:<14}from {port.producer}{constant}")
        for finding in validate.validate_layer(layer):
            errors += finding.level == "error"
            print(f"  {finding.line()}")
    print(f"{len(opened.layers)} layer(s), {errors} error(s)")
    return 1 if errors else 0


def _attribute_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per attribute of the spec's form, each flipping the schema's default."""
    for name, default in form("time_major").attributes.items():
        flag = name.replace("_", "-")
        if default:
            parser.add_argument(f"--no-{flag}", dest=name, action="store_false", help=f"{name} = false")
        else:
            parser.add_argument(f"--{flag}", dest=name, action="store_true", help=f"{name} = true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctcop", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ctcop {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    example = commands.add_parser("example", help="evaluate the spec's worked examples")
    example.set_defaults(run=_example)

    suite = commands.add_parser("conformance", help="measure installed runtimes against the reference")
    suite.add_argument("--runtimes", help="comma-separated adapters (default: all installed)")
    suite.add_argument("--cases", default="*", help="glob over case names, e.g. 'empty_*/float32' (default: all)")
    suite.add_argument("--details", type=int, default=5, help="problems listed per runtime")
    suite.add_argument("--json", help="write every case's outcome to this file")
    suite.add_argument("--strict", action="store_true", help="exit 1 when any runtime has a problem")
    suite.add_argument(
        "--write-corpus", metavar="DIR", help="write the corpus with expected losses as .npz files instead"
    )
    suite.set_defaults(run=_conformance)

    exporter = commands.add_parser("export", help="write CTCLoss-4 as ONNX or OpenVINO IR, or attach it to a model")
    exporter.add_argument("--format", choices=["onnx", "ir"], default="onnx")
    exporter.add_argument(
        "--form", choices=["lowered", "custom"], default="lowered", help="IR only: stock ops or one layer"
    )
    exporter.add_argument("-o", "--output", required=True, help="file to write")
    exporter.add_argument("--dtype", help="logits element type: float16, float32 (default), float64")
    exporter.add_argument("--mask-dtype", default="int32")
    exporter.add_argument("--labels-dtype", default="int64")
    exporter.add_argument("--dims", help="T,N,C: each a number or a symbolic name (default T,N,C)")
    _attribute_flags(exporter)
    exporter.add_argument("--opset", type=int, default=18, help="ONNX only")
    exporter.add_argument("--attach", metavar="MODEL", help="add the loss to this model instead")
    exporter.add_argument("--logits-output", default="logits", help="with --attach: the [T,N,C] output (name or index)")
    exporter.set_defaults(run=_export)

    evaluator = commands.add_parser("eval", help="what the CTCLoss layers of an IR/ONNX file compute, and the runtime")
    evaluator.add_argument("model", help="an IR .xml (its .bin beside it) or an .onnx file")
    evaluator.add_argument("--inputs", metavar="FILE.npz", help="the model's inputs, keyed by input name")
    evaluator.add_argument("--seed", type=int, default=0, help="seed of the random inputs (without --inputs)")
    evaluator.add_argument("--layer", action="append", help="only this layer (repeatable)")
    evaluator.add_argument(
        "--runtime", choices=["openvino", "onnxruntime"], help="default: openvino for IR, onnxruntime for ONNX"
    )
    evaluator.add_argument("--device", default="CPU", help="OpenVINO device (default CPU)")
    evaluator.add_argument("--json", help="write the results to this file")
    evaluator.set_defaults(run=_eval)

    checker = commands.add_parser("validate", help="list and statically check the CTCLoss layers of an IR/ONNX file")
    checker.add_argument("model", help="an IR .xml (its .bin beside it) or an .onnx file")
    checker.set_defaults(run=_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except InvalidInputError as error:
        print(f"ctcop: invalid input: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
