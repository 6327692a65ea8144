"""The pool of page-locked host buffers: reuse by size class, cap, release, no sharing.

The pool's bookkeeping is tested on a pool over ordinary memory (every tier) and, through
SmartArrays with ``host_memory='pinned'``, in the simulator (where pinned memory is ordinary
memory too); on a GPU the same code serves ``numba.cuda.pinned_array`` buffers.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import smartarray as sa
from smartarray._core import pinned_pool as _pinned_pool
from smartarray._core.pinned_pool import PinnedPool, size_class

F8 = np.dtype(np.float64)


class CountingAllocator:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, nbytes: int) -> np.ndarray:
        self.calls.append(nbytes)
        return np.full(nbytes, 0xAB, dtype=np.uint8)  # not zero: reuse must not assume zeros


@pytest.fixture
def pool() -> tuple[PinnedPool, CountingAllocator]:
    allocate = CountingAllocator()
    return PinnedPool(allocate, limit=1 << 20), allocate


def address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


def test_size_classes_waste_at_most_a_quarter() -> None:
    assert [size_class(n) for n in (0, 1, 4096)] == [4096] * 3
    assert [size_class(n) for n in (4097, 5120, 5121, 8192, 8193)] == [
        5120,
        5120,
        6144,
        8192,
        10240,
    ]
    for n in np.random.default_rng(0).integers(4097, 1 << 30, 200):
        assert n <= size_class(int(n)) <= 1.25 * n


def test_a_dead_arrays_buffer_is_reused(pool: tuple[PinnedPool, CountingAllocator]) -> None:
    p, allocate = pool
    a = p.empty((100,), F8, "C")
    first = address(a)
    del a
    b = p.empty((90, 1), F8, "F")  # another shape in the same size class
    assert address(b) == first and allocate.calls == [size_class(800)]
    assert (p.hits, p.misses) == (1, 1)
    assert b.shape == (90, 1) and b.flags.f_contiguous and b.dtype == F8


def test_a_live_buffer_is_never_shared(pool: tuple[PinnedPool, CountingAllocator]) -> None:
    p, _ = pool
    a = p.empty((100,), F8, "C")
    view = a[10:20].reshape(2, 5).T  # keeps the buffer alive after a is gone
    first = address(a)
    del a
    gc.collect()
    b = p.empty((100,), F8, "C")
    assert address(b) != first and p.idle_bytes == 0
    assert not np.shares_memory(b, view)
    del view
    c = p.empty((100,), F8, "C")
    assert address(c) == first


def test_idle_buffers_are_capped_and_released(pool: tuple[PinnedPool, CountingAllocator]) -> None:
    p, allocate = pool
    p.set_limit(3 * 8192)
    arrays = [p.empty((1024,), F8, "C") for _ in range(5)]  # 8 KiB each
    del arrays
    assert p.idle_bytes == 3 * 8192  # two were released, three kept
    assert sum(len(b) for b in p._idle.values()) == 3
    p.set_limit(8192)  # lowering the cap releases the excess at once
    assert p.idle_bytes == 8192
    assert p.release() == 8192 and p.idle_bytes == 0
    p.empty((1024,), F8, "C")
    assert len(allocate.calls) == 6  # nothing left to reuse


def test_a_zero_limit_disables_the_pool(pool: tuple[PinnedPool, CountingAllocator]) -> None:
    p, allocate = pool
    p.set_limit(0)
    for _ in range(3):
        p.empty((10,), F8, "C")
    assert len(allocate.calls) == 3 and p.idle_bytes == 0


def test_public_pool_limit_is_checked() -> None:
    for bad, error in [(-1, ValueError), (1.5, TypeError), ("1GB", TypeError)]:
        with pytest.raises(error):
            sa.set_pinned_pool_limit(bad)  # type: ignore[arg-type]
    assert sa.pinned_pool_info()["limit"] == _pinned_pool.DEFAULT_LIMIT


@pytest.fixture
def fresh_global_pool() -> Iterator[None]:
    sa.release_pinned_pool()
    yield
    sa.set_pinned_pool_limit(_pinned_pool.DEFAULT_LIMIT)
    sa.release_pinned_pool()


@pytest.mark.device
@pytest.mark.usefixtures("fresh_global_pool")
def test_smartarrays_reuse_pinned_buffers() -> None:
    before = sa.pinned_pool_info()
    a = sa.SmartArray(np.arange(1000.0), host_memory="pinned")
    first = address(a._alloc.host)
    del a
    gc.collect()
    assert sa.pinned_pool_info()["idle_bytes"] == size_class(8000)
    # Arrays made with no data take their host buffer where the host first uses it (here
    # np.asarray): it reuses the pooled buffer, which holds the old data.
    b = sa.full(1000, 7.0, host_memory="pinned")
    assert b._alloc.host is None
    np.testing.assert_array_equal(np.asarray(b), np.full(1000, 7.0))
    assert address(b._alloc.host) == first
    del b
    z = sa.zeros(1000, host_memory="pinned")  # zeros are written, not assumed
    np.testing.assert_array_equal(np.asarray(z), np.zeros(1000))
    assert address(z._alloc.host) == first
    info = sa.pinned_pool_info()
    assert info["hits"] - before["hits"] == 2 and info["misses"] - before["misses"] == 1
    assert info["idle_bytes"] == 0
    del z
    gc.collect()
    assert sa.release_pinned_pool() == size_class(8000)
    assert sa.pinned_pool_info()["idle_bytes"] == 0


@pytest.mark.device
@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("view", ["whole", "transposed", "strided", "mixed3d"])
def test_copies_keep_the_host_memory_kind(order: str, view: str) -> None:
    import copy

    x = np.arange(24.0).reshape(2, 3, 4)
    a = sa.SmartArray(x, host_memory="pinned")
    pick: dict[str, Any] = {
        "whole": lambda v: v,
        "transposed": lambda v: v.T,
        "strided": lambda v: v[:, ::2],
        "mixed3d": lambda v: v.transpose(1, 0, 2),  # order='K' keeps this axis order
    }
    source, expected = pick[view](a), pick[view](x).copy(order=order)
    with sa.track_transfers() as t:
        copied = source.copy(order=order)
    assert t.count == 0
    np.testing.assert_array_equal(np.asarray(copied), expected)
    assert copied.strides == expected.strides
    mixed = view == "mixed3d" and order == "K"  # a layout only order='K' makes: pageable
    assert copied.host_memory == ("pageable" if mixed else "pinned")
    assert copy.copy(a).host_memory == copy.deepcopy(a).host_memory == "pinned"
    assert copied.label != a.label and not np.shares_memory(np.asarray(copied), np.asarray(a))
    assert sa.SmartArray(x).copy().host_memory == sa.SmartArray(x).host_memory


@pytest.mark.device
@pytest.mark.usefixtures("fresh_global_pool")
def test_a_host_view_handed_out_keeps_its_pinned_buffer() -> None:
    a = sa.SmartArray(np.arange(1000.0), host_memory="pinned")
    host = a.get("host")
    first = address(host)
    del a
    gc.collect()
    b = sa.empty(1000, host_memory="pinned")
    b.get("host")  # (its host buffer is made where first used)
    assert address(b._alloc.host) != first  # the caller still uses the first buffer
    np.testing.assert_array_equal(host, np.arange(1000.0))


@pytest.mark.device
@pytest.mark.usefixtures("fresh_global_pool")
def test_device_born_arrays_take_their_host_buffer_from_the_pool() -> None:
    sa.set_pinned_pool_limit(0)
    a = sa.SmartArray(np.arange(16.0), host_memory="pinned", where="gpu")
    a.free_device()
    assert a.host_memory == "pinned"
    np.testing.assert_array_equal(np.asarray(a), np.arange(16.0))
    del a
    gc.collect()
    assert sa.pinned_pool_info()["idle_bytes"] == 0  # the cap of 0 keeps nothing


class PendingCopy:
    """A stand-in CUDA event of an asynchronous copy that finishes only when waited for."""

    def __init__(self, log: list[str]) -> None:
        self.done = False
        self.log = log

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.log.append("copy finished")
        self.done = True

    def wait(self, stream: object) -> None:
        pass


def test_a_buffer_is_not_reused_while_an_async_copy_uses_it(
    pool: tuple[PinnedPool, CountingAllocator],
) -> None:
    p, allocate = pool
    log: list[str] = []
    a = p.empty((100,), F8, "C")
    first = address(a)
    copy = PendingCopy(log)
    _pinned_pool.fence(a[10:], copy)  # (a view: the fence reaches the buffer's owner)
    del a
    gc.collect()
    b = p.empty((100,), F8, "C")
    assert address(b) == first and len(allocate.calls) == 1  # reused, but only ...
    assert copy.done and log == ["copy finished"]  # ... once the copy into it was done
    c = p.empty((100,), F8, "C")
    _pinned_pool.fence(c, PendingCopy(log))
    del b, c
    gc.collect()
    p.release()  # a released buffer is not freed under a copy either
    assert log == ["copy finished"] * 2
    _pinned_pool.fence(np.zeros(4), PendingCopy(log))  # memory not from a pool: ignored


@pytest.mark.device
@pytest.mark.usefixtures("fresh_global_pool")
@pytest.mark.parametrize("direction", ["upload", "download"])
def test_a_dead_arrays_pinned_buffer_waits_for_its_async_copy(
    monkeypatch: pytest.MonkeyPatch, direction: str
) -> None:
    # The simulator's copies are synchronous and record no events: stand-in events show
    # that an array dying with a copy in flight on a stream (a temporary kernel argument
    # uploaded on a stream, or ``a.to_host(stream)`` then ``del a``) does not hand its
    # buffer to a new array before that copy is done (the late copy would overwrite the new
    # array's data, or upload it in place of the old one).
    from numba import cuda

    from smartarray._core import backend as _backend

    log: list[str] = []
    real_record = _backend.record_event

    def record(stream: object, always: bool = False) -> object:
        if _backend.is_default_stream(stream):
            return real_record(stream, always)
        log.append("copy enqueued")
        return PendingCopy(log)

    monkeypatch.setattr(_backend, "record_event", record)
    stream = cuda.stream()
    if direction == "upload":
        a = sa.SmartArray(np.arange(1000.0), host_memory="pinned")
        a.to_gpu(stream)
    else:
        a = sa.SmartArray(np.arange(1000.0), host_memory="pinned", where="gpu")
        a.get("gpu")
        a.mark_changed("gpu")
        a.to_host(stream)
    first = address(a._alloc.host)
    assert log == ["copy enqueued"]
    del a
    gc.collect()
    b = sa.full(1000, 7.0, host_memory="pinned")
    assert log == ["copy enqueued"]  # no host buffer yet: it is made where first used
    np.testing.assert_array_equal(np.asarray(b), np.full(1000, 7.0))
    assert address(b._alloc.host) == first
    assert log == ["copy enqueued", "copy finished"]
