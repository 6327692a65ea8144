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
import logging
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from helpers import counts, inc
from numba import cuda

import smartarray as sa
from smartarray._core import backend as _backend
from smartarray._core import device_pool as _device_pool
from smartarray._cuda.arguments import kernel_argument

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
    first = pool.allocate(64, "s1", lasting=True)  # (freed on its stream)
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


def test_a_buffer_goes_back_on_its_stream_only_if_that_stream_lasts() -> None:
    class Stream:  # (a Numba stream: ``external`` says whether it owns its handle)
        def __init__(self, external: bool) -> None:
            self.external = external

    class CoreStream:  # (a cuda.core stream, such as numba-cuda hands kernel arguments)
        pass

    fake = FakeResource()
    pool = _device_pool.DevicePool(fake)
    owned, external, core = Stream(False), Stream(True), CoreStream()
    for stream, freed_on in ((0, 0), (owned, owned), (external, 0), (core, 0)):
        block = pool.allocate(8, stream)
        assert block.stream is stream and block.free_stream is freed_on
        block.free()
        assert fake.take() == [("allocate", 8, stream), ("close", 8, freed_on)]
    block = pool.allocate(8, core, lasting=True)  # (the caller knows: kept by the block)
    assert block.free_stream is core


def test_streams_are_handed_to_the_resource_converted() -> None:
    fake = FakeResource()
    pool = _device_pool.DevicePool(fake, to_stream=lambda stream: ("core", stream))
    pool.allocate(8, 7, lasting=True).free()
    assert fake.take() == [("allocate", 8, ("core", 7)), ("close", 8, ("core", 7))]


def test_the_environment_turns_the_default_pool_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # On by default (see smartarray._core.device_pool.enabled_by_environment).
    cases = (("", True), ("1", True), ("On", True), ("0", False), ("off", False), ("No", False))
    for value, enabled in cases:
        monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, value)
        assert _device_pool.enabled_by_environment() is enabled
    monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, "0")
    # (no pool given, no default pool made yet: the choice still to make)
    monkeypatch.setattr(_device_pool, "_GIVEN", None)
    monkeypatch.setattr(_device_pool, "_DEFAULTS", {})
    monkeypatch.setattr(_device_pool, "_WANTED", None)
    assert _device_pool.active(on_gpu=True) is None  # off: cuda.core never asked
    assert _device_pool._DEFAULTS == {0: None}
    monkeypatch.setenv(_device_pool.ENVIRONMENT_VARIABLE, "1")
    monkeypatch.setattr(_device_pool, "_DEFAULTS", {})
    monkeypatch.setattr(_device_pool, "_WANTED", None)
    asked: list[bool] = []
    # Numba given another memory manager (RMM): SmartArrays allocate through Numba.
    assert _device_pool.active(True, allowed=lambda: asked.append(True) or False) is None
    assert _device_pool.active(True, allowed=lambda: asked.append(True) or True) is None
    # (asked once for all devices: another device gets no pool either)
    assert (
        _device_pool.active(True, allowed=lambda: asked.append(True) or True, device_id=lambda: 1)
        is None
    )
    assert asked == [True] and _device_pool._DEFAULTS == {0: None, 1: None}


def test_each_device_has_its_own_default_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    current = [0]

    class Resource(FakeResource):  # (stands in for CudaCoreResource, on the current device)
        def __init__(self) -> None:
            super().__init__()
            self.device_id = current[0]
            made.append(current[0])

    monkeypatch.setattr(_device_pool, "CudaCoreResource", Resource)
    monkeypatch.setattr(_device_pool, "_GIVEN", None)
    monkeypatch.setattr(_device_pool, "_DEFAULTS", {})
    monkeypatch.setattr(_device_pool, "_WANTED", None)
    monkeypatch.delenv(_device_pool.ENVIRONMENT_VARIABLE, raising=False)
    first = _device_pool.active(True, device_id=lambda: current[0])
    current[0] = 1  # (with numba.cuda.gpus[1]: ...)
    second = _device_pool.active(True, device_id=lambda: current[0])
    current[0] = 0
    assert first is _device_pool.active(True, device_id=lambda: current[0])
    assert first is not None and second is not None and first is not second
    assert made == [0, 1] and second.resource.device_id == 1


class FailingResource(FakeResource):
    """A resource whose allocations fail, after the first ``succeed``, with ``error``, an
    error other than running out of memory."""

    error = "CUDA_ERROR_NOT_SUPPORTED (stand-in)"
    succeed = 0

    def allocate(self, size: int, *, stream: Any) -> FakeBuffer:
        if self.succeed:
            self.succeed -= 1
            return super().allocate(size, stream=stream)
        self.calls.append(("fails", size, stream))
        raise RuntimeError(self.error)


@simulator
def test_the_default_pool_gives_up_on_an_error_and_numba_allocates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_device_pool, "_GIVEN_UP", [])
    fake = FailingResource()
    fake.succeed = 1
    with _device_pool.memory_resource(fake, fallback=True) as pool:
        assert pool is not None
        kept = pool.allocate(NBYTES)  # (a buffer from before the failure)
        with pytest.warns(RuntimeWarning, match="device memory pool failed .*NOT_SUPPORTED"):
            a = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
        info = sa.device_pool_info()  # off from now on
        assert not info["enabled"] and "NOT_SUPPORTED" in info["given_up"]
        b = sa.SmartArray(np.ones(N), where="gpu")
        assert fake.take() == [("allocate", NBYTES, 0), ("fails", NBYTES, 0)]  # asked once
        inc[1, N](a)
        np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1.0)
        np.testing.assert_array_equal(np.asarray(b), np.ones(N))
        kept.free()  # back to the pool it came from, which is still trimmed
        assert sa.device_pool_info()["reserved_bytes"] == NBYTES
        assert sa.release_device_pool() == NBYTES
        assert fake.take() == [("close", NBYTES, 0), ("trim",)]
    # Errors of earlier work (or any other than "not supported") are raised, pool kept.
    _device_pool._GIVEN_UP.clear()
    flaky = FailingResource()
    flaky.error = "CUDA_ERROR_ILLEGAL_ADDRESS (stand-in)"
    with _device_pool.memory_resource(flaky, fallback=True) as pool:
        with pytest.raises(RuntimeError, match="ILLEGAL_ADDRESS"):
            sa.SmartArray(np.ones(N), where="gpu")
        assert sa.device_pool_info()["enabled"] and _device_pool.given_up() == []
    # A resource given (no fallback): its errors raise.
    with (
        _device_pool.memory_resource(FailingResource()),
        pytest.raises(RuntimeError, match="NOT_SUPPORTED"),
    ):
        sa.SmartArray(np.ones(N), where="gpu")


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
    inc[1, 2 * N](a)  # current on the device only (ones): evicting it spills it
    inc[1, N](b)
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
    assert a.location == "host" and b.location == "gpu" and d.location == "both"
    np.testing.assert_array_equal(np.asarray(a), np.ones(2 * N))


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
    assert a.location == "both" and b.location == "both"  # (made filled: current on both)
    assert a._alloc.device is not None  # (not evicted: the trim made room)


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


# --- a buffer goes back to the pool only after the work that used it (simulator tier) -------
#
# The simulator runs everything at once, records no events, and has no default stream to wait
# for; here events are stand-ins that record what waits for them, default-stream work counts
# as it does on a GPU, and the pool's ordering step records what a free waits for, in the
# resource's list of calls, right before the buffer's ``close``.


class FakeEvent:
    """A recorded event: ``log`` gets what waits for it."""

    def __init__(self, stream: Any, log: Callable[[tuple[Any, ...]], None]) -> None:
        self.stream, self.log = stream, log

    def wait(self, stream: Any = 0) -> None:
        self.log(("stream waits", self.stream, stream))

    def synchronize(self) -> None:
        self.log(("host waits", self.stream))

    def query(self) -> bool:
        return False


@pytest.fixture
def ordered(resource: FakeResource, monkeypatch: pytest.MonkeyPatch) -> FakeResource:
    """The stand-in pool, with events and the default stream as on a GPU: waits are recorded
    in the resource's calls (a free's waits right before its ``close``)."""
    log = resource.calls

    def record_event(stream: Any, always: bool = False) -> Any:
        if _backend.is_default_stream(stream) and not always:
            return None
        return FakeEvent(stream, lambda entry: resource.calls.append(entry))

    def wait_event(event: Any, stream: Any = None) -> None:
        if event is not None:
            event.wait(stream) if stream is not None else event.synchronize()

    def wait_for_default_stream(stream: Any) -> None:
        if not _backend.is_default_stream(stream):  # (as on a GPU: other streams only)
            resource.calls.append(("waits for the default stream", stream))

    monkeypatch.setattr(_backend, "record_event", record_event)
    monkeypatch.setattr(_backend, "wait_event", wait_event)
    monkeypatch.setattr(_backend, "wait_for_default_stream", wait_for_default_stream)
    monkeypatch.setattr(_backend, "is_gpu_default_stream", _backend.is_default_stream)
    monkeypatch.setattr(
        _backend, "synchronize_device", lambda: resource.calls.append(("device synchronised",))
    )
    monkeypatch.setattr(_device_pool, "_ORDER_FREE", _backend.wait_before_free)  # (as on a GPU)
    assert log is resource.calls
    return resource


def launch_on(stream: Any, array: sa.SmartArray) -> None:
    """What numba-cuda does with ``array`` in a launch of a writing kernel on ``stream`` (the
    simulator hands launches' streams to no argument)."""
    retr: list[Any] = []
    device = kernel_argument(array, "inout", retr, stream)
    device._ary[...] += 1
    for callback in retr:
        callback()


@simulator
def test_a_dropped_array_goes_back_after_work_on_another_stream(ordered: FakeResource) -> None:
    s1, s2 = cuda.stream(), cuda.stream()
    a = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu", stream=s1)
    launch_on(s2, a)  # ordered after the upload on s1; then the buffer is used on s2
    calls = ordered.take()
    assert calls[0] == ("allocate", NBYTES, s1)
    assert ("stream waits", s1, s2) in calls  # (the launch waits for the upload)
    del a
    gc.collect()
    # The buffer goes back on s1, where it was allocated, after the kernel on s2.
    assert ordered.take() == [("stream waits", s2, s1), ("close", NBYTES, s1)]


@simulator
def test_free_device_gives_back_after_default_stream_work(ordered: FakeResource) -> None:
    s1 = cuda.stream()
    a = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu", stream=s1)
    inc[1, N](a)  # on the default stream: a free on s1 (non-blocking) must wait for it
    ordered.take()
    a.free_device()  # (spilled first: the host waited for the kernel)
    calls = ordered.take()
    assert calls[-2:] == [("waits for the default stream", s1), ("close", NBYTES, s1)]
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1.0)


@simulator
def test_on_the_default_stream_a_free_waits_for_nothing(ordered: FakeResource) -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    for _ in range(3):
        inc[1, N](a)
    del a
    gc.collect()
    assert ordered.take() == [("allocate", NBYTES, 0), ("close", NBYTES, 0)]


@simulator
def test_a_buffer_handed_out_goes_back_after_the_whole_device(ordered: FakeResource) -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
    handle = a.get("gpu")  # the caller may enqueue work on it anywhere
    del a
    gc.collect()
    assert ordered.take() == [("allocate", NBYTES, 0)]  # the caller's array holds it
    del handle
    gc.collect()
    assert ordered.take() == [("device synchronised",), ("close", NBYTES, 0)]
    b = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
    read_only = b.diagonal() if b.ndim > 1 else np.broadcast_to(b, (2, N))
    assert isinstance(read_only, sa.SmartArray) and not read_only.flags.writeable
    handle = read_only.get("gpu")  # (a read-only view's cached device view: read anywhere)
    del b, read_only, handle
    gc.collect()
    assert ordered.take()[-2:] == [("device synchronised",), ("close", NBYTES, 0)]


@simulator
def test_work_on_another_stream_is_ordered_after_a_pooled_allocation(
    ordered: FakeResource,
) -> None:
    s1, s2 = cuda.stream(), cuda.stream()
    a = sa.empty(N, where="gpu", stream=s1)  # allocated on s1, nothing written yet
    assert ordered.take() == [("allocate", NBYTES, s1)]
    launch_on(s2, a)
    assert ordered.take()[0] == ("stream waits", s1, s2)


@simulator
def test_the_ordering_step_waits_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    # smartarray._core.backend's ordering of a pooled free, as it runs on a GPU.
    log: list[tuple[Any, ...]] = []

    class Cuda:
        @staticmethod
        def synchronize() -> None:
            log.append(("device synchronised",))

    monkeypatch.setattr(_backend, "tier", lambda: "gpu")
    monkeypatch.setattr(_backend, "cuda", lambda: Cuda)
    monkeypatch.setattr(_backend, "make_context_current", lambda: log.append(("context",)))
    monkeypatch.setattr(
        _backend, "wait_for_default_stream", lambda stream: log.append(("default", stream))
    )
    fake = FakeResource()
    pool = _device_pool.DevicePool(fake)
    block = pool.allocate(8, "s1", lasting=True)
    assert not block.fenced
    block.last_event = FakeEvent("s2", log.append)
    block.after_default_stream = True
    _backend._order_pooled_free(block)
    assert log == [("context",), ("stream waits", "s2", "s1"), ("default", "s1")]
    log.clear()
    block.synchronize = True  # (the address was handed out): the device covers the rest
    _backend._order_pooled_free(block)
    assert log == [("context",), ("device synchronised",)]
    log.clear()

    class Gone:  # an event whose stream was destroyed since: the device is waited for
        def wait(self, stream: Any) -> None:
            raise RuntimeError("CUDA_ERROR_INVALID_HANDLE (stand-in)")

    block.synchronize, block.last_event = False, Gone()
    _backend._order_pooled_free(block)
    assert log == [("context",), ("device synchronised",)]
    assert _device_pool._ORDER_FREE is _backend._order_pooled_free
    block.free()
    assert fake.take()[-1] == ("close", 8, "s1")


@simulator
def test_a_free_that_fails_leaves_the_buffer_counted_live() -> None:
    class Broken(FakeResource):
        def close(self, buffer: FakeBuffer, stream: Any) -> None:
            raise RuntimeError("CUDA_ERROR_INVALID_CONTEXT (stand-in)")

    class NoScope(FakeResource):
        def device_scope(self) -> Any:
            raise RuntimeError("Cannot switch CUDA-context. (stand-in)")

    for resource, match in ((Broken(), "INVALID_CONTEXT"), (NoScope(), "switch")):
        pool = _device_pool.DevicePool(resource)
        block = pool.allocate(8)
        with pytest.raises(RuntimeError, match=match):
            block.free()
        info = pool.info()
        assert info["frees"] == 0 and info["live_bytes"] == 8
        # Work may still use it: never given back, and kept from freeing itself.
        assert _device_pool._KEPT[-1] is block.buffer
        block.free()  # (once: not tried again)
        assert resource.take() == [("allocate", 8, 0)]


@simulator
def test_a_scratch_copy_goes_back_after_the_work_on_it(ordered: FakeResource) -> None:
    from helpers import numba_add_ufunc, numba_ufunc_support

    s1 = cuda.stream()
    with numba_ufunc_support():
        add = numba_add_ufunc()
        a = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
        ordered.take()
        assert add.reduce(a, stream=s1) == sum(range(N))
    calls = ordered.take()
    assert calls[0] == ("allocate", NBYTES, s1)  # (the scratch copy, on the reduce's stream)
    assert calls[-2:] == [("stream waits", s1, s1), ("close", NBYTES, s1)]


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
def test_a_handed_out_buffer_goes_back_through_numbas_deallocation_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As cuMemFree would: after the device is done, when numba-cuda flushes its queue of
    # device frees, which defer_cleanup() holds back.
    from numba.cuda.cudadrv import devices, driver
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    log: list[str] = []

    class Manager:
        deallocations = driver._PendingDeallocs(capacity=1 << 40)

    class Context:
        memory_manager = Manager()

    class Cuda:
        @staticmethod
        def synchronize() -> None:
            log.append("device synchronised")

    context = Context()
    monkeypatch.setattr(_backend, "tier", lambda: "gpu")
    monkeypatch.setattr(_backend, "cuda", lambda: Cuda)
    monkeypatch.setattr(devices, "get_context", lambda: context)
    # (made when numba-cuda initialises the driver, which this tier never does)
    monkeypatch.setattr(driver, "_logger", logging.getLogger("numba.cuda"), raising=False)
    fake = FakeResource()
    pool = _device_pool.DevicePool(fake)
    queue = Manager.deallocations
    for handed_out in (False, True):
        block = pool.allocate(NBYTES, 0)
        array = DeviceNDArray((N,), (8,), F8, gpu_data=_backend.pooled_pointer(block))
        if handed_out:
            block.synchronize = True
        with queue.disable():  # (defer_cleanup)
            del array
            gc.collect()
            queue.clear()
            if not handed_out:
                assert fake.take() == [("allocate", NBYTES, 0), ("close", NBYTES, 0)]
                assert len(queue) == 0 and log == []
                continue
            assert fake.take() == [("allocate", NBYTES, 0)] and len(queue) == 1
        queue.clear()
        assert log == ["device synchronised"]
        assert fake.take() == [("close", NBYTES, 0)]


@host_tier
def test_the_free_waits_for_the_last_work_however_its_array_dies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The block learns the last device work as it is recorded, not when its array dies: in
    # a reference cycle the collector runs the pointer's finalizer (the free) first.
    from smartarray._core.coherence import Allocation, State

    events: list[str] = []
    waited: list[Any] = []
    monkeypatch.setattr(
        _backend, "record_event", lambda stream, always=False: events.append(stream) or stream
    )
    monkeypatch.setattr(_device_pool, "_ORDER_FREE", lambda block: waited.append(block.last_event))
    fake = FakeResource()
    pool = _device_pool.DevicePool(fake)
    block = pool.allocate(NBYTES, "s1", lasting=True)
    device = _backend._pooled_array(block, (N,), F8, "C")
    alloc = Allocation(
        (N,), F8, "C", host=None, device=device, state=State.DEVICE, host_memory="pageable"
    )
    assert alloc._block is block
    alloc._note_device_work("s2")  # a kernel on s2 used it last
    assert block.last_event == "s2"

    class Holder:
        pass

    holder = Holder()
    holder.alloc, holder.me = alloc, holder  # type: ignore[attr-defined]
    del alloc, device, holder
    gc.collect()
    assert waited == ["s2"] and fake.take()[-1] == ("close", NBYTES, "s1")


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
