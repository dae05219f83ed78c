"""The corpus generator: ``python -m ctcop.conformance.generate [--check] [DIR]``.

Writes every case of :mod:`.groups` into DIR (default: the package's ``ctcop/data/corpus``),
replacing what a previous run wrote there: each case's inputs, the reference's loss and gradient
computed from the stored (rounded) logits, and the manifest (:mod:`.corpus`). Every case whose
samples all have at most ``bruteforce.PATH_LIMIT`` paths is verified by enumerating them
(:mod:`.bruteforce`) and gets provenance "brute-force"; the worked examples are checked against
their hand-worked values; an invalid case must make ctcop raise, and its message is recorded.
Generation stops with an error when any of these checks fails.

Deterministic: sorted ids, stable JSON, ``.npy`` bytes written by :func:`corpus.npy_bytes`.
``--check`` regenerates into a temporary folder and exits 1 listing the files that differ; a float
array that differs from the checked-in one only by float noise (:func:`_within_noise`: :data:`ULPS`
ulp plus :data:`NOISE_RTOL` relative, gradients plus :data:`GRAD_NOISE` absolute) counts as equal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..tolerance import compare
from . import bruteforce
from .case import FLOAT_TYPES, Case, reference_grad, reference_loss
from .corpus import (
    BFLOAT16_STORAGE,
    FORMAT,
    INDEX,
    MANIFEST,
    array_entry,
    case_folder,
    default_root,
    describe,
    float_dtype,
    generated_entries,
    save,
    save_index,
)
from .groups import all_drafts
from .report import counted

# One ulp at 1.0 and the smallest subnormal, per float type (the brute-force comparison's bounds).
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
TINY = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 5e-324}
# --check: float arrays may differ by this much between CPUs (numpy's float64 exp and log take
# other code paths on AVX-512 than on AVX2) or after a change to the order of the reference's float
# operations; gradients, differences of probabilities, by an absolute amount (their entries lie in
# [-1, 1] and cancel). Far below the conformance tolerances (float64: 1e-9), so a real change shows.
ULPS = 4
NOISE_RTOL = 1e-13
GRAD_NOISE = 1e-12


def _logits(draft: Case) -> np.ndarray:
    return draft.inputs["inputs" if draft.form == "spec" else "logits"]


def _frames(draft: Case) -> list[int]:
    if draft.form == "spec":
        return [int(v) for v in draft.inputs["sequence_mask"].astype(np.int64).sum(axis=0)]
    return [int(v) for v in draft.inputs["logit_length"]]


def enumerated(draft: Case) -> tuple[np.ndarray, np.ndarray]:
    """Loss and gradient of a valid case by brute force (float64)."""
    x, attributes = draft.inputs, draft.attributes
    if draft.form == "spec":
        return bruteforce.time_major_loss_grad(
            x["inputs"], x["sequence_mask"], x["labels"], **{k: attributes[k] for k in attributes}
        )
    blank = int(x["blank_index"]) if "blank_index" in x else x["logits"].shape[2] - 1
    return bruteforce.openvino_loss_grad(
        x["logits"],
        x["logit_length"],
        x["labels"],
        x["label_length"],
        blank,
        attributes["preprocess_collapse_repeated"],
        attributes["ctc_merge_repeated"],
        attributes["unique"],
    )


def agrees(got: np.ndarray, exact: np.ndarray, dtype: str, atol: float) -> bool:
    """Whether ``got`` (in ``dtype``) is ``exact`` (float64) rounded once, give or take 1e-12
    relative and ``atol``: within one ulp relative, with inf and NaN where ``exact`` rounds to them."""
    values = got.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = exact.astype(float_dtype(dtype)).astype(np.float64)
        special = ~np.isfinite(rounded) | ~np.isfinite(values)
        same = (np.isnan(values) & np.isnan(rounded)) | (values == rounded)
        close = np.abs(values - exact) <= (EPS[dtype] + 1e-12) * np.abs(exact) + atol + TINY[dtype]
    return bool(np.all(np.where(special, same, close)))


def verify(draft: Case, loss: np.ndarray, grad: np.ndarray) -> dict[str, Any]:
    """Provenance fields of a valid case, after checking the reference against brute force (when
    small enough) and the hand-worked value (worked examples)."""
    dtype = _logits(draft).dtype.name
    fields: dict[str, Any] = {"provenance": "reference-only"}
    classes = _logits(draft).shape[2]
    if bruteforce.small_enough(classes, _frames(draft)):
        exact_loss, exact_grad = enumerated(draft)
        if not (agrees(loss, exact_loss, dtype, 1e-12) and agrees(grad, exact_grad, dtype, 1e-12)):
            raise RuntimeError(f"{draft.id}: the reference disagrees with brute force: {loss} vs {exact_loss}")
        fields = {"provenance": "brute-force", "brute_force_paths": bruteforce.path_count(classes, _frames(draft))}
    if draft.hand_worked is not None:
        problem = compare(loss, [draft.hand_worked["value"]], dtype)
        if problem:
            raise RuntimeError(f"{draft.id}: the reference disagrees with the hand-worked value: {problem}")
        fields.update(provenance="hand-worked", hand_worked=draft.hand_worked)
    return fields


def _base_manifest(draft: Case, entries: list[dict[str, Any]]) -> dict[str, Any]:
    dtype = next(entry["dtype"] for entry in entries if entry["name"] in ("inputs", "logits"))
    return {
        "format": FORMAT,
        "id": draft.id,
        "form": draft.form,
        "description": draft.description,
        "attributes": dict(draft.attributes),
        "inputs": entries,
        "tolerance": dtype if dtype in FLOAT_TYPES else None,
        "expect": draft.expect,
    }


def _rejected(draft: Case) -> str:
    """The message ctcop gives for an invalid case (which must name its rule)."""
    try:
        reference_loss(draft.form, draft.inputs, draft.attributes)
    except InvalidInputError as error:
        message = str(error)
        if "." in (draft.rule or "") and f"rule {draft.rule}" not in message:
            raise RuntimeError(f"{draft.id}: expected rule {draft.rule}, ctcop says {message!r}") from None
        return message
    raise RuntimeError(f"{draft.id}: ctcop accepts this input")


def build(draft: Case) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The manifest and the arrays (file name -> array) of one case."""
    if draft.generator is not None:
        manifest = _base_manifest(draft, generated_entries(draft.generator))
        fields = {"generator": draft.generator, "provenance": "reference-only", "tags": sorted(set(draft.tags))}
        return {**manifest, **fields}, {}
    files = {f"{name}.npy": array for name, array in draft.inputs.items()}
    entries = [{"name": name, **array_entry(array, f"{name}.npy")} for name, array in draft.inputs.items()]
    manifest = _base_manifest(draft, entries)
    if draft.expect == "reject":
        return {**manifest, "rule": draft.rule, "error": _rejected(draft), "tags": sorted(set(draft.tags))}, files
    loss = reference_loss(draft.form, draft.inputs, draft.attributes)
    grad = reference_grad(draft.form, draft.inputs, draft.attributes)
    tags = set(draft.tags)
    tags |= {"infeasible"} if np.isposinf(loss.astype(np.float64)).any() else set()
    tags |= {"nan"} if np.isnan(loss.astype(np.float64)).any() else set()
    manifest.update(verify(draft, loss, grad))
    expected = {"loss": (loss, "expected_loss.npy"), "grad": (grad, "expected_grad.npy")}
    manifest["expected"] = {key: array_entry(array, file) for key, (array, file) in expected.items()}
    manifest["tags"] = sorted(tags)
    return manifest, {**files, "expected_loss.npy": loss, "expected_grad.npy": grad}


def _clear(root: Path) -> None:
    """Remove a previous corpus at ``root``; refuse to remove a folder that is not one."""
    if not root.exists():
        return
    if not (root / INDEX).exists() and any(root.iterdir()):
        raise SystemExit(f"{root}: not empty and holds no {INDEX}; refusing to replace it")
    shutil.rmtree(root)


def write(root: Path, drafts: Sequence[Case] | None = None) -> dict[str, Any]:
    """Generate the corpus into ``root``; returns the index's facts (ids, counts)."""
    chosen = list(all_drafts() if drafts is None else drafts)
    _clear(root)
    provenance: dict[str, int] = {}
    for draft in chosen:
        manifest, arrays = build(draft)
        key = manifest.get("provenance", "reject")
        provenance[key] = provenance.get(key, 0) + 1
        save(case_folder(root, draft.id), manifest, arrays)
    facts = {"path_limit": bruteforce.PATH_LIMIT, "provenance_counts": provenance, "keys": describe()}
    save_index(root, [draft.id for draft in chosen], facts)
    return {"cases": len(chosen), **facts}


def files_of(root: Path) -> dict[str, Path]:
    """Every file under ``root``, keyed by its path relative to it (with /)."""
    return {path.relative_to(root).as_posix(): path for path in sorted(root.rglob("*")) if path.is_file()}


def _float_array(path: Path) -> np.ndarray:
    """A stored array, bfloat16 restored when the manifest beside it says it holds bfloat16 bits."""
    array: np.ndarray = np.load(path, allow_pickle=False)
    if array.dtype == np.uint16:
        manifest = json.loads((path.parent / MANIFEST).read_text(encoding="utf-8"))
        entries = [*manifest["inputs"], *manifest.get("expected", {}).values()]
        if any(e.get("file") == path.name and e.get("storage") == BFLOAT16_STORAGE for e in entries):
            return array.view(float_dtype("bfloat16"))
    return array


def _within_noise(a: Path, b: Path) -> bool:
    """Two .npy files of the same float type and shape whose values differ by at most ULPS ulp plus
    NOISE_RTOL relative (gradients: plus GRAD_NOISE absolute), NaN and infinities in the same places."""
    if a.suffix != ".npy":
        return False
    try:
        x, y = _float_array(a), _float_array(b)
    except (OSError, ValueError, EOFError, KeyError):
        return False
    if x.dtype != y.dtype or x.shape != y.shape or not (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        return False
    wide_x, wide_y = x.astype(np.float64), y.astype(np.float64)
    allowed = ULPS * np.spacing(np.abs(x)).astype(np.float64) + NOISE_RTOL * np.abs(wide_x)
    allowed += GRAD_NOISE if a.name == "expected_grad.npy" else 0.0
    with np.errstate(invalid="ignore"):
        same_special = (np.isnan(wide_x) & np.isnan(wide_y)) | (wide_x == wide_y)
        near = np.isfinite(wide_x) & np.isfinite(wide_y) & (np.abs(wide_x - wide_y) <= allowed)
    return bool(np.all(same_special | near))


def compare_trees(expected: Path, actual: Path) -> tuple[list[str], list[str]]:
    """Files that differ between two corpus folders (missing, extra, other bytes), and the float
    arrays that differ in bytes but only by float noise (:func:`_within_noise`; counted as equal)."""
    want, have = files_of(expected), files_of(actual)
    differing: list[str] = []
    near: list[str] = []
    for name in sorted(set(want) | set(have)):
        if name not in have:
            differing.append(f"{name} (missing)")
        elif name not in want:
            differing.append(f"{name} (not generated)")
        elif want[name].read_bytes() != have[name].read_bytes():
            (near if _within_noise(want[name], have[name]) else differing).append(name)
    return differing, near


def check(root: Path) -> tuple[list[str], list[str]]:
    """Regenerate into a temporary folder and compare with ``root`` (see :func:`compare_trees`)."""
    with tempfile.TemporaryDirectory() as folder:
        fresh = Path(folder) / "corpus"
        write(fresh)
        return compare_trees(fresh, root)


def _size(root: Path) -> tuple[int, int]:
    files = files_of(root)
    return len(files), sum(path.stat().st_size for path in files.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctcop.conformance.generate", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="regenerate into a temporary folder and compare")
    parser.add_argument("folder", nargs="?", type=Path, default=default_root(), help="corpus folder")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.check:
        differing, near = check(args.folder)
        for name in differing:
            print(f"differs: {name}")
        took = time.perf_counter() - start
        print(f"{counted(len(differing), 'file')} differ, {len(near)} within float noise ({took:.1f} s)")
        return 1 if differing else 0
    facts = write(args.folder)
    count, size = _size(args.folder)
    seconds = time.perf_counter() - start
    written = f"{counted(facts['cases'], 'case')}, {counted(count, 'file')}, {size / 1e6:.2f} MB"
    print(f"wrote {written} to {args.folder} in {seconds:.1f} s")
    print("provenance: " + ", ".join(f"{k} {v}" for k, v in sorted(facts["provenance_counts"].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
