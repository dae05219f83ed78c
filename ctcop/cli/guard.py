"""``ctcop guard``: a user's IR with every native CTCLoss-4 layer replaced by ctcop's guarded
lowering of the released form (spec 7, 12.1), which stock OpenVINO runs."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import InvalidInputError
from ..exit_codes import ExitCode
from ..files import checked_output, refuse_overwriting_inputs
from .models import model_files
from .output import show

if TYPE_CHECKING:
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("guard", help="rewrite an IR's native CTCLoss-4 layers onto ctcop's guarded lowering")
    parser.add_argument("model", help="an IR .xml (its .bin beside it)")
    parser.add_argument("-o", "--output", required=True, help="the guarded IR to write (.xml; its .bin beside it)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Guard each native CTCLoss-4 layer of the model's main graph and write the result. Refused
    (exit 2, nothing written): a model that is not IR or has no such layer, one inside an
    If/Loop/TensorIterator body, and a layer with a static error of ``ctcop validate``."""
    checked_output(args.output, "output", ".xml")
    for output in (args.output, args.output[:-4] + ".bin"):
        refuse_overwriting_inputs(output, "output", model_files(args.model))
    if not args.model.endswith(".xml"):
        raise InvalidInputError("model", f"{args.model!r}: ctcop guard rewrites an IR .xml (with its .bin)")
    from ..layers import files, find, validate
    from ..openvino import guard, save_ir

    checked = files.checked_model_file(args.model)
    model = files.load_ir_model(args.model)
    if checked.nested_layers:
        nested = "1 CTCLoss layer" if checked.nested_layers == 1 else f"{checked.nested_layers} CTCLoss layers"
        raise InvalidInputError("model", f"{args.model!r} has {nested} inside If/Loop/TensorIterator bodies")
    nodes = guard.released_nodes(model)
    if not nodes:
        raise InvalidInputError("model", f"{args.model!r} holds no released CTCLoss-4 layer in its main graph")
    layers = [
        replace(layer, attributes=checked.ctc_attributes.get(layer.ir_id, {}))
        for layer in find.openvino_layers(model)
        if layer.form == "released"
    ]
    for layer in layers:
        errors = [finding for finding in validate.validate_layer(layer) if finding.level == "error"]
        if errors:
            raise InvalidInputError("model", f"cannot guard it: {errors[0].line()}")
    lines = [
        guard.guard_node(model, node, validate.attributes_of(layer)).line()
        for node, layer in zip(nodes, layers, strict=True)
    ]
    save_ir(model, args.output)
    show(*lines, f"wrote {args.output}")
    return ExitCode.OK
