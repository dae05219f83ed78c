"""``ctcop conformance --device`` and ``--precision`` (spec 10.4, 10.5): a row per OpenVINO device,
the registry by the device a model executes on, a refusal for a device that is not here, and a
reduced precision judged by its bound."""

from __future__ import annotations

import json
from collections.abc import Iterable

import numpy as np
import pytest
from support.cli import assert_invalid_input, in_process
from support.paths import SUPPORT

from ctcop.conformance import corpus, verdict

SCALED = f"{SUPPORT / 'scaled_runtimes.py'}:RUNTIMES"


def test_a_device_that_is_not_here_is_refused_in_one_line(capsys) -> None:
    result = in_process(capsys, "conformance", "--runtimes", "openvino-ir", "--device", "GPU")
    assert_invalid_input(result, "device: 'GPU' is not an OpenVINO device here; have CPU")


def test_a_device_without_an_openvino_runtime_is_refused(capsys) -> None:
    result = in_process(capsys, "conformance", "--runtimes", "reference", "--device", "CPU")
    assert_invalid_input(result, "--device applies to OpenVINO runtimes, and none is chosen")


@pytest.mark.parametrize(("device", "row"), [("CPU", "openvino-ir"), ("AUTO:CPU", "openvino-ir@AUTO:CPU"),
                                             ("HETERO:CPU", "openvino-ir@HETERO:CPU")])  # fmt: skip
def test_a_device_that_executes_on_the_cpu_has_the_cpus_registered_defects(capsys, tmp_path, device, row) -> None:
    report = tmp_path / "report.json"
    args = ["--runtimes", "openvino-ir", "--device", device, "--select", "spec/hand_worked", "--json", report]
    code, out, err = in_process(capsys, "conformance", *args)
    assert code == 0, out + err
    document = json.loads(report.read_text())
    (listed,) = document["runtimes"]
    assert listed["name"] == row and listed["registry_keys"] == ["openvino-ir"]
    facts = listed["openvino"]
    assert facts["device"] == device and facts["executes_on"] == ["CPU"]
    assert set(facts["plugins"]) == {"CPU", *(device.split(":")[:1] if ":" in device else [])}
    assert facts["hardware"]["CPU"]["full_name"]
    statuses = {r["case"]: (r["status"], r["defect"]) for r in document["results"]}
    assert statuses["spec/hand_worked/float64"] == ("xfail", "D4")  # float64 computed in float32
    assert statuses["spec/hand_worked/float32"] == ("pass", None)


def test_at_a_reduced_precision_a_runtime_is_judged_by_its_bound(capsys, tmp_path) -> None:
    report = tmp_path / "report.json"
    select = ["--select", "spec/hand_worked,spec/random_0*", "--json", report]
    args = ["--runtime-module", SCALED, "--runtimes", "bf16-within,bf16-beyond", "--precision", "bf16", *select]
    code, out, err = in_process(capsys, "conformance", *args)
    assert code == 1, out + err
    document = json.loads(report.read_text())
    assert [r["name"] for r in document["runtimes"]] == ["bf16-within/bf16", "bf16-beyond/bf16"]
    assert document["summary"]["bf16-within/bf16"]["pass"] >= 30
    assert document["summary"]["bf16-within/bf16"]["fail"] == 0
    failed = {r["case"] for r in document["results"] if r["runtime"] == "bf16-beyond/bf16" and r["status"] == "fail"}
    assert failed == shifted(r["case"] for r in document["results"] if r["runtime"] == "bf16-beyond/bf16")
    code, out, err = in_process(capsys, "conformance", *args[:4], *select)  # declared: 10.2's bound
    results = json.loads(report.read_text())["results"]
    assert {r["case"] for r in results if r["status"] == "fail"} == shifted(r["case"] for r in results)


def shifted(case_ids: Iterable[str]) -> set[str]:
    """The cases on which ``Scaled`` moves a value loss: a sample with a finite, positive bound."""
    cases = {case.id: case for case in corpus.load_all()}
    found = set()
    for case_id in case_ids:
        case = cases[case_id]
        if case.form != "spec" or case.expect != "value":
            continue
        expected = np.asarray(case.expected_loss, dtype=np.float64)
        bounds = verdict.reduced_bounds(case, expected, "bf16")
        if (np.isfinite(expected) & np.isfinite(bounds) & (bounds > 0)).any():
            found.add(case_id)
    return found
