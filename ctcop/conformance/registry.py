"""Where the conformance suite finds its runtimes, in this order (spec section 10; protocol in
:mod:`.protocol`):

1. the built-in adapters, :data:`ctcop.conformance.runtimes.RUNTIMES`;
2. the framework peers, ``ctcop.conformance.peers.PEERS`` (when that package is there);
3. the entry-point group ``ctcop.runtimes`` of every installed distribution;
4. each ``--runtime-module pkg.mod:attr`` (or ``path/to/file.py:attr``).

An entry point or ``attr`` is a runtime object, a list, tuple or dict of them, or a zero-argument
callable returning one of those. A runtime has ``name``, ``description`` and ``run(case)``, and
optionally ``available() -> str | None`` (None: usable; else why not, e.g. "torch not
installed"). Names are unique. A runtime that is not available is listed, never run. Importing
this module loads numpy only; the built-in adapters and the peers import their libraries when
first run, an entry point or a module when it is named here.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

GROUP = "ctcop.runtimes"
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


class RegistryError(ValueError):
    """A runtime module or object that cannot be used (one line, for the CLI's usage errors)."""


@dataclass(frozen=True)
class Entry:
    """One runtime as the suite lists it: ``available`` is None when it can run, else why not;
    ``origin`` says where it came from (built-in, peer, entry point or module)."""

    name: str
    description: str
    available: str | None
    origin: str
    runtime: Any


def is_runtime(value: Any) -> bool:
    return isinstance(getattr(value, "name", None), str) and callable(getattr(value, "run", None))


def _legacy(value: Any) -> Any:
    """A callable adapter without ``run`` (``runtime(inputs, mask, labels, **attributes)``, the
    spec form only) seen through the protocol."""
    from .protocol import Unsupported

    class Adapted:
        name = str(value.name)
        description = str(getattr(value, "description", ""))

        def run(self, case: Any) -> Any:
            if case.form != "spec":
                raise Unsupported("the adapter evaluates the spec's time-major form only")
            x = case.inputs
            return value(x["inputs"], x["sequence_mask"], x["labels"], **case.attributes)

        def available(self) -> str | None:
            check = getattr(value, "available", None)
            return None if check is None else availability(value)

    return Adapted()


def expand(value: Any, origin: str) -> list[Any]:
    """The runtimes that ``value`` stands for (see the module docstring)."""
    if is_runtime(value):
        return [value]
    if isinstance(getattr(value, "name", None), str) and callable(value) and not isinstance(value, type):
        return [_legacy(value)]
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
    except Exception as error:  # a broken availability check is a reason, not a crash
        return f"available() raised {type(error).__name__}: {error}"
    return None if reason is None else str(reason)


def _import_file(path: str) -> Any:
    name = "ctcop_runtime_module_" + re.sub(r"\W", "_", os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise RegistryError(f"runtime module {path!r} is not a Python file")
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
    """The runtimes of ``pkg.mod:attr`` (``attr`` may be dotted; ``path/file.py:attr`` works too)."""
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
    except Exception as error:  # whatever the user's module raises, it is one line for the CLI
        raise RegistryError(f"{spec}: {type(error).__name__}: {error}") from None


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


def plugins() -> list[tuple[str, list[Any] | str]]:
    """Each entry point of the group: its runtimes, or why it could not be loaded."""
    found: list[tuple[str, list[Any] | str]] = []
    for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: p.name):
        origin = f"entry point {point.name} ({point.value})"
        try:
            found.append((origin, expand(point.load(), origin)))
        except Exception as error:  # a broken plugin is listed, not fatal
            found.append((origin, f"{type(error).__name__}: {error}"))
    return found


def _entry(runtime: Any, origin: str) -> Entry:
    name = str(runtime.name)
    if not NAME.fullmatch(name):
        raise RegistryError(f"{origin}: runtime name {name!r} is not [a-z0-9][a-z0-9._-]*")
    description = " ".join(str(getattr(runtime, "description", "")).split())
    return Entry(name, description, availability(runtime), origin, runtime)


def _broken(origin: str, reason: str) -> Entry:
    name = re.sub(r"[^a-z0-9._-]", "-", origin.split()[2].lower())[:64] or "plugin"
    return Entry(name, f"{origin}: failed to load", f"failed to load: {reason}", origin, None)


def discover(modules: Sequence[str] = (), with_plugins: bool = True) -> list[Entry]:
    """Every runtime of the four sources (module docstring), in order; a name seen twice is an error."""
    groups: list[tuple[str, Iterable[Any] | str]] = [("built-in", builtin()), ("peer", peers())]
    if with_plugins:
        groups += plugins()
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
