"""Every script in examples/ runs to completion and prints what it promises.

Each example runs in a subprocess: in the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``), or on
the GPU when this test session runs in the GPU tier (so their GPU branches are exercised too).
Each example asserts its own results and ledger counts; here we check its exit status and key
lines of its output.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, run_python

import smartarray

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
ON_GPU = smartarray.tier() == "gpu"

# Lines (besides "<name>: OK" and "ledger: ...") each example must print.
KEY_OUTPUT = {
    "memory_basics": ["location=gpu", "reshape(order='F'):  shape=(32, 32) C=False F=True"],
    "add_ufunc_progression": (
        ["ms/call", "SmartArrays / device inputs and output"]
        if ON_GPU
        else ["tier simulator: copy counts only, no timings"]
    )
    + ["add_ufunc = @vectorize(['float32(float32, float32)'], target='cuda')"]
    + ["Steps 2-4 copy the same"],
    "heat_chain": ["diffusion kernels", "(no copies)"],
    "streams_pinned": ["asynchronous=True"],
    "migrate_from_numba_smartarray": ["legacy_transpose_twice", "legacy_jit_and_numpy"],
    "dask_pipeline": ["2 worker processes", "each chunk crossed the bus twice in all"],
}
# Examples whose lines with "location=" print aligned columns.
ALIGNED = {"heat_chain"}
# Examples that need an optional dependency group: skipped without it.
NEEDS = {"dask_pipeline": ("distributed", 'the [dask] extra: pip install -e ".[dask]"')}


def run_example(path: Path) -> subprocess.CompletedProcess[str]:
    return run_python([str(path)], simulator=not ON_GPU, timeout=300)


def test_every_example_has_expected_output() -> None:
    assert sorted(p.stem for p in EXAMPLES) == sorted(KEY_OUTPUT)


def test_getting_started_names_every_example() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text()
    missing = [p.name for p in EXAMPLES if f"`{p.name}`" not in page]
    assert not missing, f"docs/getting-started.md does not list {missing}"


@pytest.mark.device
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path: Path) -> None:
    if path.stem in NEEDS:
        pytest.importorskip(NEEDS[path.stem][0], reason=f"needs {NEEDS[path.stem][1]}")
    proc = run_example(path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert f"{path.stem}: OK" in proc.stdout, output
    assert "ledger: host->device:" in proc.stdout, output
    for line in KEY_OUTPUT[path.stem]:
        assert line in proc.stdout, f"missing {line!r} in:\n{output}"
    if path.stem in ALIGNED:  # its step lines print columns: each starts at one place
        rows = [line for line in proc.stdout.splitlines() if "location=" in line]
        assert len(rows) >= 3, output
        for column in ("location=", "("):
            assert len({line.index(column) for line in rows}) == 1, "\n".join(rows)


@pytest.mark.hostonly
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_without_cuda_says_how_to_run_it(path: Path) -> None:
    if path.stem in NEEDS:
        pytest.importorskip(NEEDS[path.stem][0], reason=f"needs {NEEDS[path.stem][1]}")
    proc = run_python([str(path)], simulator=False, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"NUMBA_ENABLE_CUDASIM=1 python examples/{path.name}" in proc.stderr


_WITHOUT_DASK = """
import importlib.abc, runpy, sys

class NoDask(importlib.abc.MetaPathFinder):  # as if dask and distributed were not installed
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoDask())
sys.argv = ["examples/dask_pipeline.py"]
runpy.run_path("examples/dask_pipeline.py", run_name="__main__")
"""


def test_dask_example_without_dask_says_what_to_install() -> None:
    proc = run_python(["-c", _WITHOUT_DASK], simulator=not ON_GPU, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "needs dask and dask.distributed" in proc.stderr
    assert "(No module named 'dask')" in proc.stderr
    assert 'pip install -e ".[dask]"' in proc.stderr
