"""Helpers that write through ``np.asarray(x)`` (issue #11, item 6).

``np.asarray(a)`` is a writable view of a writable SmartArray's host copy, tracked as a host
export (:mod:`smartarray._core.host_exports`): writes through it, made by any means (numpy,
``@njit``, ctypes), are found before the device copy is next used, and only then cost an
upload. Helpers that only read cost no transfer beyond the download that the read needs.
"""

from __future__ import annotations

import ctypes
import gc
from typing import Any

import numpy as np
import pytest
from helpers import counts, inc, numba_add_ufunc, numba_ufunc_support
from numba import njit

import smartarray as sa


def center_through_asarray(x: Any) -> Any:
    x = np.asarray(x)
    x -= x.mean()
    return x


def center(x: Any) -> None:
    x -= x.mean()


def norm(x: Any) -> float:
    x = np.asarray(x)
    return float(np.sqrt((x * x).sum()))


@njit
def double_in_place(x: Any) -> None:
    for i in range(x.size):
        x[i] *= 2.0



# --- every tier ----------------------------------------------------------------------------


def test_the_asarray_helper_writes_the_smartarray() -> None:
    a = sa.asarray(np.arange(4.0))
    result = center_through_asarray(a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) - 1.5)
    assert type(result) is np.ndarray and np.shares_memory(result, np.asarray(a))
    assert a.location == "host"
    plain = np.arange(4.0)
    center_through_asarray(plain)  # the same helper, unchanged, for ndarrays
    np.testing.assert_array_equal(plain, np.arange(4.0) - 1.5)


def test_helper_writing_through_the_smartarray_works() -> None:
    a = sa.asarray(np.arange(4.0))
    center(a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) - 1.5)


def test_get_host_and_mark_changed_still_work() -> None:
    a = sa.asarray(np.arange(4.0))
    host = a.get("host")
    center_through_asarray(host)
    a.mark_changed("host")
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) - 1.5)


def test_views_and_layouts_write_through() -> None:
    a = sa.asarray(np.arange(12.0).reshape(3, 4), order="F")
    center_through_asarray(a[1:, ::2])
    expected = np.arange(12.0).reshape(3, 4)
    expected[1:, ::2] -= expected[1:, ::2].mean()
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_read_only_smartarrays_still_refuse() -> None:
    a = sa.asarray(np.arange(4.0))
    broadcast = np.broadcast_to(a, (2, 4))
    with pytest.raises(ValueError, match="read-only"):
        center_through_asarray(broadcast)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))


# --- device tiers: the writes are found, with exact copy counts -------------------------------


@pytest.mark.device
def test_writes_found_before_the_next_launch() -> None:
    a = sa.asarray(np.arange(4.0))
    inc[1, 4](a)  # device copy current, host stale
    with sa.track_transfers() as stats:
        center_through_asarray(a)  # one download (the read), then a host write
        assert a.location == "host"  # found: the device copy is stale
        inc[1, 4](a)  # one upload of the written host copy
        result = np.asarray(a).copy()  # one download
    np.testing.assert_array_equal(result, np.arange(4.0) + 1 - 2.5 + 1)
    assert counts(stats) == (1, 2)


@pytest.mark.device
def test_reading_helpers_cost_no_upload() -> None:
    a = sa.asarray(np.arange(4.0))
    with sa.track_transfers() as stats:
        for _ in range(5):
            inc[1, 4](a)
            norm(a)  # reads: one download each, and nothing is re-uploaded
    assert counts(stats) == (1, 5)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) + 5)


@pytest.mark.device
def test_writes_numpy_cannot_see_are_found_too() -> None:
    a = sa.asarray(np.arange(4.0))
    inc[1, 4](a)
    double_in_place(np.asarray(a))  # @njit writes through the plain ndarray's pointer
    view = np.asarray(a)
    ctypes.memmove(view.ctypes.data, np.array([9.0]).ctypes.data, 8)  # ctypes writes
    del view
    with sa.track_transfers() as stats:
        inc[1, 4](a)
    assert counts(stats) == (1, 0)
    np.testing.assert_array_equal(np.asarray(a), [10.0, 5.0, 7.0, 9.0])


@pytest.mark.device
def test_a_kept_export_is_watched_across_launches() -> None:
    a = sa.asarray(np.zeros(4))
    kept = np.asarray(a)
    with sa.track_transfers() as stats:
        for step in range(1, 4):
            inc[1, 4](a)  # refreshes the kept view (one download)
            np.testing.assert_array_equal(kept, np.full(4, 2.0 * step - 1))
            kept += 1  # found at the next launch (one upload)
    assert counts(stats) == (3, 3)
    np.testing.assert_array_equal(np.asarray(a), np.full(4, 6.0))
    assert a.location == "host"


@pytest.mark.device
def test_an_export_that_died_unwritten_costs_no_copy() -> None:
    a = sa.asarray(np.arange(4.0))
    inc[1, 4](a)
    total = norm(a)
    gc.collect()
    with sa.track_transfers() as stats:
        inc[1, 4](a)
        inc[1, 4](a)
    assert counts(stats) == (0, 0)
    assert a._alloc._host_snapshot is None  # compared once, then let go
    assert total == pytest.approx(np.sqrt(((np.arange(4.0) + 1) ** 2).sum()))


@pytest.mark.device
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.complex128])
@pytest.mark.parametrize("size", [5, 70_001])  # compared as bytes, and as an array in pieces
def test_any_byte_written_is_found(dtype: Any, size: int) -> None:
    itemsize = np.dtype(dtype).itemsize
    for position in (0, size // 2, size - 1):
        a = sa.asarray(np.zeros(size, dtype=dtype))
        a.get("gpu")  # both copies current
        view = np.asarray(a).view(np.uint8)
        view[position * itemsize + itemsize - 1] ^= 1
        del view
        assert a.location == "host"
        with sa.track_transfers() as stats:
            a.get("gpu")
        assert counts(stats) == (1, 0)
    b = sa.asarray(np.zeros((size, 2), dtype=dtype, order="F"))
    b.get("gpu")
    np.asarray(b)[size - 1, 1] = 1
    assert b.location == "host"


@pytest.mark.device
def test_cuda_ufuncs_see_the_writes() -> None:
    with numba_ufunc_support():
        add = numba_add_ufunc()
        _run_ufunc_check(add)


def _run_ufunc_check(add: Any) -> None:
    a = sa.asarray(np.arange(4.0))
    b = add(a, a)  # uploads a; both copies current
    np.asarray(a)[:] = 10.0
    with sa.track_transfers() as stats:
        c = add(a, a)
    assert counts(stats) == (1, 0)
    np.testing.assert_array_equal(np.asarray(c), np.full(4, 20.0))
    np.testing.assert_array_equal(np.asarray(b), 2 * np.arange(4.0))
