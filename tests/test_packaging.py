"""Every runtime dependency declared in pyproject.toml is used (issue #11, item 14)."""

from __future__ import annotations

import re

import pytest
from helpers import ROOT

# The module each distribution provides, as smartarray imports it.
MODULES = {
    "numpy": "numpy",
    "numba": "numba",
    "numba-cuda": "numba.cuda",
    "numpy-typing-compat": "numpy_typing_compat",
}


def test_every_runtime_dependency_is_imported() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=!~ ;\[]", spec, maxsplit=1)[0] for spec in project["dependencies"]]
    assert sorted(names) == sorted(MODULES), "a dependency without a known module: add it here"
    source = "\n".join(p.read_text() for p in (ROOT / "smartarray").rglob("*.py"))
    for name in names:
        module = re.escape(MODULES[name])
        assert re.search(rf"^\s*(import|from) {module}\b", source, re.MULTILINE), name


def test_public_exceptions_print_their_public_names() -> None:
    # issue 31: tracebacks said smartarray._core.errors.DeviceUnavailableError, the docs
    # smartarray.DeviceUnavailableError.
    import pickle
    import traceback

    import smartarray

    public = [
        getattr(smartarray, name)
        for name in smartarray.__all__
        if isinstance(getattr(smartarray, name), type)
        and issubclass(getattr(smartarray, name), BaseException)
    ]
    assert {cls.__name__ for cls in public} >= {
        "DeviceUnavailableError",
        "SmartArrayKeptError",
        "TransferError",
    }
    for cls in public:
        assert cls.__module__ == "smartarray", cls
        error = cls("the message")
        last = traceback.format_exception_only(error)[-1]
        assert last == f"smartarray.{cls.__name__}: the message\n"
        again = pickle.loads(pickle.dumps(error))  # found again under its public name
        assert type(again) is cls and str(again) == "the message"


def test_dir_of_the_package_lists_no_stray_names() -> None:
    # issue 31: `from __future__ import annotations` put `annotations` in dir(smartarray).
    import types

    import smartarray

    extra = {
        name
        for name in dir(smartarray)
        if not name.startswith("_") and name not in smartarray.__all__
    }
    assert "annotations" not in extra
    for name in extra:  # what is left: submodules, and the hook installers tools/ call again
        value = getattr(smartarray, name)
        assert isinstance(value, types.ModuleType) or name.startswith("install_"), name


def test_readme_says_how_to_build_the_docs_as_ci_does() -> None:
    # issue 31: the README gave no command to build the docs (.ci/run has it).
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    ci_command = re.search(r"^(mkdocs build --strict)\b", ci, re.MULTILINE)
    assert ci_command is not None
    assert re.search(rf'pip install -e "\.\[docs\]" && {ci_command.group(1)} ', readme)
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(spec.startswith("mkdocs") for spec in extras["docs"])
