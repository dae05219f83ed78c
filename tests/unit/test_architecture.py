"""The package's shape: imports follow one order, the core needs numpy and numba alone, functions
stay short, and the code repeats no logic."""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ctcop

PACKAGE = Path(ctcop.__file__).parent
# The import order, lowest first: a module imports its own wing and the wings of lower ranks only;
# two wings of one rank never import each other. "cli" is the command line: the ctcop.cli package,
# ctcop.console and every __main__ module (``python -m``); "core" is every other module of the
# root package and the packages of CORE_PACKAGES.
ORDER = (("core",), ("onnx", "openvino"), ("torch", "tf"), ("conformance", "layers"), ("bench",), ("cli",))
RANK = {wing: rank for rank, wings in enumerate(ORDER) for wing in wings}
# The compiled core, the process plumbing and the defect registry: the root package's parts.
CORE_PACKAGES = ("core", "process", "defects")
CLI = ("cli", "console", "__main__")
# The root package is the facade: it re-exports the core and loads wings lazily, by name.
FACADE = "ctcop"
# A row of ``duplicates``: two places that share a run of lines (paths relative to --repo).
PAIR = re.compile(r"^(D\d+) (\S+):(\d+)-(\d+) ~ (\S+):(\d+)-(\d+)", re.MULTILINE)
# Lines the duplicates command passes over: blank, comments, lone punctuation.
PASSED_OVER = re.compile(r"^\s*[()\[\]{}:,]*\s*(#.*)?$")
HEAVY = ("onnx", "onnxruntime", "openvino", "ml_dtypes", "torch", "tensorflow", "jax")
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolved(path: Path, node: ast.ImportFrom) -> str:
    """The absolute name of the module that ``node``, in ``path``, imports from."""
    name = module_name(path)
    package = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, anywhere in the file (lazy imports and
    imports under TYPE_CHECKING too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = resolved(path, node)
            found |= {module, *(f"{module}.{alias.name}" for alias in node.names)}
    return found


def reads_the_facade(path: Path) -> bool:
    """Whether ``path`` imports the root package itself or one of its names that is no module."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(alias.name == FACADE for alias in node.names):
            return True
        names = node.names if isinstance(node, ast.ImportFrom) and resolved(path, node) == FACADE else []
        if any(f"{FACADE}.{alias.name}" not in MODULES for alias in names):
            return True
    return False


def ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts))}


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
# Importing a module runs its packages' __init__ first, always: those edges are not arrows.
GRAPH = {
    name: {m for m in imports_of(path) if m in MODULES and m != name and m not in ancestors(name)}
    for name, path in MODULES.items()
}


def plain(node: ast.AST) -> bool:
    """Whether expression ``node`` only names things: constants, names, attributes, displays of
    plain values and calls with plain arguments (``parser.add_argument("--x", type=int)``)."""
    if isinstance(node, ast.Call):
        return all(plain(part) for part in [node.func, *node.args, *(k.value for k in node.keywords)])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
        return all(plain(part) for part in ast.iter_child_nodes(node) if not isinstance(part, ast.expr_context))
    if isinstance(node, ast.Attribute):
        return plain(node.value)
    return isinstance(node, (ast.Constant, ast.Name))


def declarative_lines(path: Path) -> set[int]:
    """Lines of ``path`` that declare rather than compute: def and class headers (decorators and
    signatures), docstrings, assignments at module and class level (constants, tables, fields),
    statements that are one plain call, and keyword arguments that pass on a plain value."""
    tree = ast.parse(path.read_text())
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            spans.append((min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.body[0].lineno - 1))
        elif isinstance(node, (ast.Expr, ast.keyword)) and plain(node.value):
            spans.append((node.lineno, node.end_lineno))
    for scope in [tree, *(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef))]:
        spans += [(n.lineno, n.end_lineno) for n in scope.body if isinstance(n, (ast.Assign, ast.AnnAssign))]
    return {line for first, last in spans for line in range(first, last + 1)}


def computing_lines(relative: str, first: int, last: int) -> tuple[list[str], int]:
    """``file:line`` of each line in ``first``..``last`` of ``relative`` (under the package) that
    computes, and how many lines of the range the duplicates command reads (not blank, comment
    or lone punctuation)."""
    path = PACKAGE / relative
    lines = path.read_text().splitlines()
    counted = [number for number in range(first, last + 1) if not PASSED_OVER.match(lines[number - 1])]
    declared = declarative_lines(path)
    return [f"{relative}:{number}" for number in counted if number not in declared], len(counted)


def wing(name: str) -> str:
    """The wing of module ``name`` in ORDER."""
    part = name.split(".")[1] if "." in name else ""
    if part in CLI or name.endswith(".__main__"):
        return "cli"
    return "core" if part in CORE_PACKAGES or part not in RANK else part


def is_core(name: str) -> bool:
    return wing(name) == "core"


def rank(name: str) -> int:
    """The place of module ``name`` in ORDER; the facade's is that of the highest wing it loads."""
    if name == FACADE:
        return max(rank(target) for target in GRAPH[FACADE])
    return RANK[wing(name)]


def test_the_import_graph_has_no_cycle() -> None:
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(GRAPH[name]):
            assert state.get(target) != "open", f"import cycle: {' -> '.join([*path, target])}"
            if target not in state:
                visit(target, [*path, target])
        state[name] = "done"

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


def test_the_core_imports_no_wing_and_no_heavy_library() -> None:
    core = [name for name in MODULES if is_core(name) and name != FACADE]
    assert {"ctcop.canonical", "ctcop.core.scheduler", "ctcop.reference", "ctcop.schema"} <= set(core)
    for name in core:
        imported = imports_of(MODULES[name])
        assert not {m for m in GRAPH[name] if not is_core(m)}, f"{name} imports a wing"
        assert not {m for m in imported if m.split(".")[0] in HEAVY}, f"{name} imports a heavy library"


def test_every_subpackage_has_a_place_in_the_order() -> None:
    packages = {name.split(".")[1] for name, path in MODULES.items() if path.name == "__init__.py" and "." in name}
    placed = set(RANK) | set(CORE_PACKAGES)
    assert packages <= placed, f"not in ORDER: {sorted(packages - placed)}"


def test_imports_follow_the_order() -> None:
    # Every import counts: at module level, inside functions and under TYPE_CHECKING; so does an
    # import of the facade's names (``import ctcop``, ``from .. import __version__``), which may
    # load wings.
    edges = {name: GRAPH[name] | ({FACADE} if reads_the_facade(path) else set()) for name, path in MODULES.items()}
    against = sorted(
        f"{name} ({wing(name)}) -> {target} ({'facade' if target == FACADE else wing(target)})"
        for name, targets in edges.items()
        if name != FACADE
        for target in targets
        if rank(target) >= rank(name) and (target == FACADE or wing(target) != wing(name))
    )
    assert not against, "imports against the order:\n" + "\n".join(against)


def test_import_ctcop_loads_numpy_only() -> None:
    code = (
        "import sys, ctcop, ctcop.conformance; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))"
    )
    result = subprocess.run([sys.executable, "-c", code, *HEAVY], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    extensions = subprocess.run(
        [sys.executable, "-c", "import sys, ctcop; ctcop.openvino_extensions(); print('openvino' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert extensions.stdout.strip() == "True", extensions.stderr


def test_no_function_is_longer_than_a_screen() -> None:
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {length} lines")
    assert not long


def test_the_package_repeats_declarations_only() -> None:
    # Two places that share six or more lines, most of which compute, are one piece of logic
    # written twice; shared signatures, fields, tables, argument declarations and docstrings are
    # declarations, which may repeat.
    command = shutil.which("duplicates")
    if command is None:
        pytest.skip("the duplicates command is not installed")
    listed = subprocess.run(
        [command, "--repo", str(PACKAGE), "--most", "200", "--seconds", "300"],
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    assert "incomplete:" not in listed and "more pairs)" not in listed, listed
    repeated = []
    for row, *places in PAIR.findall(listed):
        sides = [computing_lines(places[k], int(places[k + 1]), int(places[k + 2])) for k in (0, 3)]
        if any(2 * len(computing) > counted for computing, counted in sides):
            where = " ~ ".join(f"{places[k]}:{places[k + 1]}-{places[k + 2]}" for k in (0, 3))
            share = " and ".join(f"{len(computing)} of {counted}" for computing, counted in sides)
            repeated.append(f"{row} {where}: {share} lines compute")
    assert not repeated, "logic written twice:\n" + "\n".join(repeated)


def test_numba_compiles_in_the_core_package_only() -> None:
    """Every module that compiles with numba is in ``ctcop/core``, so the compiled core is one
    package a reader can find whole."""
    compiling = re.compile(r"^@(compiled|entry|numba\.njit|njit)\b|\bintrinsic\(", re.MULTILINE)
    found = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if compiling.search(path.read_text())}
    assert found == {"core/kernels.py", "core/lanes.py", "core/logexp.py", "core/rule_scan.py"}
