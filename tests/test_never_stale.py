"""Regressions of issue 24 in the core: a device copy handed out by ``get('gpu')`` under memory
pressure, iteration during device writes, out-of-band pickles, and ``no_transfers()`` with
threads. Each test failed before its fix."""

from __future__ import annotations

import gc
import pickle
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import add_scalar, counts
from helpers import fill as _fill
from numba import cuda

import smartarray as sa

N = 64
NBYTES = N * 8
DEVICE = sa.tier() != "host-only"
device = pytest.mark.device


@pytest.fixture
def room_for(request: pytest.FixtureRequest) -> Iterator[None]:
    """A device memory limit of ``request.param`` arrays of N float64 (beyond what is held)."""
    gc.collect()
    sa.set_device_memory_limit(sa.device_memory_usage() + request.param * NBYTES)
    try:
        yield
    finally:
        sa.set_device_memory_limit(None)


# --- item 1: a device copy handed out by get('gpu') is never dropped as clean ---------------


@device
@pytest.mark.parametrize("room_for", [2], indirect=True)
def test_the_issue_reproduction_loses_nothing(room_for: None) -> None:
    """``b.get('gpu')`` written by a kernel, two more arrays made current under a limit of two
    arrays, then ``mark_changed('gpu')``: before, b's copy was dropped as clean and the
    declaration raised (data lost)."""
    b = sa.SmartArray(np.full(N, -1.0), label="b")
    db = b.get("gpu")
    _fill[1, N](db, 7.0)
    for label in ("c", "d"):
        sa.SmartArray(np.ones(N), label=label).to_gpu()
    b.mark_changed("gpu")
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 7.0))
    del db


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_a_handed_out_copy_the_caller_holds_is_kept(room_for: None) -> None:
    """While the caller holds the device array, evicting it would free nothing: it is kept,
    and a request that needs its room fails naming it, with nothing lost."""
    b = sa.SmartArray(np.full(N, -1.0), label="b")
    db = b.get("gpu")
    c = sa.SmartArray(np.ones(N), label="c")
    with pytest.raises(MemoryError, match=r"handed out by get\('gpu'\).*b \(512 bytes\)"):
        c.to_gpu()
    assert c.location == "host"
    _fill[1, N](db, 7.0)  # written after the refused eviction: still b's device copy
    b.mark_changed("gpu")
    assert b.location == "gpu"
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 7.0))


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_a_handed_out_copy_the_caller_dropped_is_spilled_not_dropped(room_for: None) -> None:
    """The old API's usual form, ``kernel(b.get('gpu'))`` then ``b.mark_changed('gpu')``: if
    b's copy must go in between, it is spilled (one download), and the declaration finds the
    written data on the host."""
    b = sa.SmartArray(np.full(N, -1.0), label="b")
    _fill[1, N](b.get("gpu"), 5.0)
    gc.collect()
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="c").to_gpu()  # needs b's room
    assert (t.spill_count, t.d2h_count, t.h2d_count) == (1, 1, 1)
    assert t.records[0].array == "b" and t.records[0].spill
    with sa.track_transfers() as t:
        b.mark_changed("gpu")
        np.testing.assert_array_equal(np.asarray(b), np.full(N, 5.0))
    assert counts(t) == (0, 0) and b.location == "host"


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_after_the_declaration_the_copy_is_evicted_as_usual(room_for: None) -> None:
    b = sa.SmartArray(np.full(N, -1.0), label="b")
    db = b.get("gpu")
    _fill[1, N](db, 3.0)
    b.mark_changed("gpu")  # the next state change: the hand-out is declared
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="c").to_gpu()  # b is dirty: spilled
    assert (t.spill_count, t.h2d_count) == (1, 1)
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 3.0))
    # A host write is a state change too: a clean copy handed out before it is dropped.
    e = sa.SmartArray(np.zeros(N), label="e")
    de = e.get("gpu")  # (evicts c, clean)
    e[0] = 1.0
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="f").to_gpu()
    assert (t.spill_count, t.d2h_count) == (0, 0)
    assert e._alloc.device is None
    del de


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_read_only_arrays_and_adopted_device_arrays_are_not_held(room_for: None) -> None:
    """A read-only array's device copy cannot be declared written (its hand-out is not
    tracked), and an adopted device array is never evicted anyway (and is returned as is)."""
    memory = np.zeros(N)
    memory.flags.writeable = False
    ro = sa.SmartArray(memory, copy=False, label="ro")  # a read-only SmartArray
    handle = ro.get("gpu")
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="c").to_gpu()  # ro's clean copy goes
    assert t.spill_count == 0 and ro._alloc.device is None
    del handle
    adopted = cuda.to_device(np.zeros(N))
    a = sa.SmartArray(adopted, copy=False)
    assert a.get("gpu") is adopted


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_taking_the_host_side_ends_the_hand_out(room_for: None) -> None:
    """``get('gpu')`` to read, then ``get('host')`` to write and ``mark_changed('host')``:
    pressure in between must not spill the device copy over the host write."""
    b = sa.SmartArray(np.zeros(N), label="b")
    b.get("gpu")
    host = b.get("host")
    host[:] = 42.0
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="c").to_gpu()  # needs b's room: dropped, clean
    assert t.spill_count == 0
    b.mark_changed("host")
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 42.0))


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_every_handed_out_array_keeps_the_copy(room_for: None) -> None:
    """Two hand-outs: the copy is kept while the caller holds either."""
    b = sa.SmartArray(np.zeros(N), label="b")
    first = b.get("gpu")
    _fill[1, 1](b[:1].get("gpu"), 1.0)  # a second hand-out, dropped at once
    gc.collect()
    with pytest.raises(MemoryError, match=r"handed out by get\('gpu'\)"):
        sa.SmartArray(np.ones(N), label="c").to_gpu()
    _fill[1, N](first, 9.0)
    b.mark_changed("gpu")
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 9.0))


@device
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_a_hand_out_ends_with_a_fresh_upload(room_for: None) -> None:
    """A host write, then an upload: the device copy is a copy of the host data again, and a
    later eviction drops it with no spill (the flag of the old hand-out is gone)."""
    b = sa.SmartArray(np.zeros(N), label="b")
    b.get("gpu")
    b[0] = 1.0
    b.to_gpu()
    gc.collect()
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="c").to_gpu()
    assert t.spill_count == 0 and b._alloc.device is None


@pytest.mark.skipif(sa.tier() != "simulator", reason="only the simulator raises in a kernel")
@pytest.mark.parametrize("room_for", [1], indirect=True)
def test_a_failed_launch_after_a_hand_out_still_refuses_the_declaration(room_for: None) -> None:
    """A kernel that raised leaves its argument's host copy current (state HOST): an eviction
    then drops the device copy with nothing spilled, and ``mark_changed('gpu')`` still says
    the device copy is stale instead of passing over the lost device writes."""

    @cuda.jit
    def out_of_bounds(a):  # type: ignore[no-untyped-def]
        a[a.size + 1] = 1.0

    b = sa.SmartArray(np.zeros(N), label="b")
    _fill[1, N](b.get("gpu"), 7.0)
    gc.collect()
    with pytest.raises(IndexError):
        out_of_bounds[1, 1](b)
    with sa.track_transfers() as t:
        sa.SmartArray(np.ones(N), label="c").to_gpu()
    assert t.spill_count == 0
    with pytest.raises(RuntimeError, match="device copy is stale"):
        b.mark_changed("gpu")


@device
def test_free_device_downloads_a_handed_out_copy_first() -> None:
    e = sa.SmartArray(np.zeros(N), label="e")
    _fill[1, N](e.get("gpu"), 4.0)
    with sa.track_transfers() as t:
        e.free_device()
    assert counts(t) == (0, 1)
    np.testing.assert_array_equal(np.asarray(e), np.full(N, 4.0))


# --- item 5: iteration reads every item through the coherence state --------------------------


@device
def test_iteration_sees_a_kernel_launched_inside_the_loop() -> None:
    a = sa.SmartArray(np.zeros(4))
    a.to_gpu()
    seen = []
    with sa.track_transfers() as t:
        for i, item in enumerate(a):
            seen.append(float(item))
            if i == 1:
                add_scalar[1, 4](a, 7.0)
    assert seen == [0.0, 0.0, 7.0, 7.0]
    assert counts(t) == (0, 1)  # the write found before the third item: one download


@device
def test_iteration_of_a_view_and_an_empty_array() -> None:
    base = sa.SmartArray(np.arange(8.0))
    add_scalar[1, 8](base, 1.0)  # only the device copy current
    with sa.track_transfers() as t:
        assert [float(x) for x in base[1::3]] == [2.0, 5.0, 8.0]
    assert counts(t) == (0, 1)
    assert list(sa.SmartArray(np.zeros(0))) == []


def test_iteration_gives_numpys_items() -> None:
    data = np.array([(1, 2.0), (3, 4.0)], dtype=[("i", "i4"), ("f", "f8")])
    for values in (np.arange(5.0), np.arange(3, dtype=np.int16), data):
        a = sa.SmartArray(values)
        items, expected = list(a), list(values)
        assert [type(x) for x in items] == [type(x) for x in expected]
        assert [x.tolist() for x in items] == [x.tolist() for x in expected]
    rows = list(sa.SmartArray(np.arange(6.0).reshape(2, 3)))
    assert all(isinstance(row, sa.SmartArray) for row in rows)
    with pytest.raises(TypeError, match="0-d"):
        iter(sa.SmartArray(np.float64(1.0)))


# --- item 6: out-of-band pickles never share the caller's buffer -----------------------------


def test_out_of_band_pickles_loaded_twice_are_independent() -> None:
    a = sa.SmartArray(np.arange(4.0), label="a")
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
    assert buffers  # (the data went out of band)
    x = pickle.loads(data, buffers=buffers)
    y = pickle.loads(data, buffers=buffers)
    x[0] = 42.0
    assert y[0] == 0.0 and a[0] == 0.0 and np.asarray(buffers[0].raw()).view(np.float64)[0] == 0
    assert x.label == y.label == "a"
    if DEVICE:  # each has its own coherence state: y's device copy is y's data
        y.to_gpu()
        x[1] = 7.0
        np.testing.assert_array_equal(y.get("gpu").copy_to_host(), np.arange(4.0))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_in_band_pickles_still_round_trip(protocol: int) -> None:
    a = sa.SmartArray(np.arange(6.0).reshape(2, 3), label="p")
    restored = pickle.loads(pickle.dumps(a, protocol=protocol))
    np.testing.assert_array_equal(np.asarray(restored), np.arange(6.0).reshape(2, 3))
    restored[0, 0] = 9.0
    assert a[0, 0] == 0.0


# --- item 9: no_transfers() is the calling thread's ------------------------------------------


@device
def test_no_transfers_in_one_thread_does_not_refuse_another_threads_copies() -> None:
    a = sa.SmartArray(np.zeros(N), label="a")
    add_scalar[1, N](a, 1.0)  # only the device copy current
    b = sa.SmartArray(np.zeros(N), label="b")
    add_scalar[1, N](b, 2.0)
    inside, done = threading.Event(), threading.Event()
    refused: list[BaseException] = []

    def refuse() -> None:
        with sa.no_transfers():
            inside.set()
            try:
                np.asarray(b)  # this thread's copy: refused
            except sa.TransferError as error:
                refused.append(error)
            done.wait(timeout=60)

    other = threading.Thread(target=refuse)
    other.start()
    try:
        assert inside.wait(timeout=60)
        with sa.track_transfers() as t:
            np.testing.assert_array_equal(np.asarray(a), np.ones(N))  # copied: not refused
    finally:
        done.set()
        other.join()
    assert counts(t) == (0, 1)
    assert len(refused) == 1 and "no_transfers" in str(refused[0])
    assert b.location == "gpu"  # refused before the copy: flags unchanged


# --- numpy functions given a SmartArray as a positional ``out`` ---------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda src, out: np.clip(src, 0.0, 1.0, out), [0.0, 0.5, 1.0, 0.25]),
        (lambda src, out: np.around(src, 1, out), [-1.0, 0.5, 2.0, 0.2]),
        (lambda src, out: np.cumsum(src, 0, None, out), [-1.0, -0.5, 1.5, 1.75]),
        (lambda src, out: src.clip(0.0, 1.0, out), [0.0, 0.5, 1.0, 0.25]),
        (lambda src, out: src.round(1, out), [-1.0, 0.5, 2.0, 0.2]),
        (lambda src, out: src.cumsum(0, None, out), [-1.0, -0.5, 1.5, 1.75]),
        (lambda src, out: src.take([3, 2, 1, 0], None, out), [0.25, 2.0, 0.5, -1.0]),
        (lambda src, out: src.take([3, 2, 1, 0], None, out, "clip"), [0.25, 2.0, 0.5, -1.0]),
    ],
)
def test_a_positional_out_is_written_and_marked_changed(call: object, expected: list) -> None:
    """``np.clip(a, lo, hi, out)`` (numpy's signature) and ``a.clip(lo, hi, out)``,
    ``a.take(i, None, out)`` (ndarray's): they raised 'output array is read-only' (the output
    was unwrapped as an input); the keyword forms always worked."""
    src = sa.SmartArray(np.array([-1.0, 0.5, 2.0, 0.25]))
    out = sa.SmartArray(np.full(4, 9.0))
    if DEVICE:
        out.to_gpu()  # current on both sides: the write must make the device copy stale
    result = call(src, out)  # type: ignore[operator]
    assert result is out
    np.testing.assert_array_equal(np.asarray(out), expected)
    np.testing.assert_array_equal(call(np.asarray(src), np.full(4, 9.0)), expected)  # numpy's
    assert out.location == "host"


@pytest.mark.parametrize(
    ("call", "shape", "dtype"),
    [
        (lambda a, o: a.all(None, None, o), (), bool),
        (lambda a, o: a.any(0, None, o, False), (2,), bool),
        (lambda a, o: a.sum(0, None, o), (2,), float),
        (lambda a, o: a.max(0, o), (2,), float),
        (lambda a, o: a.std(0, None, o, 1), (2,), float),
        (lambda a, o: a.argmax(0, o), (2,), np.intp),
        (lambda a, o: a.compress([True, False], None, o), (1,), float),
    ],
)
def test_a_method_s_positional_parameters_are_ndarray_s(call: Any, shape: Any, dtype: Any) -> None:
    """Each positional argument means what it means to ndarray's method (``a.all(axis,
    dtype, out, keepdims)``, not ``np.all``'s ``(a, axis, out, keepdims)``)."""
    data = np.array([[1.0, 0.0], [2.0, 3.0]])
    numpy_out = np.zeros(shape, dtype)
    call(data, numpy_out)
    out = sa.SmartArray(np.zeros(shape, dtype))
    assert call(sa.SmartArray(data), out) is out
    np.testing.assert_array_equal(np.asarray(out), numpy_out)


@pytest.mark.parametrize(
    "call",
    [
        lambda a, o: a.round(0, o, 5),  # (too many arguments)
        lambda a, o: a.cumsum(0, None, o, "x"),
        lambda a, o: a.take([0, 1], None, o, "clip", mode="wrap"),  # (by name and position)
        lambda a, o: a.all(None, o),  # (o is the dtype)
    ],
)
def test_a_method_call_numpy_refuses_is_refused(call: Any) -> None:
    data = np.arange(4.0)
    with pytest.raises(TypeError):
        call(data, np.zeros(4))
    out = sa.SmartArray(np.zeros(4))
    with pytest.raises(TypeError):
        call(sa.SmartArray(data), out)
    np.testing.assert_array_equal(np.asarray(out), np.zeros(4))  # nothing written


@pytest.mark.parametrize(
    ("data", "out_dtype"),
    [
        (np.array([1 + 2j, 3 - 1j]), complex),
        (np.array([True, False]), bool),  # (numpy copies real data: no bool loop is used)
        (np.array([1.5, 2.5], np.float32), np.float16),
    ],
)
def test_conj_writes_its_positional_out(data: Any, out_dtype: Any) -> None:
    """``a.conj(out)`` (numpy's method takes ``out`` by position only)."""
    expected = np.zeros(2, out_dtype)
    assert data.conj(expected) is expected
    out = sa.SmartArray(np.zeros(2, out_dtype))
    if DEVICE:
        out.to_gpu()
    assert sa.SmartArray(data).conj(out) is out
    np.testing.assert_array_equal(np.asarray(out), expected)
    assert out.location == "host"
    plain = np.zeros(2, out_dtype)
    assert sa.SmartArray(data).conjugate(plain) is plain  # (an ndarray out: itself too)
    np.testing.assert_array_equal(plain, expected)
    with pytest.raises(TypeError, match="output must be an array"):
        sa.SmartArray(data).conj((out,))


def test_choose_takes_its_choices_positionally() -> None:
    index = np.array([[0, 1], [1, 0]])
    x, y = np.ones((2, 2)), np.full((2, 2), 5.0)
    a, sx, sy = sa.SmartArray(index), sa.SmartArray(x), sa.SmartArray(y)
    np.testing.assert_array_equal(np.asarray(a.choose(sx, sy)), index.choose(x, y))
    np.testing.assert_array_equal(np.asarray(sy), y)  # (not an output)


def test_intents_as_a_positional_out() -> None:
    x = sa.SmartArray(np.arange(5.0))
    y = sa.zeros(5)
    assert np.clip(x, 1.0, 3.0, sa.Out(y)) is y
    np.testing.assert_array_equal(np.asarray(y), [1.0, 1.0, 2.0, 3.0, 3.0])
    with pytest.raises(TypeError, match="read-only input, but it is an output"):
        np.clip(x, 0.0, 1.0, sa.In(y))
    np.testing.assert_array_equal(np.asarray(y), [1.0, 1.0, 2.0, 3.0, 3.0])  # unchanged


def test_a_release_queued_while_an_adoption_is_refused_is_applied() -> None:
    """The registry applies queued releases also when its body raises (a refused adoption)."""
    from smartarray._core import adoption

    memory = np.zeros(4)
    first = sa.SmartArray(memory, copy=False)

    def body() -> None:
        nonlocal first
        with pytest.raises(ValueError, match="refused"), adoption._registry():
            del first
            gc.collect()  # queued: this thread holds the lock
            raise ValueError("refused")

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive()
    assert not adoption._pending and memory.flags.writeable
