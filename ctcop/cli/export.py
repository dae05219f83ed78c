"""``ctcop export``: CTCLoss-4 as an ONNX model or an OpenVINO IR (spec 11, 12), alone or
attached to a user's model.

Each attribute of either form has one flag flipping its default; the merge attribute, which the
forms name differently (``merge_repeated``, spec 2; ``ctc_merge_repeated``, spec 7), has two
spellings that are aliases: ``--no-merge-repeated`` and ``--no-ctc-merge-repeated`` each set the
chosen form's (spec 7's correspondence of the two)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..attributes import Attributes
from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from ..files import checked_input_file, checked_output, refuse_overwriting_inputs
from ..schema import form
from . import arguments
from .models import model_files
from .output import show

if TYPE_CHECKING:
    from .arguments import Commands


# The forms' attributes, each flag once (spec 2, 7): preprocess_collapse_repeated is in both.
ATTRIBUTE_FORMS = ("time_major", "openvino")
# The released form's name of a spec-form attribute: one flag with both spellings sets either.
ALIASES = {"ctc_merge_repeated": "merge_repeated"}


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("export", help="write CTCLoss-4 as ONNX or OpenVINO IR, or attach it to a model")
    parser.add_argument("--format", choices=["onnx", "ir"], default="onnx")
    parser.add_argument(
        "--form",
        choices=["lowered", "custom", "released"],
        help="IR only: stock ops (default), one layer, or OpenVINO's released form in stock ops",
    )
    parser.add_argument("-o", "--output", required=True, help="file to write (.xml for IR)")
    parser.add_argument("--dtype", help="logits element type: float16, float32 (default), float64")
    parser.add_argument("--mask-dtype", help="sequence_mask element type (default int32)")
    parser.add_argument("--labels-dtype", help="labels element type (default int64)")
    parser.add_argument("--index-dtype", help="--form released: lengths, labels, blank_index type (default int64)")
    parser.add_argument("--blank-index", action="store_true", help="--form released: take a blank_index input")
    parser.add_argument(
        "--dims", help="T,N,C: each a number or a symbolic name (default T,N,C; --form released lays out N,T,C)"
    )
    _attribute_flags(parser)
    parser.add_argument("--opset", type=arguments.integer(0, 10**6), help="ONNX only (default 18)")
    parser.add_argument(
        "--inline",
        action="store_true",
        help="ONNX only: the node replaced by its function's body, standard operators only (spec 11.2)",
    )
    parser.add_argument(
        "--static",
        action="store_true",
        help="with --inline and fixed dims: every shape fixed, the recursion a Scan (runtimes without Loop: tract)",
    )
    parser.add_argument("--attach", metavar="MODEL", help="add the loss to this model instead")
    parser.add_argument(
        "--logits-output", type=arguments.text("output name"), help="with --attach: the [T,N,C] output, name or index"
    )
    parser.set_defaults(run=run)


def _attribute_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per attribute of either form, each flipping the schema's default (None: not
    given); an attribute of :data:`ALIASES` is the flag of the one it names, with both spellings."""
    added: set[str] = set()
    spellings = {own: other for other, own in ALIASES.items()}
    for form_name in ATTRIBUTE_FORMS:
        for name, default in form(form_name).attributes.items():
            if name in added or name in ALIASES:
                continue
            added.add(name)
            names = [name, *([spellings[name]] if name in spellings else [])]
            flags = [(f"--no-{n}" if default else f"--{n}").replace("_", "-") for n in names]
            only = "--form released: " if name not in form("time_major").attributes else ""
            value = str(not default).lower()
            parser.add_argument(
                *flags,
                dest=name,
                action="store_const",
                const=not default,
                help=f"{only}{' (released form: '.join(names)}{')' * (len(names) - 1)} = {value}",
            )


def _attributes(args: argparse.Namespace, form_name: str) -> Attributes:
    """The given attribute flags of ``form_name``, refusing those of the other form."""
    own = form(form_name).attributes
    given = {name: getattr(args, ALIASES.get(name, name)) for name in own}
    for other in ATTRIBUTE_FORMS:
        for name, default in form(other).attributes.items():
            aliased = name in ALIASES or name in ALIASES.values()
            if name not in own and not aliased and getattr(args, name) is not None:
                flag = ("--no-" if default else "--") + name.replace("_", "-")
                where = "without --form released" if form_name == "time_major" else "with --form released"
                raise InvalidInputError(name, f"{flag} is ignored {where}: leave it out")
    return Attributes.of({name: value for name, value in given.items() if value is not None}, form_name=form_name)


def _released_options(args: argparse.Namespace) -> dict[str, Any]:
    """The released IR writer's keyword arguments (``--form released``)."""
    why = "with --form released (it has no sequence_mask; --index-dtype types its integer inputs)"
    arguments.refuse_ignored(args, ["attach", "logits_output", "mask_dtype", "labels_dtype"], why)
    t, n, c = arguments.dims(args.dims or "T,N,C")
    return {
        "dtype": args.dtype or "float32",
        "index_dtype": args.index_dtype or "int64",
        "dims": (n, t, c),
        "blank_index": args.blank_index,
        "attributes": _attributes(args, "openvino"),
    }


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The exporter's keyword arguments, after refusing what this combination would ignore."""
    checked_output(args.output, "output", ".xml" if args.format == "ir" else "")
    if args.format == "onnx":
        arguments.refuse_ignored(args, ["form"], "with --format onnx (it chooses between IR forms)")
    else:
        arguments.refuse_ignored(args, ["opset", "inline", "static"], "with --format ir (they shape the ONNX model)")
    if args.form == "released":
        return _released_options(args)
    arguments.refuse_ignored(args, ["index_dtype", "blank_index"], "without --form released")
    if args.attach:
        arguments.refuse_ignored(args, ["dtype", "dims"], "with --attach: it comes from the model's logits output")
        checked_input_file(args.attach, "model")
        for output in [args.output, *([args.output[:-4] + ".bin"] if args.format == "ir" else [])]:
            refuse_overwriting_inputs(output, "output", model_files(args.attach))
    else:
        arguments.refuse_ignored(args, ["logits_output"], "without --attach")
    common: dict[str, Any] = {
        "mask_dtype": args.mask_dtype or "int32",
        "labels_dtype": args.labels_dtype or "int64",
        "attributes": _attributes(args, "time_major"),
    }
    if not args.attach:
        common |= {"dtype": args.dtype or "float32", "dims": arguments.dims(args.dims or "T,N,C")}
    return common


def _ir(args: argparse.Namespace, common: dict[str, Any]) -> Any:
    """The IR model the arguments ask for."""
    from .. import openvino as ov_wing

    if args.form == "released":
        from ..openvino.released import released_ir_model

        return released_ir_model(**common)
    ir_form = args.form or "lowered"
    if args.attach:
        return ov_wing.attach_openvino(
            ov_wing.load_ir(args.attach), args.logits_output or "logits", form=ir_form, **common
        )
    return ov_wing.ir_model(form=ir_form, **common)


def run(args: argparse.Namespace) -> int:
    """Write the op, or a model with the op attached, as ONNX or OpenVINO IR."""
    common = _options(args)
    if args.format == "onnx":
        from .. import onnx as wing

        opset = wing.MIN_OPSET if args.opset is None else args.opset
        onnx_options = {"opset": opset, "inline": bool(args.inline), "static": bool(args.static), **common}
        if args.attach:
            model = wing.attach_onnx(wing.load_onnx(args.attach), args.logits_output or "logits", **onnx_options)
        else:
            model = wing.onnx_model(**onnx_options)
        wing.save_onnx(model, args.output)
    else:
        from ..openvino import save_ir

        save_ir(_ir(args, common), args.output)
    show(f"wrote {args.output}")
    return ExitCode.OK
