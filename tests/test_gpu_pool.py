"""Issue 22 on real hardware: the device memory pool, pooled ufunc results, the launch path.

Written without a GPU (the simulator tier checks the same logic with a stand-in pool:
tests/test_device_pool.py, tests/test_ufunc_results.py, tests/test_launch_fast_path.py);
these run in the GPU tier only.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import counts, inc, run_python
from numba import cuda, vectorize

import smartarray as sa
from smartarray._core import device_pool as _device_pool

pytestmark = pytest.mark.gpu

N = 1 << 12


@pytest.fixture(autouse=True)
def pooled(monkeypatch: pytest.MonkeyPatch) -> object:
    """The pool (on by default) with cuda.core's resource, as ``device_pool.active`` makes it,
    whatever earlier tests chose; on in the processes these tests start too."""
    monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, "1")
    with _device_pool.memory_resource(
        _device_pool.CudaCoreResource(), _device_pool._core_stream, fallback=True
    ) as pool:
        yield pool


@pytest.fixture(scope="module")
def add() -> object:
    @vectorize(["float32(float32, float32)"], target="cuda")
    def add(a, b):  # type: ignore[no-untyped-def]
        return a + b

    return add


def test_the_pool_is_on_and_serves_device_copies() -> None:
    resource = _device_pool.active(True).resource  # type: ignore[union-attr]
    attributes = resource.resource.attributes  # smartarray's own pool, threshold bounded
    assert attributes.release_threshold == resource.release_threshold > 0
    info = sa.device_pool_info()
    assert info["enabled"] and info["resource"] == "CudaCoreResource"
    before = sa.device_pool_info()
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    inc[(N + 255) // 256, 256](a)
    assert sa.device_pool_info()["allocations"] == before["allocations"] + 1
    view = a[N // 2 :]
    inc[(N + 255) // 256, 256](view)  # a view of a pooled buffer
    expected = np.arange(N) + 1.0
    expected[N // 2 :] += 1
    np.testing.assert_array_equal(np.asarray(a), expected)
    a.free_device()
    assert sa.device_pool_info()["frees"] == before["frees"] + 1
    del a, view
    gc.collect()
    assert sa.release_device_pool() >= 0


def test_a_steady_ufunc_loop_is_served_by_the_pool(add: object) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float32), where="gpu")
    y = sa.SmartArray(np.ones(N, dtype=np.float32), where="gpu")
    z = add(x, y)  # type: ignore[operator]
    z = add(x, y)  # type: ignore[operator]
    before = sa.device_pool_info()
    with sa.track_transfers() as t:
        for _ in range(20):
            z = add(x, y)  # type: ignore[operator]
    after = sa.device_pool_info()
    assert counts(t) == (0, 0)
    assert after["allocations"] - before["allocations"] == 20
    assert after["reserved_bytes"] == before["reserved_bytes"]  # all served from the pool
    assert isinstance(z, sa.SmartArray) and z.location == "gpu"
    np.testing.assert_array_equal(np.asarray(z), np.arange(N, dtype=np.float32) + 1)


def test_direct_ufunc_launches_match_numba_cudas_own(add: object) -> None:
    data = np.random.default_rng(0).random(N, dtype=np.float32)
    x = sa.SmartArray(data)
    out = sa.empty(N, dtype=np.float32, where="gpu")
    add(x, x, out=out)  # type: ignore[operator]
    add(x, out, out=out)  # type: ignore[operator]  # the cached specialisation
    d = cuda.to_device(data)
    reference = add(d, add(d, d))  # type: ignore[operator]  # numba-cuda's own path
    np.testing.assert_array_equal(np.asarray(out), reference.copy_to_host())


def test_the_chain_hands_over_the_cached_strided_memory_view() -> None:
    a = sa.zeros(N, where="gpu")
    blocks = (N + 255) // 256
    inc[blocks, 256](a)
    key = (a._offset, a._shape, a._strides, a._dtype, True)
    cached = a._alloc._device_views[key]
    assert cached is a._alloc.device._strided_memory_view_shim
    with sa.track_transfers() as t:
        for _ in range(10):
            inc[blocks, 256](a)
    assert counts(t) == (0, 0) and a._alloc._device_views[key] is cached
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 11.0))


def test_the_numba_plugin_allocates_numbas_arrays_from_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NUMBA_CUDA_MEMORY_MANAGER", "smartarray.numba_pool")
    script = (
        "import numpy as np, smartarray as sa\n"
        "from numba import cuda\n"
        "manager = cuda.current_context().memory_manager\n"
        "assert type(manager).__name__ == 'PooledMemoryManager', type(manager)\n"
        "before = sa.device_pool_info()['allocations']\n"
        "d = cuda.to_device(np.arange(1000.0))\n"
        "assert sa.device_pool_info()['allocations'] == before + 1\n"
        "np.testing.assert_array_equal(d.copy_to_host(), np.arange(1000.0))\n"
        "del d\n"
        "print('ok', sa.device_pool_info()['frees'])\n"
    )
    proc = run_python(["-c", script], simulator=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-2] == "ok" and int(proc.stdout.split()[-1]) >= 1


@pytest.mark.parametrize("setting", [None, "0"])
def test_the_pool_is_on_by_default_and_the_environment_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, setting: str | None
) -> None:
    if setting is None:
        monkeypatch.delenv(_device_pool.ENVIRONMENT_VARIABLE)
        check = (
            "assert info['enabled'] and info['resource'] == 'CudaCoreResource', info\n"
            "assert info['allocations'] == 1, info\n"
        )
    else:
        monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, setting)
        check = "assert info == {'enabled': False}, info\n"
    script = (
        "import warnings\n"
        "warnings.simplefilter('error', RuntimeWarning)\n"  # (no pool that failed)
        "import numpy as np, smartarray as sa\n"
        "a = sa.SmartArray(np.ones(8), where='gpu')\n"
        "info = sa.device_pool_info()\n" + check + "print(float(np.asarray(a).sum()))\n"
    )
    proc = run_python(["-c", script], simulator=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split()[-1] == "8.0"


@cuda.jit
def slow_copy(src, dst):  # type: ignore[no-untyped-def]
    """``dst[:] = src`` after about 50 ms: work still reading ``src`` when the host goes on."""
    i = cuda.grid(1)
    for _ in range(500):
        cuda.nanosleep(100_000)
    if i < src.size:
        dst[i] = src[i]


@pytest.fixture
def non_blocking_stream() -> object:
    from cuda.bindings import driver

    error, handle = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
    assert error == driver.CUresult.CUDA_SUCCESS
    yield cuda.external_stream(int(handle))
    cuda.synchronize()
    driver.cuStreamDestroy(handle)


@pytest.mark.parametrize("handed_out", [False, True])
def test_a_dropped_array_is_not_reused_under_a_kernel_on_another_stream(
    non_blocking_stream: object, handed_out: bool
) -> None:
    n = 1 << 20
    blocks = (n + 255) // 256
    a = sa.SmartArray(np.arange(n, dtype=np.float64), where="gpu")  # allocated on stream 0
    b = sa.empty(n, where="gpu")
    if handed_out:  # the caller's own launch on the raw device array: smartarray never sees it
        slow_copy[blocks, 256, non_blocking_stream](a.get("gpu"), b.get("gpu"))
        b.mark_changed("gpu")
    else:
        slow_copy[blocks, 256, non_blocking_stream](sa.In(a), sa.Out(b))
    del a
    gc.collect()
    # (a handed-out buffer goes back through numba-cuda's deallocation queue: flushed now)
    cuda.current_context().memory_manager.deallocations.clear()
    # The same size from the pool on the default stream, overwritten at once: the memory a
    # had must not be reused before the kernel on the non-blocking stream has read it.
    c = sa.full(n, -1.0, where="gpu")
    non_blocking_stream.synchronize()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(np.asarray(b), np.arange(n, dtype=np.float64))
    np.testing.assert_array_equal(np.asarray(c), np.full(n, -1.0))
