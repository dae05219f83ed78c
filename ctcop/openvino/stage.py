"""ctcop's lowerings as stages of a model, readable back from any IR that holds one (spec 13).

A lowering (:func:`ctcop.openvino.lowering.lower`, :func:`ctcop.openvino.released.released_loss`)
is a subgraph of stock operators around OpenVINO's native kernel. What the model computes there
is the op of its form (the released CTCLoss-4 or the time-major form) on the values that enter
the subgraph, with the attributes the lowering was built with; the kernel inside sees other
values (log-softmax logits, dummy samples) and other attributes. :func:`mark` names every node
the lowering added, except the one that gives the loss, ``[WITHIN/]ctcop:FORM:FLAGS/[ROLES/]NAME``:
``FORM`` ``released`` or ``time_major``; ``FLAGS`` the form's attributes as built, ``name=0|1``
joined by commas, in the schema's order; ``ROLES`` the ports (schema names, joined by ``+``) whose
values the node reads directly, for a node that reads one (the native kernel is
``guarded_kernel``); ``WITHIN`` the name of the layer a lowering replaced (``ctcop guard``), or
nothing. Friendly names survive OpenVINO's serializer, reader and model conversion, so
:func:`stages` reads them back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import openvino as ov

from ..attributes import Attributes
from ..schema import form

KERNEL = "guarded_kernel"
FORMS = {"released": "openvino", "time_major": "time_major"}  # name in the mark: schema form
_MARK = re.compile(r"ctcop:(released|time_major):([a-z_]+=[01](?:,[a-z_]+=[01])*)/(?:([a-z_]+(?:\+[a-z_]+)*)/)?")


@dataclass(frozen=True)
class Stage:
    """One lowering found in a model: ``name`` that of the node giving the loss (or the layer it
    replaced), ``form`` the schema form ("openvino" or "time_major"), ``attributes`` as built,
    ``inputs`` the values it reads in the form's port order, ``output`` the loss [N] and
    ``kernels`` the native CTCLoss-4 nodes inside."""

    name: str
    form: str
    attributes: dict[str, bool]
    inputs: tuple[Any, ...]
    output: Any
    kernels: tuple[Any, ...]


def _key(value: Any) -> tuple[int, int]:
    return value.get_node().get_instance_id(), value.get_index()


def flags(attributes: Mapping[str, bool], form_name: str) -> str:
    chosen = Attributes.of(attributes, form_name=form_name)
    return ",".join(f"{name}={int(value)}" for name, value in chosen.items())


def mark(
    loss: Any, sources: Mapping[str, Any], form_name: str, attributes: Mapping[str, bool], within: str = ""
) -> Any:
    """Name the nodes between ``sources`` (port name to the value it feeds; a missing optional
    port absent) and ``loss`` as the stage they are (module docstring); ``loss`` keeps its name.
    ``form_name`` is the schema's form ("openvino" or "time_major"). Returns ``loss``."""
    mark_form = next(name for name, schema_form in FORMS.items() if schema_form == form_name)
    prefix = f"{within}/" if within else ""
    prefix += f"ctcop:{mark_form}:{flags(attributes, form_name)}/"
    roles: dict[tuple[int, int], list[str]] = {}
    for port, value in sources.items():
        roles.setdefault(_key(value.output(0) if isinstance(value, ov.Node) else value), []).append(port)
    members: dict[int, Any] = {}
    read: dict[int, list[str]] = {}
    pending = [loss]
    while pending:
        node = pending.pop()
        for value in node.input_values():
            if _key(value) in roles:
                read.setdefault(node.get_instance_id(), []).extend(roles[_key(value)])
                continue
            producer = value.get_node()
            if producer.get_instance_id() not in members:
                members[producer.get_instance_id()] = producer
                pending.append(producer)
    for identity, node in members.items():
        if node.get_type_name() == "CTCLoss":
            node.set_friendly_name(prefix + KERNEL)
            continue
        ports = "+".join(sorted(set(read.get(identity, []))))
        node.set_friendly_name(prefix + (f"{ports}/" if ports else "") + node.get_friendly_name())
    return loss


def _parsed(name: str) -> tuple[str, str, str, list[str]] | None:
    """(prefix, form, flags, roles) of a marked node's name, from its last mark; None if unmarked."""
    marks = list(_MARK.finditer(name))
    if not marks:
        return None
    found = marks[-1]
    roles = found.group(3).split("+") if found.group(3) else []
    return name[: found.start()] + f"ctcop:{found.group(1)}:{found.group(2)}/", found.group(1), found.group(2), roles


def _components(nodes: list[Any]) -> list[list[Any]]:
    """``nodes`` split into the groups connected by edges among them, in the order given."""
    within = {node.get_instance_id(): node for node in nodes}
    parent = {identity: identity for identity in within}

    def root(identity: int) -> int:
        while parent[identity] != identity:
            parent[identity] = parent[parent[identity]]
            identity = parent[identity]
        return identity

    for node in nodes:
        for value in node.input_values():
            other = value.get_node().get_instance_id()
            if other in within:
                parent[root(other)] = root(node.get_instance_id())
    groups: dict[int, list[Any]] = {}
    for node in nodes:
        groups.setdefault(root(node.get_instance_id()), []).append(node)
    return list(groups.values())


def _sources(members: list[Any], ids: set[int], roles: dict[int, list[str]]) -> dict[str, Any] | None:
    """Each port's value as the stage's port-named nodes read it; None where a port is read from
    two values, a port-named node reads two values from outside, or another value from outside is
    neither an input, a constant nor a dimension (a transformation makes constants and shares the
    model's shape computations with the stage's)."""
    sources: dict[str, Any] = {}
    for node in members:
        for role in roles[node.get_instance_id()]:
            entering = {_key(v): v for v in node.input_values() if v.get_node().get_instance_id() not in ids}
            if not entering:  # a transformation gave it another input (a constant of the stage)
                continue
            (value, *more) = entering.values()
            if more or (role in sources and _key(sources[role]) != _key(value)):
                return None
            sources[role] = value
    known = {_key(value) for value in sources.values()}
    for node in members:
        for value in node.input_values():
            producer = value.get_node()
            outside = producer.get_instance_id() not in ids and _key(value) not in known
            dims = value.get_element_type().is_integral() and value.get_partial_shape().rank.get_length() <= 1
            if outside and producer.get_type_name() != "Constant" and not dims:
                return None
    return sources


def _loss(members: list[Any], ids: set[int], sources: dict[str, Any]) -> Any:
    """The stage's loss, a float: the one node outside that reads only the stage and its inputs
    (the node the lowering ended with, renamed), else the one value of the stage read outside (that
    node removed by a transformation); other readers are shapes. None where neither is one."""
    known = {_key(value) for value in sources.values()}
    readers: dict[int, Any] = {}
    read: dict[tuple[int, int], Any] = {}
    for node in members:
        for output in node.outputs():
            for target in output.get_target_inputs():
                reader = target.get_node()
                if reader.get_instance_id() not in ids:
                    readers[reader.get_instance_id()] = reader
                    read[_key(output)] = output
    final = [
        reader.output(0)
        for reader in readers.values()
        if reader.get_output_size() == 1
        and reader.get_output_element_type(0).is_real()
        and all(v.get_node().get_instance_id() in ids or _key(v) in known for v in reader.input_values())
    ]
    values = [value for value in read.values() if value.get_element_type().is_real()]
    if len(final) == 1:
        return final[0]
    return values[0] if not final and len(values) == 1 else None


def _read_stage(
    prefix: str, mark_form: str, written: str, members: list[Any], roles: dict[int, list[str]]
) -> Stage | None:
    ids = {node.get_instance_id() for node in members}
    spec = form(FORMS[mark_form])
    sources = _sources(members, ids, roles)
    if sources is None or set(sources) - set(spec.input_names):
        return None
    if any(port.name not in sources for port in spec.inputs if not port.optional):
        return None
    output = _loss(members, ids, sources)
    attributes = {name: value == "1" for name, value in (pair.split("=") for pair in written.split(","))}
    if output is None or set(attributes) != set(spec.attributes):
        return None
    within = prefix[: -len(f"ctcop:{mark_form}:{written}/")].rstrip("/")
    name = within or output.get_node().get_friendly_name()
    inputs = tuple(sources[port] for port in spec.input_names if port in sources)
    kernels = tuple(node for node in members if node.get_type_name() == "CTCLoss")
    return Stage(name, FORMS[mark_form], attributes, inputs, output, kernels)


def stages(model: Any) -> list[Stage]:
    """The stages of ``model``'s main graph that can be read back (module docstring), in the
    topological order of their losses.

    A stage is the connected nodes of one prefix, its inputs (the values from outside that its
    role-named nodes read) and its loss (the one node outside that reads the stage's values, or the
    one value of the stage that outside nodes read). A stage whose names no longer give one reading
    (a transformation merged or renamed its nodes) is not read: its kernel is then an ordinary
    native layer."""
    ordered = list(model.get_ordered_ops())
    groups: dict[tuple[str, str, str], list[Any]] = {}
    roles: dict[int, list[str]] = {}
    for node in ordered:
        parsed = _parsed(node.get_friendly_name())
        if parsed is not None:
            prefix, mark_form, written, node_roles = parsed
            groups.setdefault((prefix, mark_form, written), []).append(node)
            roles[node.get_instance_id()] = node_roles
    position = {node.get_instance_id(): k for k, node in enumerate(ordered)}
    found = []
    for (prefix, mark_form, written), nodes in groups.items():
        for members in _components(nodes):
            stage = _read_stage(prefix, mark_form, written, members, roles)
            if stage is not None:
                found.append(stage)
    return sorted(found, key=lambda s: position.get(s.output.get_node().get_instance_id(), len(ordered)))


def kernel_ids(found: list[Stage]) -> set[int]:
    """The instance ids of the native kernels inside ``found``."""
    return {kernel.get_instance_id() for stage in found for kernel in stage.kernels}
