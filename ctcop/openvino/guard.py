"""Guarding a user's model: each native CTCLoss-4 node (the released form, spec 7) replaced by the
guarded released lowering of :mod:`.released` (spec 12.1), fed by the same producer outputs.

The rewritten model keeps its parameters, results, tensor names and the layer's friendly name
(now the name of the node that gives the loss); it computes, for every input, what the spec's
released form gives (NaN where a rule is broken, spec 11.5) instead of what OpenVINO's kernel
gives (its defects D1, D2, D3, D6, D8, D9, D10, D11; spec 12.2). The lowering's nodes are named as
a stage inside the layer (:mod:`.stage`: ``NAME/ctcop:released:FLAGS/...``), so that ``ctcop
eval`` and ``validate`` read the layer back as the user wrote it; the kernel inside, itself a
CTCLoss-4 node (``NAME/ctcop:released:FLAGS/guarded_kernel``), only ever sees input it computes
correctly, and is never guarded again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..attributes import Attributes
from ..errors import InvalidInputError
from ..schema import form
from .released import RELEASED, ReleasedInputs, released_loss
from .stage import kernel_ids, stages

RANKS = (3, 1, 2, 1, 0)  # logits, logit_length, labels, label_length, blank_index (spec 7)
# The registry's defects of the native kernel (spec 12.2) that the lowering guards for every layer,
# and those only an attribute exposes.
ALWAYS_GUARDED = ("D1", "D2", "D3", "D6", "D8", "D11")
COLLAPSE_GUARDED = ("D9", "D10")


@dataclass(frozen=True)
class Guarded:
    """One rewritten layer: its name, where its ``blank_index`` came from ("" when it has none),
    its attributes and the defects its lowering guards."""

    name: str
    blank_index: str
    attributes: Attributes
    defects: tuple[str, ...]

    def line(self) -> str:
        blank = f"blank_index from {self.blank_index}" if self.blank_index else "blank_index absent (C-1)"
        flags = ", ".join(f"{name}={str(value).lower()}" for name, value in self.attributes.items())
        return f"guarded {self.name}: {blank}; {flags}; guards {', '.join(self.defects)}"


def released_nodes(model: Any) -> list[Any]:
    """The native (opset4) CTCLoss nodes of an ``openvino.Model``'s main graph that are not the
    kernel of a ctcop lowering (:mod:`.stage`), in topological order."""
    inner = kernel_ids(stages(model))
    return [
        node
        for node in model.get_ordered_ops()
        if node.get_type_name() == "CTCLoss"
        and node.get_type_info().version_id == "opset4"
        and node.get_instance_id() not in inner
    ]


def _checked_ranks(node: Any) -> None:
    """Refuse a node whose inputs have unknown ranks or ranks other than the op's (spec 7)."""
    name = node.get_friendly_name()
    sources = node.input_values()
    if not 4 <= len(sources) <= 5:
        raise InvalidInputError("model", f"layer {name!r} has {len(sources)} inputs; CTCLoss-4 takes 4 or 5")
    for port, source, rank in zip(form(RELEASED).input_names, sources, RANKS, strict=False):
        shape = source.get_partial_shape()
        if shape.rank.is_dynamic:
            raise InvalidInputError("model", f"layer {name!r}: {port} has an unknown rank; cannot guard it")
        if shape.rank.get_length() != rank:
            raise InvalidInputError("model", f"layer {name!r}: {port} has rank {shape.rank.get_length()}, not {rank}")


def _source(output: Any) -> str:
    """Where an input comes from: the producer's type and name, and a constant scalar's value."""
    producer = output.get_node()
    where = f"{producer.get_type_name()} {producer.get_friendly_name()}"
    if producer.get_type_name() == "Constant" and producer.get_output_partial_shape(0).is_static:
        values = producer.get_data()
        where += f" = {values.item()}" if values.size == 1 else ""
    return where


def guard_node(model: Any, node: Any, attributes: Mapping[str, bool]) -> Guarded:
    """Replace the native CTCLoss-4 ``node`` of ``model`` by the guarded released lowering with
    ``attributes`` (the released form's, as the runtime reads the layer's file), in place."""
    _checked_ranks(node)
    chosen = Attributes.of(attributes, form_name=RELEASED)
    name, sources = node.get_friendly_name(), list(node.input_values())
    loss = released_loss(ReleasedInputs(*sources), chosen, within=name)
    if loss.get_output_element_type(0) != node.get_output_element_type(0):
        raise InvalidInputError("model", f"layer {name!r}: its output type differs from its logits'")
    node.output(0).replace(loss.output(0))
    loss.set_friendly_name(name)
    model.validate_nodes_and_infer_types()
    collapse = chosen["preprocess_collapse_repeated"] or chosen["unique"]
    defects = ALWAYS_GUARDED + (COLLAPSE_GUARDED if collapse else ())
    blank = _source(sources[4]) if len(sources) == 5 else ""
    return Guarded(name, blank, chosen, tuple(sorted(defects, key=lambda d: int(d[1:]))))
