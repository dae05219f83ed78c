"""A report's rows (spec 10.4): names that parse back, registry keys by the device a model
executes on, and the registry applied by key: a CPU entry covers the CPU's virtual devices and
every precision on it, never another device."""

from __future__ import annotations

import pytest

from ctcop import defects
from ctcop.conformance import known, remeasure, rows
from ctcop.conformance.result import Result, to_dict

NAMES = {
    "openvino-ir": rows.Row("openvino-ir"),
    "openvino-ir@AUTO:CPU": rows.Row("openvino-ir", "AUTO:CPU"),
    "openvino@HETERO:GPU,CPU/f16": rows.Row("openvino", "HETERO:GPU,CPU", "f16"),
    "onnxruntime/bf16": rows.Row("onnxruntime", precision="bf16"),
    "openvino@GPU.1/native": rows.Row("openvino", "GPU.1", "native"),
}
DOCUMENT = {
    "schema": defects.SCHEMA,
    "libraries": {"rt": {"distributions": ["no-such-distribution"], "measured": "1.0"}},
    "defects": [
        {"id": "D1", "library": "rt", "kind": "defect", "spec": "4.4", "title": "wrong on CPU", "runtimes": ["rt"],
         "statuses": ["fail"], "cases": {"rt": ["spec/a/float32"]}},
        {"id": "D2", "library": "rt", "kind": "defect", "spec": "6", "title": "wrong on GPU at f16",
         "runtimes": ["rt@GPU/f16"], "statuses": ["fail"], "cases": {"rt@GPU/f16": ["spec/b/float32"]}},
    ],
}  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_a_rows_name_parses_back_into_the_row(name) -> None:
    assert rows.parse(name) == NAMES[name] and NAMES[name].name == name
    assert rows.ROW.fullmatch(name)


def test_a_rows_registry_keys_name_the_device_it_executes_on_then_its_precision() -> None:
    assert rows.Row("rt", "AUTO:CPU").registry_keys("CPU") == ("rt",)
    assert rows.Row("rt", "AUTO:GPU").registry_keys("GPU") == ("rt@GPU",)
    assert rows.Row("rt", "GPU", "f16").registry_keys("GPU") == ("rt@GPU/f16", "rt@GPU")


@pytest.mark.parametrize(
    ("keys", "case", "status"),
    [
        (("rt",), "spec/a/float32", "xfail"),  # AUTO:CPU executes on CPU
        (("rt/bf16", "rt"), "spec/a/float32", "xfail"),  # the CPU's defects at any precision
        (("rt@GPU",), "spec/a/float32", "fail"),  # measured on CPU: says nothing of the GPU
        (("rt@GPU/f16", "rt@GPU"), "spec/b/float32", "xfail"),
        (("rt@GPU",), "spec/b/float32", "fail"),  # measured at f16 only
    ],
)
def test_the_registry_applies_by_registry_key(keys, case, status) -> None:
    registered = known.KnownDefects.of(list(defects.parse(DOCUMENT).defects), {"row": keys})
    assert registered.apply(Result(case, "row", "fail", "off"), ()).status == status


def test_a_listed_case_that_passes_is_news_only_under_the_rows_own_key() -> None:
    registered = known.KnownDefects.of(
        list(defects.parse(DOCUMENT).defects), {"own": ("rt",), "inherits": ("rt/bf16", "rt")}
    )
    assert registered.apply(Result("spec/a/float32", "own", "pass"), ()).status == "xpass"
    assert registered.apply(Result("spec/a/float32", "inherits", "pass"), ()).status == "pass"


def test_remeasuring_a_new_device_adds_what_fails_as_on_the_cpu_and_lists_the_rest() -> None:
    failing = [Result("spec/a/float32", "rt@GPU", "fail", "off"), Result("spec/c/float32", "rt@GPU", "fail", "off")]
    report = {
        "settings": {"known_defects": False},
        "runtimes": [{"name": "rt@GPU", "available": True, "registry_keys": ["rt@GPU"]}],
        "results": [to_dict(r) for r in failing],
    }
    updated, lines = remeasure.remeasure(DOCUMENT, report)
    first = updated["defects"][0]
    assert first["cases"]["rt@GPU"] == ["spec/a/float32"] and "rt@GPU" in first["runtimes"]
    assert first["cases"]["rt"] == ["spec/a/float32"]  # the CPU's cases were not measured: kept
    assert lines == [
        "D1 rt@GPU: 1 case added (a new device; they fail as on the CPU)",
        "unregistered: rt@GPU spec/c/float32 [fail] off",
    ]
