"""``ctcop export``: CTCLoss-4 as an ONNX model or an OpenVINO IR (spec 11, 12), alone or
attached to a user's model."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..attributes import Attributes
from ..exit_codes import ExitCode
from ..files import checked_input_file, checked_output, refuse_overwriting_inputs
from ..schema import form
from . import arguments
from .models import model_files
from .output import show

if TYPE_CHECKING:
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("export", help="write CTCLoss-4 as ONNX or OpenVINO IR, or attach it to a model")
    parser.add_argument("--format", choices=["onnx", "ir"], default="onnx")
    parser.add_argument("--form", choices=["lowered", "custom"], help="IR only: stock ops (default) or one layer")
    parser.add_argument("-o", "--output", required=True, help="file to write (.xml for IR)")
    parser.add_argument("--dtype", help="logits element type: float16, float32 (default), float64")
    parser.add_argument("--mask-dtype", default="int32")
    parser.add_argument("--labels-dtype", default="int64")
    parser.add_argument("--dims", help="T,N,C: each a number or a symbolic name (default T,N,C)")
    _attribute_flags(parser)
    parser.add_argument("--opset", type=arguments.integer(0, 10**6), help="ONNX only (default 18)")
    parser.add_argument("--attach", metavar="MODEL", help="add the loss to this model instead")
    parser.add_argument(
        "--logits-output", type=arguments.text("output name"), help="with --attach: the [T,N,C] output, name or index"
    )
    parser.set_defaults(run=run)


def _attribute_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per attribute of the spec's form, each flipping the schema's default."""
    for name, default in form("time_major").attributes.items():
        flag = name.replace("_", "-")
        if default:
            parser.add_argument(f"--no-{flag}", dest=name, action="store_false", help=f"{name} = false")
        else:
            parser.add_argument(f"--{flag}", dest=name, action="store_true", help=f"{name} = true")


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The exporter's keyword arguments, after refusing what this combination would ignore."""
    checked_output(args.output, "output", ".xml" if args.format == "ir" else "")
    if args.format == "onnx":
        arguments.refuse_ignored(args, ["form"], "with --format onnx (it chooses between IR forms)")
    else:
        arguments.refuse_ignored(args, ["opset"], "with --format ir (it is the ONNX opset)")
    if args.attach:
        arguments.refuse_ignored(args, ["dtype", "dims"], "with --attach: it comes from the model's logits output")
        checked_input_file(args.attach, "model")
        for output in [args.output, *([args.output[:-4] + ".bin"] if args.format == "ir" else [])]:
            refuse_overwriting_inputs(output, "output", model_files(args.attach))
    else:
        arguments.refuse_ignored(args, ["logits_output"], "without --attach")
    attributes = Attributes.of({name: getattr(args, name) for name in form("time_major").attributes})
    common: dict[str, Any] = {
        "mask_dtype": args.mask_dtype,
        "labels_dtype": args.labels_dtype,
        "attributes": attributes,
    }
    if not args.attach:
        common |= {"dtype": args.dtype or "float32", "dims": arguments.dims(args.dims or "T,N,C")}
    return common


def run(args: argparse.Namespace) -> int:
    """Write the op, or a model with the op attached, as ONNX or OpenVINO IR."""
    common = _options(args)
    logits = args.logits_output or "logits"
    if args.format == "onnx":
        from .. import onnx as wing

        opset = wing.MIN_OPSET if args.opset is None else args.opset
        if args.attach:
            model = wing.attach_onnx(wing.load_onnx(args.attach), logits, opset=opset, **common)
        else:
            model = wing.onnx_model(opset=opset, **common)
        wing.save_onnx(model, args.output)
    else:
        from .. import openvino as ov_wing

        ir_form = args.form or "lowered"
        if args.attach:
            model = ov_wing.attach_openvino(ov_wing.load_ir(args.attach), logits, form=ir_form, **common)
        else:
            model = ov_wing.ir_model(form=ir_form, **common)
        ov_wing.save_ir(model, args.output)
    show(f"wrote {args.output}")
    return ExitCode.OK
