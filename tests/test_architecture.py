"""The package's shape: imports point down only, the core needs numpy and numba alone, functions stay short."""

import ast
import subprocess
import sys
from pathlib import Path

import ctcop

PACKAGE = Path(ctcop.__file__).parent
WINGS = ("onnx", "openvino", "conformance", "layers", "torch", "bench")
HEAVY = ("onnx", "onnxruntime", "openvino", "ml_dtypes", "torch", "tensorflow", "jax")
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports, anywhere in the file (lazy imports too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts))}


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}
# Importing a module runs its packages' __init__ first, always: those edges are not arrows.
GRAPH = {
    name: {m for m in imports_of(path) if m in MODULES and m != name and m not in ancestors(name)}
    for name, path in MODULES.items()
}


def is_core(name: str) -> bool:
    return name.split(".")[1] not in (*WINGS, "cli", "console", "__main__") if "." in name else True


def test_the_import_graph_has_no_cycle() -> None:
    # The root package is the facade: it re-exports the core and loads the OpenVINO wing lazily
    # for ``ctcop.openvino_extensions``; nothing imports it by name.
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
    core = [name for name in MODULES if is_core(name) and name != "ctcop"]
    assert {"ctcop.canonical", "ctcop.recursion", "ctcop.reference", "ctcop.schema"} <= set(core)
    for name in core:
        imported = imports_of(MODULES[name])
        assert not {m for m in GRAPH[name] if not is_core(m)}, f"{name} imports a wing"
        assert not {m for m in imported if m.split(".")[0] in HEAVY}, f"{name} imports a heavy library"


def test_the_openvino_wing_does_not_import_the_onnx_wing_and_vice_versa() -> None:
    for name, targets in GRAPH.items():
        if name.startswith("ctcop.onnx"):
            assert not any(t.startswith(("ctcop.openvino", "ctcop.conformance")) for t in targets), name
        if name.startswith("ctcop.openvino"):
            assert not any(t.startswith(("ctcop.onnx", "ctcop.conformance")) for t in targets), name


def test_import_ctcop_loads_numpy_only() -> None:
    code = (
        "import sys, ctcop, ctcop.conformance; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))"
    )
    result = subprocess.run([sys.executable, "-c", code, *HEAVY], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    wing = subprocess.run(
        [sys.executable, "-c", "import sys, ctcop; ctcop.openvino_extensions; print('openvino' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wing.stdout.strip() == "True", wing.stderr


def test_no_function_is_longer_than_a_screen() -> None:
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {length} lines")
    assert not long
