"""``ctcop validate``: the CTCLoss layers of a user's IR or ONNX file, listed and checked
statically against the spec and the schema (spec 13)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..exit_codes import ExitCode
from .output import show

if TYPE_CHECKING:
    from ..layers.find import Port
    from .arguments import Commands


def add_parser(commands: Commands) -> None:
    parser = commands.add_parser("validate", help="list and statically check the CTCLoss layers of an IR/ONNX file")
    parser.add_argument("model", help="an IR .xml (its .bin beside it) or an .onnx file")
    parser.add_argument(
        "--kernels", action="store_true", help="also list the native CTCLoss-4 kernels inside ctcop's lowerings"
    )
    parser.set_defaults(run=run)


def _port_line(port: Port) -> str:
    shape = "?" if port.shape is None else "[" + ",".join("?" if d is None else str(d) for d in port.shape) + "]"
    constant = f" = {port.constant.tolist()}" if port.constant is not None and port.constant.size <= 8 else ""
    return f"  {port.name:<16}{port.dtype:<9}{shape:<14}from {port.producer}{constant}"


def run(args: argparse.Namespace) -> int:
    """List the CTCLoss layers of a model and check each against the spec and the schema."""
    from ..conformance.report import counted
    from ..layers import model, validate

    opened = model.open_model(args.model, args.kernels)
    errors = 0
    for layer in opened.layers:
        flags = ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in layer.attributes.items())
        show(f"layer {layer.name} [{layer.form}] {flags}")
        for port in layer.ports:
            show(_port_line(port))
        for finding in validate.validate_layer(layer):
            errors += finding.level == "error"
            show(f"  {finding.line()}")
    print(f"{counted(len(opened.layers), 'layer')}, {counted(errors, 'error')}")
    if opened.nested_layers:
        print(f"note: {opened.nested_layers} more inside If/Loop/TensorIterator bodies, which ctcop does not evaluate")
    return ExitCode.FAILURES if errors else ExitCode.OK
