"""Adversarial checks of the watch on writes through ``np.asarray(a)`` (host exports).

Each test tries to make smartarray use a stale device copy, or count a wrong transfer, after a
write through an exported ndarray view: a launch whose preparation fails after the array was
passed twice, adopting an export, kernel arguments that alias an export, ledger counts of
writes the watch must find. Exact ledger counts everywhere.
"""

from __future__ import annotations

import ctypes
import gc
import weakref
from typing import Any

import numpy as np
import pytest
from helpers import (
    counts,
    inc,
    numba_add_ufunc,
    numba_double_and_triple_rows_gufunc,
    numba_ufunc_support,
)
from numba import cuda, njit

import smartarray as sa
from smartarray._core import coherence as _coherence
from smartarray._core import memory as _memory

N = 4
device = pytest.mark.device



@cuda.jit
def set_second(x, y):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0
        y[i] = 100.0 + i


# --- a launch that fails while being prepared, after the array was passed twice ------------


@device
def test_a_failed_launch_keeps_watching_a_kept_export() -> None:
    x = sa.SmartArray(np.zeros(N))
    x.get("gpu")  # both copies current
    kept = np.asarray(x)
    pinned = len(_memory._BUDGET.launches)
    with sa.track_transfers() as t, pytest.raises(ValueError, match="negative strides"):
        # x, then a view of x the device cannot represent: its preparation looks at x's
        # provisional state (HOST until the launch is enqueued), then the launch is abandoned
        set_second[1, N](x, x[::-1])
    assert counts(t) == (0, 0) and x.location == "both"
    assert len(_memory._BUDGET.launches) == pinned
    kept[:] = 5.0  # a write the device copy does not have
    assert x.location == "host"
    with sa.track_transfers() as t:
        inc[1, N](x)
    assert counts(t) == (1, 1)  # the written host copy uploaded; the kept view refreshed
    np.testing.assert_array_equal(kept, np.full(N, 6.0))


@device
def test_a_failed_gufunc_call_keeps_watching_a_kept_export() -> None:
    a = sa.SmartArray(np.ones((N, 3)))
    x = sa.SmartArray(np.zeros((N, 3)))
    x.get("gpu")
    kept = np.asarray(x)
    with numba_ufunc_support():
        gufunc = numba_double_and_triple_rows_gufunc()
        with sa.track_transfers() as t, pytest.raises(ValueError, match="negative strides"):
            gufunc(a, x, x[::-1])  # two outputs over x, the second one refused
        assert counts(t) == (1, 0) and x.location == "both"  # (a's upload)
        kept[:] = 5.0
        assert x.location == "host"
        thrice = sa.SmartArray(np.zeros((N, 3)))
        with sa.track_transfers() as t:
            gufunc(x, a, thrice)  # reads x (uploaded), overwrites a and thrice
        assert counts(t) == (1, 0)
    np.testing.assert_array_equal(np.asarray(a), np.full((N, 3), 10.0))
    np.testing.assert_array_equal(np.asarray(thrice), np.full((N, 3), 15.0))


# --- adopting an export: refused, the owner's host copy left writable ---------------------


@njit
def tail(x):  # type: ignore[no-untyped-def]
    return x[1:]



@pytest.mark.parametrize(
    "handed_out",
    [
        lambda a: np.asarray(a),
        lambda a: np.asarray(a)[1:],
        lambda a: np.asarray(a).reshape(2, 2).T,
        lambda a: memoryview(np.asarray(a)),
        lambda a: a.data,
        lambda a: np.asarray(a[::2]).view(np.int64),
        lambda a: tail(np.asarray(a)),  # (an @njit view: its base is an NRT meminfo)
    ],
)
def test_an_export_cannot_be_adopted_by_another_smartarray(handed_out: Any) -> None:
    a = sa.SmartArray(np.arange(float(N)), label="owner")
    view = handed_out(a)
    with pytest.raises(ValueError, match=r"owner's host copy .*np\.asarray.*copy=True"):
        sa.SmartArray(view, copy=False)
    a[0] = 7.0  # still writable, as is the export
    np.asarray(a)[1] = 8.0
    np.testing.assert_array_equal(a, [7.0, 8.0, 2.0, 3.0])
    copied = sa.SmartArray(view)  # a copy is fine
    copied[...] = 0
    np.testing.assert_array_equal(a, [7.0, 8.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "handed_out",
    [
        lambda a: a.get("host"),
        lambda a: a.get("host")[1:],
        lambda a: a.get("host").reshape(2, 2).T,
        lambda a: np.from_dlpack(a),
        lambda a: np.from_dlpack(np.broadcast_to(a, (N,))),  # a read-only view's
    ],
)
def test_a_raw_host_buffer_cannot_be_adopted_by_another_smartarray(handed_out: Any) -> None:
    a = sa.SmartArray(np.arange(float(N)), label="owner")
    view = handed_out(a)
    writeable = view.flags.writeable
    with pytest.raises(ValueError, match=r"host buffer of owner .*get\('host'\).*copy"):
        sa.SmartArray(view, copy=False)
    assert view.flags.writeable == writeable and a.get("host").flags.writeable  # none locked
    a[0] = 7.0  # a still works: writable, and its host copy can take downloads
    if sa.tier() != "host-only":
        a.get("gpu")
        a.mark_changed("gpu")
        assert a.tolist() == [7.0, 1.0, 2.0, 3.0]
    copied = sa.SmartArray(view)  # a copy is fine
    copied[...] = 0
    assert a.tolist() == [7.0, 1.0, 2.0, 3.0]


def test_a_raw_host_buffer_is_free_to_adopt_once_its_smartarray_is_gone() -> None:
    a = sa.SmartArray(np.arange(float(N)))
    raw = a.get("host")
    del a
    gc.collect()
    b = sa.SmartArray(raw, copy=False)  # the memory is raw's alone now
    b[0] = 5.0
    assert raw[0] == 5.0 and not raw.flags.writeable


# --- a kernel that fails half-way (the simulator raises; the host copy stays authoritative) --


@cuda.jit
def add_then_fail(x, fail):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0
        if fail[0] > 0:
            x[x.size + 100] = 1.0  # IndexError in the simulator


@cuda.jit
def total_into(x, out):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        out[0] = 0.0
        for j in range(x.size):
            out[0] = out[0] + x[j]


@pytest.mark.skipif(
    sa.tier() != "simulator", reason="only the simulator raises IndexError inside a kernel"
)
def test_a_kernel_failing_half_way_then_an_export_write_costs_one_upload() -> None:
    x = sa.SmartArray(np.zeros(N))
    x.get("gpu")
    kept = np.asarray(x)
    with pytest.raises(IndexError):
        add_then_fail[1, N](x, sa.SmartArray(np.ones(1)).readonly())
    assert x.location == "host"  # the device copy may be half written
    np.testing.assert_array_equal(kept, np.zeros(N))
    kept[:] = 3.0
    out = sa.SmartArray(np.zeros(1))
    with sa.track_transfers() as t:
        total_into[1, 1](x.readonly(), out)  # x uploaded once...
        total_into[1, 1](x.readonly(), out)  # ...and then current on both sides
    assert [(r.direction, r.array) for r in t.records if r.array == x.label] == [("h2d", x.label)]
    assert x.location == "both"
    np.testing.assert_array_equal(np.asarray(out), [12.0])


# --- attributes: only those over the data are read from an export --------------------------


def test_the_device_attribute_reads_no_data() -> None:
    a = sa.SmartArray(np.zeros(N))
    assert a.device == np.zeros(N).device == "cpu"
    assert not a._alloc.host_exports


@device
def test_the_device_attribute_of_a_device_only_array_copies_nothing() -> None:
    a = sa.zeros(N, where="gpu")
    inc[1, N](a)  # current on the device only
    with sa.no_transfers():
        assert a.device == "cpu"
    assert a.location == "gpu" and a._alloc._host_snapshot is None
    with sa.track_transfers() as t:
        pointer = a.ctypes.data  # a pointer to the host data: that needs the host copy
    assert counts(t) == (0, 1) and pointer == np.asarray(a).ctypes.data
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))


# --- no host memory for a snapshot --------------------------------------------------------


@pytest.fixture
def no_room_for_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(host: np.ndarray) -> bytes:
        raise MemoryError(f"cannot allocate {host.nbytes} bytes")

    monkeypatch.setattr(_coherence, "_snapshot", out_of_memory)


@device
@pytest.mark.usefixtures("no_room_for_snapshots")
def test_without_room_for_a_snapshot_the_device_copy_counts_as_stale() -> None:
    x = sa.SmartArray(np.zeros(N))
    kept = np.asarray(x)
    with sa.track_transfers() as t:
        inc[1, N](x)  # uploaded, written, downloaded for the kept view: no snapshot
    assert counts(t) == (1, 1) and x.location == "host"
    np.testing.assert_array_equal(kept, np.ones(N))
    kept[:] = 5.0
    with sa.track_transfers() as t:
        inc[1, N](x)
    assert counts(t) == (1, 1)
    np.testing.assert_array_equal(kept, np.full(N, 6.0))
    y = sa.SmartArray(np.zeros(N))
    y.get("gpu")
    np.asarray(y)[0] = 1.0  # taken while both copies are current: no snapshot either
    assert y.location == "host"
    with sa.track_transfers() as t:
        inc[1, N](y)
    assert counts(t) == (1, 0)
    np.testing.assert_array_equal(np.asarray(y), [2.0, 1.0, 1.0, 1.0])


# --- writes through a.ctypes / a.data, inside no_transfers(), before an eviction -----------


@device
def test_writes_through_ctypes_and_data_attributes_are_found() -> None:
    a = sa.SmartArray(np.zeros(N))
    a.get("gpu")
    a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))[1] = 4.0  # (the pointer keeps the view)
    assert a.location == "host"
    a.get("gpu")
    a.data.cast("B")[16:24] = np.array([5.0]).tobytes()
    assert a.location == "host"
    with sa.track_transfers() as t:
        inc[1, N](a)
    assert counts(t) == (1, 0)
    np.testing.assert_array_equal(np.asarray(a), [1.0, 5.0, 6.0, 1.0])


@device
def test_a_write_found_inside_no_transfers_refuses_the_upload_and_keeps_it() -> None:
    a = sa.SmartArray(np.zeros(N), label="written")
    a.get("gpu")
    kept = np.asarray(a)
    kept[:] = 2.0
    with sa.no_transfers(), pytest.raises(sa.TransferError, match="written"):
        inc[1, N](a)
    assert a.location == "host"
    with sa.track_transfers() as t:
        inc[1, N](a)
    assert counts(t) == (1, 1)
    np.testing.assert_array_equal(kept, np.full(N, 3.0))


@device
@pytest.mark.usefixtures("empty_budget")
def test_an_eviction_after_a_write_through_a_dead_export_keeps_the_write() -> None:
    a = sa.SmartArray(np.zeros(N))
    a.get("gpu")
    np.asarray(a)[2] = 7.0  # the view dies at once; the write is not looked for yet
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)  # the device copy looks clean: dropped, not spilled
    sa.set_device_memory_limit(None)
    assert counts(t) == (0, 0) and a.location == "host"
    assert a._alloc._host_snapshot is None
    with sa.track_transfers() as t:
        inc[1, N](a)
    assert counts(t) == (1, 0)
    np.testing.assert_array_equal(np.asarray(a), [1.0, 1.0, 8.0, 1.0])


# --- a launch that raises after its arguments were prepared --------------------------------


@pytest.mark.skipif(
    sa.tier() != "simulator", reason="only the simulator raises IndexError inside a kernel"
)
@pytest.mark.usefixtures("empty_budget")
def test_a_kernel_that_raised_leaves_nothing_in_a_launch() -> None:
    x = sa.SmartArray(np.zeros(N))
    x.get("gpu")
    kept = np.asarray(x)
    pinned = len(_memory._BUDGET.launches)
    with pytest.raises(IndexError):
        add_then_fail[1, N](x, sa.SmartArray(np.ones(1)).readonly())
    assert len(_memory._BUDGET.launches) == pinned and x._alloc._launch is None
    assert x.location == "host" and x._alloc._host_snapshot is None
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)  # the (stale) device copy can be evicted again
    sa.set_device_memory_limit(None)
    assert counts(t) == (0, 0) and x._alloc.device is None
    kept[:] = 2.0
    with sa.track_transfers() as t:
        inc[1, N](x)
    assert counts(t) == (1, 1)
    np.testing.assert_array_equal(kept, np.full(N, 3.0))


@device
@pytest.mark.usefixtures("empty_budget")
def test_a_cuda_ufunc_call_that_raised_leaves_nothing_in_a_launch() -> None:
    x = sa.SmartArray(np.zeros(N))
    x.get("gpu")
    wrong_dtype = sa.SmartArray(np.zeros(N, dtype=np.int8))
    with numba_ufunc_support():
        add = numba_add_ufunc()
        with pytest.raises(TypeError, match="No matching version"):
            add(x, wrong_dtype, out=x)  # refused by numba-cuda, after x was prepared
    assert x._alloc._launch is None and x.location == "host"
    sa.set_device_memory_limit(0)
    sa.set_device_memory_limit(None)
    assert x._alloc.device is None
    np.testing.assert_array_equal(np.asarray(x), np.zeros(N))


@device
@pytest.mark.usefixtures("empty_budget")
def test_a_spill_with_a_kept_export_takes_no_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    x = sa.SmartArray(np.zeros(N))
    kept = np.asarray(x)
    inc[1, N](x)  # both copies current
    with sa.no_transfers(), pytest.raises(sa.TransferError):
        inc[1, N](x)  # the refresh is refused: only the device copy is current
    assert x.location == "gpu"
    snapshots: list[int] = []
    take = _coherence._snapshot
    monkeypatch.setattr(_coherence, "_snapshot", lambda host: snapshots.append(1) or take(host))
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)  # spilled: downloaded, then dropped
    sa.set_device_memory_limit(None)
    assert counts(t) == (0, 1) and t.spill_count == 1 and x.location == "host"
    assert snapshots == [] and x._alloc._host_snapshot is None
    np.testing.assert_array_equal(kept, np.full(N, 2.0))


@device
def test_launches_leave_no_reference_cycle_holding_their_arguments() -> None:
    def launched(launch: Any) -> weakref.ref[Any]:
        x = sa.SmartArray(np.zeros(N))
        kept = np.asarray(x)  # (a kept export adds the refresh to the launch)
        launch(x)
        del kept
        return weakref.ref(x._alloc)

    def failing_launch(x: Any) -> None:
        with pytest.raises(ValueError, match="negative strides"):
            set_second[1, N](x, x[::-1])

    def failing_ufunc_call(x: Any) -> None:
        with pytest.raises(TypeError, match="No matching version"):
            add(x, sa.SmartArray(np.zeros(N, dtype=np.int8)), out=x)

    with numba_ufunc_support():
        add = numba_add_ufunc()
        gc.disable()
        try:
            assert launched(lambda x: inc[1, N](x))() is None
            assert launched(failing_launch)() is None
            assert launched(lambda x: add(x, x, out=x))() is None
            assert launched(failing_ufunc_call)() is None
        finally:
            gc.enable()


# --- shapes and memory kinds the watch must handle -----------------------------------------


@device
def test_writes_through_exports_of_0d_empty_and_mapped_arrays() -> None:
    scalar = sa.SmartArray(np.array(1.0))
    scalar.get("gpu")
    np.asarray(scalar)[()] = 4.0
    assert scalar.location == "host"
    with sa.track_transfers() as t:
        scalar.get("gpu")
    assert counts(t) == (1, 0)
    empty = sa.SmartArray(np.zeros((0, 3)))
    empty.get("gpu")
    kept_empty = np.asarray(empty)
    assert empty.location == "both" and kept_empty.size == 0
    mapped = sa.zeros(N, host_memory="mapped")  # one buffer, read and written in place
    kept = np.asarray(mapped)
    with sa.track_transfers() as t:
        kept[:] = 2.0
        inc[1, N](mapped)
    assert counts(t) == (0, 0) and mapped.location == "both"
    assert mapped._alloc._host_snapshot is None
    np.testing.assert_array_equal(kept, np.full(N, 3.0))
