"""Host exports: a kept ``np.asarray(a)`` / ``memoryview(a)`` never shows stale data.

Lifetime and cost tests run in every tier; the device-write tests (kernels in the simulator,
numba-cuda's CUDA ufunc dispatchers around simulator kernels) are marked ``device``. Every
test asserts exact ledger counts.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import (
    add_scalar,
    copy_into,
    counts,
    inc,
    numba_add_ufunc,
    numba_double_rows_gufunc,
    numba_ufunc_support,
    run_in_threads,
)
from numba import cuda

import smartarray as sa
from smartarray._core import memory as _memory
from smartarray._core.coherence import Allocation
from smartarray._core.host_exports import live_exports

N = 8
NBYTES = N * 8
device = pytest.mark.device



@cuda.jit
def add_both(a, b):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1
        b[i] += 10


def live(array: sa.SmartArray) -> int:
    return live_exports(array._alloc)


def total_of(array: sa.SmartArray) -> Any:
    """A helper that reads through np.asarray and keeps nothing."""
    return np.asarray(array).sum()


# --- lifetime and cost (every tier) ---------------------------------------------------------


def test_an_export_lives_as_long_as_any_view_derived_from_it() -> None:
    x = sa.SmartArray(np.arange(12.0))
    h = np.asarray(x)
    assert live(x) == 1 and h.flags.writeable  # (x is writable)
    derived = [h[1:], h.reshape(3, 4).T, h[::2].reshape(2, 3)[1], h.view(np.int64), h[None]]
    del h
    gc.collect()
    while derived:
        assert live(x) == 1
        derived.pop()
    assert live(x) == 0


def test_exports_are_counted_one_by_one() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    first, second, of_a_view = np.asarray(x), np.asarray(x), np.asarray(x[2:5])
    assert live(x) == 3
    del first
    assert live(x) == 2
    del second, of_a_view
    assert live(x) == 0


def test_copies_and_conversions_are_not_exports() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    kept = [np.array(x), np.asarray(x, dtype=np.float32), x.__array__(copy=True), x.tolist()]
    assert live(x) == 0 and len(kept) == 4
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        x.__array__(dtype=np.int32, copy=False)
    assert live(x) == 0


def test_a_helper_returning_a_reduction_leaves_no_export() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    assert total_of(x) == np.arange(N).sum()
    assert live(x) == 0


def test_taking_and_releasing_an_export_costs_no_copy_and_changes_no_flag() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        h = np.asarray(x)
        view = h[2:]
        del h, view
    assert t.count == 0 and x.location == "host" and live(x) == 0


def test_host_writes_show_through_a_kept_export_without_copies() -> None:
    x = sa.SmartArray(np.zeros(N))
    h = np.asarray(x)
    with sa.track_transfers() as t:
        x[3] = 7.0
        x += 1
    assert t.count == 0
    np.testing.assert_array_equal(h, np.r_[np.ones(3), 8.0, np.ones(N - 4)])
    h[0] = 5.0  # and writes through the export show in the SmartArray
    assert x[0] == 5.0
    np.testing.assert_array_equal(np.asarray(x), h)


def test_the_export_handle_itself_and_its_copies_release_nothing() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    h = np.asarray(x)
    handle = h.base
    part, copied = handle[1:], pickle.loads(pickle.dumps(handle))
    del part, copied
    assert live(x) == 1
    del h, handle
    assert live(x) == 0


def test_other_dtypes_are_exported_exactly() -> None:
    record = np.dtype([("a", "<i4"), ("b", "<f8")])
    cases = [
        np.zeros(3, dtype=record),
        np.array(["x", "yy"], dtype=np.dtypes.StringDType()),
        np.array([1, "x"], dtype=object),
        np.array(["2020-01-01"], dtype="M8[D]"),
    ]
    for data in cases:
        x = sa.SmartArray(data)
        h = np.asarray(x)
        assert h.dtype == data.dtype and type(h) is np.ndarray
        np.testing.assert_array_equal(h, data)
        assert live(x) == 1
        del h
        assert live(x) == 0
    fields = sa.SmartArray(np.zeros(3, dtype=record))
    b = np.asarray(fields["b"])
    assert b.dtype == np.float64 and live(fields) == 1


def test_exports_in_many_threads_count_back_to_zero() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))

    def worker(k: int) -> None:
        kept = []
        for i in range(300):
            kept.append(np.asarray(x)[k % N :])
            if i % 3 == 0:
                kept.pop(0)
        assert all(view.size for view in kept)

    run_in_threads(worker, 4)
    assert live(x) == 0


def test_a_memoryview_of_the_export_keeps_it_counted() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        m = memoryview(np.asarray(x))
    assert t.count == 0 and not m.readonly and live(x) == 1
    of_it = np.asarray(m)
    del m
    assert live(x) == 1
    del of_it
    assert live(x) == 0


# --- device writes (simulator and GPU) ------------------------------------------------------


@device
def test_a_kept_export_sees_every_writing_launch() -> None:
    x = sa.SmartArray(np.zeros(N), label="x")
    h = np.asarray(x)
    with sa.track_transfers() as t:
        for step in range(1, 4):
            inc[1, N](x)
            np.testing.assert_array_equal(h, np.full(N, float(step)))
            assert x.location == "both"
    assert counts(t) == (1, 3) and t.d2h_bytes == 3 * NBYTES
    del h
    with sa.track_transfers() as t:
        for _ in range(3):
            inc[1, N](x)
    assert counts(t) == (0, 0) and x.location == "gpu"  # lazy again
    np.testing.assert_array_equal(np.asarray(x), np.full(N, 6.0))


@device
def test_a_derived_view_kept_after_the_export_keeps_it_current() -> None:
    x = sa.SmartArray(np.zeros(N))
    h = np.asarray(x)
    tail = h[N // 2 :].reshape(2, -1).T
    del h
    with sa.track_transfers() as t:
        add_scalar[1, N](x, 2.0)
    assert counts(t) == (1, 1)
    np.testing.assert_array_equal(tail, np.full((N // 4, 2), 2.0))


@device
def test_an_export_of_a_view_and_a_launch_on_another_view() -> None:
    x = sa.SmartArray(np.zeros(N))
    h = np.asarray(x[:4])
    with sa.track_transfers() as t:
        inc[1, N](x[2:])  # writes the allocation: the whole allocation is downloaded
    assert counts(t) == (1, 1)
    np.testing.assert_array_equal(h, [0.0, 0.0, 1.0, 1.0])


@device
def test_a_helper_reading_through_asarray_leaves_launches_lazy() -> None:
    x = sa.SmartArray(np.zeros(N))
    inc[1, N](x)
    with sa.track_transfers() as t:
        assert total_of(x) == N  # one download: the device copy was the current one
        for _ in range(3):
            inc[1, N](x)
    assert counts(t) == (0, 1) and x.location == "gpu"


@device
def test_taking_an_export_costs_what_any_host_read_costs() -> None:
    x = sa.SmartArray(np.zeros(N))
    x.to_gpu()
    with sa.track_transfers() as t:
        kept = [np.asarray(x)]  # BOTH: no copy
    assert counts(t) == (0, 0)
    inc[1, N](x)
    del kept
    inc[1, N](x)
    with sa.track_transfers() as t:
        h = np.asarray(x)  # DEVICE: one download, as today
    assert counts(t) == (0, 1) and x.location == "both"
    np.testing.assert_array_equal(h, np.full(N, 2.0))


@device
def test_one_download_per_launch_for_an_array_passed_twice() -> None:
    x = sa.SmartArray(np.zeros(N))
    h = np.asarray(x)
    with sa.track_transfers() as t:
        add_both[1, N](x, x)
        add_both[1, N](x[: N // 2], x[N // 2 :])
    assert counts(t) == (1, 2)
    np.testing.assert_array_equal(h, np.r_[np.full(N // 2, 12.0), np.full(N // 2, 21.0)])


@device
def test_read_only_launches_do_not_download() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    scratch = sa.zeros(N, where="gpu")
    h = np.asarray(x)
    with sa.track_transfers() as t:
        copy_into[1, N](scratch, x)  # inferred: reads x only
        copy_into[1, N](sa.Out(scratch), sa.In(x))
        copy_into[1, N](scratch, cuda.In(x))
    assert counts(t) == (1, 0) and x.location == "both" and scratch.location == "gpu"
    np.testing.assert_array_equal(h, np.arange(N))


@device
@pytest.mark.parametrize(
    "intent", [sa.Out, sa.InOut, cuda.Out, cuda.InOut], ids=lambda c: f"{c.__module__}.{c.__name__}"
)
def test_explicit_writing_intents_keep_the_export_current(intent: Any) -> None:
    x = sa.SmartArray(np.full(N, -1.0))
    source = sa.SmartArray(np.arange(N, dtype=np.float64))
    h = np.asarray(x)
    with sa.track_transfers() as t:
        copy_into[1, N](intent(x), source)
    uploads = 1 if intent in (sa.Out, cuda.Out) else 2  # Out: x is not uploaded
    assert counts(t) == (uploads, 1) and x.location == "both"
    np.testing.assert_array_equal(h, np.arange(N))


@device
def test_a_launch_on_a_stream_is_downloaded_on_it_and_waited_for() -> None:
    x = sa.SmartArray(np.zeros(N))
    h = np.asarray(x)
    stream = cuda.stream()
    with sa.track_transfers() as t:
        inc[1, N, stream](x)
    assert counts(t) == (1, 1) and x.location == "both"
    assert x._alloc._host_event is None  # the host waited for the download
    np.testing.assert_array_equal(h, np.ones(N))


@device
def test_mark_changed_gpu_refreshes_a_live_export() -> None:
    x = sa.SmartArray(np.zeros(N))
    device_array = x.get("gpu")
    h = np.asarray(x)
    inc[1, N](device_array)  # a write smartarray cannot see: the user declares it
    with sa.track_transfers() as t:
        x.mark_changed("gpu")
    assert counts(t) == (0, 1) and x.location == "both"
    np.testing.assert_array_equal(h, np.ones(N))
    del h
    inc[1, N](device_array)
    with sa.track_transfers() as t:
        x.mark_changed("gpu")
    assert counts(t) == (0, 0) and x.location == "gpu"


@device
def test_refused_refreshes_of_one_launch_are_named_together() -> None:
    x = sa.SmartArray(np.zeros(N), label="first")
    y = sa.SmartArray(np.zeros(N), label="second")
    kept = np.asarray(x), np.asarray(y)
    add_both[1, N](x, y)
    with sa.no_transfers(), pytest.raises(sa.TransferError) as error:
        add_both[1, N](x, y)
    assert str(error.value).startswith(
        "first, second were written on the device while host views of them handed out by "
        "np.asarray() are alive: keeping those views current needs a device-to-host copy"
    )
    assert x.location == y.location == "gpu"  # both hold the results on the device
    np.testing.assert_array_equal(np.asarray(x), np.full(N, 2.0))
    np.testing.assert_array_equal(np.asarray(y), np.full(N, 20.0))
    np.testing.assert_array_equal(kept[1], np.full(N, 20.0))


@device
def test_a_refused_refresh_of_an_array_passed_twice_names_it_once() -> None:
    # issue 31: k(x, x) inside no_transfers() said "x, x were written ... views of them".
    x = sa.SmartArray(np.zeros(N), label="twice")
    h = np.asarray(x)
    add_both[1, N](x, x)
    with sa.no_transfers(), pytest.raises(sa.TransferError) as error:
        add_both[1, N](x, x)
    message = str(error.value)
    assert message.startswith("twice was written on the device while a host view of it ")
    assert message.count("twice") == 1 and "is alive" in message
    assert x.location == "gpu"
    np.testing.assert_array_equal(np.asarray(x), np.full(N, 22.0))  # two launches of +11
    del h


@device
def test_a_refused_refresh_names_the_export_and_keeps_the_results() -> None:
    x = sa.SmartArray(np.zeros(N), label="kept")
    h = np.asarray(x)
    inc[1, N](x)  # uploads once; the export is refreshed
    pinned = len(_memory._BUDGET.launches)
    with sa.no_transfers(), pytest.raises(sa.TransferError, match=r"kept .*np\.asarray.*del h"):
        inc[1, N](x)
    assert x.location == "gpu" and len(_memory._BUDGET.launches) == pinned  # none left pinned
    with sa.no_transfers(), pytest.raises(sa.TransferError, match="no_transfers"):
        x.mark_changed("gpu")
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(x), np.full(N, 2.0))
    assert counts(t) == (0, 1)
    np.testing.assert_array_equal(h, np.full(N, 2.0))


@device
@pytest.mark.usefixtures("empty_budget")
def test_an_exported_array_stays_evictable_and_freeable() -> None:
    x = sa.SmartArray(np.zeros(N), label="x")
    h = np.asarray(x)
    inc[1, N](x)  # BOTH: its device copy is clean
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)
    sa.set_device_memory_limit(None)
    assert counts(t) == (0, 0) and t.spill_count == 0 and x.location == "host"
    with sa.track_transfers() as t:
        inc[1, N](x)
        x.free_device()
    assert counts(t) == (1, 1) and x.location == "host"
    np.testing.assert_array_equal(h, np.full(N, 2.0))


@pytest.fixture
def evict_before_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's eviction, run after a launch's pins are released and before its
    refresh of live host exports takes the allocation's lock."""
    refresh = Allocation.refresh_host_exports

    def evict_then_refresh(self: Allocation, stream: Any = None) -> None:
        _memory._evict_down_to(0, keep=())
        refresh(self, stream)

    monkeypatch.setattr(Allocation, "refresh_host_exports", evict_then_refresh)


@device
@pytest.mark.usefixtures("evict_before_refresh")
def test_a_spill_between_the_launch_and_the_refresh_is_the_only_download() -> None:
    x = sa.SmartArray(np.zeros(N), label="x")
    h = np.asarray(x)
    with sa.track_transfers() as t:
        inc[1, N](x)
    assert counts(t) == (1, 1) and t.spill_count == 1 and x.location == "host"
    np.testing.assert_array_equal(h, np.ones(N))


@pytest.fixture
def numba_add() -> Iterator[Any]:
    with numba_ufunc_support():
        yield numba_add_ufunc()


@device
def test_a_cuda_ufunc_writing_out_refreshes_the_export(numba_add: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    ones = sa.SmartArray(np.ones(N))
    h = np.asarray(x)
    with sa.track_transfers() as t:
        numba_add(x, ones, out=x)
        numba_add(x, ones)  # reads x only
    assert counts(t) == (2, 1) and x.location == "both"
    np.testing.assert_array_equal(h, np.arange(N) + 1.0)


@device
def test_a_gufunc_output_refreshes_the_export() -> None:
    a = sa.SmartArray(np.arange(12, dtype=np.float64).reshape(4, 3))
    out = sa.empty((4, 3), where="gpu")
    with numba_ufunc_support():
        gufunc = numba_double_rows_gufunc()
        h = np.asarray(out[1:])  # one download (device-only array)
        with sa.track_transfers() as t:
            gufunc(a, out)
            gufunc(a, out=out)
    assert counts(t) == (1, 2) and out.location == "both"
    np.testing.assert_array_equal(h, 2 * np.arange(12.0).reshape(4, 3)[1:])


@device
def test_a_kept_memoryview_sees_every_writing_launch() -> None:
    x = sa.SmartArray(np.zeros(N))
    m = memoryview(np.asarray(x))
    with sa.track_transfers() as t:
        inc[1, N](x)
    assert counts(t) == (1, 1)
    assert m.tolist() == [1.0] * N
    del m
    with sa.track_transfers() as t:
        inc[1, N](x)
    assert counts(t) == (0, 0)
