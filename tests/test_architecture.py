"""The package's layers (issue #20): who may import whom, read from the source.

The import graph is read with ``ast`` from every module of the package: every ``import`` of a
smartarray module, at module level, inside a function, or under ``if TYPE_CHECKING:`` (a
type-only import is a dependency too), and ``importlib.import_module``/``__import__`` of a
constant name. Each module belongs to a layer; an import may only point to its own layer or
one below, and the graph has no cycle at all. (Python runs a package's ``__init__`` before
any of its modules; that implicit step is not an edge here, only what the source imports.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

import smartarray
from smartarray import _hooks

PACKAGE = ROOT / "smartarray"

# Bottom first. A module of layer n may import modules of layers 0..n only.
LAYERS: dict[str, int] = {
    "_core": 0,  # the state machine, transfers, memory: imports nothing above
    "_hooks": 1,  # the class and its extension points
    "_array": 1,
    "_speedups": 1,  # the class's indexing fast paths in C (optional)
    "_array_typing": 1,  # what type checkers see of the class's installed members
    "_intents": 1,
    "_numpy": 2,  # the glue, each registering itself with the class
    "_numba": 3,
    "_cuda": 4,
    "numba_pool": 4,  # the Numba memory-manager plugin (NUMBA_CUDA_MEMORY_MANAGER)
    "_interop": 5,
    "": 6,  # smartarray/__init__.py: the public API
    "__main__": 7,  # the command lines
    "bench": 7,
}
LAYER_NAMES = {0: "_core", 1: "the class", 2: "_numpy", 3: "_numba", 4: "_cuda", 5: "_interop"}
# Modules that are one module of the graph with another: SmartArray's typing-only declarations
# (_array_typing, its first base for type checkers, never imported at run time) and the class
# import each other, for type checkers only, as a class and its own methods would.
PART_OF = {"_array_typing": "_array"}


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name under ``smartarray`` ('' for the package,
    '_numpy' for a subpackage's ``__init__``)."""
    found = {}
    # (a C extension module, smartarray/_speedups.c, is a module too; it imports nothing)
    for path in [*package.rglob("*.py"), *package.rglob("*.c")]:
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """The smartarray modules that module ``name`` (at ``path``) imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    package = name.split(".") if is_package else name.split(".")[:-1]
    if package == [""]:
        package = []
    found: set[str] = set()
    if path.suffix == ".c":
        return found

    def resolve(dotted: str) -> None:
        if dotted in modules:
            found.add(dotted)

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[: len(package) - (node.level - 1)]
            elif node.module and (node.module + ".").startswith("smartarray."):
                base = []
            else:
                continue
            mod = (node.module or "").split(".") if node.level else node.module.split(".")[1:]  # type: ignore[union-attr]
            target = ".".join(p for p in [*base, *mod] if p)
            for alias in node.names:
                # ``from package import module`` imports that module; ``from module import
                # name`` (or a package's own names) imports the module itself.
                submodule = f"{target}.{alias.name}" if target else alias.name
                resolve(submodule if submodule in modules else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "smartarray" or alias.name.startswith("smartarray."):
                    resolve(alias.name.partition(".")[2])
        elif (  # importlib.import_module("smartarray.x"), __import__("smartarray.x")
            isinstance(node, ast.Call)
            and ast.unparse(node.func).split(".")[-1] in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (node.args[0].value + ".").startswith("smartarray.")
        ):
            resolve(node.args[0].value.partition(".")[2])
    return found - {name}


def _graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Who imports whom, with each module of ``PART_OF`` merged into its module."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        node = PART_OF.get(name, name)
        targets = {PART_OF.get(target, target) for target in _imports(name, path, set(modules))}
        graph.setdefault(node, set()).update(targets - {node})
    return graph


def _layer(name: str) -> int:
    top = name.split(".")[0]
    if top not in LAYERS:
        raise AssertionError(f"smartarray.{name} is in no layer: add {top!r} to LAYERS")
    return LAYERS[top]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_the_import_graph_has_no_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_every_module_is_in_a_layer() -> None:
    assert set(_modules()) - {""}, "no modules found"
    for name in _modules():
        assert name.split(".")[0] in LAYERS, f"{name}: add its folder to LAYERS"


def test_imports_only_point_down() -> None:
    wrong = [
        f"{name} -> {target}"
        for name, targets in _graph().items()
        for target in targets
        if _layer(target) > _layer(name)
    ]
    assert not wrong, wrong


@pytest.mark.parametrize("layer", [0, 1, 2, 3, 4, 5])
def test_each_layer_reaches_only_the_layers_below(layer: int) -> None:
    """What a layer reaches, through any chain of imports."""
    graph = _graph()
    todo = [name for name in graph if _layer(name) == layer]
    reachable: set[str] = set()
    while todo:
        for target in graph[todo.pop()]:
            if target not in reachable:
                reachable.add(target)
                todo.append(target)
    above = sorted(name for name in reachable if _layer(name) > layer)
    assert not above, f"{LAYER_NAMES[layer]} reaches {above}"


def test_the_core_imports_nothing_outside_it() -> None:
    graph = _graph()
    for name, targets in graph.items():
        if name.startswith("_core"):
            assert all(t.startswith("_core") for t in targets), (name, targets)


def test_the_class_layer_imports_only_the_core_and_its_hooks() -> None:
    graph = _graph()
    assert graph["_hooks"] == set()  # the slots: filled by the glue, importing nothing
    assert all(t in ("_hooks", "_speedups") or t.startswith("_core") for t in graph["_array"]), (
        graph["_array"]
    )
    assert graph["_intents"] <= {"_array", "_hooks"} | {t for t in graph if t.startswith("_core")}


def test_nothing_in_the_library_imports_the_benchmarks() -> None:
    for name, targets in _graph().items():
        if _layer(name) < 7:
            assert not any(t.startswith("bench") for t in targets), name


def test_the_top_level_package_has_at_most_eight_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Module level, function level, type-only, relative at any depth, and absolute."""
    package = tmp_path / "smartarray"
    (package / "_core").mkdir(parents=True)
    (package / "_cuda").mkdir()
    for name in [
        "_core/errors.py",
        "__init__.py",
        "_array.py",
        "_core/__init__.py",
        "_core/backend.py",
        "_core/coherence.py",
        "_cuda/__init__.py",
        "_cuda/arguments.py",
    ]:
        (package / name).write_text("")
    (package / "_cuda" / "probe.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .._core import backend as _backend\n"
        "from . import arguments\n"
        "import smartarray._core.coherence\n"
        "if TYPE_CHECKING:\n"
        "    from .._array import SmartArray\n"
        "def f():\n"
        "    from smartarray import __version__\n"
        "    importlib.import_module('smartarray._core.errors')\n"
    )
    assert _graph(package)["_cuda.probe"] == {
        "_core.backend",
        "_cuda.arguments",
        "_core.coherence",
        "_core.errors",
        "_array",
        "",
    }


def test_every_hook_is_registered_by_its_module() -> None:
    for name, module in _hooks.REGISTERED_BY.items():
        implementation = getattr(_hooks, name)
        assert implementation.__module__ == f"smartarray.{module}", name
    # Every slot (an annotated module variable of _hooks) has its registering module listed.
    assert set(_hooks.__annotations__) - {"NOT_SHUFFLING"} == set(_hooks.REGISTERED_BY)


def test_an_unregistered_hook_names_its_module() -> None:
    hook = _hooks._unregistered("_cuda.arguments")
    with pytest.raises(RuntimeError, match=r"smartarray\._cuda\.arguments is not imported"):
        hook(smartarray.zeros(2), [], 0)


def test_importing_a_core_module_first_registers_the_hooks() -> None:
    """A program that starts with ``from smartarray._array import SmartArray`` (or a core
    module) gets the package, and so every layer's registration, first."""
    code = (
        "from smartarray._core.coherence import Allocation\n"
        "from smartarray._array import SmartArray\n"
        "a = SmartArray([1.0, 2.0])\n"
        "print(a.readonly(), a._numba_type_, (a + 1)[1], list(a.flat))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "smartarray.In(" in result.stdout
    assert "array(float64, 1d, C)" in result.stdout
    assert "3.0 [np.float64(1.0), np.float64(2.0)]" in result.stdout
