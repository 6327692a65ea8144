"""Settings of the device memory budget: sizes, the limit, the environment variable (all tiers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import run_python

import smartarray as sa
from smartarray._core import memory as _memory


@pytest.fixture(autouse=True)
def _no_limit_after() -> Iterator[None]:
    yield
    sa.set_device_memory_limit(None)


def test_sizes() -> None:
    assert _memory.parse_size("4GB") == 4 * 10**9
    assert _memory.parse_size("4g") == 4 * 10**9
    assert _memory.parse_size("512 MiB") == 512 * 2**20
    assert _memory.parse_size("1.5k") == 1500
    assert _memory.parse_size(" 100 ") == 100
    assert _memory.parse_size(7) == 7
    for bad in ("4 parsecs", "-1GB", "GB", ""):
        with pytest.raises(ValueError, match="4GB, 512MiB"):
            _memory.parse_size(bad)


def test_bad_limits_are_refused_and_change_nothing() -> None:
    sa.set_device_memory_limit("1 MiB")
    assert sa.device_memory_limit() == 2**20
    for bad, error in [(-1, ValueError), ("lots", ValueError), (1.5, TypeError), (True, TypeError)]:
        with pytest.raises(error):
            sa.set_device_memory_limit(bad)  # type: ignore[arg-type]
    assert sa.device_memory_limit() == 2**20


def test_the_environment_variable_sets_the_initial_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    code = (
        "import numpy as np, smartarray as sa; from helpers import inc; "
        "xs = [sa.SmartArray(np.zeros(8)) for _ in range(3)]; "
        "[inc[1, 8](x) for x in xs]; "
        "print(sa.device_memory_limit(), sa.device_memory_usage(), sa.transfer_stats().spill_count)"
    )
    monkeypatch.setenv(_memory.ENVIRONMENT_VARIABLE, "0.128kB")  # room for 2 arrays of 8
    script = f"import sys; sys.path.insert(0, 'tests'); {code}"
    proc = run_python(["-c", script], simulator=True, timeout=120)
    assert proc.stdout.split() == ["128", "128", "1"], proc.stderr
    monkeypatch.setenv(_memory.ENVIRONMENT_VARIABLE, "much")
    proc = run_python(["-c", "import smartarray"], simulator=True, timeout=120)
    assert proc.returncode != 0
    assert "environment variable SMARTARRAY_DEVICE_MEMORY_LIMIT: cannot read 'much'" in proc.stderr


@pytest.mark.skipif(sa.tier() == "simulator", reason="the simulator replaces numba-cuda's driver")
def test_cuda_out_of_memory_errors_are_recognised() -> None:
    from numba.cuda.cudadrv.driver import CudaAPIError, binding

    from smartarray._core import backend as _backend

    out_of_memory = CudaAPIError(
        binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY,
        "Call to cuMemAlloc results in CUDA_ERROR_OUT_OF_MEMORY",
    )
    other = CudaAPIError(binding.CUresult.CUDA_ERROR_INVALID_VALUE, "bad value")
    assert _backend.is_out_of_memory(out_of_memory)
    assert _backend.is_out_of_memory(MemoryError("std::bad_alloc: out_of_memory"))  # RMM
    assert not _backend.is_out_of_memory(other)
    assert not _backend.is_out_of_memory(RuntimeError("a kernel failed"))
