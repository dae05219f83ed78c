"""The case groups of the corpus, as :class:`~.case.Case` drafts (inputs and attributes; the
generator computes and checks their expected values).

- spec form (``spec/<name>/<float type>``, :func:`spec_drafts`): the worked examples of spec 9,
  the edge cases of 4.4 and seeded random cases;
- released form (``released/<name>/<index type>/<float type>``, :func:`released_drafts`): the
  attributes and inputs of spec 7;
- invalid input (``invalid/<name>``, ``invalid/released/<name>``, :func:`invalid_drafts`): one case
  per rule of spec 3, 6 and 7, each breaking exactly one rule of a valid base;
- scale (``spec/scale_*``, tag "scale", :func:`scale_drafts`): drawn from a recipe
  (:func:`corpus.materialize`).

A case whose finite logits would overflow a type is left out of that type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from ..attributes import Attributes
from ..examples import worked_examples
from .case import ATTRIBUTE_FORMS, FLOAT_TYPES, Case, LazyArrays
from .cases import edge_cases, random_cases
from .corpus import SCALE_TAG, float_dtype, generated_entries, materialize

HAND_WORKED = "hand_worked"  # the tag of the worked examples (and the name of the first)
WIDE_TYPES = ("float32", "float64")
RELEASED_TYPES: tuple[tuple[str, str], ...] = (
    ("int32", "float32"),
    ("int64", "float32"),
    ("int64", "float64"),
    ("int32", "float16"),
    ("int32", "bfloat16"),
)
# float16 and bfloat16 take the first few cases of the random groups (the file count stays small).
NARROW_RANDOM = {"random": 8, "many_classes": 2}


def flag_suffix(attributes: Attributes) -> str:
    """``_collapse``, ``_nomerge``, ``_unique`` for the attributes that differ from the defaults."""
    parts = []
    if attributes["preprocess_collapse_repeated"]:
        parts.append("collapse")
    merge = attributes["merge_repeated" if attributes.form == "time_major" else "ctc_merge_repeated"]
    if not merge:
        parts.append("nomerge")
    if attributes.form == "openvino" and attributes["unique"]:
        parts.append("unique")
    return "".join(f"_{p}" for p in parts)


def rounded(values: np.ndarray, dtype: str) -> np.ndarray | None:
    """``values`` rounded to ``dtype``; None when a finite value would overflow it."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.asarray(values).astype(float_dtype(dtype))
        overflow = np.isfinite(np.asarray(values, dtype=np.float64)) & ~np.isfinite(out.astype(np.float64))
    return None if overflow.any() else out


# -- spec form -----------------------------------------------------------------------------------


# The cases every sample of the default run holds (tag "sample", :mod:`.sampling`): the only ones
# of the self-check's map that catch a mutant no family's representative catches (float64
# accuracy: a log-softmax in float32; a loss beyond a half type's range saturated).
IN_EVERY_SAMPLE = ("spec/hand_worked/float64", "spec/loss_beyond_float16/float16")


def _draft(case: Case, path: str, dtype: str, tags: tuple[str, ...], description: str) -> Case | None:
    """``case`` as the corpus case ``<form>/<path>/<dtype>``: its logits rounded to ``dtype`` (None
    when a finite one would overflow it), tagged with its form, ``tags``, ``dtype``, its flags and,
    for :data:`IN_EVERY_SAMPLE`, "sample"."""
    logits = rounded(case.inputs[case.logits_name], dtype)
    if logits is None:
        return None
    flags = flag_suffix(case.attributes).split("_")[1:]
    case_id = f"{case.form}/{path}/{dtype}"
    return replace(
        case,
        id=case_id,
        inputs={**case.inputs, case.logits_name: logits},
        tags=(case.form, *tags, dtype, *flags, *(("sample",) if case_id in IN_EVERY_SAMPLE else ())),
        description=description,
    )


def _spec_draft(case: Case, name: str, group: str, dtype: str, description: str) -> Case | None:
    path = name if group == HAND_WORKED else name + flag_suffix(case.attributes)
    return _draft(case, path, dtype, (group,), description)


def _spec_sources() -> list[tuple[str, str, Case, str]]:
    """(group, name, case, description) of every spec-form case, in a fixed order."""
    worked = {example.name for example in worked_examples()}
    sources = []
    for case in edge_cases():
        base = case.id.split("[")[0]
        group = HAND_WORKED if base in worked else "edge"
        sources.append((group, base, case, f"cases.edge_cases(): {case.id}"))
    for group, seed, count, max_c in (("random", 2026, 60, 8), ("many_classes", 2027, 8, 300)):
        for k, case in enumerate(random_cases(seed=seed, count=count, max_c=max_c)):
            call = f"cases.random_cases(seed={seed}, count={count}, max_c={max_c})[{k}]"
            sources.append((group, f"{group}_{k:02d}", case, f"{call}: {case.id}"))
    return sources


def spec_drafts() -> list[Case]:
    """The spec-form groups: the worked examples of spec 9 ("hand_worked", as their provenance:
    ``spec/hand_worked`` and the seed's examples, each value worked by hand), the edge cases of 4.4
    with their attribute variants ("edge"), 60 seeded random cases with up to 8 classes ("random")
    and 8 with up to 300 ("many_classes"), in float32 and float64; float16 and bfloat16 for the
    worked and edge cases and the first 8 random and 2 many-class ones. A case whose finite logits
    would overflow a type is left out of that type (``shift_minus_3e5`` in float16)."""
    hand = {example.name: example for example in worked_examples()}
    drafts = []
    counts: dict[str, int] = {}
    for group, name, case, description in _spec_sources():
        counts[group] = counts.get(group, 0) + 1
        narrow = counts[group] <= NARROW_RANDOM.get(group, 10**9)
        for dtype in FLOAT_TYPES if narrow else WIDE_TYPES:
            draft = _spec_draft(case, name, group, dtype, description)
            if draft is None:
                continue
            if group == HAND_WORKED:
                example = hand[name]
                worked = {"section": example.section, "closed_form": example.closed_form, "value": example.expected}
                draft = replace(draft, hand_worked=worked)
            drafts.append(draft)
    return drafts


# -- released form -------------------------------------------------------------------------------


Rows = list[list[int]]


def _released(
    name: str,
    group: str,
    description: str,
    logits: np.ndarray,
    lengths: tuple[list[int], Rows, list[int]],
    index_type: str,
    blank_index: int | None = None,
    flags: dict[str, bool] | None = None,
) -> Case:
    """A released-form case (tag ``group``) in float64 logits; ``lengths`` are ``logit_length``,
    the label rows and ``label_length``, written in ``index_type``."""
    logit_length, rows, label_length = lengths
    n, frames = logits.shape[:2]
    inputs = {
        "logits": logits,
        "logit_length": np.array(logit_length, dtype=index_type).reshape(n),
        "labels": np.array(rows, dtype=index_type).reshape(n, frames),
        "label_length": np.array(label_length, dtype=index_type).reshape(n),
    }
    if blank_index is not None:
        inputs["blank_index"] = np.array(blank_index, dtype=index_type)
    attributes = Attributes.of(flags or {}, form_name="openvino")
    return Case(name, "released", inputs, attributes, tags=(group,), description=description)


def _rows(rng: np.random.Generator, frames: int, classes: int, blank: int, lengths: list[int]) -> Rows:
    """Random targets of ``lengths`` over the non-blank classes, then junk in [0, C-1] (blank included)."""
    others = [c for c in range(classes) if c != blank]
    rows = []
    for length in lengths:
        prefix = [others[int(k)] for k in rng.integers(0, len(others), size=length)]
        rows.append(prefix + [int(k) for k in rng.integers(0, classes, size=frames - length)])
    return rows


def _blank_cases(index_type: str) -> list[Case]:
    """The same logits with the blank absent (C-1), first, in the middle and last."""
    logits = np.random.default_rng(4001).normal(size=(3, 5, 5)) * 2.0
    out = []
    for name, blank in (("blank_absent", None), ("blank_first", 0), ("blank_middle", 2), ("blank_last", 4)):
        rows = _rows(np.random.default_rng(4002), 5, 5, 4 if blank is None else blank, [2, 3, 0])
        where = "absent (C-1)" if blank is None else str(blank)
        description = f"blank_index {where}; junk (blank included) after label_length"
        out.append(_released(name, "blank", description, logits, ([5, 4, 2], rows, [2, 3, 0]), index_type, blank))
    return out


def _flag_cases(index_type: str) -> list[Case]:
    """``unique`` over runs and interleavings, and the 8 attribute combinations on one batch."""
    logits = np.random.default_rng(4003).normal(size=(4, 6, 4)) * 2.0
    unique_rows = [[2, 0, 2, 1, 0, 9], [1, 1, 1, 0, 0, 0], [0, 1, 0, 1, 0, 1], [2, 2, 0, 0, 2, 1]]
    description = "unique: (2,0,2,1,0) -> (2,0,1), runs, interleavings"
    unique_lengths = ([6, 6, 6, 5], unique_rows, [5, 3, 6, 6])
    out = [
        _released("unique_repeats", "unique", description, logits, unique_lengths, index_type, flags={"unique": True})
    ]
    rows = [[1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 0], [2, 0, 2, 1, 0, 1], [1, 2, 1, 2, 0, 0]]
    for bits in range(8):
        flags = {
            "preprocess_collapse_repeated": bool(bits & 1),
            "ctc_merge_repeated": not bits & 2,
            "unique": bool(bits & 4),
        }
        attributes = Attributes.of(flags, form_name="openvino")
        name = "flags" + (flag_suffix(attributes) or "_default")
        description = f"repeats and interleavings under {attributes.label()}"
        lengths = ([6, 6, 5, 6], rows, [4, 4, 5, 4])
        out.append(_released(name, "flags", description, logits, lengths, index_type, flags=flags))
    return out


def _junk(index_type: str) -> Rows:
    low, high = int(np.iinfo(np.dtype(index_type)).min), int(np.iinfo(np.dtype(index_type)).max)
    return [[0, 3, low, high, -1, 4], [4, -1, 5, 7, low, 0], [1, 1, 2, 0, 5, high]]


def _length_cases(index_type: str) -> list[Case]:
    """Junk after ``label_length``, ``logit_length`` < T, empty and infeasible targets, 300 classes."""
    rng = np.random.default_rng(4004)
    short = rng.normal(size=(4, 6, 4)) * 2.0
    for i, length in enumerate([3, 0, 1, 6]):
        short[i, length:] = np.nan
    junk = "label_length < T; junk after it: blank, -1, C, the index type's min and max"
    short_rows = [[0, 1, 9, 9, 9, 9], [0, 0, 0, 0, 0, 0], [2, 5, 5, 5, 5, 5], [1, 1, 2, 0, 0, 0]]
    infeasible_rows = [[0, 1, 2, 0, 1, 2], [1, 1, 1, 0, 0, 0], [2, 2, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]]
    infeasible = "targets longer than their frames, repeats that need a blank between them"
    t = index_type
    return [
        _released("junk_after_length", "junk", junk, rng.normal(size=(3, 6, 5)), ([6, 5, 6], _junk(t), [2, 0, 4]), t),
        _released(
            "logit_length_short", "logit_length", "logit_length < T (0 included); NaN in every frame beyond it",
            short, ([3, 0, 1, 6], short_rows, [2, 0, 1, 3]), t,
        ),
        _released(
            "empty_targets", "empty", "label_length 0: the all-blank path; T_i = 0 gives 0",
            rng.normal(size=(3, 6, 4)), ([6, 0, 3], [[0, 1, 2, 3, 3, 3]] * 3, [0, 0, 0]), t,
        ),
        _released("infeasible", "infeasible", infeasible, rng.normal(size=(4, 6, 4)),
                  ([4, 4, 1, 3], infeasible_rows, [6, 3, 2, 3]), t),
        _released(
            "many_classes", "many_classes", "300 classes, blank_index 150", rng.normal(size=(2, 3, 300)) * 3.0,
            ([2, 1], [[0, 299, 7], [151, 0, 0]], [2, 1]), t, 150,
        ),
        _released("empty_batch", "empty", "N = 0", np.zeros((0, 4, 3)), ([], [], []), t),
        _released("no_frames", "empty", "T = 0", np.zeros((2, 0, 3)), ([0, 0], [[], []], [0, 0]), t),
        _released(
            "non_finite_in_active_frames", "non_finite",
            "NaN, -inf and +inf in an active frame of samples 0, 1 and 2: NaN for each, sample 3 finite",
            _non_finite(), ([5, 5, 5, 4], [[0, 1, 2, 0, 1]] * 4, [2, 2, 2, 2]), t,
        ),
    ]  # fmt: skip


def _non_finite() -> np.ndarray:
    logits = np.random.default_rng(4005).normal(size=(4, 5, 4))
    logits[0, 1, 2], logits[1, 0, 0], logits[2, 3, 1] = np.nan, -np.inf, np.inf
    logits[3, 4, 0] = np.nan  # beyond sample 3's logit_length: ignored
    return logits


def released_drafts() -> list[Case]:
    """The released-form groups, each case in every pair of :data:`RELEASED_TYPES` ((int32,
    float32), (int64, float32), (int64, float64), (int32, float16), (int32, bfloat16)):
    ``blank_index`` absent, 0, middle, C-1 ("blank"); ``unique`` over repeats and interleavings
    ("unique"); all 8 combinations of ``preprocess_collapse_repeated`` x ``ctc_merge_repeated`` x
    ``unique`` ("flags"); ``label_length`` shorter than the rows with junk after it, the index
    type's extremes included ("junk"); ``logit_length`` < T with NaN in the frames beyond it
    ("logit_length"); empty and infeasible targets, N = 0, T = 0 and 300 classes."""
    drafts = []
    for index_type, dtype in RELEASED_TYPES:
        for case in _blank_cases(index_type) + _flag_cases(index_type) + _length_cases(index_type):
            draft = _draft(case, f"{case.id}/{index_type}", dtype, (*case.tags, index_type), case.description)
            if draft is not None:
                drafts.append(draft)
    return drafts


# -- invalid input -------------------------------------------------------------------------------


def _spec_base() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4005)
    return {
        "inputs": rng.normal(size=(4, 2, 3)).astype(np.float32),
        "sequence_mask": np.array([[1, 1], [1, 1], [1, 1], [1, 0]], dtype=np.int32),
        "labels": np.array([[0, 1, -1, -1], [1, -1, -1, -1]], dtype=np.int64),
    }


def _released_base() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4006)
    return {
        "logits": rng.normal(size=(2, 4, 3)).astype(np.float32),
        "logit_length": np.array([4, 3], dtype=np.int64),
        "labels": np.array([[0, 1, 0, 0], [1, 0, 0, 0]], dtype=np.int64),
        "label_length": np.array([2, 1], dtype=np.int64),
    }


def _set(name: str, index: tuple[int, ...], value: int) -> Callable[[dict[str, np.ndarray]], None]:
    def change(inputs: dict[str, np.ndarray]) -> None:
        inputs[name][index] = value

    return change


def _replace(name: str, value: np.ndarray) -> Callable[[dict[str, np.ndarray]], None]:
    def change(inputs: dict[str, np.ndarray]) -> None:
        inputs[name] = value

    return change


def _invalid_spec() -> list[tuple[str, str, str, Callable[[dict[str, np.ndarray]], None]]]:
    """(name, rule, description, change to the valid base) for the spec form."""
    base = _spec_base()
    return [
        ("mask_value_2", "3.1", "a sequence_mask value 2", _set("sequence_mask", (2, 1), 2)),
        ("mask_value_negative", "3.1", "a sequence_mask value -1", _set("sequence_mask", (0, 0), -1)),
        ("mask_gap", "3.1", "a mask column 1 1 0 1", _set("sequence_mask", (2, 0), 0)),
        ("label_is_blank", "3.3", "a label equal to the blank C-1", _set("labels", (0, 1), 2)),
        ("label_below_pad", "3.3", "a label -2", _set("labels", (1, 0), -2)),
        ("label_at_least_c", "3.3", "a label equal to C", _set("labels", (0, 0), 3)),
        ("label_invalid_beyond_frames", "3.3", "a label 7 beyond the sample's frames", _set("labels", (1, 3), 7)),
        ("single_class_label", "3.3", "C = 1 and a label 0 (only pads are valid)",
         _replace("inputs", base["inputs"][:, :, :1].copy())),
        ("inputs_rank_2", "2", "inputs of rank 2", _replace("inputs", base["inputs"][:, :, 0].copy())),
        ("mask_shape", "2", "sequence_mask [T+1, N]", _replace("sequence_mask", np.ones((5, 2), np.int32))),
        ("labels_shape", "2", "labels [N, T-1]", _replace("labels", base["labels"][:, :3].copy())),
        ("zero_classes", "6", "C = 0", _replace("inputs", np.zeros((4, 2, 0), np.float32))),
        ("inputs_int32", "6", "integer logits", _replace("inputs", np.zeros((4, 2, 3), np.int32))),
        ("mask_float32", "6", "a float sequence_mask", _replace("sequence_mask", np.ones((4, 2), np.float32))),
        ("labels_float64", "6", "float labels", _replace("labels", base["labels"].astype(np.float64))),
    ]  # fmt: skip


def _invalid_released() -> list[tuple[str, str, str, Callable[[dict[str, np.ndarray]], None]]]:
    """(name, rule, description, change to the valid base) for the released form."""

    def blank(value: Any) -> Callable[[dict[str, np.ndarray]], None]:
        return _replace("blank_index", np.array(value, dtype=np.int64))

    return [
        ("logit_length_above_t", "7.1", "logit_length T+1", _set("logit_length", (1,), 5)),
        ("logit_length_negative", "7.1", "logit_length -1", _set("logit_length", (0,), -1)),
        ("label_length_above_t", "7.1", "label_length T+1", _set("label_length", (0,), 5)),
        ("label_length_negative", "7.1", "label_length -1", _set("label_length", (1,), -1)),
        ("blank_index_out_of_range", "7.1", "blank_index C", blank(3)),
        ("blank_index_negative", "7.1", "blank_index -1", blank(-1)),
        ("label_is_blank_in_prefix", "7.2", "a label in the prefix equal to blank_index 1", blank(1)),
        ("label_at_least_c_in_prefix", "7.2", "a label C in the prefix", _set("labels", (0, 1), 3)),
        ("label_negative_in_prefix", "7.2", "a label -1 in the prefix", _set("labels", (1, 0), -1)),
        ("label_is_default_blank", "7.2", "a label C-1 in the prefix, blank_index absent", _set("labels", (0, 0), 2)),
        ("blank_index_rank_1", "7", "blank_index of shape [1]", blank([1])),
        ("lengths_shape", "7", "logit_length [N+1]", _replace("logit_length", np.array([4, 3, 2], np.int64))),
    ]  # fmt: skip


def invalid_drafts() -> list[Case]:
    """One case per rule of spec 3, 6 and 7 (tag "invalid"): a valid base with one rule broken."""
    drafts = []
    groups = (
        ("spec", "invalid/", _spec_base, _invalid_spec()),
        ("released", "invalid/released/", _released_base, _invalid_released()),
    )
    for form, prefix, base, changes in groups:
        for name, rule, description, change in changes:
            inputs = base()
            change(inputs)
            drafts.append(
                Case(
                    id=prefix + name,
                    form=form,
                    inputs=inputs,
                    attributes=Attributes.of(form_name=ATTRIBUTE_FORMS[form]),
                    tags=("invalid", form),
                    description=description,
                    expect="reject",
                    rule=rule,
                )
            )
    return drafts


# -- scale ---------------------------------------------------------------------------------------


def scale_drafts() -> list[Case]:
    """warp-ctc's benchmark shapes (T = 150, N = 64; C = 28, L = 40 and C = 5000, L = 20) and a
    T = 1000 case, float32, drawn by recipe at load time (tag "scale", outside the default selection)."""
    drafts = []
    for frames, n, classes, targets, seed in ((150, 64, 28, 40, 1), (150, 64, 5000, 20, 2), (1000, 8, 28, 100, 3)):
        generator = {
            "recipe": "splitmix64-v1",
            "seed": 20260000 + seed,
            "T": frames,
            "N": n,
            "C": classes,
            "L": targets,
            "logit_scale": 4.0,
            "dtype": "float32",
        }
        drafts.append(
            Case(
                id=f"spec/scale_t{frames}_n{n}_c{classes}_l{targets}/float32",
                form="spec",
                inputs=LazyArrays(generated_entries(generator), partial(materialize, generator)),
                attributes=Attributes.of(),
                tags=("spec", SCALE_TAG, "float32"),
                description=f"T={frames}, N={n}, C={classes}, L={targets}: inputs drawn by recipe at load time",
                generator=generator,
            )
        )
    return drafts


def all_drafts() -> list[Case]:
    """Every case of the corpus, sorted by id (ids are unique)."""
    drafts = spec_drafts() + released_drafts() + invalid_drafts() + scale_drafts()
    ids = [draft.id for draft in drafts]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate case ids: {duplicates}")
    return sorted(drafts, key=lambda draft: draft.id)
