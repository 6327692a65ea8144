"""The module structure (issue #11, item 15): no import cycles; SmartArray imports no glue.

The import graph is read from the source with ``ast``: every ``import`` of a smartarray
module that runs (at module level or inside a function), leaving out ``if TYPE_CHECKING:``
blocks, which never run.
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
# Modules built on SmartArray: SmartArray reaches them only through smartarray._hooks.
GLUE = {
    "_numba_types",
    "_numba_cuda",
    "_numba_cpu",
    "_numba_signatures",
    "_intents",
    "_launch_intents",
    "_jit_intents",
    "_dlpack",
    "_creation",
    "_cuda_ufuncs",
    "_launch_guard",
    "_dask",
    "_explain",
}


def _runtime_imports(path: Path) -> set[str]:
    """The smartarray modules ``path`` imports when it runs."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("smartarray."):
                found.add(node.module.split(".")[1])
            elif node.module == "smartarray":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("smartarray."):
                    found.add(alias.name.split(".")[1])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found & modules - {path.stem}


def _graph() -> dict[str, set[str]]:
    return {p.stem: _runtime_imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


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


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_reader_sees_function_level_imports_and_skips_type_checking(
    tmp_path: Path,
) -> None:
    source = tmp_path / "_probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import _backend\n"
        "if TYPE_CHECKING:\n"
        "    from ._array import SmartArray\n"
        "def f():\n"
        "    from ._numba_cuda import kernel_argument\n"
    )
    assert _runtime_imports(source) == {"_backend", "_numba_cuda"}


@pytest.mark.parametrize("core", ["_array", "_numpy_protocols", "_fastpath", "_coherence"])
def test_the_core_imports_no_glue(core: str) -> None:
    graph = _graph()
    reachable, todo = set(), [core]
    while todo:
        for target in graph[todo.pop()]:
            if target not in reachable:
                reachable.add(target)
                todo.append(target)
    assert not reachable & GLUE, sorted(reachable & GLUE)


def test_every_hook_is_registered_by_its_module() -> None:
    for name, module in _hooks.REGISTERED_BY.items():
        implementation = getattr(_hooks, name)
        assert implementation.__module__ == f"smartarray.{module}", name
    # Every slot (an annotated module variable of _hooks) has its registering module listed.
    assert set(_hooks.__annotations__) == set(_hooks.REGISTERED_BY)


def test_an_unregistered_hook_names_its_module() -> None:
    hook = _hooks._unregistered("_numba_cuda")
    with pytest.raises(RuntimeError, match=r"smartarray\._numba_cuda is not imported"):
        hook(smartarray.zeros(2), [], 0)


def test_importing_a_core_module_first_registers_the_hooks() -> None:
    """A program that starts with ``from smartarray._array import SmartArray`` gets the
    package (and so every hook) first."""
    code = (
        "from smartarray._array import SmartArray\n"
        "from smartarray import _hooks\n"
        "a = SmartArray([1.0, 2.0])\n"
        "print(a.readonly(), a._numba_type_)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "smartarray.In(" in result.stdout
    assert "array(float64, 1d, C)" in result.stdout
