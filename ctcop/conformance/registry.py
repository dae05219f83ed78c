"""Where the conformance suite finds its runtimes, in this order (spec section 10; protocol in
:mod:`.protocol`):

1. the built-in adapters, :data:`ctcop.conformance.runtimes.RUNTIMES`;
2. the framework peers, ``ctcop.conformance.peers.PEERS`` (when that package is there);
3. the entry-point group ``ctcop.runtimes`` of every installed distribution;
4. each ``--runtime-module pkg.mod:attr`` (or ``path/to/file.py:attr``, :func:`load_module`).

Entry points and modules are third-party code: each is loaded first in a probe worker process
(:func:`probe_loading`), so that one that kills or hangs its importer is refused (a module) or
listed as broken (an entry point), in one line, instead of taking ctcop with it. Names are unique
(:func:`discover`). A runtime that is not available is listed, never run. Importing this module
loads numpy only; the built-in adapters and the peers import their libraries when first run, an
entry point or a module when it is named here.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..text import one_line
from . import rows

GROUP = "ctcop.runtimes"
PROBE_TIMEOUT_S = 120.0  # how long loading a runtime module may take in the probe (:func:`probe`)
NAME = rows.NAME
VERSION_LIMIT = 200  # characters of a runtime's version


class RegistryError(ValueError):
    """A runtime module or object that cannot be used (one line, for the CLI's usage errors)."""


@dataclass(frozen=True)
class Entry:
    """One runtime as the suite lists it: ``available`` is None when it can run, else why not;
    ``origin`` says where it came from (built-in, peer, entry point or module); ``version`` the
    runtime's own (its optional ``version`` attribute), None when it gives none."""

    name: str
    description: str
    available: str | None
    origin: str
    runtime: Any
    version: str | None = None


def is_runtime(value: Any) -> bool:
    try:
        return isinstance(getattr(value, "name", None), str) and callable(getattr(value, "run", None))
    except Exception as error:  # a property that raises: not a usable runtime
        raise RegistryError(f"{type(value).__name__}: reading its name or run raised {type(error).__name__}") from None


def expand(value: Any, origin: str) -> list[Any]:
    """The runtimes that ``value`` stands for: a runtime object, a list, tuple or dict of them, or a
    zero-argument callable returning one of those (an entry point or ``attr``). A runtime has ``name``,
    ``description`` and ``run(case)``, and optionally ``available() -> str | None`` (None: usable; else
    why not, e.g. "torch not installed") and ``version`` (text: the runtime's own version, which the
    report records with its name and ``conformance-diff`` compares)."""
    if is_runtime(value):
        return [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        found = [expand(item, origin) for item in value]
        return [runtime for group in found for runtime in group]
    if callable(value):
        return expand(value(), origin)
    raise RegistryError(f"{origin}: {type(value).__name__} is not a runtime (name, description, run(case))")


def availability(runtime: Any) -> str | None:
    """None when ``runtime`` can run here, else the reason (its ``available()``; one that raises
    is not available either)."""
    check: Callable[[], Any] | None = getattr(runtime, "available", None)
    if check is None:
        return None
    try:
        reason = check()
        return None if reason is None else one_line(reason)
    except (Exception, SystemExit) as error:  # a broken availability check is a reason, not a crash
        return f"available() raised {type(error).__name__}: {one_line(error)}"


def _import_file(path: str) -> Any:
    """The module in file ``path``, its folder first on ``sys.path`` (as ``python path/file.py``
    has it), so that it imports the modules beside it, when loaded and when its runtimes run."""
    name = "ctcop_runtime_module_" + re.sub(r"\W", "_", os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RegistryError(f"runtime module {path!r} is not a Python file")
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _import(module: str) -> Any:
    """A module by dotted name (the current folder searched too, as ``python -m`` does) or by path."""
    if module.endswith(".py") or os.sep in module:
        if not os.path.isfile(module):
            raise RegistryError(f"runtime module {module!r}: no such file")
        return _import_file(module)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module.split(".")[0] or os.getcwd() in sys.path:
            raise
    sys.path.insert(0, os.getcwd())
    return importlib.import_module(module)


def load_module(spec: str) -> list[Any]:
    """The runtimes of ``pkg.mod:attr`` (``attr`` may be dotted; ``path/file.py:attr`` works too,
    importing the modules beside it: its folder is put first on ``sys.path``, in the probe, the parent
    and every worker, as ``python path/to/file.py`` has it; ``pkg.mod`` is searched in the current
    folder too)."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise RegistryError(f"{spec!r} is not MODULE:ATTRIBUTE (e.g. mypackage.ctc:RUNTIMES)")
    try:
        value = _import(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
        return expand(value, spec)
    except RegistryError:
        raise
    except (Exception, SystemExit) as error:  # whatever the user's module raises, it is one line for the CLI
        raise RegistryError(f"{spec}: {type(error).__name__}: {error}") from None


def _load_and_list(request: dict[str, str]) -> str:
    """The probe worker's function: load the module or entry point ``request`` names and list its
    runtimes (their ``description`` and ``available()`` read too); "ok", or a refusal raised."""
    if "module" in request:
        spec = request["module"]
        for runtime in load_module(spec):
            _entry(runtime, f"module {spec}")
        return "ok"
    name, value = request["entry_point"], request["value"]
    origin = f"entry point {name} ({value})"
    point = next(p for p in importlib.metadata.entry_points(group=GROUP) if (p.name, p.value) == (name, value))
    try:
        runtimes = expand(point.load(), origin)
    except (Exception, SystemExit) as error:  # an entry point's own failure, in one line
        raise RegistryError(f"{type(error).__name__}: {one_line(error, 2000)}") from None
    for runtime in runtimes:
        _entry(runtime, origin)
    return "ok"


def probe(spec: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Load the runtime module ``spec`` in a worker process first (:func:`probe_loading`)."""
    probe_loading(spec, {"module": spec}, timeout_s)


def probe_loading(what: str, request: dict[str, str], timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Load third-party code (``request``: a module or an entry point, :func:`_load_and_list`) in
    a fresh worker process first (:mod:`ctcop.process.workers`), so that code that kills the process that
    imports it (a fault, ``os._exit``) or never finishes loading costs that process, not this one:
    :class:`RegistryError` (one line) when it did, or when it answered a refusal."""
    from ..process.workers import Failed, Lost, call

    try:
        call(f"{__name__}:_load_and_list", request, timeout_s)
    except Lost as lost:
        if lost.timed_out:
            raise RegistryError(f"{what}: loading it did not finish within {timeout_s:g} s") from None
        verb = "was " if lost.how.startswith("killed") else ""
        raise RegistryError(f"{what}: the process loading it {verb}{lost.how}") from None
    except Failed as failed:
        raise RegistryError(str(failed).removeprefix(f"{RegistryError.__name__}: ")) from None


def builtin() -> list[Any]:
    from .runtimes import RUNTIMES

    return expand(RUNTIMES, "ctcop.conformance.runtimes")


def peers() -> list[Any]:
    """The framework peers, when this installation has them."""
    try:
        from .peers import PEERS  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return []
    return expand(PEERS, "ctcop.conformance.peers")


def plugins(probe_timeout_s: float = PROBE_TIMEOUT_S) -> list[tuple[str, list[Any] | str]]:
    """Each entry point of the group: its runtimes, or why it could not be loaded (loaded in a
    probe process first, :func:`probe_loading`)."""
    found: list[tuple[str, list[Any] | str]] = []
    for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: p.name):
        origin = f"entry point {point.name} ({point.value})"

        try:
            probe_loading(origin, {"entry_point": point.name, "value": point.value}, probe_timeout_s)
            found.append((origin, expand(point.load(), origin)))
        except RegistryError as error:  # a broken plugin is listed, not fatal
            found.append((origin, one_line(error, 2000)))
        except (Exception, SystemExit) as error:
            found.append((origin, f"{type(error).__name__}: {one_line(error, 2000)}"))
    return found


def find(name: str, modules: Sequence[str] = (), with_plugins: bool = True) -> Any:
    """The runtime of the row called ``name`` (:mod:`.rows`), for a worker that runs what its
    caller listed available: the sources are read in :func:`discover`'s order, but loaded here
    without a probe, and no runtime's ``available()`` is asked (the caller did both, and a module
    that kills this process costs the worker's evaluation only). An OpenVINO adapter compiles
    for the row's device at its precision. :class:`LookupError` when no runtime is called ``name``."""
    row = rows.parse(name)
    found = next((runtime for runtime in _sources(modules, with_plugins) if runtime.name == row.runtime), None)
    if found is None:
        raise LookupError(f"no runtime is called {name!r}")
    return found.on(row.device, row.precision) if getattr(found, "device", None) is not None else found


def _sources(modules: Sequence[str], with_plugins: bool) -> Iterator[Any]:
    """The runtimes of the four sources, each source loaded when the ones before it are read."""
    yield from builtin()
    yield from peers()
    if with_plugins:
        for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: p.name):
            try:
                loaded = expand(point.load(), f"entry point {point.name} ({point.value})")
            except (Exception, SystemExit):  # the caller listed it broken: none of its runtimes runs
                continue
            yield from loaded
    for spec in modules:
        yield from load_module(spec)


def _version(runtime: Any) -> tuple[str | None, str | None]:
    """The runtime's ``version`` (one printable line; None when it has none) and, for one that is
    not text or cannot be read, why the runtime is not available."""
    try:
        version = getattr(runtime, "version", None)
    except (Exception, SystemExit) as error:
        return None, f"its version raised {type(error).__name__}: {one_line(error)}"
    if version is None:
        return None, None
    if not isinstance(version, str) or not version.strip():
        return None, f"its version is not text: {type(version).__name__} {one_line(repr(version), 80)}"
    return one_line(version, VERSION_LIMIT), None


def _entry(runtime: Any, origin: str) -> Entry:
    """The runtime as listed; one whose ``description`` or ``version`` cannot be read is listed,
    not available."""
    name = str(runtime.name)
    if not NAME.fullmatch(name):
        raise RegistryError(f"{origin}: runtime name {name!r} is not [a-z0-9][a-z0-9._-]*")
    try:
        description = one_line(getattr(runtime, "description", ""), 1000)
    except (Exception, SystemExit) as error:
        reason = f"its description raised {type(error).__name__}: {one_line(error)}"
        return Entry(name, "(no description)", reason, origin, runtime)
    version, broken = _version(runtime)
    return Entry(name, description, broken or availability(runtime), origin, runtime, version)


def _broken(origin: str, reason: str) -> Entry:
    name = re.sub(r"[^a-z0-9._-]", "-", origin.split()[2].lower())[:64] or "plugin"
    return Entry(name, f"{origin}: failed to load", f"failed to load: {reason}", origin, None)


def discover(
    modules: Sequence[str] = (), with_plugins: bool = True, probe_timeout_s: float = PROBE_TIMEOUT_S
) -> list[Entry]:
    """Every runtime of the four sources (the module's list), in order; a name seen twice is an
    error. Each module is loaded by :func:`probe` (within ``probe_timeout_s``) before it is
    loaded here."""
    for spec in modules:
        probe(spec, probe_timeout_s)
    groups: list[tuple[str, Iterable[Any] | str]] = [("built-in", builtin()), ("peer", peers())]
    if with_plugins:
        groups += plugins(probe_timeout_s)
    groups += [(f"module {spec}", load_module(spec)) for spec in modules]
    entries: list[Entry] = []
    for origin, runtimes in groups:
        if isinstance(runtimes, str):
            entries.append(_broken(origin, runtimes))
            continue
        entries += [_entry(runtime, origin) for runtime in runtimes]
    seen: dict[str, str] = {}
    for entry in entries:
        if entry.name in seen:
            raise RegistryError(f"runtime {entry.name!r} comes from both {seen[entry.name]} and {entry.origin}")
        seen[entry.name] = entry.origin
    return entries
