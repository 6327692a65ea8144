"""Core API: construction, validity flags, the ledger, threads, and the host-only tier."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from helpers import run_in_threads
from numba import cuda

import smartarray as sa

DEVICE = sa.tier() != "host-only"


@cuda.jit
def touch(x):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def test_old_constructor_signature() -> None:
    a = sa.SmartArray(np.arange(4.0), True, None, None, None, "host")
    assert a.location == "host" and a.shape == (4,)
    b = sa.SmartArray(shape=(2, 3), dtype=np.int32, order="F")
    assert b.shape == (2, 3) and b.dtype == np.int32 and b.flags.f_contiguous
    c = sa.SmartArray([1, 2, 3])
    assert c.dtype == np.array([1, 2, 3]).dtype


def test_copy_false_adopts_without_copying() -> None:
    data = np.arange(6.0).reshape(2, 3)
    a = sa.SmartArray(data, copy=False)
    a[1, 1] = -1
    assert data[1, 1] == -1  # shared memory
    assert a.host_memory == "pageable"
    with pytest.raises(ValueError, match="read-only"):  # locked while adopted
        data[0, 0] = 42
    f = np.asfortranarray(data)
    assert sa.SmartArray(f, copy=False).flags.f_contiguous


def test_copy_true_is_independent() -> None:
    data = np.arange(3.0)
    a = sa.SmartArray(data)
    data[0] = 9
    assert a[0] == 0


def test_smartarray_from_smartarray() -> None:
    a = sa.SmartArray(np.arange(4.0))
    shared = sa.SmartArray(a, copy=False)
    shared[0] = 100
    assert a[0] == 100
    copied = sa.SmartArray(a)
    copied[1] = -5
    assert a[1] == 1
    as_int = sa.SmartArray(a, dtype=np.int64)
    assert as_int.dtype == np.int64 and as_int.tolist() == [100, 1, 2, 3]


def test_asarray_returns_same_object_or_copies() -> None:
    a = sa.zeros(3)
    assert sa.asarray(a) is a
    data = np.ones(3)
    b = sa.asarray(data)
    data[0] = 7  # the caller's ndarray stays its own
    assert b[0] == 1
    assert not np.shares_memory(b.get("host"), data)
    assert sa.asarray([1, 2]).tolist() == [1, 2]
    assert sa.asarray(a, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: sa.zeros((2, 2)), np.zeros((2, 2))),
        (lambda: sa.ones(3, dtype=np.int8), np.ones(3, dtype=np.int8)),
        (lambda: sa.full((2,), 2.5), np.full((2,), 2.5)),
        (lambda: sa.zeros_like(np.ones((2, 3), dtype=np.float32)), np.zeros((2, 3), np.float32)),
        (lambda: sa.ones_like(sa.zeros(2)), np.ones(2)),
        (lambda: sa.full_like(sa.zeros(2, dtype=int), 4), np.full(2, 4)),
        # dtype=None is numpy's default, float64 (ones once took full's: the fill value's)
        (lambda: sa.ones(3, dtype=None), np.ones(3, dtype=None)),
        (lambda: sa.zeros(3, None), np.zeros(3, None)),
    ],
)
def test_creation_functions(make, expected) -> None:  # type: ignore[no-untyped-def]
    a = make()
    assert isinstance(a, sa.SmartArray)
    assert a.dtype == expected.dtype
    np.testing.assert_array_equal(np.asarray(a), expected)


TEXT_AND_RECORD_DTYPES = ["S3", "U2", np.dtype([("a", "i4"), ("b", "S2")]), "m8[s]", bool]


@pytest.mark.parametrize("dtype", TEXT_AND_RECORD_DTYPES, ids=str)
def test_zeros_and_ones_of_any_dtype_match_numpy(dtype) -> None:  # type: ignore[no-untyped-def]
    # zeros are all-zero bytes (b'' for text), not the number 0 converted (b'0').
    assert np.asarray(sa.zeros(3, dtype=dtype)).tobytes() == np.zeros(3, dtype=dtype).tobytes()
    prototype = np.ones(3, dtype=dtype)
    assert np.asarray(sa.zeros_like(prototype)).tobytes() == np.zeros_like(prototype).tobytes()
    if np.dtype(dtype).names is None:
        np.testing.assert_array_equal(np.asarray(sa.ones(2, dtype=dtype)), np.ones(2, dtype))


@pytest.mark.device
@pytest.mark.parametrize("dtype", TEXT_AND_RECORD_DTYPES, ids=str)
def test_zeros_made_on_the_device_match_numpy(dtype) -> None:  # type: ignore[no-untyped-def]
    z = sa.zeros(3, dtype=dtype, where="gpu")
    # Numbers, booleans, dates: filled on each side where made (current on both, no copy);
    # text and records: filled on the device, downloaded by a host read.
    filled = np.dtype(dtype).kind in "biufcmM"
    assert z.location == ("both" if filled else "gpu")
    with sa.track_transfers() as t:
        assert np.asarray(z).tobytes() == np.zeros(3, dtype=dtype).tobytes()
    assert (t.h2d_count, t.d2h_count) == (0, 0 if filled else 1)


def test_empty_like_shape_and_order() -> None:
    proto = np.zeros((3, 2), order="F")
    e = sa.empty_like(proto)
    assert e.shape == (3, 2) and e.flags.f_contiguous
    assert sa.empty((2, 2)).shape == (2, 2)


def test_where_alias_and_bad_where() -> None:
    with pytest.raises(ValueError, match="'host', 'gpu'"):
        sa.SmartArray(np.zeros(2), where="cuda")
    a = sa.zeros(2)
    with pytest.raises(ValueError, match="'host', 'gpu'"):
        a.get("cpu")
    with pytest.raises(ValueError, match="'host', 'gpu'"):
        a.mark_changed("both")
    with pytest.raises(ValueError, match="'host', 'gpu'"):
        a.is_valid(1)
    assert a.location == "both"  # (made where first used: no buffer yet, nothing stale)


def test_mark_changed_host_and_is_valid() -> None:
    a = sa.SmartArray(np.zeros(3))
    assert a.is_valid("host") and not a.is_valid("gpu") and not a.is_valid("device")
    host = a.get("host")
    host[0] = 1
    a.mark_changed("host")
    assert a[0] == 1


def test_transfer_stats_fields() -> None:
    stats = sa.transfer_stats()
    for name in ("h2d_count", "h2d_bytes", "d2h_count", "d2h_bytes"):
        assert getattr(stats, name) == 0
    with sa.track_transfers() as t:
        sa.zeros(4).sum()
    assert t.count == 0 and t.nbytes == 0 and t.records == []
    assert "host->device: 0 copies" in str(t)


@pytest.mark.hostonly
def test_host_only_tier_device_requests_fail_clearly() -> None:
    a = sa.SmartArray(np.arange(3.0))
    for action in (
        lambda: a.get("gpu"),
        lambda: a.get("device"),
        a.to_gpu,
        lambda: sa.zeros(3, where="gpu"),
        lambda: sa.SmartArray(np.zeros(2), where="gpu"),
        lambda: sa.asarray(np.zeros(2), where="gpu"),
        lambda: sa.SmartArray(np.zeros(2), host_memory="pinned"),
        lambda: sa.zeros(2, host_memory="mapped"),
    ):
        with pytest.raises(sa.DeviceUnavailableError, match="NUMBA_ENABLE_CUDASIM=1"):
            action()
        assert isinstance(sa.DeviceUnavailableError(), RuntimeError)
    assert a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(3.0))
    a.free_device()  # nothing on the device: a no-op, never an error
    assert sa.transfer_stats().count == 0


@pytest.mark.hostonly
def test_host_only_tier_everything_else_works() -> None:
    a = sa.zeros((3, 3))
    a[1] = 5
    a += 1
    b = np.dot(a, a.T)
    assert isinstance(b, sa.SmartArray)
    assert b[1, 1] == 6 * 6 * 3
    assert a.location == "host"


@pytest.mark.hostonly
def test_host_only_tier_leaves_numba_cudas_ufunc_code_alone() -> None:
    # smartarray's simulator support for CUDA ufuncs (issue 24) is for the simulator only.
    from numba.cuda.vectorizers import CUDAVectorize

    from smartarray._cuda.simulator_ufuncs import install_simulator_ufuncs

    assert install_simulator_ufuncs() is False
    assert not getattr(CUDAVectorize._compile_core, "__smartarray_simulator__", False)


@pytest.mark.device
def test_threads_hammering_one_array() -> None:
    """8 threads mixing host writes, device round trips and reads on one array."""
    n = 64
    a = sa.SmartArray(np.zeros(n))

    def worker(k: int) -> None:
        for step in range(20):
            a[k * 8 : (k + 1) * 8] += 1  # host write of this thread's slice
            if step % 5 == 0:
                a.get("gpu")  # force a device round trip
            chunk = np.asarray(a[k * 8 : (k + 1) * 8])
            assert (chunk == chunk[0]).all()

    run_in_threads(worker, 8)
    np.testing.assert_array_equal(np.asarray(a), np.full(n, 20.0))


def test_threads_host_only_writes() -> None:
    a = sa.zeros(800)

    def worker(k: int) -> None:
        for _ in range(50):
            a[k * 100 : (k + 1) * 100] += 1

    run_in_threads(worker, 8)
    np.testing.assert_array_equal(np.asarray(a), np.full(800, 50.0))


@pytest.mark.device
def test_buffers_are_released_with_the_last_reference() -> None:
    a = sa.zeros(16, where="gpu")
    view = a[2:6]
    touch[1, 16](a)
    np.asarray(view)
    alloc = weakref.ref(a._alloc)
    del a, view
    assert alloc() is None  # no cycles: device and host buffers go with the last view


def test_nested_trackers_count_independently() -> None:
    with sa.track_transfers() as outer:
        with sa.track_transfers() as empty:
            pass
        with sa.track_transfers() as inner:
            if DEVICE:
                sa.SmartArray(np.zeros(4)).get("gpu")
    assert empty.count == 0
    expected = 1 if DEVICE else 0
    assert outer.h2d_count == expected and inner.h2d_count == expected


def test_deprecated_old_api_spellings() -> None:
    a = sa.SmartArray(np.zeros(3))
    with pytest.warns(DeprecationWarning, match="get\\('host'\\)"):
        host = a.host()
    host[0] = 1
    with pytest.warns(DeprecationWarning, match="mark_changed\\('host'\\)"):
        a.host_changed()
    assert a[0] == 1
    if DEVICE:
        with pytest.warns(DeprecationWarning, match="get\\('gpu'\\)"):
            device = a.gpu()
        device[1] = 2
        with pytest.warns(DeprecationWarning, match="mark_changed\\('gpu'\\)"):
            a.gpu_changed()
        assert a.tolist() == [1, 2, 0]


def test_object_arrays_use_pageable_host_memory() -> None:
    from smartarray._core import backend as _backend

    assert _backend.default_host_memory(np.dtype(object)) == "pageable"
    assert sa.SmartArray(np.array([1, "a"], dtype=object)).host_memory == "pageable"
    assert sa.empty(3, dtype=object).host_memory == "pageable"
    with pytest.raises(TypeError, match="host_memory='pageable'"):
        sa.SmartArray(np.array([object()]), host_memory="pinned")


@pytest.mark.device
def test_free_device_keeps_an_exported_buffer_alive() -> None:
    a = sa.SmartArray(np.arange(4.0))
    a.get("gpu")
    exported = a._alloc.device
    a._alloc.device_exported()  # what __cuda_array_interface__ does on a GPU
    a._alloc.device_exported()  # once is enough
    a.free_device()
    assert a._alloc.device is None and a._alloc._exported_device is exported
    a[0] = 10.0
    a.get("gpu")  # the exported buffer is reused: its consumer sees current data again
    assert a._alloc.device is exported
    np.testing.assert_array_equal(exported.copy_to_host(), [10.0, 1.0, 2.0, 3.0])
