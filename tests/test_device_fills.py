"""Arrays made with no data on the device (issue 29, item 8).

``zeros``/``ones``/``full``/``empty`` with ``where='gpu'``, and the ``*_like`` functions of a
device-only array, make their device buffer at once (the memory asked for: the device memory
budget counts it) and fill it there; the array is current on both sides, and the host buffer
is made, and filled on the host, where the host first uses it. Nothing is ever copied for the
fill (``empty``: for the undefined contents). A kernel that reads such an array uploads
nothing; one that writes it makes its bytes device-only, as for any array. Dtypes the device
cannot fill where made (text, records) and mapped host memory keep their own paths.

Every count is exact (``sa.track_transfers()``); values are checked against numpy.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import fill
from numba import cuda

import smartarray as sa

pytestmark = pytest.mark.device


@cuda.jit
def fill2(x, v):  # type: ignore[no-untyped-def]
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] = v


@cuda.jit
def copy(dst, src):  # type: ignore[no-untyped-def]  # writes dst, reads src
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


SHAPE = (6, 5)
DTYPES = ["float64", "int16", "bool", "complex128", "m8[s]"]

# (make on the device, what numpy makes): full's value 7 (True for bool), empty undefined.
MAKERS: dict[str, tuple[Callable[..., Any], Callable[..., Any] | None]] = {
    "zeros": (
        lambda shape, dtype, order: sa.zeros(shape, dtype, order, where="gpu"),
        lambda shape, dtype, order: np.zeros(shape, dtype, order),
    ),
    "ones": (
        lambda shape, dtype, order: sa.ones(shape, dtype, order, where="gpu"),
        lambda shape, dtype, order: np.ones(shape, dtype, order),
    ),
    "full": (
        lambda shape, dtype, order: sa.full(shape, 7, dtype, order, where="gpu"),
        lambda shape, dtype, order: np.full(shape, 7, dtype, order),
    ),
    "empty": (lambda shape, dtype, order: sa.empty(shape, dtype, order, where="gpu"), None),
    "SmartArray(shape=...)": (
        lambda shape, dtype, order: sa.SmartArray(
            shape=shape, dtype=dtype, order=order, where="gpu"
        ),
        None,
    ),
}


def _usage_after(make: Callable[[], Any]) -> tuple[Any, int]:
    """``make()`` and the device memory it added to the budget's usage."""
    gc.collect()  # (earlier tests' dead arrays give their device memory back first)
    before = sa.device_memory_usage()
    made = make()
    return made, sa.device_memory_usage() - before


def _device_bytes(a: sa.SmartArray) -> np.ndarray:
    """What ``a``'s device buffer holds (read directly: no ledger copy, no hand-out)."""
    return np.asarray(a._alloc.device.copy_to_host())


def _device_only(shape: tuple[int, ...], order: str, value: float = 1.0) -> sa.SmartArray:
    """A float64 SmartArray holding ``value``, current on the device only (a kernel wrote
    it), laid out in ``order``."""
    x = sa.SmartArray(np.zeros(shape, order=order))  # type: ignore[call-overload]
    if len(shape) == 1:
        fill[1, 128](x, value)
    else:
        fill2[(1, 1), (8, 8)](x, value)
    assert x.location == "gpu"
    return x


# --- each constructor ---------------------------------------------------------------------


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("maker", list(MAKERS))
def test_made_on_the_device_is_current_on_both_sides_and_never_copied(
    maker: str, dtype: str, order: str
) -> None:
    make, numpy_make = MAKERS[maker]
    with sa.track_transfers() as t:
        a, added = _usage_after(lambda: make(SHAPE, dtype, order))
    assert t.count == 0
    assert added == a.nbytes  # the device buffer is made now, within the budget
    assert a._alloc.device is not None and a._alloc.host is None
    assert a.location == "both" and a.is_valid("host") and a.is_valid("gpu")
    assert a.flags.f_contiguous == (order == "F") and a.dtype == np.dtype(dtype)
    if numpy_make is not None:
        want = numpy_make(SHAPE, dtype, order)
        np.testing.assert_array_equal(_device_bytes(a), want)  # filled on the device
    with sa.track_transfers() as t:
        got = np.array(a)  # the host buffer is made, and filled, on the host
    assert t.count == 0
    assert a._alloc.host is not None and a.location == "both"
    assert got.shape == SHAPE and got.dtype == np.dtype(dtype)
    if numpy_make is not None:
        np.testing.assert_array_equal(got, want)
        assert a._alloc.host.flags.f_contiguous == (order == "F")


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(
    "like",
    [
        (lambda x: sa.zeros_like(x), lambda x: np.zeros_like(x)),
        (lambda x: sa.ones_like(x), lambda x: np.ones_like(x)),
        (lambda x: sa.full_like(x, 4.5), lambda x: np.full_like(x, 4.5)),
        (lambda x: sa.empty_like(x), None),
        (lambda x: np.zeros_like(x), lambda x: np.zeros_like(x)),  # numpy's, dispatched
        (lambda x: np.full_like(x, -2.0), lambda x: np.full_like(x, -2.0)),
    ],
    ids=["zeros_like", "ones_like", "full_like", "empty_like", "np.zeros_like", "np.full_like"],
)
def test_like_of_a_device_only_array(like: tuple[Any, Any], order: str) -> None:
    make, numpy_make = like
    x = _device_only(SHAPE, order)
    with sa.track_transfers() as t:
        a, added = _usage_after(lambda: make(x))
    assert t.count == 0 and added == a.nbytes
    assert isinstance(a, sa.SmartArray) and a.shape == SHAPE and a.dtype == x.dtype
    assert a.flags.f_contiguous == (order == "F")  # order='K': the prototype's layout
    assert a._alloc.device is not None and a._alloc.host is None and a.location == "both"
    with sa.track_transfers() as t:
        got = np.array(a)
    assert t.count == 0 and a.location == "both"
    if numpy_make is not None:
        want = numpy_make(np.zeros(SHAPE, order=order))  # type: ignore[call-overload]
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(_device_bytes(a), want)
    assert x.location == "gpu"  # the prototype's data was never read


def test_like_of_an_array_made_on_the_device_stays_on_the_device() -> None:
    # Not device-only (current on both sides), but the host never used it: its *_like and
    # its copy are made on the device too (as when it was device-only). Once the host has
    # used it, they are made on the host side, where first used.
    z = sa.zeros(8, where="gpu")
    with sa.track_transfers() as t:
        e, c = sa.empty_like(z), z.copy()
    assert t.count == 0
    assert e._alloc.device is not None and e.location == "both"
    assert c._alloc.device is not None and c.location == "gpu"  # copied on the device
    np.testing.assert_array_equal(_device_bytes(c), np.zeros(8))
    assert z._alloc.host is None
    np.array(z)
    e2, c2 = sa.empty_like(z), z.copy()
    assert e2._alloc.device is None and e2.location == "both"  # made where first used
    assert c2._alloc.device is None and c2.location == "host"


# --- views, kernels, and later host reads -------------------------------------------------


def test_views_read_on_the_host_copy_nothing() -> None:
    a = sa.full(SHAPE, 3.0, order="F", where="gpu")
    want = np.full(SHAPE, 3.0, order="F")
    with sa.track_transfers() as t:
        for key in (np.s_[1:4, 2:5], np.s_[:, 3], np.s_[::2, ::-1], np.s_[5]):
            np.testing.assert_array_equal(np.array(a[key]), want[key])
        assert a[5, 4] == 3.0 and a.T[2, 1] == 3.0
        assert a.sum() == want.sum() and a[2:].tolist() == want[2:].tolist()
    assert t.count == 0
    assert a.location == "both"


@pytest.mark.parametrize("maker", ["zeros", "ones", "full", "empty"])
def test_a_kernel_write_then_a_host_read_downloads_once(maker: str) -> None:
    make, numpy_make = MAKERS[maker]
    a = make((100,), "float64", "C")
    with sa.track_transfers() as t:
        fill[1, 128](a[:10], 1.0)  # only the written bytes become device-only
    assert t.count == 0
    assert a[:10].location == "gpu" and a[10:].location == "both"
    with sa.track_transfers() as t:
        got = np.array(a)
    assert (t.h2d_count, t.d2h_count, t.d2h_bytes) == (0, 1, 80)
    assert t.records[0].offset == 0
    np.testing.assert_array_equal(got[:10], np.ones(10))
    if numpy_make is not None:
        np.testing.assert_array_equal(got[10:], numpy_make((90,), "float64", "C"))
    assert a.location == "both"


@pytest.mark.parametrize("maker", ["zeros", "full", "empty"])
def test_a_kernel_writing_it_all_makes_it_device_only(maker: str) -> None:
    a = MAKERS[maker][0]((100,), "float64", "C")
    with sa.track_transfers() as t:
        fill[1, 128](a, 2.0)
    assert t.count == 0 and a.location == "gpu" and not a.is_valid("host")
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.array(a), np.full(100, 2.0))
    assert (t.h2d_count, t.d2h_count, t.d2h_bytes) == (0, 1, 800)


@pytest.mark.parametrize("read_on_host_first", [False, True])
@pytest.mark.parametrize("maker", ["zeros", "full", "empty"])
def test_a_kernel_reading_it_uploads_nothing(maker: str, read_on_host_first: bool) -> None:
    a = MAKERS[maker][0]((100,), "float64", "C")
    if read_on_host_first:
        np.array(a)  # (its host buffer made and filled on the host: no copy)
    out = sa.empty(100, where="gpu")
    with sa.track_transfers() as t:
        copy[1, 128](sa.Out(out), a)
        copy[1, 128](out, sa.In(a))
    assert t.count == 0
    assert a.location == "both" and out.location == "gpu"
    if maker != "empty":
        with sa.track_transfers() as t:
            np.testing.assert_array_equal(np.array(out), np.array(a))
        assert (t.h2d_count, t.d2h_count) == (0, 1)


def test_a_host_write_then_a_kernel_uploads_only_the_written_bytes() -> None:
    a = sa.zeros(100, where="gpu")
    a[10:20] = 1.0  # the host buffer is made (zeros) and written
    assert a[10:20].location == "host" and a[:10].location == a[20:].location == "both"
    out = sa.empty(100, where="gpu")
    with sa.track_transfers() as t:
        copy[1, 128](sa.Out(out), a)
    assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [("h2d", 80, 80)]
    want = np.zeros(100)
    want[10:20] = 1.0
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.array(out), want)
    assert (t.h2d_count, t.d2h_count) == (0, 1)


# --- the memory budget --------------------------------------------------------------------


def test_an_evicted_fill_costs_nothing_and_is_made_again_filled() -> None:
    a = sa.full(100, 2.5, where="gpu")
    b = sa.full(100, 1.5, where="gpu")
    np.array(b)  # b's host buffer is made (filled on the host)
    gc.collect()
    usage = sa.device_memory_usage()
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)  # both device copies are clean: dropped, not spilled
    assert t.count == 0 and t.spill_count == 0
    assert a._alloc.device is None and b._alloc.device is None
    assert sa.device_memory_usage() == usage - a.nbytes - b.nbytes
    sa.set_device_memory_limit(None)
    assert a.location == "both" and b.location == "host"
    out = sa.empty(100, where="gpu")
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.array(a), np.full(100, 2.5))  # filled on the host
        copy[1, 128](sa.Out(out), a)  # a new device buffer, filled on the device
    assert t.count == 0
    np.testing.assert_array_equal(_device_bytes(a), np.full(100, 2.5))
    with sa.track_transfers() as t:
        copy[1, 128](sa.Out(out), b)  # b's fill was on the host only: one upload
    assert (t.h2d_count, t.d2h_count) == (1, 0)


# --- empty: undefined bytes, and writes through a host export ----------------------------


@pytest.mark.parametrize("made", ["where_gpu", "on_the_host_then_read_by_a_kernel"])
def test_an_export_of_empty_made_on_the_device_makes_its_undefined_bytes_the_hosts(
    made: str,
) -> None:
    # The device buffer, made first, and the host buffer, made at the export, hold different
    # (undefined) bytes. A write through the export that equals the host byte it replaces is
    # unseen: once exported, the host's bytes are the array's, and a kernel reads them.
    x = np.arange(16.0) + 100
    if made == "where_gpu":
        a = sa.empty(16, where="gpu")
    else:  # (the same order of buffers from the host: a kernel used it first)
        a = sa.empty(16)
        copy[1, 128](sa.Out(sa.empty(16, where="gpu")), a)
        assert a._alloc.device is not None and a._alloc.host is None
    a._alloc.device.copy_to_device(x + 1)  # (as if the device buffer held other bytes)
    with sa.track_transfers() as t:
        h = np.asarray(a)
    assert t.count == 0 and a.location == "host"
    h[...] = x
    a._alloc.host[...] = x  # (as if the host buffer had held x before: no change to see)
    with sa.track_transfers() as t:
        a.to_gpu()
    assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [("h2d", 0, 128)]
    np.testing.assert_array_equal(_device_bytes(a), x)
    np.testing.assert_array_equal(np.array(a), x)


def test_an_export_of_empty_keeps_the_bytes_a_kernel_wrote_on_both_sides() -> None:
    a = sa.empty(100, where="gpu")
    fill[1, 128](a[:50], 1.0)  # bytes 0..400 device-only
    with sa.track_transfers() as t:
        h = np.asarray(a)  # downloads what the kernel wrote; the rest is undefined
    assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [("d2h", 0, 400)]
    assert a[:50].location == "both" and a[50:].location == "host"
    np.testing.assert_array_equal(h[:50], np.ones(50))
    out = sa.empty(100, where="gpu")
    with sa.track_transfers() as t:
        copy[1, 128](sa.Out(out[:50]), a[:50])  # current on both sides: no copy
    assert t.count == 0
    with sa.track_transfers() as t:
        copy[1, 128](sa.Out(out), a)  # the host's undefined bytes: one upload
    assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [("h2d", 400, 400)]
    del h


def test_empty_read_on_the_host_without_an_export_copies_nothing_either_way() -> None:
    a = sa.empty(100, where="gpu")
    out = sa.empty(100, where="gpu")
    with sa.track_transfers() as t:
        assert a.sum() == a.sum()  # (undefined values, but the same twice)
        assert np.array(a).shape == (100,)
        copy[1, 128](sa.Out(out), a)
    assert t.count == 0 and a.location == "both"


# --- what keeps its own path --------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", ["S4", np.dtype([("a", "f8"), ("b", "i4")])], ids=["text", "record"]
)
def test_dtypes_not_made_filled_start_device_only(dtype: Any) -> None:
    a, added = _usage_after(lambda: sa.zeros(4, dtype=dtype, where="gpu"))
    assert added == a.nbytes and a.location == "gpu"
    with sa.track_transfers() as t:
        got = np.array(a)
    assert (t.h2d_count, t.d2h_count) == (0, 1)
    assert got.tobytes() == np.zeros(4, dtype=dtype).tobytes()


def test_mapped_memory_is_one_buffer_as_before() -> None:
    a = sa.full(8, 3.0, where="gpu", host_memory="mapped")
    assert a.host_memory == "mapped" and a.location == "both"
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.array(a), np.full(8, 3.0))
        fill[1, 128](a, 1.0)
        np.testing.assert_array_equal(np.array(a), np.ones(8))
    assert t.count == 0


def test_an_array_fill_value_is_uploaded_as_before() -> None:
    with sa.track_transfers() as t:
        a = sa.full((2, 3), [1.0, 2.0, 3.0], where="gpu")
    assert (t.h2d_count, t.d2h_count) == (1, 0) and a.location == "both"
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.array(a), np.tile([1.0, 2.0, 3.0], (2, 1)))
    assert t.count == 0


def test_a_launch_cancelled_on_undefined_bytes_keeps_them_undefined() -> None:
    # ``empty(where='gpu')`` with its host buffer made: both buffers hold different bytes,
    # both "current" (undefined). A launch that writes it is cancelled before it is enqueued
    # (its second argument is refused once the first is prepared): the bytes are undefined
    # as before, so an export taken later makes them the host's (numpy: one array, whose
    # bytes are the export's), and a write through the export equal to the bytes it
    # replaces still reaches the device.
    a = sa.empty(8, where="gpu")
    a[0]  # (a host read: the host buffer is made)
    a._alloc.device.copy_to_device(np.full(8, 5.0))  # (device bytes unlike the host's)
    reversed_view = sa.SmartArray(np.arange(8.0))[::-1]
    with pytest.raises(ValueError, match="negative strides"):
        copy[1, 8](sa.Out(a), reversed_view)  # refused in its preparation
    h = np.asarray(a)
    h[3] = h[3]  # (unseen: the same bytes)
    np.testing.assert_array_equal(a.get("gpu").copy_to_host(), h)
