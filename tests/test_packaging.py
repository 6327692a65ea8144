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
