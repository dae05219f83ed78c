"""Shards (``--shard K/N``) and the merge of shard reports (``ctcop conformance-merge``).

Shard K of N holds the selected cases whose position in id order is K-1 modulo N: a fixed split
that needs nothing but the ids, so N machines with the same corpus and options run disjoint sets
whose union is the unsharded run. :func:`merge` joins the ``--json`` reports of shards into one
report equal (results, summary) to the unsharded run's; it refuses reports of another schema, of
other library versions or instruction sets (OpenVINO's float64 results depend on it, spec 12.2),
of other runtimes or selections (the runtimes sampled and their rules too, read by
:func:`.sampling.recorded`), shards given twice or not K/N, and results that are not rows of a
report (files that are not strict JSON, ``NaN`` or an overflowing number included, are refused
when read: :func:`ctcop.conformance.report.read`). A missing shard leaves the merged report
``complete: false``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .rows import ROW
from .sampling import recorded

T = TypeVar("T")
_SHARD = re.compile(r"([1-9][0-9]{0,5})/([1-9][0-9]{0,5})")


def parse(text: str) -> tuple[int, int]:
    """``"K/N"`` with 1 <= K <= N (ValueError otherwise)."""
    found = _SHARD.fullmatch(text)
    if found is None or int(found.group(1)) > int(found.group(2)):
        raise ValueError(f"{text!r} is not K/N with 1 <= K <= N (ASCII digits)")
    return int(found.group(1)), int(found.group(2))


def select(items: Sequence[T], ids: Sequence[str], shard: tuple[int, int] | None) -> list[T]:
    """The items of shard ``(K, N)``: those at positions K-1 mod N when sorted by ``ids``."""
    if shard is None:
        return list(items)
    k, n = shard
    order = sorted(range(len(items)), key=lambda i: ids[i])
    chosen = sorted(order[k - 1 :: n])
    return [items[i] for i in chosen]


class MergeError(ValueError):
    """Reports that cannot be merged (one line)."""


def _same(items: Sequence[T], paths: Sequence[str], what: str, get: Callable[[T], object]) -> None:
    """MergeError where ``get`` of an item (a report, or what was read of it) differs from the first's."""
    first = get(items[0])
    for item, path in zip(items[1:], paths[1:], strict=True):
        if get(item) != first:
            raise MergeError(f"{path}: {what} differ from {paths[0]}'s: {get(item)} vs {first}")


def _shards(documents: Sequence[dict[str, Any]], paths: Sequence[str]) -> tuple[list[str], int | None]:
    seen: dict[str, str] = {}
    totals = set()
    for document, path in zip(documents, paths, strict=True):
        for shard in document["selection"].get("merged") or [document["selection"].get("shard")]:
            if shard is None:
                raise MergeError(f"{path}: not a shard report (run with --shard K/N)")
            if not isinstance(shard, str):
                raise MergeError(f"{path}: shard {shard!r} is not K/N")
            try:
                totals.add(parse(shard)[1])
            except ValueError as error:
                raise MergeError(f"{path}: shard {error}") from None
            if shard in seen:
                raise MergeError(f"{path}: shard {shard} is also in {seen[shard]}")
            seen[shard] = path
    if len(totals) != 1:
        raise MergeError(f"shards of different splits: {', '.join(sorted(seen))}")
    n = totals.pop()
    return sorted(seen, key=lambda s: parse(s)[0]), n


def _text_or_null(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.isprintable())


def _check_runtimes(runtimes: Any, path: str) -> None:
    """A report's runtimes as the suite lists them: name (a runtime name), description (printable
    text), available (true/false), reason (printable text or null), version (printable text, null
    or absent)."""
    entries = runtimes if isinstance(runtimes, list) else [None]
    for number, entry in enumerate(entries):
        fine = (
            isinstance(entry, dict)
            and isinstance(entry.get("name"), str)
            and ROW.fullmatch(entry["name"]) is not None
            and isinstance(entry.get("description"), str)
            and entry["description"].isprintable()
            and isinstance(entry.get("available"), bool)
            and all(_text_or_null(entry.get(key)) for key in ("reason", "version"))
        )
        if not fine:
            raise MergeError(
                f"{path}: runtime {number} is not {{name, description, available, reason}} as the suite writes it"
            )


def _sample_rules(documents: Sequence[dict[str, Any]], paths: Sequence[str]) -> list[dict[str, str]]:
    """Each report's sampled runtimes and their rules (:func:`.sampling.recorded`: checked first)."""
    rules = []
    for document, path in zip(documents, paths, strict=True):
        try:
            rules.append({name: part.rule for name, part in recorded(document).items()})
        except ValueError as error:
            raise MergeError(f"{path}: {error}") from None
    return rules


def check(documents: Sequence[dict[str, Any]], paths: Sequence[str], schema: str) -> tuple[list[str], int]:
    """Refuse what :func:`merge` must not join; the shards present and N."""
    for document, path in zip(documents, paths, strict=True):
        if not isinstance(document, dict) or document.get("schema") != schema:
            found = document.get("schema") if isinstance(document, dict) else type(document).__name__
            raise MergeError(f"{path}: schema {found!r}, expected {schema!r}")
    rules = _sample_rules(documents, paths)
    _same(documents, paths, "library versions", lambda d: d["versions"])
    _same(documents, paths, "instruction sets", lambda d: d["machine"].get("isa"))
    for document, path in zip(documents, paths, strict=True):
        _check_runtimes(document.get("runtimes"), path)
    _same(documents, paths, "runtimes", lambda d: d["runtimes"])
    _same(documents, paths, "selections", lambda d: d["selection"].get("patterns"))
    _same(rules, paths, "sampled runtimes", lambda found: found)
    shards, n = _shards(documents, paths)
    assert n is not None
    return shards, n
