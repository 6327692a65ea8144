"""The device memory pool (issue 22): SmartArrays' device buffers from a stream-ordered pool.

On a GPU the pool is ``cuda.core``'s ``DeviceMemoryResource``; no tier here has one, so the
pool's logic is checked with a stand-in memory resource that records what it is asked
(``allocate``, a buffer's ``close``, ``trim``) and keeps freed buffers for reuse, as the
driver's pool does, until trimmed. Given to :func:`device_pool.memory_resource`, it serves
every device buffer smartarray allocates, in the simulator tier: the buffers' release on their
stream, the budget's counts, and an out-of-memory error trimming the pool before evicting.
In the host tier (no simulator), the numba-cuda pointers over pooled buffers (what the GPU
tier uses, and the Numba memory-manager plugin returns) and the plugin itself are checked.
"""

from __future__ import annotations

import collections
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import counts, inc
from numba import cuda

import smartarray as sa
from smartarray._core import backend as _backend
from smartarray._core import device_pool as _device_pool

N = 16
NBYTES = N * 8
F8 = np.dtype(np.float64)


class FakeBuffer:
    """A buffer of :class:`FakeResource`: ``int(handle)`` is its address."""

    def __init__(self, resource: FakeResource, address: int, size: int) -> None:
        self.resource = resource
        self.handle = address
        self.size = size

    def close(self, stream: Any) -> None:
        self.resource.close(self, stream)


class FakeResource:
    """A stream-ordered pool's behaviour, in bookkeeping only.

    ``capacity`` bytes of device memory: live buffers and freed buffers kept for reuse
    (``cached``, by size) count against it; an allocation that does not fit raises
    ``MemoryError`` (as ``is_out_of_memory`` recognises the driver's); ``trim`` gives the
    cached bytes back. Every request is recorded in ``calls``.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self.calls: list[tuple[Any, ...]] = []
        self.live: dict[int, int] = {}
        self.cached: collections.Counter[int] = collections.Counter()
        self.addresses: dict[int, list[int]] = collections.defaultdict(list)
        self.next_address = 1 << 20
        self.hits = 0

    def reserved_bytes(self) -> int:
        return sum(self.live.values()) + sum(size * n for size, n in self.cached.items())

    def allocate(self, size: int, *, stream: Any) -> FakeBuffer:
        if self.cached[size]:
            self.cached[size] -= 1
            address = self.addresses[size].pop()
            self.hits += 1
        elif self.capacity is not None and self.reserved_bytes() + size > self.capacity:
            self.calls.append(("out of memory", size, stream))
            raise MemoryError(f"CUDA_ERROR_OUT_OF_MEMORY (stand-in, {size} bytes)")
        else:
            address, self.next_address = self.next_address, self.next_address + size
        self.calls.append(("allocate", size, stream))
        self.live[address] = size
        return FakeBuffer(self, address, size)

    def close(self, buffer: FakeBuffer, stream: Any) -> None:
        self.calls.append(("close", buffer.size, stream))
        size = self.live.pop(buffer.handle)
        self.cached[size] += 1
        self.addresses[size].append(buffer.handle)

    def trim(self) -> None:
        self.calls.append(("trim",))
        self.cached.clear()
        self.addresses.clear()

    def take(self) -> list[tuple[Any, ...]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def resource() -> Iterator[FakeResource]:
    gc.collect()
    fake = FakeResource()
    with _device_pool.memory_resource(fake):
        yield fake
    gc.collect()


simulator = pytest.mark.skipif(
    sa.tier() != "simulator", reason="smartarray's device buffers, in the simulator tier"
)
host_tier = pytest.mark.skipif(
    sa.tier() == "simulator",
    reason="numba-cuda's pointers and memory managers (absent from the simulator)",
)


# --- the pool's bookkeeping (any tier) ------------------------------------------------------


def test_the_pool_counts_what_it_hands_out_and_gets_back() -> None:
    fake = FakeResource()
    pool = _device_pool.DevicePool(fake)
    first = pool.allocate(64, "s1")
    second = pool.allocate(32, 0)
    assert (first.address, first.nbytes, first.stream) == (1 << 20, 64, "s1")
    first.free()
    first.free()  # once
    assert fake.take() == [("allocate", 64, "s1"), ("allocate", 32, 0), ("close", 64, "s1")]
    info = pool.info()
    assert info["allocations"] == 2 and info["frees"] == 1
    assert info["live_buffers"] == 1 and info["live_bytes"] == 32
    assert info["peak_live_bytes"] == 96 and info["reserved_bytes"] == 96
    assert pool.trim() == 64 and fake.take() == [("trim",)]
    second.free()
    assert pool.info()["live_bytes"] == 0


def test_streams_are_handed_to_the_resource_converted() -> None:
    fake = FakeResource()
    pool = _device_pool.DevicePool(fake, to_stream=lambda stream: ("core", stream))
    pool.allocate(8, 7).free()
    assert fake.take() == [("allocate", 8, ("core", 7)), ("close", 8, ("core", 7))]


def test_the_environment_turns_the_default_pool_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # Opt-in until measured on a GPU (see smartarray._core.device_pool.enabled_by_environment).
    cases = (("", False), ("1", True), ("On", True), ("0", False), ("off", False), ("No", False))
    for value, enabled in cases:
        monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, value)
        assert _device_pool.enabled_by_environment() is enabled
    monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, "0")
    saved = _device_pool._POOL, _device_pool._CHOSEN
    try:
        _device_pool._POOL, _device_pool._CHOSEN = None, False
        assert _device_pool.active(on_gpu=True) is None  # off: cuda.core never asked
        assert _device_pool._CHOSEN
        monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, "1")
        _device_pool._POOL, _device_pool._CHOSEN = None, False
        asked: list[bool] = []
        # Numba given another memory manager (RMM): SmartArrays allocate through Numba.
        assert _device_pool.active(True, allowed=lambda: asked.append(True) or False) is None
        assert _device_pool.active(True, allowed=lambda: asked.append(True) or True) is None
        assert asked == [True]  # asked once: the choice is made
    finally:
        _device_pool._POOL, _device_pool._CHOSEN = saved


def test_without_a_gpu_there_is_no_pool_unless_one_is_given() -> None:
    if sa.tier() == "gpu":
        pytest.skip("the GPU tier has the default pool")
    assert sa.device_pool_info() == {"enabled": False}
    assert sa.release_device_pool() == 0
    fake = FakeResource()
    with _device_pool.memory_resource(fake):
        assert sa.device_pool_info()["resource"] == "FakeResource"
    assert sa.device_pool_info() == {"enabled": False}


# --- SmartArrays' device buffers (simulator tier) ----------------------------------------


@simulator
def test_device_copies_come_from_the_pool_and_go_back_on_their_stream(
    resource: FakeResource,
) -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        inc[1, N](a)
    assert counts(t) == (1, 0)
    assert resource.take() == [("allocate", NBYTES, 0)]
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)
    del a
    gc.collect()
    assert resource.take() == [("close", NBYTES, 0)]
    stream = cuda.stream()
    b = sa.SmartArray(np.ones(N), where="gpu", stream=stream)  # allocated on the stream
    assert resource.take() == [("allocate", NBYTES, stream)]  # (the freed buffer, reused)
    assert resource.hits == 1
    b.free_device()  # spilled, then given back on the stream it was allocated on
    assert resource.take() == [("close", NBYTES, stream)]
    np.testing.assert_array_equal(np.asarray(b), np.ones(N))


@simulator
def test_a_buffer_goes_back_once_every_view_of_it_is_gone(resource: FakeResource) -> None:
    base = _backend.device_empty((N,), F8, "C")
    view = _backend.device_view(base, 8, (N - 1,), (8,), F8)
    resource.take()
    del base
    gc.collect()
    assert resource.take() == []  # the view still uses it
    del view
    gc.collect()
    assert resource.take() == [("close", NBYTES, 0)]


@simulator
@pytest.mark.usefixtures("empty_budget")
def test_the_budget_counts_live_buffers(resource: FakeResource) -> None:
    usage = sa.device_memory_usage()
    pool = _device_pool.active(False)
    assert pool is not None
    arrays = [sa.zeros(N, where="gpu") for _ in range(3)]
    assert sa.device_memory_usage() == usage + 3 * NBYTES
    assert pool.info()["live_bytes"] == 3 * NBYTES
    arrays[0].free_device()
    arrays.pop()
    gc.collect()
    assert sa.device_memory_usage() == usage + NBYTES
    assert pool.info()["live_bytes"] == NBYTES
    assert resource.reserved_bytes() == 3 * NBYTES  # freed buffers kept for reuse...
    assert sa.device_pool_info()["reserved_bytes"] == 3 * NBYTES
    assert sa.release_device_pool() == 2 * NBYTES  # ... until trimmed
    assert resource.reserved_bytes() == NBYTES


@simulator
@pytest.mark.usefixtures("empty_budget")
def test_out_of_memory_trims_the_pool_before_evicting(resource: FakeResource) -> None:
    resource.capacity = 4 * NBYTES
    a, b = sa.zeros(2 * N, where="gpu"), sa.zeros(N, where="gpu")
    c = sa.zeros(N, where="gpu")
    c.free_device()  # a buffer of N elements kept by the pool: 4 * NBYTES reserved
    resource.take()
    with sa.track_transfers() as t:
        d = sa.zeros(2 * N, where="gpu")  # no room, even once the pool gave c's back
    assert counts(t) == (0, 1) and t.spill_count == 1  # a spilled
    assert t.records[0].array == a.label
    assert resource.take() == [
        ("out of memory", 2 * NBYTES, 0),
        ("trim",),
        ("out of memory", 2 * NBYTES, 0),  # (b and a: still 3 * NBYTES live)
        ("close", 2 * NBYTES, 0),  # then the least recently used copy, a, is evicted
        ("allocate", 2 * NBYTES, 0),
    ]
    assert a.location == "host" and b.location == "gpu" and d.location == "gpu"
    np.testing.assert_array_equal(np.asarray(a), np.zeros(2 * N))


@simulator
@pytest.mark.usefixtures("empty_budget")
def test_a_trim_that_makes_room_evicts_nothing(resource: FakeResource) -> None:
    resource.capacity = 3 * NBYTES
    a = sa.zeros(N, where="gpu")
    kept = sa.zeros(2 * N, where="gpu")
    kept.free_device()  # 2 * NBYTES kept by the pool, for a request of that size only
    resource.take()
    with sa.track_transfers() as t:
        b = sa.full(N, 2.0, where="gpu")
    assert t.spill_count == 0 and counts(t) == (0, 0)
    assert resource.take() == [("out of memory", NBYTES, 0), ("trim",), ("allocate", NBYTES, 0)]
    assert a.location == "gpu" and b.location == "gpu"


@simulator
@pytest.mark.usefixtures("empty_budget")
def test_nothing_to_evict_after_the_trim_reports_the_request(resource: FakeResource) -> None:
    resource.capacity = NBYTES
    with pytest.raises(MemoryError, match=f"out of device memory allocating {2 * NBYTES} bytes"):
        sa.zeros(2 * N, where="gpu")
    assert resource.take() == [
        ("out of memory", 2 * NBYTES, 0),
        ("trim",),
        ("out of memory", 2 * NBYTES, 0),
    ]


@simulator
def test_a_scratch_copy_comes_from_the_pool_too(resource: FakeResource) -> None:
    # A CUDA ufunc reduce runs on a device-side scratch copy of its argument.
    from helpers import numba_add_ufunc, numba_ufunc_support

    with numba_ufunc_support():
        add = numba_add_ufunc()
        a = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
        resource.take()
        assert add.reduce(a) == sum(range(N))
    calls = resource.take()
    assert calls[0] == ("allocate", NBYTES, 0) and ("close", NBYTES, 0) in calls


# --- numba-cuda pointers over pooled buffers, and the Numba plugin (host tier) -------------


class Block:
    """A stand-in pooled buffer: records whether it went back."""

    def __init__(self, address: int, nbytes: int) -> None:
        self.address, self.nbytes, self.freed = address, nbytes, 0

    def free(self) -> None:
        self.freed += 1


@host_tier
def test_a_pooled_pointer_lives_while_any_view_of_it_does() -> None:
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    block = Block(1 << 30, NBYTES)
    array = DeviceNDArray((N,), (8,), F8, gpu_data=_backend.pooled_pointer(block))  # type: ignore[arg-type]
    assert array.device_ctypes_pointer.value == 1 << 30
    view = array.gpu_data.view(8, NBYTES)
    assert int(view.device_ctypes_pointer.value) == (1 << 30) + 8
    probe = weakref.ref(array)
    del array
    gc.collect()
    assert probe() is None and block.freed == 0  # the view holds the buffer
    del view
    gc.collect()
    assert block.freed == 1 and (1 << 30) not in _backend._POOLED_POINTERS


@host_tier
def test_the_numba_plugin_allocates_from_the_pool() -> None:
    from numba.cuda.cudadrv import driver

    from smartarray import numba_pool

    assert numba_pool._numba_memory_manager is numba_pool.PooledMemoryManager
    manager = numba_pool.PooledMemoryManager(context=None)
    assert manager.interface_version == 1
    assert isinstance(manager, driver.HostOnlyCUDAMemoryManager)
    fake = FakeResource()
    with _device_pool.memory_resource(fake):
        pointer = manager.memalloc(100)
        assert fake.take() == [("allocate", 100, 0)]
        assert pointer.device_ctypes_pointer.value == 1 << 20
        del pointer
        gc.collect()
        assert fake.take() == [("close", 100, 0)]
    with _device_pool.memory_resource(None), pytest.raises(RuntimeError, match="no device"):
        manager.memalloc(100)
    with pytest.raises(NotImplementedError, match="stream-ordered pool"):
        manager.get_ipc_handle(None)
    previous = driver._memory_manager
    try:
        driver.set_memory_manager(numba_pool.PooledMemoryManager)  # the version is accepted
    finally:
        driver._memory_manager = previous
