"""Type hints (issue 23): SmartArray is generic over shape and dtype, like ``np.ndarray``.

``tests/typing/pass_*.py`` is code ``mypy --strict`` must accept; its ``assert_type`` calls
state the types of the public API. ``tests/typing/fail_*.py`` has lines marked
``# E: <text>`` that mypy must reject with an error containing ``<text>``, and no other
errors. One mypy run checks them all, with ``docs/snippets/type_hints.py`` (skipped when mypy,
of the ``dev`` extra, is not installed). Without mypy, the pass files still run here, and
every ``assert_type`` is checked against the value it is given: its class, dtype and number
of dimensions, so that the hints are true, not only consistent.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import tokenize
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from token import COMMENT
from typing import Any

import numpy as np
import pytest
from helpers import ROOT

import smartarray
from smartarray import SmartArray

TYPING = ROOT / "tests" / "typing"
PASS = sorted(TYPING.glob("pass_*.py"))
FAIL = sorted(TYPING.glob("fail_*.py"))
SNIPPET = ROOT / "docs" / "snippets" / "type_hints.py"
EXPECTED = re.compile(r"#\s*E:\s*(.+?)\s*$")
REPORT = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<kind>error|note): (?P<message>.*)$")


# --- mypy --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mypy_report() -> dict[Path, list[tuple[int, str, str]]]:
    """mypy --strict over every typing file: (line, kind, message) by file."""
    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")
    # This checkout's smartarray (mypy cannot see an editable install's import hook); its own
    # errors are the package check's business (``mypy`` with pyproject's settings), not these
    # files'. A cache per checkout and Python under the temporary directory: later runs take
    # a fraction of a second. (The tier is in the key too: the two tiers may run at once.)
    tier = os.environ.get("NUMBA_ENABLE_CUDASIM", "")
    key = hashlib.sha256(f"{ROOT}{sys.version}{tier}".encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"smartarray-typing-mypy-{key}"
    cache.mkdir(exist_ok=True)
    config = cache / "mypy.ini"
    config.write_text(
        f"[mypy]\nstrict = True\nmypy_path = {ROOT}\n[mypy-smartarray.*]\nfollow_imports = silent\n"
    )
    files = [str(path) for path in [*PASS, *FAIL, SNIPPET]]
    stdout, stderr, status = api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(cache / "cache"),
            "--no-color-output",
            "--no-error-summary",
            "--show-error-codes",
            "--hide-error-context",
            *files,
        ]
    )
    assert status in (0, 1), f"mypy crashed ({status}):\n{stderr}{stdout}"
    report: dict[Path, list[tuple[int, str, str]]] = {Path(f): [] for f in files}
    for line in stdout.splitlines():
        match = REPORT.match(line)
        assert match, f"unexpected mypy output: {line!r}"
        path = Path(match["path"])
        path = path if path.is_absolute() else Path.cwd() / path
        report.setdefault(path.resolve(), []).append(
            (int(match["line"]), match["kind"], match["message"])
        )
    return report


def _expected_errors(path: Path) -> dict[int, str]:
    """The ``# E: <text>`` comments of ``path``: text by line."""
    with path.open() as source:  # the comments, not the docstring's words about them
        comments = [t for t in tokenize.generate_tokens(source.readline) if t.type == COMMENT]
    return {t.start[0]: m.group(1) for t in comments if (m := EXPECTED.match(t.string))}


def _findings(report: dict[Path, list[tuple[int, str, str]]], path: Path) -> list[str]:
    return [f"{path.name}:{n}: {kind}: {msg}" for n, kind, msg in report.get(path.resolve(), [])]


def test_the_typing_files_exist() -> None:
    assert len(PASS) >= 4 and FAIL and SNIPPET.is_file()


@pytest.mark.parametrize("path", [*PASS, SNIPPET], ids=lambda p: p.stem)
def test_mypy_accepts(mypy_report: dict[Path, list[tuple[int, str, str]]], path: Path) -> None:
    findings = _findings(mypy_report, path)
    assert not findings, "\n".join(findings)


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_mypy_rejects(mypy_report: dict[Path, list[tuple[int, str, str]]], path: Path) -> None:
    expected = _expected_errors(path)
    assert len(expected) >= 10
    errors: dict[int, list[str]] = {}
    for n, kind, message in mypy_report.get(path.resolve(), []):
        if kind == "error":
            errors.setdefault(n, []).append(message)
    missing = [
        f"line {n}: no error containing {text!r} (got {errors.get(n, [])})"
        for n, text in expected.items()
        if not any(text in message for message in errors.get(n, []))
    ]
    unexpected = [f"line {n}: {messages}" for n, messages in errors.items() if n not in expected]
    assert not missing and not unexpected, "\n".join(missing + unexpected)


# --- pyright (basedpyright, of the dev extra: pyright's checker, installed from PyPI) ----


@pytest.fixture(scope="module")
def pyright_errors() -> dict[Path, set[int]]:
    """basedpyright (pyright's standard mode) over the typing files: error lines by file."""
    executable = shutil.which("basedpyright")
    if executable is None:
        pytest.skip("basedpyright is in the dev extra")
    with tempfile.TemporaryDirectory() as project:
        config = Path(project) / "pyrightconfig.json"
        # This checkout's smartarray, as for mypy (an editable install's hook is invisible).
        config.write_text(json.dumps({"extraPaths": [str(ROOT)], "typeCheckingMode": "standard"}))
        files = [str(path) for path in [*PASS, *FAIL, SNIPPET]]
        run = subprocess.run(
            [executable, "--outputjson", "--pythonpath", sys.executable, "-p", str(config), *files],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert run.returncode in (0, 1), f"basedpyright failed ({run.returncode}):\n{run.stderr}"
    errors: dict[Path, set[int]] = {Path(f).resolve(): set() for f in files}
    for diagnostic in json.loads(run.stdout)["generalDiagnostics"]:
        if diagnostic["severity"] == "error":
            path = Path(diagnostic["file"]).resolve()
            errors.setdefault(path, set()).add(diagnostic["range"]["start"]["line"] + 1)
    return errors


@pytest.mark.parametrize("path", [*PASS, SNIPPET], ids=lambda p: p.stem)
def test_pyright_accepts(pyright_errors: dict[Path, set[int]], path: Path) -> None:
    assert not pyright_errors[path.resolve()], sorted(pyright_errors[path.resolve()])


@pytest.mark.parametrize("path", FAIL, ids=lambda p: p.stem)
def test_pyright_rejects(pyright_errors: dict[Path, set[int]], path: Path) -> None:
    """The lines mypy rejects, and only those (pyright's messages are its own)."""
    assert pyright_errors[path.resolve()] == set(_expected_errors(path))


# --- the hints are true -----------------------------------------------------------------


class _Checked:
    count = 0


def _check(value: Any, expected: Any) -> None:
    """``value`` is what type ``expected`` says, as far as its class, dtype and number of
    dimensions go (Any, unions and type variables are not looked into)."""
    if expected is Any or isinstance(expected, typing.TypeVar):  # (Any is a class since 3.11)
        return
    origin = typing.get_origin(expected) or expected
    args = typing.get_args(expected)
    if origin is typing.Literal:
        assert isinstance(value, (str, bytes, int)) and value in args, (value, expected)
    elif origin in (SmartArray, np.ndarray):
        assert type(value) is origin, (type(value), expected)
        if args:
            shape, dtype = args
            _check_shape(value.ndim, shape, expected)
            _check(value.dtype, dtype)
    elif origin is np.dtype:
        assert isinstance(value, np.dtype), (value, expected)
        (scalar,) = args or (Any,)
        scalar = typing.get_origin(scalar) or scalar
        if isinstance(scalar, type) and scalar not in (Any, types.UnionType):
            assert issubclass(value.type, scalar), (value, expected)
    elif origin is tuple and expected is not tuple:
        assert isinstance(value, tuple), (value, expected)
        if len(args) == 2 and args[1] is Ellipsis:
            for item in value:
                _check(item, args[0])
        elif args != ((),):
            assert len(value) == len(args), (value, expected)
            for item, item_type in zip(value, args, strict=True):
                _check(item, item_type)
    elif isinstance(origin, type):
        assert isinstance(value, origin), (type(value), expected)
    else:  # a union: not checked
        return
    _Checked.count += 1


def _check_shape(ndim: int, shape: Any, expected: Any) -> None:
    if typing.get_origin(shape) is not tuple:
        return  # Any (tuple[()] has an origin)
    args = typing.get_args(shape)
    if len(args) == 2 and args[1] is Ellipsis:
        return  # tuple[int, ...]: any number of axes
    assert ndim == (0 if args in ((), ((),)) else len(args)), (ndim, expected)


def _checked_assert_type(value: Any, expected: Any, /) -> Any:
    _check(value, expected)
    return value


@pytest.fixture
def checking_assert_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(typing, "assert_type", _checked_assert_type, raising=False)
    try:
        import typing_extensions
    except ImportError:  # (the files import it only before Python 3.11)
        pass
    else:
        monkeypatch.setattr(typing_extensions, "assert_type", _checked_assert_type)
    yield


@pytest.mark.parametrize("path", PASS, ids=lambda p: p.stem)
def test_the_asserted_types_are_the_values_types(checking_assert_type: None, path: Path) -> None:
    if sys.version_info < (3, 11):  # (the files' assert_type before typing had it)
        pytest.importorskip("typing_extensions")
    calls = sum(
        isinstance(node, ast.Call) and getattr(node.func, "id", None) == "assert_type"
        for node in ast.walk(ast.parse(path.read_text()))
    )
    before = _Checked.count
    runpy.run_path(str(path), run_name="__typing_check__")
    # Every assert_type that ran checked something (those under TYPE_CHECKING never run).
    assert _Checked.count - before >= calls * 0.8, (_Checked.count - before, calls)


def test_the_value_check_finds_wrong_types() -> None:
    x = smartarray.zeros(3)
    _check(x, SmartArray[tuple[int], np.dtype[np.float64]])
    for wrong in (
        SmartArray[tuple[int], np.dtype[np.int64]],
        SmartArray[tuple[int, int], np.dtype[np.float64]],
        np.ndarray[tuple[int], np.dtype[np.float64]],
        tuple[SmartArray[Any, Any], ...],
        typing.Literal["cpu"],
    ):
        with pytest.raises(AssertionError):
            _check(x, wrong)


# --- what type checkers see of the members installed at run time -----------------------


def _declared_for_type_checkers() -> set[str]:
    """Names SmartArray's typing-only base (smartarray._array_typing) declares, and those the
    ``if TYPE_CHECKING:`` blocks of SmartArray's own class body declare."""

    def declared(body: list[ast.stmt]) -> set[str]:
        names: set[str] = set()
        for item in body:
            if isinstance(item, ast.FunctionDef):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                names.update(t.id for t in item.targets if isinstance(t, ast.Name))
        return names

    def class_body(module: str, name: str) -> list[ast.stmt]:
        tree = ast.parse((ROOT / "smartarray" / module).read_text())
        nodes = [*tree.body]
        for node in tree.body:  # (a class may be declared under ``if TYPE_CHECKING:``)
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                nodes += node.body
        (cls,) = (n for n in nodes if isinstance(n, ast.ClassDef) and n.name == name)
        return cls.body

    names = declared(class_body("_array_typing.py", "_SmartArrayTyping"))
    for node in class_body("_array.py", "SmartArray"):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            names |= declared(node.body)
    return names - _defined_for_the_run_time_only()


def _defined_for_the_run_time_only() -> set[str]:
    """The methods SmartArray's class body defines under ``if not TYPE_CHECKING:``
    (``_getitem_py`` as ``__getitem__``: it is that method, or its C slot's Python twin)."""
    tree = ast.parse((ROOT / "smartarray" / "_array.py").read_text())
    (cls,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SmartArray")
    return {
        "__getitem__" if item.name == "_getitem_py" else item.name
        for node in cls.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "not TYPE_CHECKING"
        for item in node.body
        if isinstance(item, ast.FunctionDef)
    }


def test_the_class_body_holds_runtime_code_only() -> None:
    """smartarray/_array.py's SmartArray has no typing-only declarations (no overloads, no
    ``if TYPE_CHECKING:`` block): the methods whose types depend on their arguments are
    defined for the run time only, and declared, with their overloads, in the typing-only
    base, which declares a member of that name for each of them."""
    tree = ast.parse((ROOT / "smartarray" / "_array.py").read_text())
    (cls,) = (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SmartArray")
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef):
            assert not any(ast.unparse(d) == "overload" for d in node.decorator_list), node.name
    typing_blocks = [
        n for n in cls.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    assert all(  # (only the attribute declaration that the class-level descriptor hides)
        isinstance(item, ast.AnnAssign) for block in typing_blocks for item in block.body
    )
    runtime_only = _defined_for_the_run_time_only()
    assert runtime_only == {
        "__init__",
        "get",
        "__getitem__",
        "__array__",
        "astype",
        "reshape",
        "getfield",
        "view",
    }
    tree = ast.parse((ROOT / "smartarray" / "_array_typing.py").read_text())
    nodes = [*tree.body]
    for node in tree.body:
        if isinstance(node, ast.If):
            nodes += node.body
    (base,) = (n for n in nodes if isinstance(n, ast.ClassDef) and n.name == "_SmartArrayTyping")
    overloaded = {
        item.name
        for item in base.body
        if isinstance(item, ast.FunctionDef)
        and any(ast.unparse(d) == "overload" for d in item.decorator_list)
    }
    assert runtime_only <= overloaded


def test_the_typing_only_base_is_no_base_at_run_time() -> None:
    """Type checkers see SmartArray's installed members in a base, numpy's operator mixin
    as smartarray._array_typing declares it; at run time that base is the mixin itself
    (after the indexing base, smartarray._speedups.Indexing or its Python twin), and nothing
    imports smartarray._array_typing (which defines nothing)."""
    from numba.cuda.args import ArgHint
    from numpy.lib.mixins import NDArrayOperatorsMixin

    from smartarray._array import _Indexing

    assert SmartArray.__bases__ == (_Indexing, NDArrayOperatorsMixin, ArgHint, typing.Generic)
    assert "smartarray._array_typing" not in sys.modules
    code = "import smartarray._array_typing as m; print(sorted(n for n in vars(m) if n[0] != '_'))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert result.stdout.strip() == "['TYPE_CHECKING', 'annotations']"


def test_every_installed_member_is_declared_for_type_checkers() -> None:
    """The members smartarray._numpy installs on the class (setattr: invisible to type
    checkers) are the ones declared for them, minus those refused at run time."""
    from smartarray._numpy import fastpath, protocols

    installed = {
        name
        for name, member in vars(SmartArray).items()
        if getattr(getattr(member, "fget", member), "__module__", "")
        in (protocols.__name__, fastpath.__name__)
    }
    assert installed >= set(fastpath.operator_methods())
    declared = _declared_for_type_checkers()
    assert declared == installed - set(protocols.REFUSED_METHODS)
