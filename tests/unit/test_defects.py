"""The registry of known defects (ctcop/data/defects.json) is well formed and in step with the
versions CI pins, the conformance corpus and the tests that reproduce its defects."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

from support.paths import ROOT, TESTS

from ctcop import defects
from ctcop.conformance import corpus
from ctcop.conformance.peers import PEERS
from ctcop.conformance.runtimes import RUNTIMES

CONSTRAINTS = ROOT / ".ci" / "constraints.txt"


def canonical(name: str) -> str:
    """A distribution's name as pip compares names (PEP 503): ``tensorflow_cpu`` is ``tensorflow-cpu``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    """The ``name==version`` lines of .ci/constraints.txt, by canonical name."""
    found = {}
    for raw in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        name, equals, version = (part.strip() for part in line.partition("=="))
        assert equals and name and version, f"{CONSTRAINTS}: not name==version: {raw!r}"
        found[canonical(name)] = version
    return found


def test_the_registry_parses() -> None:
    text = (ROOT / "ctcop" / "data" / "defects.json").read_text(encoding="utf-8")
    parsed = defects.parse(json.loads(text))
    assert parsed.defects and parsed.libraries
    assert parsed == defects.registry()


def test_ids_are_numbered_from_d1_without_gaps() -> None:
    ids = [d.id for d in defects.registry().defects]
    assert ids == [f"D{number}" for number in range(1, len(ids) + 1)]


def test_every_library_was_measured_on_the_version_ci_pins() -> None:
    pinned = pins()
    for library in defects.registry().libraries.values():
        versions = {d: pinned[canonical(d)] for d in library.distributions if canonical(d) in pinned}
        assert versions, f"{library.name}: none of {library.distributions} is pinned in {CONSTRAINTS}"
        assert set(versions.values()) == {library.measured}, f"{library.name} measured on {library.measured}"


def test_conformance_defects_list_cases_that_exist_for_the_runtimes_they_name() -> None:
    ids = {c.id for c in corpus.load_all()}
    known = [*RUNTIMES, *PEERS]
    for entry in defects.registry().defects:
        for runtime in entry.runtimes:
            assert fnmatch.filter(known, runtime), f"{entry.id}: no conformance runtime {runtime!r}"
            assert entry.cases.get(runtime) or entry.also, f"{entry.id}: no cases listed for {runtime}"
        for runtime, cases in entry.cases.items():
            missing = sorted(set(cases) - ids)
            assert not missing, f"{entry.id} on {runtime}: no such corpus cases {missing}"


def _test_sources() -> str:
    here = Path(__file__).resolve()
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(TESTS.rglob("*.py")) if p != here)


def test_every_defect_outside_the_conformance_suite_has_a_test() -> None:
    # Defects with conformance runtimes are checked by the suite on their listed cases; the others
    # only by a test that names their id (``reproduces("D12", ...)``).
    sources = _test_sources()
    untested = [d.id for d in defects.registry().defects if not d.runtimes and f'"{d.id}"' not in sources]
    assert not untested, f"registered defects no test names: {untested}"


def test_the_tests_reproduce_only_registered_defects() -> None:
    registered = {d.id for d in defects.registry().defects}
    named = set(re.findall(r'reproduces\(\s*"(D\d+)"', _test_sources()))
    assert named and named <= registered, f"not in the registry: {sorted(named - registered)}"
