"""CUDA ufunc calls over SmartArrays (issue 22): the result smartarray allocates, and what
numba-cuda would work out on every call, worked out once.

``z = add(x, y)`` with SmartArray inputs and no ``out=``: smartarray allocates ``z`` itself
(from the device memory pool on a GPU; here an ordinary device array, or the stand-in pool of
``test_device_pool``), with the dtype numba-cuda resolves, and passes it as the output: no
copy, ``z`` current on the device only. The signature is resolved by numba-cuda's own code
once per ufunc and input types, and an elementwise call over device buffers of one shape
launches the kernel directly (``CUDAUFuncMechanism.call`` not run); anything else, and every
error, goes through numba-cuda.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import counts, numba_add_ufunc

import smartarray as sa
from smartarray._core import device_pool as _device_pool
from smartarray._core.coherence import State
from smartarray._cuda import ufuncs as _ufuncs

pytestmark = pytest.mark.device

N = 16


def _build_add() -> Any:
    from numba import vectorize

    @vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
    def add(a, b):  # type: ignore[no-untyped-def]
        return a + b

    return add


@pytest.fixture(params=["vectorize", "dispatcher"])
def add(request: pytest.FixtureRequest) -> Any:
    """A real ``@vectorize(target='cuda')`` ufunc, and numba-cuda's dispatcher around a
    hand-written kernel (float64 only)."""
    return _build_add() if request.param == "vectorize" else numba_add_ufunc()


class Calls:
    """Counts calls of numba-cuda's ufunc machinery: the whole call, and the signature
    resolution (``get_arguments``, which smartarray's cache runs once per signature)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from numba.cuda.vectorizers import CUDAUFuncMechanism

        self.call = 0
        self.resolve = 0
        call, get_arguments = CUDAUFuncMechanism.call.__func__, CUDAUFuncMechanism.get_arguments

        def counted_call(cls: Any, *args: Any) -> Any:
            self.call += 1
            return call(cls, *args)

        def counted_get_arguments(mechanism: Any) -> Any:
            self.resolve += 1
            return get_arguments(mechanism)

        monkeypatch.setattr(CUDAUFuncMechanism, "call", classmethod(counted_call))
        monkeypatch.setattr(CUDAUFuncMechanism, "get_arguments", counted_get_arguments)

    def take(self) -> tuple[int, int]:
        taken = (self.call, self.resolve)
        self.call = self.resolve = 0
        return taken


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    return Calls(monkeypatch)


def test_the_result_is_allocated_by_smartarray_current_on_the_device(
    add: Any, calls: Calls
) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    usage = sa.device_memory_usage()
    with sa.track_transfers() as t:
        z = add(x, y)
    assert counts(t) == (2, 0)  # x and y up; nothing else
    assert isinstance(z, sa.SmartArray) and z.dtype == np.float64 and z.shape == (N,)
    assert z._alloc.state is State.DEVICE and z._alloc._device_owned
    assert sa.device_memory_usage() == usage + 3 * N * 8  # charged when allocated
    assert calls.take() == (0, 1)  # resolved once by numba-cuda's code; launched directly
    with sa.track_transfers() as t:
        for _ in range(5):
            z = add(x, y)  # the steady state: nothing copied, nothing resolved again
    assert counts(t) == (0, 0) and calls.take() == (0, 0)
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(z), np.arange(N) + 1.0)
    assert counts(t) == (0, 1)


def test_each_signature_is_resolved_once() -> None:
    add = _build_add()
    x64, x32 = sa.SmartArray(np.ones(N)), sa.SmartArray(np.ones(N, dtype=np.float32))
    assert add(x64, x64).dtype == np.float64
    assert add(x32, x32).dtype == np.float32
    assert add(x32, x32).dtype == np.float32
    signatures = add.__dict__[_ufuncs._SIGNATURES]
    assert set(signatures) == {(np.dtype("f8"), np.dtype("f8")), (np.dtype("f4"), np.dtype("f4"))}
    assert all(s.resty == k[0] for k, s in signatures.items())


def test_out_calls_launch_directly_with_the_same_results(add: Any, calls: Calls) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    out = sa.empty(N, where="gpu")
    add(x, x, out=out)
    calls.take()
    with sa.track_transfers() as t:
        for _ in range(3):
            assert add(x, out, out=out) is out
    assert counts(t) == (0, 0) and calls.take() == (0, 0)
    np.testing.assert_array_equal(np.asarray(out), 5 * np.arange(N))


def test_calls_that_need_numba_cudas_own_path_take_it(add: Any, calls: Calls) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    one = sa.SmartArray(np.ones(1))
    with sa.track_transfers() as t:
        z = add(x, 1.0)  # a scalar: smartarray allocates, numba-cuda runs the call
        w = add(x, one)  # a one-element array broadcast on the device
    assert counts(t) == (2, 0) and calls.take()[0] == 2
    assert z.location == "gpu" and w.location == "gpu"
    np.testing.assert_array_equal(np.asarray(z), np.arange(N) + 1.0)
    np.testing.assert_array_equal(np.asarray(w), np.arange(N) + 1.0)
    grid = sa.SmartArray(np.arange(2 * N, dtype=np.float64).reshape(2, N))
    g = add(grid, grid)  # C-contiguous 2-d: ravelled, launched directly
    assert g.shape == (2, N) and g.location == "gpu"
    np.testing.assert_array_equal(np.asarray(g), 2 * np.arange(2 * N).reshape(2, N))


def test_numba_cudas_errors_and_rules_are_kept(add: Any) -> None:
    from numba import cuda

    ints = sa.SmartArray(np.arange(N, dtype=np.int32))
    gc.collect()
    usage = sa.device_memory_usage()
    with pytest.raises(TypeError, match="No matching version"):
        add(ints, ints)
    gc.collect()
    assert sa.device_memory_usage() == usage + N * 4  # (ints uploaded), no result allocated
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    d = cuda.to_device(np.ones(N))
    result = add(x, d)  # a Numba device array among the inputs: numba-cuda's result
    assert not isinstance(result, sa.SmartArray)
    np.testing.assert_array_equal(result.copy_to_host(), np.arange(N) + 1.0)
    with pytest.raises(ValueError, match="broadcast"):
        add(x, sa.SmartArray(np.ones(3)))


class PoolHits:
    """A stand-in stream-ordered pool: counts allocations and the ones served by a buffer
    freed before (see tests/test_device_pool.py for one that records every call)."""

    class Buffer:
        def __init__(self, pool: PoolHits, address: int, size: int) -> None:
            self.pool, self.handle, self.size = pool, address, size

        def close(self, stream: Any) -> None:
            self.pool.free.setdefault(self.size, []).append(self.handle)

    def __init__(self) -> None:
        self.free: dict[int, list[int]] = {}
        self.allocations = self.hits = 0
        self.next = 1 << 20

    def allocate(self, size: int, *, stream: Any) -> Any:
        self.allocations += 1
        if self.free.get(size):
            self.hits += 1
            return PoolHits.Buffer(self, self.free[size].pop(), size)
        self.next += size
        return PoolHits.Buffer(self, self.next, size)

    def trim(self) -> None:
        self.free.clear()


@pytest.fixture
def pool() -> Iterator[PoolHits]:
    if sa.tier() != "simulator":
        pytest.skip("a stand-in pool in the simulator tier (the GPU tier has the real one)")
    gc.collect()
    fake = PoolHits()
    with _device_pool.memory_resource(fake):
        yield fake
    gc.collect()


def test_a_steady_result_loop_allocates_one_pooled_buffer_per_call(
    add: Any, pool: PoolHits
) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
    y = sa.SmartArray(np.ones(N), where="gpu")
    z = add(x, y)
    before = pool.allocations, pool.hits
    calls = 10
    with sa.track_transfers() as t:
        for _ in range(calls):
            # The last result dies once the next one is made: two buffers take turns, each
            # served by the pool from the second call on.
            z = add(x, y)
    assert counts(t) == (0, 0)
    assert pool.allocations - before[0] == calls
    assert pool.hits - before[1] == calls - 1
    assert pool.next == (1 << 20) + 4 * N * 8  # x, y and the two results: nothing else
    np.testing.assert_array_equal(np.asarray(z), np.arange(N) + 1.0)
