"""The checked-in conformance corpus (ctcop/data/corpus): the generator reproduces it, brute force
and the hand-worked values vouch for it, and a reader with only json and numpy reads it."""

from __future__ import annotations

import fnmatch
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.oracle import decode_path, openvino_loss_grad, time_major_loss_grad

import ctcop
from ctcop.conformance import bruteforce, corpus, generate
from ctcop.conformance.case import Case, reference_loss
from ctcop.tolerance import compare

ROOT = corpus.default_root()
CASES = corpus.load_all()
BY_ID = {case.id: case for case in CASES}
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
SUBNORMAL = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 5e-324}


def test_the_checked_in_corpus_is_what_the_generator_writes() -> None:
    command = [sys.executable, "-m", "ctcop.conformance.generate", "--check"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, "run `python -m ctcop.conformance.generate`:\n" + result.stdout + result.stderr
    assert "0 files differ" in result.stdout


def test_check_exits_1_and_lists_what_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "corpus"
    shutil.copytree(ROOT, copy)
    (copy / "spec" / "hand_worked" / "float64" / "expected_loss.npy").write_bytes(b"changed")
    (copy / "invalid" / "mask_gap" / "labels.npy").unlink()
    (copy / "spec" / "extra.txt").write_text("not generated")
    one_ulp = copy / "spec" / "hand_worked" / "float32" / "expected_loss.npy"
    loss = np.load(one_ulp)
    one_ulp.write_bytes(corpus.npy_bytes(np.nextafter(loss, np.float32(np.inf))))
    bits = copy / "spec" / "hand_worked" / "bfloat16" / "expected_loss.npy"  # bfloat16 stored as uint16 bits
    bits.write_bytes(corpus.npy_bytes(np.load(bits) + np.uint16(1)))
    # The checked-in corpus is what the generator writes (the test above): copy it instead.
    monkeypatch.setattr(generate, "write", lambda root: shutil.copytree(ROOT, root))
    assert generate.main(["--check", str(copy)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        "differs: invalid/mask_gap/labels.npy (missing)",
        "differs: spec/extra.txt (not generated)",
        "differs: spec/hand_worked/float64/expected_loss.npy",
    ]
    assert "3 files differ, 2 within float noise" in out


def test_size_and_file_count_stay_small() -> None:
    files = [path for path in ROOT.rglob("*") if path.is_file()]
    assert len(files) < 3000
    assert sum(path.stat().st_size for path in files) < 5_000_000


def test_the_package_data_globs_ship_every_corpus_file() -> None:
    text = (Path(ctcop.__file__).parent.parent / "pyproject.toml").read_text()
    line = next(line for line in text.splitlines() if line.startswith("ctcop = [") and "data/" in line)
    patterns = json.loads(line.split("=", 1)[1])
    package = Path(ctcop.__file__).parent
    shipped = {path for pattern in patterns for path in package.glob(pattern)}
    assert {path for path in ROOT.rglob("*") if path.is_file()} <= shipped


# -- what vouches for the expected values --------------------------------------------------------


def rounded_once(got: np.ndarray, exact: np.ndarray, dtype: str, atol: float) -> bool:
    """``got`` is ``exact`` rounded to ``dtype`` (within 1e-12 relative and ``atol``; subnormals of
    ``dtype`` are spaced by its smallest one)."""
    values = got.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        target = exact.astype(corpus.float_dtype(dtype)).astype(np.float64)
        special = ~np.isfinite(values) | ~np.isfinite(target)
        same = (np.isnan(values) & np.isnan(target)) | (values == target)
        close = np.abs(values - exact) <= (EPS[dtype] + 1e-12) * np.abs(exact) + atol + SUBNORMAL[dtype]
    return bool(np.all(np.where(special, same, close)))


def enumerate_case(case: Case) -> tuple[np.ndarray, np.ndarray]:
    x, a = case.inputs, case.attributes
    if case.form == "spec":
        return time_major_loss_grad(
            x["inputs"], x["sequence_mask"], x["labels"], a["preprocess_collapse_repeated"], a["merge_repeated"]
        )
    blank = int(x["blank_index"]) if "blank_index" in x else x["logits"].shape[2] - 1
    flags = (a["preprocess_collapse_repeated"], a["ctc_merge_repeated"], a["unique"])
    return openvino_loss_grad(x["logits"], x["logit_length"], x["labels"], x["label_length"], blank, *flags)


BRUTE = [case for case in CASES if case.brute_force_paths is not None]


def test_brute_force_provenance_is_what_it_says() -> None:
    assert len(BRUTE) > 300
    for case in CASES:
        if case.provenance == "brute-force":
            assert case.brute_force_paths is not None, case.id
        if case.brute_force_paths is not None:
            frames = case.brute_force_paths
            logits = case.inputs["inputs" if case.form == "spec" else "logits"]
            lengths = case.inputs["sequence_mask"].sum(axis=0) if case.form == "spec" else case.inputs["logit_length"]
            assert frames == bruteforce.path_count(logits.shape[2], list(lengths)), case.id
            assert bruteforce.small_enough(logits.shape[2], list(lengths)), case.id


@pytest.mark.parametrize("chunk", range(4))
def test_every_brute_force_case_matches_enumeration_again(chunk: int) -> None:
    for case in BRUTE[chunk::4]:
        assert case.tolerance is not None and case.expected_loss is not None and case.expected_grad is not None
        loss, grad = enumerate_case(case)
        assert rounded_once(case.expected_loss, loss, case.tolerance, 1e-12), (case.id, case.expected_loss, loss)
        assert rounded_once(case.expected_grad, grad, case.tolerance, 1e-12), case.id


def test_hand_worked_values() -> None:
    by_hand = {"9.1": -math.log(0.339), "9.2": 9 * math.log(5) - math.log(495)}
    hand = [case for case in CASES if case.provenance == "hand-worked"]
    assert len(hand) == 12
    for case in hand:
        worked = case.hand_worked
        assert worked is not None
        value = worked["value"]
        if "no_merge" in case.id:
            assert value == pytest.approx(9 * math.log(5) - math.log(126), rel=1e-15)
        else:
            assert value == pytest.approx(by_hand[worked["section"]], rel=1e-15)
        assert case.tolerance is not None
        assert compare(case.expected_loss, [value], case.tolerance) is None, case.id


def test_reject_cases_are_rejected_with_the_recorded_message() -> None:
    rejects = [case for case in CASES if case.expect == "reject"]
    rules = {case.rule for case in rejects}
    assert {"2", "3.1", "3.3", "6", "7", "7.1", "7.2"} <= rules
    for case in rejects:
        assert (
            case.expected_loss is None
            and case.expected_grad is None
            and "expected" not in corpus.read_manifest(case.stored_in())
        )
        function = ctcop.ctc_loss if case.form == "spec" else ctcop.openvino_ctc_loss
        with pytest.raises(ctcop.InvalidInputError) as info:
            function(**case.inputs, **case.attributes)
        assert str(info.value) == case.error, case.id
        assert "." not in (case.rule or "") or f"rule {case.rule}" in str(info.value), case.id


# -- an independent reader: json and numpy only -------------------------------------------------


def read_independently(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """A case as another language would read it: the manifest and every listed .npy file."""
    manifest = json.loads((folder / "case.json").read_text())
    entries = [*manifest["inputs"], *manifest.get("expected", {}).values()]
    arrays = {}
    for entry in entries:
        if "file" not in entry:  # drawn by recipe (scale cases)
            continue
        array = np.load(folder / entry["file"], allow_pickle=False)
        bits = entry.get("storage") == "uint16 bits"
        assert array.dtype.name == ("uint16" if bits else entry["dtype"]), (folder, entry)
        assert list(array.shape) == entry["shape"], (folder, entry)
        arrays[entry["file"]] = array
    return manifest, arrays


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and a.tobytes() == b.tobytes()


def test_every_case_reads_the_same_without_ctcop() -> None:
    index = json.loads((ROOT / "index.json").read_text())
    assert index["cases"] == sorted(index["cases"]) == [case.id for case in CASES]
    for case_id in index["cases"]:
        folder = ROOT.joinpath(*case_id.split("/"))
        manifest, arrays = read_independently(folder)
        case = corpus.load(folder)
        assert manifest["id"] == case.id == case_id and manifest["format"] == "ctcop-corpus-1"
        if "generator" in manifest:
            assert not arrays and "scale" in manifest["tags"]
            continue
        for entry in manifest["inputs"]:
            assert same_bits(arrays[entry["file"]], case.inputs[entry["name"]]), (case_id, entry)
            assert case.inputs[entry["name"]].dtype.name == entry["dtype"]
        assert [entry["name"] for entry in manifest["inputs"]] == list(case.inputs)
        if manifest["expect"] == "value":
            assert same_bits(arrays["expected_loss.npy"], case.expected_loss)
            assert same_bits(arrays["expected_grad.npy"], case.expected_grad)


def test_the_reference_on_the_stored_inputs_gives_the_stored_values() -> None:
    for case in corpus.select(CASES, ["*"]):
        if case.expect != "value":
            continue
        assert case.tolerance is not None and case.expected_loss is not None
        got = reference_loss(case.form, case.inputs, case.attributes)
        assert got.dtype == case.expected_loss.dtype, case.id
        assert compare(got, case.expected_loss, case.tolerance) is None, case.id


def test_bfloat16_stays_bits_without_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(corpus, "_bfloat16", lambda: None)
    case = corpus.load(ROOT / "spec" / "hand_worked" / "bfloat16")
    assert case.inputs["inputs"].dtype == np.uint16
    assert case.declared()[0]["storage"] == "uint16 bits"


# -- composition and selection -------------------------------------------------------------------


def ids(pattern: str) -> list[str]:
    return [case.id for case in CASES if fnmatch.fnmatchcase(case.id, pattern)]


def test_ids_are_readable_and_name_their_folders() -> None:
    for case in CASES:
        assert corpus.ID_PATTERN.match(case.id), case.id
        assert case.folder == ROOT.joinpath(*case.id.split("/"))
        assert case.form in ("spec", "released") and case.expect in ("value", "reject")
        assert case.form in case.tags
    for wanted in ("spec/empty_targets/float32", "released/blank_middle/int32/float32", "invalid/mask_value_2"):
        assert wanted in BY_ID


def test_the_groups_cover_every_form_element_type_and_edge_case() -> None:
    for dtype, released in (("float16", 21), ("bfloat16", 21), ("float32", 42), ("float64", 21)):
        assert len(ids(f"spec/*/{dtype}")) >= 40 and len(ids(f"released/*/{dtype}")) == released
    assert len(ids("released/*/int32/*")) == 63 and len(ids("released/*/int64/*")) == 42
    for non_finite in ("nan_in_active_frame", "neg_inf_in_active_frame", "inf_in_active_frame", "loss_beyond_float16"):
        assert len(ids(f"spec/{non_finite}/*")) == 4
    assert len(ids("released/non_finite_in_active_frames/*/*")) == 5
    for edge in ("empty_targets", "infeasible_too_long", "zero_length_sequences", "single_class", "empty_batch"):
        assert len(ids(f"spec/{edge}/*")) == 4
    assert len(ids("spec/random_*/float64")) == 60 and len(ids("spec/many_classes_*/float64")) == 8
    for name in ("absent", "first", "middle", "last"):
        assert len(ids(f"released/blank_{name}/*")) == 5
    flags = {case.attributes for case in CASES if "flags" in case.tags}
    assert len(flags) == 8
    for group in ("unique", "junk", "logit_length", "empty", "infeasible", "int32", "int64"):
        assert any(group in case.tags for case in CASES if case.form == "released"), group
    assert BY_ID["released/blank_absent/int32/float32"].inputs.keys() == {
        "logits",
        "logit_length",
        "labels",
        "label_length",
    }
    assert int(BY_ID["released/blank_middle/int64/float64"].inputs["blank_index"]) == 2


def test_default_selection_leaves_out_the_scale_cases() -> None:
    scale = [case.id for case in CASES if "scale" in case.tags]
    assert len(scale) == 3
    assert not set(scale) & {case.id for case in corpus.select(CASES)}
    assert not set(scale) & {case.id for case in corpus.select(CASES, ["*"])}
    assert [case.id for case in corpus.select(CASES, ["scale"])] == scale
    assert [case.id for case in corpus.select(CASES, ["spec/scale_t150_*"])] == scale[1:]
    assert {case.id for case in corpus.select(CASES, ["invalid"])} == set(ids("invalid/*"))
    assert [case.id for case in corpus.select(CASES, ["bfloat16", "*/float16"])] == [
        case.id for case in CASES if case.id.endswith(("/float16", "/bfloat16"))
    ]


# -- generated (scale) inputs ----------------------------------------------------------------------


def splitmix64(seed: int, count: int) -> list[int]:
    """SplitMix64 in Python integers, as any language writes it."""
    out, state, mask = [], seed, 2**64 - 1
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return out


def test_the_recipe_is_splitmix64() -> None:
    assert splitmix64(0, 1) == [0xE220A8397B1DCDAF]  # the published first output for seed 0
    for seed in (0, 20260001, 2**64 - 1):
        expected = [(z >> 11) * 2.0**-53 for z in splitmix64(seed, 50)]
        assert corpus.splitmix64_uniform(seed, 0, 50).tolist() == expected
        assert corpus.splitmix64_uniform(seed, 7, 3).tolist() == expected[7:10]


def test_scale_inputs_are_drawn_deterministically() -> None:
    case = BY_ID["spec/scale_t150_n64_c28_l40/float32"]
    inputs = case.inputs
    assert case.generator is not None
    again = corpus.materialize(case.generator)
    for entry in case.declared():
        array = inputs[entry["name"]]
        assert array.dtype.name == entry["dtype"] and list(array.shape) == entry["shape"]
        assert same_bits(array, again[entry["name"]])
    u = [(z >> 11) * 2.0**-53 for z in splitmix64(20260001, 3)]
    assert inputs["inputs"][0, 0, :3].tolist() == [np.float32(4.0 * (2 * v - 1)) for v in u]
    lengths = inputs["sequence_mask"].sum(axis=0)
    assert lengths[:5].tolist() == [150, 135, 120, 105, 150]
    assert ((inputs["labels"] != -1).sum(axis=1)[:4] == [40, 36, 32, 40]).all()
    assert case.provenance == "reference-only" and np.isfinite(case.expected_loss).all()
    assert case.expected_loss.shape == (64,)


# -- the brute force itself ------------------------------------------------------------------------


def test_vectorised_decoding_is_decode_path() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        classes, frames = int(rng.integers(1, 5)), int(rng.integers(0, 6))
        blank = int(rng.integers(0, classes))
        paths = bruteforce.all_paths(classes, frames)
        for merge in (False, True):
            decoded = [decode_path(tuple(path), blank, merge) for path in paths]
            for target in {*decoded[:: max(1, len(decoded) // 7)], (0, 0)}:
                want = [d == target for d in decoded]
                assert bruteforce.aligned(paths, target, blank, merge).tolist() == want
