"""The ``ctcop`` command line. Invalid input ends in one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

import numpy as np

from .errors import InvalidInputError
from .reference import ctc_loss


def _example(_: argparse.Namespace) -> int:
    """Evaluate the worked examples of spec/ctcloss4.md section 9 and print them."""
    probs = np.array([[0.5, 0.2, 0.3], [0.4, 0.1, 0.5], [0.6, 0.3, 0.1]])
    hand = ctc_loss(np.log(probs)[:, None, :], np.ones((3, 1), np.int8), np.array([[0, -1, -1]]))
    print("spec 9.1 (T=3, C=3, target (0)):")
    print(f"  ctcop loss {hand[0]:.16g}   by hand -ln(0.339) = {-math.log(0.339):.16g}")
    labels = np.array([[0, 3, 2, 2, -1, -1, -1, -1, -1]])
    print("spec 9.2, the seed's example (T=9, C=5, labels (0,3,2,2,-1,...), equal logits):")
    for merge, paths in ((True, 495), (False, 126)):
        loss = ctc_loss(np.zeros((9, 1, 5)), np.ones((9, 1), np.int8), labels, merge_repeated=merge)
        closed = 9 * math.log(5) - math.log(paths)
        print(f"  merge_repeated={merge!s:5}  ctcop loss {loss[0]:.16g}", end="")
        print(f"   9 ln 5 - ln {paths} = {closed:.16g}")
    return 0


def _dims(text: str) -> tuple[int | str, ...]:
    return tuple(int(part) if part.strip().lstrip("-").isdigit() else part.strip() for part in text.split(","))


def _export(args: argparse.Namespace) -> int:
    """Write the op, or a model with the op attached, as ONNX or OpenVINO IR."""
    from . import export

    attributes = {
        "preprocess_collapse_repeated": args.preprocess_collapse_repeated,
        "merge_repeated": not args.no_merge_repeated,
    }
    common = {"mask_dtype": args.mask_dtype, "labels_dtype": args.labels_dtype, "attributes": attributes}
    if args.format == "onnx":
        if args.attach:
            model = export.attach_onnx(export.load_onnx(args.attach), args.logits_output, opset=args.opset, **common)
        else:
            model = export.onnx_model(dtype=args.dtype, dims=_dims(args.dims), opset=args.opset, **common)
        export.save_onnx(model, args.output)
    else:
        if args.attach:
            logits: str | int = int(args.logits_output) if args.logits_output.isdigit() else args.logits_output
            model = export.attach_openvino(export.load_ir(args.attach), logits, form=args.form, **common)
        else:
            model = export.ir_model(form=args.form, dtype=args.dtype, dims=_dims(args.dims), **common)
        export.save_ir(model, args.output)
    print(f"wrote {args.output}")
    return 0


def _conformance(args: argparse.Namespace) -> int:
    """Measure the installed runtimes against the reference on the bundled corpus."""
    from . import conformance

    if args.write_corpus:
        try:
            count = conformance.write_corpus(args.write_corpus)
        except OSError as error:
            raise InvalidInputError("write_corpus", f"cannot write {args.write_corpus!r}: {error.strerror}") from None
        print(f"wrote {count} cases to {args.write_corpus}")
        return 0
    available = conformance.available_runtimes()
    chosen = args.runtimes.split(",") if args.runtimes else available
    unknown = [name for name in chosen if name not in available]
    if unknown:
        raise InvalidInputError(
            "runtimes", f"unknown or not installed: {', '.join(unknown)}; have {', '.join(available)}"
        )
    names = [case.name for case in conformance.corpus()]
    reports = [conformance.run_runtime(name, names) for name in chosen]
    print(conformance.format_report(reports, len(names), details=args.details))
    if args.json:
        document = {r.runtime: r.outcomes for r in reports}
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(document, file, indent=1)
    failing = [r.runtime for r in reports if r.count("pass") != len(names)]
    return 1 if args.strict and failing else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctcop", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    example = commands.add_parser("example", help="evaluate the spec's worked examples")
    example.set_defaults(run=_example)

    suite = commands.add_parser("conformance", help="measure installed runtimes against the reference")
    suite.add_argument("--runtimes", help="comma-separated adapters (default: all installed)")
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
    exporter.add_argument("--dtype", default="float32", help="logits element type: float16, float32, float64")
    exporter.add_argument("--mask-dtype", default="int32")
    exporter.add_argument("--labels-dtype", default="int64")
    exporter.add_argument("--dims", default="T,N,C", help="T,N,C: each a number or a symbolic name")
    exporter.add_argument("--preprocess-collapse-repeated", action="store_true")
    exporter.add_argument("--no-merge-repeated", action="store_true")
    exporter.add_argument("--opset", type=int, default=18, help="ONNX only")
    exporter.add_argument("--attach", metavar="MODEL", help="add the loss to this model instead")
    exporter.add_argument("--logits-output", default="logits", help="with --attach: the [T,N,C] output (name or index)")
    exporter.set_defaults(run=_export)
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
