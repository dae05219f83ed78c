"""The conformance corpus as data: one folder per case, a JSON manifest and ``.npy`` arrays.

Layout (package data ``ctcop/data/corpus/``, written by ``python -m ctcop.conformance.generate``):
``index.json`` lists the case ids; case ``spec/empty_targets/float32`` lives in the folder
``spec/empty_targets/float32/`` with ``case.json``, one ``<input name>.npy`` per input, and, for a
case with a value, ``expected_loss.npy`` and ``expected_grad.npy``. Any language that reads JSON
and ``.npy`` (format 1.0, little-endian, C order) reads it. The manifest is of format
:data:`FORMAT`; :func:`describe` says what each key means. Forms: "spec" is the time-major form of
spec section 2, "released" the OpenVINO form of section 7; ``expect`` "reject" cases break one spec
rule (section 3, 6 or 7) and hold no expected outputs. Expected values are the reference's,
computed from the stored (rounded) logits; a bfloat16 array is stored as its bits (``"storage":
"uint16 bits"``: numpy has no portable bfloat16); an absent optional input is not listed. Scale
cases store no arrays: :func:`materialize` draws their inputs from the portable recipe in
``generator``, and the reference computes their expected values when first asked.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..attributes import Attributes
from .case import ATTRIBUTE_FORMS, Case, LazyArrays

FORMAT = "ctcop-corpus-1"
MANIFEST = "case.json"
INDEX = "index.json"
BFLOAT16_STORAGE = "uint16 bits"
SCALE_TAG = "scale"
WIDTH = 100  # a list of scalars longer than this in JSON gets one item per line
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)*$")


def default_root() -> Path:
    """The corpus shipped in the package (``ctcop/data/corpus``)."""
    return Path(__file__).resolve().parent.parent / "data" / "corpus"


# -- writing -------------------------------------------------------------------------------------


def _json(value: Any, depth: int) -> str:
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, Mapping) and value:
        items = [f"{inner}{json.dumps(str(k))}: {_json(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and (
        any(isinstance(v, (Mapping, list)) for v in value) or len(json.dumps(value)) > WIDTH
    ):
        return "[\n" + ",\n".join(inner + _json(v, depth + 1) for v in value) + "\n" + pad + "]"
    return json.dumps(value, sort_keys=True, ensure_ascii=True, allow_nan=False)


def dumps(document: Mapping[str, Any]) -> str:
    """Stable JSON: sorted keys, two-space indent, short lists of scalars on one line, shortest
    round-trip floats (Python's repr), ASCII only, no NaN or infinity, a final newline."""
    return _json(document, 0) + "\n"


def stored(array: np.ndarray) -> np.ndarray:
    """The array as written: little-endian, C order; bfloat16 as its uint16 bits."""
    if array.dtype.name == "bfloat16":
        array = array.view(np.uint16)
    return array.astype(array.dtype.newbyteorder("<"), order="C")


def npy_bytes(array: np.ndarray) -> bytes:
    """``.npy`` format 1.0 bytes of ``array``, written here so that they do not depend on the
    numpy version: the header dict with sorted keys, padded with spaces to a multiple of 64."""
    data = stored(array)
    shape = repr(tuple(int(s) for s in data.shape))
    header = f"{{'descr': '{data.dtype.str}', 'fortran_order': False, 'shape': {shape}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    text = (header + " " * (pad % 64) + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data.tobytes()


def array_entry(array: np.ndarray, file: str | None) -> dict[str, Any]:
    """The manifest entry of one array: element type, shape, file (and storage for bfloat16)."""
    entry: dict[str, Any] = {"dtype": array.dtype.name, "shape": [int(s) for s in array.shape]}
    if file is not None:
        entry["file"] = file
    if array.dtype.name == "bfloat16":
        entry["storage"] = BFLOAT16_STORAGE
    return entry


def save(folder: Path, manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Write one case: ``case.json`` and each array of ``arrays`` (file name -> array)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(dumps(manifest), encoding="utf-8")
    for name, array in sorted(arrays.items()):
        (folder / name).write_bytes(npy_bytes(array))


def save_index(root: Path, ids: Sequence[str], extra: Mapping[str, Any]) -> None:
    """Write ``index.json``: the format, the sorted ids and ``extra`` facts about the corpus."""
    root.mkdir(parents=True, exist_ok=True)
    (root / INDEX).write_text(dumps({"format": FORMAT, "cases": sorted(ids), **extra}), encoding="utf-8")


# -- reading -------------------------------------------------------------------------------------


def _bfloat16() -> Any:
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


def read_array(folder: Path, entry: Mapping[str, Any]) -> np.ndarray:
    """One stored array, checked against its manifest entry; bfloat16 bits become bfloat16 when
    ml_dtypes is installed (and stay uint16 bits otherwise)."""
    array: np.ndarray = np.load(folder / entry["file"], allow_pickle=False)
    if entry.get("storage") == BFLOAT16_STORAGE:
        wanted = "uint16"
        bfloat16 = _bfloat16()
        restored = array.view(bfloat16) if bfloat16 is not None and array.dtype == np.uint16 else array
    else:
        wanted, restored = entry["dtype"], array
    if array.dtype.name != wanted or list(array.shape) != list(entry["shape"]):
        raise ValueError(f"{folder / entry['file']}: {array.dtype.name} {array.shape}, manifest says {entry}")
    return restored


def _stored_arrays(folder: Path, entries: Sequence[Mapping[str, Any]], writeable: bool) -> LazyArrays:
    """The arrays of ``entries`` in ``folder``, read when first used (read-only unless ``writeable``)."""

    def load() -> dict[str, np.ndarray]:
        arrays = {entry["name"]: read_array(folder, entry) for entry in entries}
        for array in arrays.values():
            array.flags.writeable = writeable
        return arrays

    return LazyArrays(entries, load)


def case_folder(root: Path, case_id: str) -> Path:
    if not ID_PATTERN.match(case_id):
        raise ValueError(f"bad case id {case_id!r}")
    return root.joinpath(*case_id.split("/"))


def read_manifest(folder: Path | str) -> dict[str, Any]:
    """The manifest (``case.json``) in ``folder``, its format checked."""
    path = Path(folder) / MANIFEST
    manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}")
    return manifest


def load(folder: Path | str) -> Case:
    """The case whose ``case.json`` is in ``folder``: its inputs are read (or drawn) when first
    used, its expected values are the stored ones (a scale case's are the reference's)."""
    path = Path(folder)
    manifest = read_manifest(path)
    generator = manifest.get("generator")
    if generator is not None:
        inputs = LazyArrays(manifest["inputs"], lambda: materialize(generator))
        expected = None
    else:
        inputs = _stored_arrays(path, manifest["inputs"], writeable=True)
        stored = [{"name": name, **entry} for name, entry in manifest.get("expected", {}).items()]
        expected = _stored_arrays(path, stored, writeable=False)
    return Case(
        id=manifest["id"],
        form=manifest["form"],
        inputs=inputs,
        attributes=Attributes.of(manifest["attributes"], form_name=ATTRIBUTE_FORMS[manifest["form"]]),
        tags=tuple(manifest["tags"]),
        description=manifest.get("description", ""),
        expect=manifest["expect"],
        rule=manifest.get("rule"),
        error=manifest.get("error"),
        provenance=manifest.get("provenance"),
        brute_force_paths=manifest.get("brute_force_paths"),
        hand_worked=manifest.get("hand_worked"),
        generator=generator,
        expected=expected,
        folder=path,
    )


def list_ids(root: Path | str | None = None) -> list[str]:
    """The sorted case ids of the corpus at ``root`` (the package's by default), from ``index.json``."""
    base = default_root() if root is None else Path(root)
    index = json.loads((base / INDEX).read_text(encoding="utf-8"))
    if index.get("format") != FORMAT:
        raise ValueError(f"{base / INDEX}: format {index.get('format')!r}, expected {FORMAT!r}")
    return sorted(index["cases"])


def load_all(root: Path | str | None = None) -> list[Case]:
    """Every case of the corpus at ``root`` (the package's by default), sorted by id."""
    base = default_root() if root is None else Path(root)
    cases = []
    for case_id in list_ids(base):
        case = load(case_folder(base, case_id))
        if case.id != case_id:
            raise ValueError(f"{case_folder(base, case_id)}: holds case {case.id!r}")
        cases.append(case)
    return cases


def _matches(case: Case, pattern: str) -> bool:
    in_folder = case.id.startswith(pattern.rstrip("/") + "/")
    return pattern in case.tags or in_folder or fnmatch.fnmatchcase(case.id, pattern)


def select(cases: Iterable[Case], patterns: Sequence[str] | None = None) -> list[Case]:
    """The cases matching any of ``patterns``, in order. A pattern is a tag, a folder of the id
    tree (the cases under it: a case family such as ``spec/hand_worked``, as the HTML report's
    matrix names it, or ``released/blank_first/int32``) or a glob over ids.

    No patterns: every case but the ``scale`` ones. A ``scale`` case is selected only by a
    pattern that asks for it by name (the tag ``scale``, or a glob that contains "scale"), so
    ``*`` does not draw hundreds of MB of inputs.
    """
    chosen = []
    for case in cases:
        big = SCALE_TAG in case.tags
        wanted = [p for p in patterns or ["*"] if _matches(case, p)]
        if (wanted and not big) or any(SCALE_TAG in p for p in wanted):
            chosen.append(case)
    return chosen


# -- generated inputs (scale cases) --------------------------------------------------------------

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def splitmix64_uniform(seed: int, start: int, count: int) -> np.ndarray:
    """Outputs ``start .. start + count - 1`` of SplitMix64 seeded with ``seed``, as doubles in [0, 1)."""
    state = np.uint64(seed % 2**64) + np.arange(start + 1, start + count + 1, dtype=np.uint64) * _GAMMA
    z = (state ^ (state >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    z = z ^ (z >> np.uint64(31))
    out: np.ndarray = (z >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return out


def float_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of a float element type name (bfloat16 from ml_dtypes)."""
    if name == "bfloat16":
        bfloat16 = _bfloat16()
        if bfloat16 is None:
            raise ValueError("bfloat16 needs the ml_dtypes package")
        wide: np.dtype[Any] = np.dtype(bfloat16)
        return wide
    return np.dtype(name)


def generated_lengths(generator: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Frame counts and target lengths [N] of a "splitmix64-v1" recipe."""
    frames, targets, n = int(generator["T"]), int(generator["L"]), int(generator["N"])
    samples = np.arange(n)
    return frames - (samples % 4) * (frames // 10), targets - (samples % 3) * (targets // 10)


def materialize(generator: Mapping[str, Any] | Case) -> dict[str, np.ndarray]:
    """The inputs of a generated case, deterministic. The recipe "splitmix64-v1" is portable:
    ``u(s, k)`` is the k-th output (k = 0, 1, ...) of SplitMix64 seeded with s, as a double
    ``(z >> 11) * 2**-53``; ``inputs[t, n, c] = logit_scale * (2 u(seed, (t N + n) C + c) - 1)``
    rounded to ``dtype``; sample n has ``T_n = T - (n mod 4) floor(T / 10)`` frames (a prefix mask,
    int32) and ``L_n = L - (n mod 3) floor(L / 10)`` labels ``floor(u(seed + 1, n T + j) (C - 1))``
    for j < L_n, then -1 pads (int64)."""
    recipe = generator.generator if isinstance(generator, Case) else generator
    if recipe is None or recipe.get("recipe") != "splitmix64-v1":
        raise ValueError(f"unknown generator {recipe!r}")
    frames, n, classes, seed = (int(recipe[k]) for k in ("T", "N", "C", "seed"))
    scale = float(recipe["logit_scale"])
    inputs = np.empty((frames, n, classes), dtype=float_dtype(recipe["dtype"]))
    row = n * classes
    for t in range(frames):
        inputs[t] = (scale * (2.0 * splitmix64_uniform(seed, t * row, row) - 1.0)).reshape(n, classes)
    lengths, target_lengths = generated_lengths(recipe)
    mask = (np.arange(frames)[:, None] < lengths[None, :]).astype(np.int32)
    labels = np.full((n, frames), -1, dtype=np.int64)
    for i in range(n):
        draws = splitmix64_uniform(seed + 1, i * frames, int(target_lengths[i]))
        labels[i, : target_lengths[i]] = np.floor(draws * (classes - 1)).astype(np.int64)
    return {"inputs": inputs, "sequence_mask": mask, "labels": labels}


def generated_entries(generator: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The manifest's input entries of a generated case (no files)."""
    frames, n, classes = (int(generator[k]) for k in ("T", "N", "C"))
    entries = [
        {"name": "inputs", "dtype": generator["dtype"], "shape": [frames, n, classes]},
        {"name": "sequence_mask", "dtype": "int32", "shape": [frames, n]},
        {"name": "labels", "dtype": "int64", "shape": [n, frames]},
    ]
    return entries


def describe() -> dict[str, str]:
    """What each manifest key means (written into ``index.json``, for readers in other languages)."""
    return {
        "id": "the case id; the case's folder is the id's path under the corpus root",
        "form": "spec (time-major: inputs, sequence_mask, labels) or released (OpenVINO: logits, "
        "logit_length, labels, label_length, optional blank_index)",
        "attributes": "every boolean attribute of the form, defaults included",
        "inputs": "in port order: name, dtype, shape, file (.npy 1.0, little-endian, C order); "
        "storage 'uint16 bits' when a bfloat16 array is stored as its bits",
        "tolerance": "element type whose rtol/atol (schema 'tolerance') apply; null for non-float logits",
        "expect": "value: compare with 'expected'; reject: the implementation must refuse the input",
        "rule": "reject cases: the spec rule broken (spec/ctcloss4.md section numbers)",
        "error": "reject cases: the message ctcop's reference gives",
        "expected": "loss [N] and grad (spec form [T,N,C]; released form d loss / d logits [N,T,C]), "
        "in the logits' element type; absent for reject and generated cases",
        "provenance": "hand-worked (spec 9), brute-force (all C**T_i paths enumerated at generation, "
        "C**T_i <= path_limit per sample) or reference-only",
        "brute_force_paths": "number of paths enumerated to verify the case",
        "hand_worked": "section, closed form and value worked by hand (spec 9)",
        "generator": "scale cases: recipe and parameters from which the inputs are drawn (no files); "
        "expected values are computed by the reference when the case is loaded",
        "tags": "sorted tags: form, group, element types, attribute flags, infeasible, nan, invalid, scale",
    }
