"""Fuzzing `ctcop validate` and `ctcop eval` with mutated model files (spec 13: files are untrusted).

Sources, built here: an IR with OpenVINO's released CTCLoss-4 after a MatMul/Add (``blank_index``
Constant, ``unique``), ctcop's custom-op IR layer, ctcop's ONNX export alone, and the ONNX export
attached to a small acoustic model (evaluated with ``--inputs``). Mutations (seeded; see
:data:`XML_MUTATIONS`, :data:`BIN_MUTATIONS`, :data:`ONNX_MUTATIONS`): truncation at a random
offset, bit flips, huge / negative / non-numeric declared dimensions, garbage attribute values,
deleted or duplicated XML lines, wrong element types, broken ONNX functions, opsets, node inputs
and initializers. Each mutated file is run through the CLI as a user runs it, with a timeout; the
command must end (no hang), with exit code 0, 1 or 2, no Python traceback on stderr, and a single
line on stderr when the exit code is 2 (spec 13, README: "one line on stderr").

Every failure is collected (description, command, exit code, stderr) and reported at the end, with
the mutated file kept for reproduction. The bounded profile runs :func:`examples` ("files")
mutations per source; the long profile (``pytest -m fuzz``, ``CTCOP_FUZZ=long``) more, with a fresh
seed each run (printed; ``CTCOP_FUZZ_SEED`` replays one). :data:`FILE_FINDINGS` replays what it
found (a finding that hangs is not replayed here: it would cost the timeout on every run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from support.eval_files import released_ir
from support.fuzz_strategies import LONG, examples
from support.models import onnx_acoustic_model

from ctcop.onnx import attach_onnx, onnx_model, save_onnx
from ctcop.openvino import ir_model, save_ir

pytestmark = pytest.mark.fuzz
T, N, FEATURES, C = 8, 3, 6, 5
TIMEOUT_S = 300
SEED = int(os.environ.get("CTCOP_FUZZ_SEED", "0")) or (int.from_bytes(os.urandom(4), "little") if LONG else 2026)
Files = dict[str, bytes]


# -- the sources -------------------------------------------------------------------------------------


def attached_inputs(path: Path) -> None:
    rng = np.random.default_rng(2)
    mask = (np.arange(T)[:, None] < np.array([8, 5, 2])[None, :]).astype(np.int32)
    labels = np.full((N, T), -1, np.int64)
    labels[0, :3], labels[1, 1:3], labels[2, 0] = [0, 1, 0], [3, 3], 2
    features = rng.normal(size=(T, N, FEATURES)).astype(np.float32)
    np.savez(path, features=features, sequence_mask=mask, labels=labels)


def build_sources(folder: Path) -> dict[str, tuple[Files, list[str]]]:
    """name -> (files, extra eval arguments)."""
    released_ir(folder / "released.xml", blank_zero_unique=True)  # blank_index Constant 0, unique
    save_ir(ir_model(form="custom", dims=(T, N, C)), str(folder / "custom.xml"))
    save_onnx(onnx_model(dims=(T, N, C)), str(folder / "op.onnx"))
    save_onnx(attach_onnx(onnx_acoustic_model(), "logits"), str(folder / "attached.onnx"))
    attached_inputs(folder / "attached.npz")

    def read(*names: str) -> Files:
        return {name: (folder / name).read_bytes() for name in names}

    return {
        "released_ir": (read("released.xml", "released.bin"), ["--seed", "1"]),
        "custom_ir": (read("custom.xml", "custom.bin"), ["--seed", "1"]),
        "onnx_op": (read("op.onnx"), ["--seed", "1"]),
        "onnx_attached": (read("attached.onnx"), ["--inputs", str(folder / "attached.npz")]),
    }


# -- mutations ---------------------------------------------------------------------------------------

HUGE_DIMS = ["999999999999", "18446744073709551615", "4294967296", "-5", "-1", "0", "1e9", "abc", "", "9" * 40]
GARBAGE = [
    "maybe",
    "",
    "-1",
    "2",
    "1e999",
    "nan",
    "18446744073709551616",
    "x" * 100_000,
    "f99",
    "u1",
    "opset4",
    "ctcop1",
    "true",
    "0,0",
    "-9223372036854775808",
    "\u00e9\u4e2d",
    "?",
]


def truncate(rng: np.random.Generator, data: bytes) -> tuple[str, bytes]:
    offset = int(rng.integers(0, max(len(data), 1)))
    return f"truncated at {offset} of {len(data)}", data[:offset]


def flip_bits(rng: np.random.Generator, data: bytes) -> tuple[str, bytes]:
    changed = bytearray(data)
    positions = rng.integers(0, max(len(data), 1), size=int(rng.integers(1, 9))) if data else []
    bits = []
    for position in positions:
        bit = int(rng.integers(0, 8))
        changed[position] ^= 1 << bit
        bits.append(f"{int(position)}.{bit}")
    return f"bits flipped at {','.join(bits)}", bytes(changed)


def xml_dim(rng: np.random.Generator, text: str) -> tuple[str, str]:
    dims = list(re.finditer(r"<dim>([^<]*)</dim>", text))
    match = dims[int(rng.integers(0, len(dims)))]
    value = HUGE_DIMS[int(rng.integers(0, len(HUGE_DIMS)))]
    return f"<dim> at {match.start()} {match.group(1)!r} -> {value!r}", (
        text[: match.start(1)] + value + text[match.end(1) :]
    )


def xml_attribute(rng: np.random.Generator, text: str) -> tuple[str, str]:
    found = list(re.finditer(r'(\w+)="([^"]*)"', text))
    match = found[int(rng.integers(0, len(found)))]
    if rng.integers(0, 5) == 0:
        return f"attribute {match.group(0)!r} at {match.start()} removed", text[: match.start()] + text[match.end() :]
    value = GARBAGE[int(rng.integers(0, len(GARBAGE)))]
    shown = value if len(value) < 40 else f"{value[:5]}...({len(value)} chars)"
    return f"attribute {match.group(0)!r} at {match.start()} -> {shown!r}", (
        text[: match.start(2)] + value + text[match.end(2) :]
    )


def xml_lines(rng: np.random.Generator, text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    k = int(rng.integers(0, len(lines)))
    how = ["deleted", "duplicated", "moved to the end"][int(rng.integers(0, 3))]
    line = lines[k]
    if how == "deleted":
        del lines[k]
    elif how == "duplicated":
        lines.insert(k, line)
    else:
        lines.append(lines.pop(k))
    return f"line {k + 1} {line.strip()[:60]!r} {how}", "".join(lines)


def xml_doctype(rng: np.random.Generator, text: str) -> tuple[str, str]:
    head = '<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>\n'
    return "DOCTYPE with entities prepended", head + re.sub(r"^<\?xml[^>]*>\s*", "", text)


def on_text(mutate: Callable[[np.random.Generator, str], tuple[str, str]]) -> Callable:
    def apply(rng: np.random.Generator, data: bytes) -> tuple[str, bytes]:
        what, text = mutate(rng, data.decode())
        return what, text.encode()

    apply.__name__ = mutate.__name__
    return apply


XML_MUTATIONS = [
    truncate,
    flip_bits,
    on_text(xml_dim),
    on_text(xml_attribute),
    on_text(xml_lines),
    on_text(xml_doctype),
]


def bin_extend(rng: np.random.Generator, data: bytes) -> tuple[str, bytes]:
    extra = rng.integers(0, 256, size=int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
    return f"{len(extra)} bytes appended", data + extra


BIN_MUTATIONS = [truncate, flip_bits, bin_extend]


def onnx_dims(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    infos = [*model.graph.input, *model.graph.output]
    info = infos[int(rng.integers(0, len(infos)))]
    dims = info.type.tensor_type.shape.dim
    if not dims:
        return f"{info.name}: no dims to change"
    dim = dims[int(rng.integers(0, len(dims)))]
    value = [2**40, 2**62, -1, -(2**62), 0, 2**63 - 1, "", "N T", "é"][int(rng.integers(0, 9))]
    if isinstance(value, int):
        dim.dim_value = value
    else:
        dim.dim_param = value
    return f"{info.name}: a dim -> {value!r}"


def onnx_element_type(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    infos = [*model.graph.input, *model.graph.output]
    info = infos[int(rng.integers(0, len(infos)))]
    value = [0, 2, 3, 8, 9, 10, 14, 16, 17, 23, 999, 2**31 - 1][int(rng.integers(0, 12))]
    info.type.tensor_type.elem_type = value
    return f"{info.name}: elem_type -> {value}"


def loss_node(model: onnx.ModelProto) -> onnx.NodeProto:
    return next(node for node in model.graph.node if node.op_type == "CTCLoss")


def onnx_attribute(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = loss_node(model)
    name = ["merge_repeated", "preprocess_collapse_repeated", "unknown_flag"][int(rng.integers(0, 3))]
    value = [2, -1, 2**62, 1.5, "yes", b"\xff", [1, 2], np.zeros(2, np.float32)][int(rng.integers(0, 8))]
    kept = [attribute for attribute in node.attribute if attribute.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    if isinstance(value, np.ndarray):
        node.attribute.append(helper.make_attribute(name, onnx.numpy_helper.from_array(value)))
    else:
        node.attribute.append(helper.make_attribute(name, value))
    return f"CTCLoss attribute {name} -> {value!r}"


def onnx_function(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    if not model.functions:
        return "no function"
    function = model.functions[0]
    how = int(rng.integers(0, 4))
    if how == 0:
        del model.functions[:]
        return "function removed"
    k = int(rng.integers(0, len(function.node)))
    node = function.node[k]
    if how == 1:
        del function.node[k]
        return f"function node {k} ({node.op_type}) removed"
    if how == 2:
        node.op_type = "NoSuchOp"
        return f"function node {k} op_type -> NoSuchOp"
    if node.input:
        node.input[0] = "no_such_value"
    return f"function node {k} ({node.op_type}) first input -> no_such_value"


def onnx_opset(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    entry = model.opset_import[int(rng.integers(0, len(model.opset_import)))]
    value = [0, 1, 17, 99, 10**9, -1][int(rng.integers(0, 6))]
    entry.version = value
    return f"opset of domain {entry.domain!r} -> {value}"


def onnx_node_inputs(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = loss_node(model)
    how = int(rng.integers(0, 3))
    if how == 0:
        del node.input[-1]
        return "CTCLoss node's last input dropped"
    if how == 1:
        node.input.append(node.input[0])
        return "CTCLoss node given a fourth input"
    node.input[int(rng.integers(0, len(node.input)))] = "no_such_value"
    return "CTCLoss node input -> no_such_value"


def onnx_initializer(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    if not model.graph.initializer:
        return onnx_dims(rng, model)
    tensor = model.graph.initializer[int(rng.integers(0, len(model.graph.initializer)))]
    how = int(rng.integers(0, 3))
    if how == 0:
        tensor.dims[0] = [2**40, 0, -3][int(rng.integers(0, 3))]
        return f"initializer {tensor.name} dims -> {list(tensor.dims)}"
    if how == 1:
        tensor.raw_data = tensor.raw_data[: len(tensor.raw_data) // 2]
        return f"initializer {tensor.name} raw data halved"
    tensor.data_type = [0, 8, 999][int(rng.integers(0, 3))]
    return f"initializer {tensor.name} data_type -> {tensor.data_type}"


def on_proto(mutate: Callable[[np.random.Generator, onnx.ModelProto], str]) -> Callable:
    def apply(rng: np.random.Generator, data: bytes) -> tuple[str, bytes]:
        model = onnx.ModelProto()
        model.ParseFromString(data)
        return mutate(rng, model), model.SerializeToString()

    apply.__name__ = mutate.__name__
    return apply


ONNX_MUTATIONS = [
    truncate,
    flip_bits,
    *(on_proto(m) for m in (onnx_dims, onnx_element_type, onnx_attribute, onnx_function, onnx_opset)),
    *(on_proto(m) for m in (onnx_node_inputs, onnx_initializer)),
]


def mutated(rng: np.random.Generator, files: Files) -> tuple[str, Files]:
    """One mutation of one of ``files``: XML, its .bin (one time in four) or ONNX."""
    name = next(iter(files))
    if name.endswith(".xml") and rng.integers(0, 4) == 0:
        name = name[:-4] + ".bin"
    table = ONNX_MUTATIONS if name.endswith(".onnx") else BIN_MUTATIONS if name.endswith(".bin") else XML_MUTATIONS
    mutation = table[int(rng.integers(0, len(table)))]
    what, data = mutation(rng, files[name])
    return f"{name}: {mutation.__name__}: {what}", {**files, name: data}


# -- running the CLI -----------------------------------------------------------------------------------


def run_cli(args: list[str]) -> tuple[int | None, str, str]:
    """Exit code (None after the timeout), stdout and stderr of ``python -m ctcop *args``."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "ctcop", *args], capture_output=True, text=True, timeout=TIMEOUT_S, errors="replace"
        )
    except subprocess.TimeoutExpired as expired:
        return None, str(expired.stdout or ""), str(expired.stderr or "")
    return result.returncode, result.stdout, result.stderr


def problem(code: int | None, stderr: str) -> str | None:
    if code is None:
        return f"no answer within {TIMEOUT_S} s"
    if code not in (0, 1, 2):
        return f"exit code {code}"
    if "Traceback" in stderr:
        return "a traceback on stderr"
    if code == 2 and len(stderr.strip().splitlines()) > 1:
        return f"exit code 2 with {len(stderr.strip().splitlines())} lines on stderr"
    return None


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Files, list[str]]]:
    return build_sources(tmp_path_factory.mktemp("sources"))


@pytest.mark.parametrize("source", ["released_ir", "custom_ir", "onnx_op", "onnx_attached"])
def test_mutated_files_end_in_exit_0_1_or_2_without_traceback(source: str, sources: dict, tmp_path: Path) -> None:
    files, eval_args = sources[source]
    failures = []
    count = examples("files")
    for k in range(count):
        rng = np.random.default_rng([SEED, len(source), k])
        what, changed = mutated(rng, files)
        folder = tmp_path / f"m{k}"
        folder.mkdir()
        for name, data in changed.items():
            (folder / name).write_bytes(data)
        model = str(folder / next(iter(changed)))
        runtime = ["--runtime", "openvino"] if model.endswith(".onnx") and rng.integers(0, 3) == 0 else []
        for args in (["validate", model], ["eval", model, *eval_args, *runtime]):
            code, _, stderr = run_cli(args)
            found = problem(code, stderr)
            if found:
                tail = "\n      ".join(stderr.strip().splitlines()[-6:])
                failures.append(f"{what}\n    ctcop {' '.join(args)}: {found}\n      {tail}")
    assert not failures, f"seed {SEED}, {len(failures)} of {2 * count} runs failed:\n" + "\n".join(failures)


def declared_dim(value: int) -> Callable[[Path], str]:
    """ctcop's ONNX export with ``inputs``' first dimension declared as ``value``."""

    def build(folder: Path) -> str:
        model = onnx_model(dims=(T, N, C))
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = value
        onnx.save(model, str(folder / "model.onnx"))
        return str(folder / "model.onnx")

    return build


# What the mutation fuzzing found, replayed: (how the file is made, the eval arguments).
FILE_FINDINGS = {
    # `ctcop eval` drew random inputs of a declared negative shape: exit 3, "internal error".
    "onnx_dim_negative": (declared_dim(-1), ["--seed", "1"]),
    # ... and of a declared shape too large for memory: exit 3, "array is too big".
    "onnx_dim_2_62": (declared_dim(2**62), ["--seed", "1"]),
}


@pytest.mark.parametrize("name", list(FILE_FINDINGS))
def test_what_file_fuzzing_found_stays_fixed(name: str, tmp_path: Path) -> None:
    build, eval_args = FILE_FINDINGS[name]
    model = build(tmp_path)
    for args in (["validate", model], ["eval", model, *eval_args]):
        code, _, stderr = run_cli(args)
        found = problem(code, stderr)
        assert found is None, f"ctcop {' '.join(args)}: {found}: {stderr.strip()}"
