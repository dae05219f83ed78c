"""ctcop never reads its own messages back: a failure is classified from the fields of its result
(:class:`ctcop.conformance.result.Result`, :class:`ctcop.tolerance.Mismatch`), a faulty sample
comes from the core (:func:`ctcop.canonical.openvino_faults`), never from text ctcop rendered.

The scan reads every module of the package (its syntax tree) and refuses a regular expression
(``re.search``, ``PATTERN.match``, ...) or a substring test (``in``, ``startswith``, ``find``, ...)
applied to message text: a ``.message`` or ``.error`` attribute, a ``["message"]`` or
``["error"]`` item, a variable named ``message``, or ``str()`` of an exception. A runtime's own
words (an upstream library's exception text, ``Raised.text``) are not ctcop's messages.
"""

from __future__ import annotations

import ast

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "ctcop"
MATCHERS = {"search", "match", "fullmatch", "findall", "finditer", "sub", "subn"}
SUBSTRING = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "partition", "rpartition"}
MESSAGE_FIELDS = {"message", "error"}
EXCEPTIONS = {"error", "exc", "exception", "why", "wrong", "failed", "problem"}
# Reads that decide nothing about a result, each with why it may read the text:
ALLOWED = {
    # The corpus generator refuses to write an invalid case whose refusal does not name its spec
    # rule (the text stored as the case's ``error``): a reworded message stops it loudly.
    ("ctcop/conformance/generate.py", "f'rule {draft.rule}' not in message"),
}


def _holds_message(part: ast.AST) -> bool:
    if isinstance(part, ast.Attribute):
        return part.attr in MESSAGE_FIELDS
    if isinstance(part, ast.Subscript):
        return isinstance(part.slice, ast.Constant) and part.slice.value in MESSAGE_FIELDS
    if isinstance(part, ast.Name):
        return part.id == "message"
    if isinstance(part, ast.Call) and isinstance(part.func, ast.Name) and part.func.id == "str":
        return any(isinstance(a, ast.Name) and a.id in EXCEPTIONS for a in part.args)
    return False


def _is_message(node: ast.AST) -> bool:
    """Whether ``node`` holds ctcop's message text anywhere in it."""
    return any(_holds_message(part) for part in ast.walk(node))


def readings(source: str) -> list[str]:
    """Where ``source`` reads message text back (``line: code``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            matched = method in MATCHERS and any(_is_message(a) for a in [*node.args, *node.keywords])
            tested = method in SUBSTRING and _is_message(node.func.value)
        elif isinstance(node, ast.Compare):
            pairs = zip(node.ops, node.comparators, strict=True)
            matched, tested = False, any(isinstance(op, (ast.In, ast.NotIn)) and _is_message(c) for op, c in pairs)
        else:
            continue
        if matched or tested:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_of_ctcop_reads_its_messages_back() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = str(path.relative_to(PACKAGE.parent))
        hits = [
            hit for hit in readings(path.read_text(encoding="utf-8")) if (name, hit.split(": ", 1)[1]) not in ALLOWED
        ]
        if hits:
            found[name] = hits
    assert found == {}, found


@pytest.mark.parametrize(
    "source",
    [
        '_SAMPLE = re.compile(r"^labels\\[(\\d+)")\nfound = _SAMPLE.match(case.error or "")',
        'pair = re.search(r"sample (\\d+): got (\\S+)", result["message"])',
        "def check(message):\n    return _PAIR.search(message)",
        'kind = re.fullmatch(r"(\\w+): .*", str(error))',
        'accepted = "accepted invalid input" in r["message"]',
        'long = any(word in r["message"].lower() for word in WORDS)',
        'gradient = r["message"].startswith("gradient")',
        'fatal = "Traceback" not in result.message',
    ],
)
def test_the_scan_sees_a_message_read_back(source: str) -> None:
    assert readings(source), source


@pytest.mark.parametrize(
    "source",
    [
        'upstream = "dim0_offset" in r.raised.text',
        'found = r.mismatch is not None and r.mismatch.kind == "loss"',
        "shard = _SHARD.fullmatch(text)",
        'message = f"sample {found.sample}: got {found.got!r}"',
    ],
)
def test_the_scan_lets_fields_and_upstream_words_be(source: str) -> None:
    assert readings(source) == [], source
