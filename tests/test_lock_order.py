"""The order in which numpy calls take allocation locks (review 3 of the lock-order change).

A numpy call that writes SmartArrays holds their locks from the copy-in to the flag update,
and takes its inputs' locks too, all in one order (by id), while it unwraps them. Nothing may
take another SmartArray's lock while the targets' are held: an input given as a wrapper
(``a.flat``, an intent in a setitem, a user's ``__array__`` object), converted by numpy inside
the call, used to take its array's lock then, out of order, and deadlocked against a call
holding the two locks the other way round. Inputs' locks are released before numpy runs, so
other threads can read (or evict) them meanwhile.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from smartarray import In, SmartArray
from smartarray._numpy import protocols


def _ordered_pair() -> tuple[SmartArray, SmartArray]:
    """Two arrays, the first with the lower allocation id (its lock is taken first)."""
    a = SmartArray(np.arange(64.0))
    b = SmartArray(np.arange(64.0) * 2)
    return (a, b) if id(a._alloc) < id(b._alloc) else (b, a)


class _List(list):
    """A user's list subclass (numpy reads it as a list)."""


def _setitem(w: SmartArray, x: Any) -> None:
    w[:] = x


def _flat_setitem(w: SmartArray, x: Any) -> None:
    w.flat[:] = x


_WRITES: dict[str, Callable[[SmartArray, Any], Any]] = {
    "np.copyto(w, x)": lambda w, x: np.copyto(w, x),
    "w[:] = x": _setitem,
    "w.flat[:] = x": _flat_setitem,
    "np.add(x, 0, out=w)": lambda w, x: np.add(x, 0.0, out=w),
    "np.add.at(w, range(64), x)": lambda w, x: np.add.at(w, range(64), x),
    "np.concatenate([x], out=w)": lambda w, x: np.concatenate([x], out=w),
    "w.put(range(64), x)": lambda w, x: w.put(range(64), x),
    "np.clip(x, 0, 1, out=w)": lambda w, x: np.clip(x, 0.0, 1.0, out=w),
}

# What wraps the input array ``r`` (128 elements; its first 64 read, or every second one).
_WRAPPED: dict[str, Callable[[Any], Any]] = {
    "r[:64]": lambda r: r[:64],
    "r[:64].flat": lambda r: r[:64].flat,
    "r[::2].flat": lambda r: r[::2].flat,  # (not contiguous: read as its copy)
    "In(r[:64])": lambda r: In(r[:64]),
}


@pytest.fixture
def conversions(monkeypatch):
    """Whether a watched lock was held each time a SmartArray or its ``flat`` was converted
    by ``__array__``."""
    from smartarray._numpy.flatiter import FlatIterator

    watched: list[SmartArray] = []
    held: list[bool] = []
    for cls in (SmartArray, FlatIterator):
        original = cls.__array__

        def record(self, *args, _original=original, **kwargs):
            held.append(any(w._alloc.lock._is_owned() for w in watched))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__array__", record)
    return watched, held


@pytest.mark.parametrize("wrapped", sorted(_WRAPPED))
@pytest.mark.parametrize("write", sorted(_WRITES))
def test_a_wrapped_input_is_read_holding_no_other_lock(conversions, write, wrapped):
    watched, held = conversions
    r = SmartArray(np.arange(128.0) / 128)
    w = SmartArray(np.arange(64.0) * 2)
    watched.append(w)
    expected = np.asarray(w).copy()
    _WRITES[write](expected, np.array(_WRAPPED[wrapped](r)))  # (numpy's result, same values)
    held.clear()
    _WRITES[write](w, _WRAPPED[wrapped](r))
    assert not any(held), "an input converted while the target's lock was held"
    np.testing.assert_array_equal(np.asarray(w), expected)
    assert not w._alloc.lock._is_owned() and not r._alloc.lock._is_owned()


def test_a_list_subclass_of_arrays_is_read_holding_no_other_lock(conversions):
    watched, held = conversions
    r, w = _ordered_pair()
    watched.append(w)
    np.copyto(w, _List([r]))
    w.reshape(1, 64)[:] = _List([r * 2])
    np.add(_List([r]), 1.0, out=w.reshape(1, 64))
    np.testing.assert_array_equal(np.asarray(w), np.asarray(r) + 1.0)
    assert not any(held)


def test_an_object_array_stores_a_wrapper_as_it_is():
    r = SmartArray(np.arange(4.0))
    w = SmartArray(np.empty(3, dtype=object))
    flat, intent = r.flat, In(r)
    w[0] = flat
    w[1] = intent
    w[2] = r
    assert w[0] is flat and w[1] is intent and w[2] is r  # (numpy stores the objects)


def test_a_user_array_like_is_converted_by_numpy_with_the_dtype_it_asks():
    class Precise:  # float32 unless asked for a dtype, as numpy's setitem and put do
        def __array__(self, dtype=None, copy=None):
            return np.full(4, 1 / 3, dtype=dtype or np.float32)

    for write in (
        lambda w: w.__setitem__(slice(None), Precise()),
        lambda w: np.put(w, range(4), Precise()),
        lambda w: np.copyto(w, Precise()),
    ):
        expected = np.zeros(4)
        write(expected)
        w = SmartArray(np.zeros(4))
        write(w)
        np.testing.assert_array_equal(np.asarray(w), expected)


def test_a_flat_input_of_a_contiguous_array_is_read_as_its_view():
    r, s = _ordered_pair()
    first, second = np.atleast_1d(r.flat, s)
    # (numpy's: the first result is a view of r; not a new array over r's memory)
    assert first._alloc is r._alloc and second._alloc is s._alloc
    r[0] = -1.0
    assert first[0] == -1.0


def test_a_flat_input_of_a_strided_array_is_its_copy():
    base = SmartArray(np.arange(16.0).reshape(4, 4))
    target = SmartArray(np.zeros(8))
    np.copyto(target, base[:, ::2].flat)
    np.testing.assert_array_equal(np.asarray(target), np.arange(16.0).reshape(4, 4)[:, ::2].ravel())
    np.testing.assert_array_equal(np.asarray(base), np.arange(16.0).reshape(4, 4))


def test_an_intent_nested_in_a_list_is_read_as_its_array():
    r, w = _ordered_pair()
    out = SmartArray(np.zeros(128))
    np.concatenate([In(r), w], out=out)
    np.testing.assert_array_equal(np.asarray(out), np.concatenate([np.asarray(r), np.asarray(w)]))
    w[:] = In(r)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(r))


def test_numpy_runs_holding_its_targets_locks_only():
    r, w = _ordered_pair()
    seen: list[tuple[bool, bool]] = []

    def read(x: float, y: float) -> float:
        seen.append((r._alloc.lock._is_owned(), target._alloc.lock._is_owned()))
        return x + y

    target = SmartArray(np.zeros(64, dtype=object))
    np.frompyfunc(read, 2, 1)(r, w, out=target)  # (a ufunc: __array_ufunc__)
    assert seen and set(seen) == {(False, True)}

    seen.clear()

    def copy(host_target: np.ndarray, host_input: np.ndarray) -> None:
        seen.append((r._alloc.lock._is_owned(), target._alloc.lock._is_owned()))
        host_target[...] = host_input

    protocols.call_on_host(copy, (target, r), {}, writes_first=True)  # (__array_function__)
    assert seen == [(False, True)]
    np.testing.assert_array_equal(np.asarray(target).astype(float), np.asarray(r))


def test_a_reader_of_an_input_does_not_wait_for_the_call():
    r = SmartArray(np.arange(64.0))
    target = SmartArray(np.zeros(64, dtype=object))
    inside = threading.Event()
    release = threading.Event()

    def slow(x: float) -> float:
        inside.set()
        release.wait(10)
        return x

    caller = threading.Thread(target=lambda: np.frompyfunc(slow, 1, 1)(r, out=target))
    caller.start()
    try:
        assert inside.wait(10)
        started = time.monotonic()
        assert r._alloc.lock.acquire(timeout=5), "the input's lock is held during the call"
        r._alloc.lock.release()
        assert time.monotonic() - started < 5
        assert not target._alloc.lock.acquire(blocking=False)  # (the target's is held)
    finally:
        release.set()
        caller.join(10)
    assert not caller.is_alive()


def _flat_copyto(r: SmartArray, w: SmartArray) -> None:
    np.copyto(w, r.flat)


def _copyto(r: SmartArray, w: SmartArray) -> None:
    np.copyto(w, r)


def _flat_setitem_of(r: SmartArray, w: SmartArray) -> None:
    w[:] = r.flat


def _intent_setitem_of(r: SmartArray, w: SmartArray) -> None:
    w[:] = In(r)


def _add_out(r: SmartArray, w: SmartArray) -> None:
    np.add(r, 0.0, out=w)


def _flat_add_out(r: SmartArray, w: SmartArray) -> None:
    np.add(r.flat, 0.0, out=w)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (_flat_copyto, _copyto),
        (_flat_setitem_of, _add_out),
        (_intent_setitem_of, _add_out),
        (_flat_add_out, _copyto),
    ],
    ids=[
        "copyto flat / copyto",
        "w[:] = r.flat / add out=",
        "w[:] = In(r) / add out=",
        "add(r.flat) out= / copyto",
    ],
)
def test_wrapped_inputs_do_not_deadlock(fast_switching, first, second):
    r, w = _ordered_pair()  # (r's lock first in the global order)
    stop = time.monotonic() + 1.0

    def loop(operation: Callable[[SmartArray, SmartArray], None]) -> None:
        while time.monotonic() < stop:
            operation(r, w)

    threads = [threading.Thread(target=loop, args=(op,), daemon=True) for op in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
    np.testing.assert_array_equal(np.asarray(w), np.asarray(r))


@pytest.mark.parametrize(
    "wrap", [lambda x: x.flat, In, lambda x: [x.flat, 0, 0]], ids=["flat", "In", "[flat, 0, 0]"]
)
def test_object_arrays_assigned_each_other_s_wrappers_do_not_deadlock(fast_switching, wrap):
    a = SmartArray(np.array([1, 2, 3], dtype=object))
    b = SmartArray(np.array([4, 5, 6], dtype=object))
    stop = time.monotonic() + 1.0

    def loop(x: SmartArray, y: SmartArray) -> None:
        while time.monotonic() < stop:
            x[...] = wrap(y)

    threads = [threading.Thread(target=loop, args=pair, daemon=True) for pair in ((a, b), (b, a))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), "deadlock"


def test_an_in_place_operator_takes_no_lock_while_holding_its_own():
    """``a += b`` for a ``b`` whose host buffer is not made yet (``sa.zeros``): reading ``b``
    makes it, under ``b``'s lock; done while holding ``a``'s, it deadlocked against
    ``np.add(a, 1, out=b)``, which takes the two in the global order (review 13)."""
    import smartarray as sa

    pool = [sa.zeros(4) for _ in range(64)]
    candidates = [SmartArray(np.zeros(4)) for _ in range(64)]
    for candidate in candidates:
        candidate += 0.0  # (current on the host, host buffer made)
    a = max(candidates, key=lambda x: id(x._alloc))
    b = min(pool, key=lambda x: id(x._alloc))
    if id(b._alloc) > id(a._alloc):
        pytest.skip("no array with a lower allocation id")
    switched = threading.Event()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "_host_buffer" and not switched.is_set():
            switched.set()
            time.sleep(0.2)  # (a thread switch here: the other thread runs)

    def first():
        sys.setprofile(profile)
        try:
            a.__iadd__(b)
        finally:
            sys.setprofile(None)
            switched.set()

    def second():
        switched.wait(10)
        np.add(a, 1.0, out=b)

    threads = [threading.Thread(target=f, daemon=True) for f in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
    # (either order: b read before the other thread wrote it, or after)
    assert np.asarray(a).tolist() in ([0.0] * 4, [1.0] * 4)
    np.testing.assert_array_equal(np.asarray(b), np.ones(4))
