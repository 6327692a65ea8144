"""The device memory budget: limit, eviction (clean copies dropped, dirty ones spilled), pins.

Simulator tier (the same code enforces the limit on a GPU): exact ledger counts.
"""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from helpers import inc, numba_add_ufunc, numba_ufunc_support, run_in_threads
from numba import cuda

import smartarray as sa
from smartarray._core import backend as _backend
from smartarray._core import memory as _memory
from smartarray._core.coherence import Allocation

pytestmark = [pytest.mark.device, pytest.mark.usefixtures("empty_budget")]

N = 8
NBYTES = N * 8


@cuda.jit
def add3(a, b, c):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1
        b[i] += 1
        c[i] += 1


@cuda.jit
def copy_kernel(dst, src):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]




def counts(t: sa.TransferStats) -> tuple[int, int, int]:
    return t.h2d_count, t.d2h_count, t.spill_count


def arrays(count: int, prefix: str = "a") -> list[sa.SmartArray]:
    return [
        sa.SmartArray(np.arange(N, dtype=np.float64) + 100 * k, label=f"{prefix}{k}")
        for k in range(count)
    ]


def limit_slots(slots: float) -> int:
    """Set the limit to ``slots`` arrays' worth above what other tests left charged."""
    limit = sa.device_memory_usage() + int(slots * NBYTES)
    sa.set_device_memory_limit(limit)
    _memory._peak_usage(reset=True)
    return limit


def test_six_arrays_round_robin_under_a_limit_of_three() -> None:
    xs = arrays(6)
    limit = limit_slots(3)
    rounds = 3
    with sa.track_transfers() as t:
        for _ in range(rounds):
            for x in xs:
                inc[1, N](x)
                assert sa.device_memory_usage() <= limit
    # Cyclic use of 6 arrays with room for 3: each launch uploads its array and (from the
    # fourth on) spills the least recently used one, which is dirty.
    assert counts(t) == (6 * rounds, 6 * rounds - 3, 6 * rounds - 3)
    assert t.spill_bytes == (6 * rounds - 3) * NBYTES and t.d2h_bytes == t.spill_bytes
    assert [r.array for r in t.records if r.spill][:4] == ["a0", "a1", "a2", "a3"]
    assert _memory._peak_usage() <= limit
    assert [x.location for x in xs] == ["host"] * 3 + ["gpu"] * 3
    with sa.track_transfers() as t:
        for k, x in enumerate(xs):
            np.testing.assert_array_equal(np.asarray(x), np.arange(N) + 100 * k + rounds)
    assert counts(t) == (0, 3, 0)  # only the three still on the device are downloaded


def test_clean_copies_go_first_at_no_cost() -> None:
    clean, dirty = arrays(2)
    limit_slots(2)
    inc[1, N](dirty)  # least recently used, but dirty (only the device copy is current)
    clean.to_gpu()  # more recently used, clean (both copies current)
    with sa.track_transfers() as t:
        new = sa.empty(N, where="gpu")
    assert counts(t) == (0, 0, 0)
    assert clean.location == "host" and clean._alloc.device is None
    # (new: made on the device, undefined bytes, current on both sides with no host buffer)
    assert dirty.location == "gpu" and new.location == "both" and new._alloc.device is not None
    np.testing.assert_array_equal(np.asarray(clean), np.arange(N))


def test_a_device_copy_made_stale_by_a_host_write_is_dropped_at_no_cost() -> None:
    (a, b) = arrays(2)
    limit_slots(1)
    inc[1, N](a)
    a[:] = -1.0  # the whole device copy is stale now: dropping it loses nothing
    with sa.track_transfers() as t:
        inc[1, N](b)
    assert counts(t) == (1, 0, 0)
    assert a._alloc.device is None and a.location == "host"
    assert a[0] == -1.0 and a[1] == -1.0


def test_a_device_copy_partly_stale_after_a_host_write_spills_only_the_rest() -> None:
    (a, b) = arrays(2)
    limit_slots(1)
    inc[1, N](a)
    a[0] = -1.0  # only element 0's device copy is stale (issue 21): the rest is dirty
    with sa.track_transfers() as t:
        inc[1, N](b)
    # a's spill downloads the bytes current only on the device (elements 1..7), then b goes up
    assert [(r.direction, r.offset, r.nbytes, r.spill) for r in t.records] == [
        ("d2h", 8, NBYTES - 8, True),
        ("h2d", 0, NBYTES, False),
    ]
    assert a._alloc.device is None and a.location == "host"
    assert a[0] == -1.0 and a[1] == 2.0


def test_launch_whose_arguments_alone_exceed_the_limit() -> None:
    a, b, c = arrays(3)
    b.to_gpu()  # both copies current
    limit = limit_slots(1)  # room for b and one more
    with sa.track_transfers() as t, pytest.raises(MemoryError) as error:
        add3[1, N](a, b, c)  # a fits, b is there, c cannot fit: a and b are in the launch
    message = str(error.value)
    assert f"cannot allocate {NBYTES} bytes of device memory for a2" in message
    assert f"the smartarray device memory limit is {limit} bytes" in message
    assert f"SmartArrays hold {limit} bytes of device memory" in message
    assert "in use by this operation: a0 (64 bytes), a1 (64 bytes)" in message
    assert "set_device_memory_limit" in message and "free_device" in message
    # Nothing lost, and every argument's flags are back as they were (a was uploaded).
    assert counts(t) == (1, 0, 0)
    assert [x.location for x in (a, b, c)] == ["host", "both", "host"]
    assert sa.device_memory_usage() <= limit
    for k, x in enumerate((a, b, c)):
        np.testing.assert_array_equal(np.asarray(x), np.arange(N) + 100 * k)
    sa.set_device_memory_limit(limit + NBYTES)
    with sa.track_transfers() as t:
        add3[1, N](a, b, c)
    assert counts(t) == (2, 0, 0)  # a again (its device copy was stale) and c
    for k, x in enumerate((a, b, c)):
        np.testing.assert_array_equal(np.asarray(x), np.arange(N) + 100 * k + 1)


def test_a_request_larger_than_the_limit_evicts_nothing() -> None:
    (a,) = arrays(1)
    inc[1, N](a)
    limit = limit_slots(1.5)
    big = sa.SmartArray(np.zeros(limit // 8 + 1), label="big")
    with sa.track_transfers() as t, pytest.raises(MemoryError, match="for big"):
        inc[1, N](big)
    assert counts(t) == (0, 0, 0) and a.location == "gpu" and big.location == "host"
    assert sa.device_memory_usage() <= limit


def test_spilled_array_reads_on_the_host_free_and_uploads_once() -> None:
    a, b = arrays(2)
    limit_slots(1)
    inc[1, N](a)
    with sa.track_transfers() as t:
        inc[1, N](b)  # spills a
    assert counts(t) == (1, 1, 1) and t.records[0].spill and t.records[0].array == "a0"
    assert a.location == "host"
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)
    assert counts(t) == (0, 0, 0)
    with sa.track_transfers() as t:
        inc[1, N](a)  # uploads a once (and spills b)
    assert counts(t) == (1, 1, 1) and t.records[0].array == "a1"
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 2)


def test_free_device_and_array_death_lower_the_usage() -> None:
    base = sa.device_memory_usage()
    a, b = arrays(2)
    inc[1, N](a)
    inc[1, N](a[2:6])  # a cached device view: no new memory
    inc[1, N](b[::2])
    assert sa.device_memory_usage() == base + 2 * NBYTES
    a.free_device()
    assert sa.device_memory_usage() == base + NBYTES
    view = b[1:3]
    del b
    gc.collect()
    assert sa.device_memory_usage() == base + NBYTES  # the view keeps the memory alive
    del view
    gc.collect()
    assert sa.device_memory_usage() == base
    c = sa.zeros(N, where="gpu")
    assert sa.device_memory_usage() == base + NBYTES
    d = c.copy()  # a device-side copy: new device memory, charged
    assert d.location == "gpu" and sa.device_memory_usage() == base + 2 * NBYTES
    del c, d
    gc.collect()
    assert sa.device_memory_usage() == base


def test_the_registry_never_keeps_arrays_alive() -> None:
    (a,) = arrays(1)
    inc[1, N](a)
    ref = weakref.ref(a._alloc)
    del a
    gc.collect()
    assert ref() is None


def test_adopted_device_arrays_are_the_callers_memory() -> None:
    base = sa.device_memory_usage()
    device = cuda.to_device(np.arange(N, dtype=np.float64))
    adopted = sa.SmartArray(device, copy=False)
    assert sa.device_memory_usage() == base  # not allocated by smartarray, never evicted
    limit_slots(0)
    with sa.track_transfers() as t:
        inc[1, N](adopted)  # needs no allocation
    assert counts(t) == (0, 0, 0) and adopted.location == "gpu"
    with pytest.raises(MemoryError):
        sa.SmartArray(device, copy=True)  # a copy is smartarray's memory: within the limit
    sa.set_device_memory_limit(None)
    copied = sa.SmartArray(device, copy=True)
    assert copied.location == "gpu" and sa.device_memory_usage() == base + NBYTES


def test_exported_device_buffers_are_never_evicted() -> None:
    a, b = arrays(2)
    inc[1, N](a)
    a._alloc.device_exported()  # what __cuda_array_interface__ does (real GPU only)
    limit_slots(0.5)
    with sa.track_transfers() as t, pytest.raises(MemoryError) as error:
        inc[1, N](b)
    assert "exported through __cuda_array_interface__: a0 (64 bytes)" in str(error.value)
    assert counts(t) == (0, 0, 0) and a.location == "gpu"
    a.free_device()  # downloads, but the exported buffer stays (and stays charged)
    assert a._alloc._exported_device is not None
    with pytest.raises(MemoryError, match="exported"):
        inc[1, N](b)


def test_busy_copies_are_evicted_after_idle_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    busy, idle, new = arrays(3)
    limit_slots(2)
    inc[1, N](busy)  # least recently used
    inc[1, N](idle)
    busy_alloc = busy._alloc
    monkeypatch.setattr(type(busy_alloc), "device_busy", lambda self: self is busy_alloc)
    with sa.track_transfers() as t:
        inc[1, N](new)
    assert [r.array for r in t.records if r.spill] == ["a1"]
    assert busy.location == "gpu" and idle.location == "host"


def test_the_array_being_copied_is_not_evicted_for_its_copy() -> None:
    a, other = arrays(2)
    inc[1, N](a)  # least recently used
    inc[1, N](other)
    limit_slots(0)
    with sa.track_transfers() as t:
        b = a.copy()  # a device-side copy of a
    assert counts(t) == (0, 1, 1) and t.records[0].array == "a1"
    assert a.location == "gpu" and b.location == "gpu" and other.location == "host"
    np.testing.assert_array_equal(np.asarray(b), np.arange(N) + 1)
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)


def test_an_allocation_pinned_after_the_candidates_were_listed_is_not_evicted() -> None:
    # An eviction lists its candidates, then takes each one's lock; a launch in another
    # thread may pin one in between (under that lock): the eviction must see the pin.
    (a,) = arrays(1)
    inc[1, N](a)  # device-only: a spill would download it
    candidates = _memory._candidates(())
    assert any(c is a._alloc for c in candidates)
    pins = _memory.LaunchPins()
    with a._alloc.lock:
        pins.add(a._alloc)
    with sa.track_transfers() as t:
        assert _memory._evict(candidates, NBYTES) == (0, False)
    assert counts(t) == (0, 0, 0) and a.location == "gpu"
    pins()  # the launch was enqueued
    with sa.track_transfers() as t:
        assert _memory._evict(candidates, NBYTES) == (NBYTES, False)
    assert counts(t) == (0, 1, 1) and a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)


def test_same_array_twice_in_a_launch_under_a_limit() -> None:
    a, b = arrays(2)
    limit_slots(1)
    inc[1, N](b)
    with sa.track_transfers() as t:
        copy_kernel[1, N](a[:4], a[4:])
    # b spilled; each view of a uploads its own half (issue 21): a's bytes go up once
    assert [(r.direction, r.offset, r.nbytes, r.spill) for r in t.records] == [
        ("d2h", 0, NBYTES, True),
        ("h2d", 0, NBYTES // 2, False),
        ("h2d", NBYTES // 2, NBYTES // 2, False),
    ]
    np.testing.assert_array_equal(np.asarray(a), [4, 5, 6, 7, 4, 5, 6, 7])


def test_spills_inside_no_transfers_are_refused() -> None:
    dirty, clean, c = arrays(3)
    limit_slots(2)
    inc[1, N](dirty)
    clean.to_gpu()
    with sa.no_transfers():
        kept = sa.zeros(N, where="gpu")  # the clean copy goes: no copy needed
        inc[1, N](kept)  # (made current on both sides: a kernel makes it dirty)
        with pytest.raises(MemoryError):
            sa.empty(N, where="gpu")  # only a spill would make room
    assert dirty.location == "gpu" and kept.location == "gpu" and clean.location == "host"
    np.testing.assert_array_equal(np.asarray(dirty), np.arange(N) + 1)
    np.testing.assert_array_equal(np.asarray(kept), np.ones(N))
    del c


def test_lowering_the_limit_evicts_at_once() -> None:
    a, b = arrays(2)
    inc[1, N](a)
    b.to_gpu()
    base = sa.device_memory_usage() - 2 * NBYTES
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(base + NBYTES)  # the clean copy b goes
    assert counts(t) == (0, 0, 0) and b.location == "host" and a.location == "gpu"
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(base)
    assert counts(t) == (0, 1, 1) and a.location == "host"
    assert sa.device_memory_limit() == base


def test_results_of_cuda_ufuncs_are_charged() -> None:
    add = numba_add_ufunc()
    x, y, old = arrays(3)
    inc[1, N](old)
    limit = limit_slots(2)
    _memory._peak_usage(reset=True)
    with numba_ufunc_support(), sa.track_transfers() as t:
        z = add(x, y)  # x and y fill the budget; smartarray allocates the result within it
    # The inputs are pinned for the call: the least recently used other copy (old, only on
    # the device) is spilled to make room, and the limit is never exceeded.
    assert counts(t) == (2, 1, 1) and t.records[-1].array == old.label
    assert z.location == "gpu" and x.location == "both" and old.location == "host"
    assert sa.device_memory_usage() == limit and _memory._peak_usage() <= limit
    np.testing.assert_array_equal(np.asarray(z), 2 * np.arange(N) + 100)
    _memory._peak_usage(reset=True)
    with numba_ufunc_support():
        total = add.reduce(x)  # a scratch copy, counted while the reduction runs
    assert total == np.arange(N).sum()
    assert _memory._peak_usage() <= limit and sa.device_memory_usage() <= limit


def test_cuda_ufunc_arguments_exceeding_the_limit() -> None:
    add = numba_add_ufunc()
    x, y, out = arrays(3)
    limit_slots(2)
    with numba_ufunc_support(), pytest.raises(MemoryError, match="for a2"):
        add(x, y, out=out)
    assert [v.location for v in (x, y, out)] == ["host"] * 3
    np.testing.assert_array_equal(np.asarray(out), np.arange(N) + 200)


def _device_with_room_for(slots: int, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Make the simulated device run out of memory beyond ``slots`` live arrays of N."""
    real = _backend.cuda().device_array
    live: list[weakref.ref[object]] = []

    def device_array(shape, dtype, order="C"):  # type: ignore[no-untyped-def]
        live[:] = [r for r in live if r() is not None]
        if len(live) >= slots:
            raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY (simulated)")
        array = real(shape, dtype=dtype, order=order)
        live.append(weakref.ref(array))
        return array

    monkeypatch.setattr(_backend.cuda(), "device_array", device_array)
    return live  # type: ignore[return-value]


def test_real_out_of_memory_without_a_limit_evicts_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    xs = arrays(6)
    _device_with_room_for(3, monkeypatch)
    with sa.track_transfers() as t:
        for _ in range(2):
            for x in xs:
                inc[1, N](x)
    assert counts(t) == (12, 9, 9)
    for k, x in enumerate(xs):
        np.testing.assert_array_equal(np.asarray(x), np.arange(N) + 100 * k + 2)


def test_out_of_memory_with_nothing_to_evict_names_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = arrays(2)
    _device_with_room_for(1, monkeypatch)
    with pytest.raises(MemoryError) as error:
        add3[1, N](a, b, a)
    message = str(error.value)
    assert "out of device memory allocating 64 bytes for a1" in message
    assert "no smartarray device memory limit is set" in message
    assert "in use by this operation: a0 (64 bytes)" in message
    assert a.location == "host" and b.location == "host"


def test_threads_holding_each_others_victims_do_not_deadlock() -> None:
    x, y, z, w = arrays(4)
    x.to_gpu()
    y.to_gpu()
    limit_slots(0)  # x and y fill the budget
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def hold_and_allocate(held: sa.SmartArray, wanted: sa.SmartArray) -> None:
        with held._alloc.lock:
            barrier.wait()
            try:
                wanted.to_gpu()  # needs the other thread's array evicted
                outcomes.append("fitted")
            except MemoryError:
                outcomes.append("no room")
            barrier.wait()

    threads = [
        threading.Thread(target=hold_and_allocate, args=(x, z)),
        threading.Thread(target=hold_and_allocate, args=(y, w)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
    assert outcomes == ["no room", "no room"]
    assert x.location == "both" and y.location == "both"
    z.to_gpu()  # nothing held now: x, the least recently used, goes
    assert x.location == "host" and z.location == "both"


def test_threads_sharing_a_small_budget() -> None:
    xs = arrays(6)
    limit = limit_slots(3)

    def worker(k: int) -> None:
        mine = xs[2 * k : 2 * k + 2]
        for step in range(20):
            for x in mine:
                x.to_gpu()  # device use: may evict the other threads' arrays
                x += 1  # host write: the device copy goes stale
                assert sa.device_memory_usage() <= limit
            assert step >= 0

    run_in_threads(worker, 3)
    for k, x in enumerate(xs):
        np.testing.assert_array_equal(np.asarray(x), np.arange(N) + 100 * k + 20)
    assert _memory._peak_usage() <= limit


def test_a_new_device_copy_cannot_be_evicted_before_it_holds_its_data() -> None:
    from smartarray._core.coherence import Allocation

    source = cuda.to_device(np.arange(N, dtype=np.float64))

    def write(new: object) -> None:
        _backend.copy_d2d(source, new)
        other = threading.Thread(target=sa.set_device_memory_limit, args=(0,))
        other.start()  # another thread evicts everything it can, now
        other.join()

    alloc = Allocation.on_device((N,), np.dtype(np.float64), "C", host_memory="pageable",
                                 write=write)  # fmt: skip
    assert alloc.device is not None and alloc.state.value == "gpu"
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)  # now it can go: spilled with its data
    assert counts(t) == (0, 1, 1) and alloc.device is None
    np.testing.assert_array_equal(alloc.host, np.arange(N))


def test_a_launch_failing_while_its_arguments_are_prepared_restores_their_flags() -> None:
    a, b, c = arrays(3)
    a.to_gpu()  # both copies current
    # A view the device cannot represent, refused while the launch's arguments are prepared
    # (a read-only argument would be refused earlier on a GPU: when the kernel is compiled).
    backwards = c[::-1]
    with sa.track_transfers() as t, pytest.raises(ValueError, match="negative strides"):
        add3[1, N](a, backwards, b)  # a is prepared (device copy about to be written) first
    assert counts(t) == (0, 0, 0)
    assert a.location == "both" and b.location == "host"  # as before the launch
    assert c.location == "host"
    assert not _memory._BUDGET.launches  # nothing stays pinned


@pytest.fixture
def evict_when_unpinned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's eviction, run the moment a launch's pins are released: the first
    moment another thread can evict the launch's arguments (it needs no lock of ours)."""
    release = _memory.LaunchPins.__call__

    def release_then_evict(self: _memory.LaunchPins) -> None:
        release(self)
        _memory._evict_down_to(0, keep=())

    monkeypatch.setattr(_memory.LaunchPins, "__call__", release_then_evict)


@pytest.mark.usefixtures("evict_when_unpinned")
@pytest.mark.parametrize("how", ["kernel-Out", "cuda-ufunc-out"])
def test_a_written_output_is_not_evicted_between_its_launch_and_its_flags(how: str) -> None:
    # An output overwritten whole from the HOST state is written on the device without an
    # upload; until the launch marks it DEVICE its device copy looks stale (clean to drop).
    # Once unpinned it must already be marked written, or an eviction then drops the only
    # copy of the kernel's results (and the array is left DEVICE with no device buffer).
    x = sa.SmartArray(np.arange(N, dtype=np.float64), label="x")
    out = sa.SmartArray(np.full(N, -1.0), label="out")
    with sa.track_transfers() as t:
        if how == "kernel-Out":
            copy_kernel[1, N](sa.Out(out), sa.In(x))
        else:
            with numba_ufunc_support():
                sa.cuda_ufunc(numba_add_ufunc())(x, x, out=out)
    expected = np.arange(N) * (1 if how == "kernel-Out" else 2)
    assert out.location == "host"  # spilled by the eviction, not dropped
    np.testing.assert_array_equal(np.asarray(out), expected)
    assert counts(t) == (1, 1, 1)  # x uploaded (then dropped: clean); out spilled


def test_a_device_copy_on_a_stream_is_recorded_before_it_can_be_evicted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SmartArray(device_array) copies on the device on ``stream``. Until that copy's event is
    # recorded, a spill (on the default stream) would not wait for it and would download
    # half-copied data; the event must be recorded before the new copy's lock is released,
    # when another thread's eviction could spill it. (Stand-in events: the simulator's copies
    # are synchronous and record none.)
    log: list[str] = []

    class CopyEvent:
        def query(self) -> bool:
            return "copy done" in log

        def synchronize(self) -> None:
            log.append("copy done")

        def wait(self, stream: object) -> None:
            log.append("copy done")

    def record(stream: object, always: bool = False) -> object:
        return None if _backend.is_default_stream(stream) else CopyEvent()

    real_copy_d2h = _backend.copy_d2h

    def copy_d2h(device: object, host: np.ndarray, stream: object) -> None:
        log.append("download")
        real_copy_d2h(device, host, stream)

    written = Allocation.device_written

    def evict_first(self: Allocation, stream: object = None) -> None:
        _memory._evict_down_to(0, keep=())  # another thread, once the lock is free
        written(self, stream)

    monkeypatch.setattr(_backend, "record_event", record)
    monkeypatch.setattr(_backend, "copy_d2h", copy_d2h)
    monkeypatch.setattr(Allocation, "device_written", evict_first)
    source = cuda.to_device(np.arange(N, dtype=np.float64))
    a = sa.SmartArray(source, stream=cuda.stream())
    _memory._evict_down_to(0, keep=())
    assert log[:2] == ["copy done", "download"]
    assert a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(N))
