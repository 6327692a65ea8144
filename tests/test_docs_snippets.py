"""The code in docs/ is code the tests run.

Every ``docs/snippets/*.py`` runs (in this process, so in the tier of the test session), every
``--8<--`` include in the Markdown pages points at an existing file and section, every snippet
is used by some page, and the state diagram in the docs is the one in smartarray._core.coherence.
"""

from __future__ import annotations

import gc
import re
import runpy
import textwrap
from pathlib import Path

import pytest

import smartarray
import smartarray._core.coherence

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SNIPPETS = sorted((DOCS / "snippets").glob("*.py"))
PAGES = sorted(DOCS.glob("*.md"))
INCLUDE = re.compile(r'^\s*--8<-- "([^":]+)(?::([\w-]+))?"\s*$', re.MULTILINE)


def includes() -> list[tuple[str, Path, str | None]]:
    found = []
    for page in PAGES:
        for match in INCLUDE.finditer(page.read_text()):
            found.append((page.name, ROOT / match.group(1), match.group(2)))
    return found


@pytest.mark.device
@pytest.mark.parametrize("path", SNIPPETS, ids=[p.stem for p in SNIPPETS])
def test_snippet_runs(path: Path) -> None:
    if path.stem.startswith("dask"):  # the [dask] extra
        pytest.importorskip("distributed")
    # Earlier tests' arrays that are garbage but not yet collected still hold device memory,
    # which a snippet measuring device memory use (memory_budget.py) would count.
    gc.collect()
    print("device memory in use before the snippet:", smartarray.device_memory_usage())
    runpy.run_path(str(path), run_name="__snippet__")


def test_includes_exist() -> None:
    assert includes(), "no --8<-- includes found in docs/*.md"
    for page, path, section in includes():
        assert path.is_file(), f"{page} includes missing file {path}"
        if section is not None:
            text = path.read_text()
            assert f"--8<-- [start:{section}]" in text, f"{page}: no section {section} in {path}"
            assert f"--8<-- [end:{section}]" in text, f"{page}: no section {section} in {path}"


PYTHON_BLOCK = re.compile(r"^([ \t]*)```python[^\n]*\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def test_every_python_block_is_a_snippet_the_tests_run() -> None:
    # docs/index.md says so: code written inline in a page would run nowhere (issue 24).
    blocks = [(page, m.group(2)) for page in PAGES for m in PYTHON_BLOCK.finditer(page.read_text())]
    assert len(blocks) >= len(SNIPPETS), "found fewer ```python blocks than snippets"
    inline = [
        f"{page.name}: {body.strip().splitlines()[0]!r}"
        for page, body in blocks
        if not all(INCLUDE.fullmatch(line) for line in body.strip().splitlines())
    ]
    assert not inline, f"```python blocks that are not --8<-- includes of docs/snippets: {inline}"


def test_every_snippet_is_used() -> None:
    used = {path.resolve() for _, path, _ in includes()}
    unused = [p.name for p in SNIPPETS if p.resolve() not in used]
    assert not unused, f"snippets no page includes: {unused}"


def test_state_diagram_matches_the_code() -> None:
    diagram = (DOCS / "snippets" / "state_diagram.txt").read_text().rstrip("\n")
    doc = smartarray._core.coherence.__doc__
    assert doc is not None
    indented = textwrap.indent(diagram, "    ")  # a literal block in the module docstring
    assert indented in doc, (
        "docs/snippets/state_diagram.txt differs from smartarray/_core/coherence.py"
    )


@pytest.mark.device
def test_readme_example_runs_and_copies_once_each_way() -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.DOTALL)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    t = namespace["t"]
    assert isinstance(t, smartarray.TransferStats)
    assert (t.h2d_count, t.d2h_count) == (1, 1)
    assert namespace["total"] == pytest.approx(sum(range(256)) * 1.5**10)
