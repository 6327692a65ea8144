"""Foreign ndarrays are copied by default; explicit adoption locks them (issue #11, item 2).

A SmartArray cannot see writes made through an ndarray it does not own, so
``smartarray.asarray``/``SmartArray(obj)`` copy, and ``SmartArray(a, copy=False)`` makes
``a`` (and the ndarrays it is a view of) read-only while the SmartArray lives.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest
from helpers import ROOT, inc
from numba import njit

import smartarray as sa
from smartarray import SmartArray
from smartarray._core import adoption


def test_asarray_copies_an_ndarray() -> None:
    a = np.zeros(4)
    s = sa.asarray(a)
    a[:] = 7  # the caller's array stays writable and its own
    np.testing.assert_array_equal(s.get("host"), np.zeros(4))
    assert not np.shares_memory(s.get("host"), a)
    assert a.flags.writeable


@pytest.mark.parametrize("make", [sa.asarray, SmartArray], ids=["asarray", "SmartArray"])
def test_default_conversions_copy_any_layout(make: object) -> None:
    for data in (np.arange(6.0).reshape(2, 3), np.asfortranarray(np.ones((2, 3)))):
        s = make(data)  # type: ignore[operator]
        data += 1
        assert not np.shares_memory(s.get("host"), data)
        np.testing.assert_array_equal(np.asarray(s), data - 1)


@pytest.mark.device
def test_issue_reproduction_asarray_then_kernel() -> None:
    # The issue's reproduction: writes through the original ndarray after a device copy
    # exists were lost. Now the SmartArray owns a copy: the kernel sees its own data.
    a = np.zeros(4)
    s = sa.asarray(a)
    s.get("gpu")
    a[:] = 7
    with sa.track_transfers() as stats:
        inc[1, 4](s)
        result = s.get("host").copy()
    np.testing.assert_array_equal(result, np.ones(4))
    np.testing.assert_array_equal(a, np.full(4, 7.0))
    assert (stats.h2d_count, stats.d2h_count) == (0, 1)


@pytest.mark.device
def test_issue_reproduction_explicit_adoption_is_loud() -> None:
    a = np.zeros(4)
    s = SmartArray(a, copy=False)
    s.get("gpu")
    with pytest.raises(ValueError, match="read-only"):
        a[:] = 7
    assert s.location == "both"
    inc[1, 4](s)
    np.testing.assert_array_equal(s.get("host"), np.ones(4))
    np.testing.assert_array_equal(a, np.ones(4))  # same memory, synchronised through s


def test_explicit_adoption_locks_until_the_smartarray_is_gone() -> None:
    a = np.arange(4.0)
    s = SmartArray(a, copy=False)
    view = s[1:3]
    assert not a.flags.writeable
    s[0] = 10.0  # writes through the SmartArray reach the shared memory
    assert a[0] == 10.0
    with pytest.raises(ValueError, match="read-only"):
        a[1] = 0.0
    del s
    gc.collect()
    assert not a.flags.writeable  # a view of the SmartArray still uses the memory
    view[0] = 5.0
    del view
    gc.collect()
    assert a.flags.writeable
    a[1] = 0.0
    np.testing.assert_array_equal(a, [10.0, 0.0, 2.0, 3.0])


def test_adopting_a_view_locks_its_base_too() -> None:
    base = np.zeros(8)
    s = SmartArray(base.reshape(2, 4), copy=False)
    with pytest.raises(ValueError, match="read-only"):
        base[0] = 1.0
    del s
    gc.collect()
    base[0] = 1.0


def test_second_adoption_of_the_same_memory_is_refused() -> None:
    a = np.zeros(6)
    s = SmartArray(a, copy=False, label="first")
    before = (a.flags.writeable, s.location)
    with pytest.raises(ValueError, match="already adopted by first"):
        SmartArray(a, copy=False)
    with pytest.raises(ValueError, match="already adopted"):
        SmartArray(a[2:4], copy=False)  # overlapping memory
    assert (a.flags.writeable, s.location) == before
    # Copies and SmartArray views remain the way to go.
    assert not np.shares_memory(sa.asarray(a).get("host"), a)
    shared = SmartArray(s, copy=False)
    shared[0] = 3.0
    assert s[0] == 3.0


def test_disjoint_views_of_one_base_unlock_when_both_are_gone() -> None:
    base = np.zeros(8)
    left_half, right_half = base[:4], base[4:]
    left = SmartArray(left_half, copy=False)
    # A view taken now would be read-only (numpy: views of read-only arrays are), and so
    # would a SmartArray adopting it; the right half was taken before the lock.
    assert not base[4:].flags.writeable
    right = SmartArray(right_half, copy=False)
    assert right.flags.writeable
    del left
    gc.collect()
    assert not base.flags.writeable  # still adopted (through its right half)
    del right
    gc.collect()
    assert base.flags.writeable


def test_read_only_ndarray_adopted_read_only_without_lock() -> None:
    a = np.arange(3.0)
    a.flags.writeable = False
    first = SmartArray(a, copy=False)
    second = SmartArray(a, copy=False)  # nothing can write either: both allowed
    assert not first.flags.writeable and not second.flags.writeable
    del first, second
    gc.collect()
    assert not a.flags.writeable  # never ours to change


def test_a_read_only_view_adopted_locks_the_writable_ndarrays_it_views() -> None:
    # The SmartArray is read-only, but writes through the view's writable base would change
    # its bytes behind its coherence state (a current device copy would keep old values).
    base = np.arange(4.0)
    view = base[:]
    view.flags.writeable = False
    s = SmartArray(view, copy=False)
    assert not s.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        base[0] = 9.0
    del s
    gc.collect()
    base[0] = 9.0  # writable again once the SmartArray is gone
    assert not view.flags.writeable  # the caller's own flag, never ours to change


@pytest.mark.parametrize("order", ["read-only-first", "writable-first"])
def test_read_only_and_writable_adoptions_of_one_memory_exclude_each_other(order: str) -> None:
    # A read-only SmartArray over memory that a writable one adopted too would keep a device
    # copy marked current while the writable one changes the bytes under it: whichever came
    # first, the second adoption is refused (two read-only ones are fine: nothing writes).
    base = np.arange(6.0)
    earlier = base[:]  # a view made before the adoption: adoption cannot lock it
    read_only = base[2:].view()
    read_only.flags.writeable = False
    if order == "read-only-first":
        first = SmartArray(read_only, copy=False, label="ro")
        with pytest.raises(ValueError, match="already adopted by ro"):
            SmartArray(earlier, copy=False)
        assert earlier.flags.writeable  # refused before anything was locked
        assert not SmartArray(base, copy=False).flags.writeable  # locked by ro: read-only
        SmartArray(read_only, copy=False)  # another read-only one: allowed
    else:
        first = SmartArray(base, copy=False, label="rw")
        with pytest.raises(ValueError, match="already adopted by rw"):
            SmartArray(read_only, copy=False)
    del first
    gc.collect()
    second = SmartArray(base, copy=False)  # the first is gone: nothing to conflict with
    assert second.flags.writeable


def test_results_of_operations_are_not_locked_or_registered() -> None:
    s = sa.asarray(np.arange(4.0))
    result = s + 1  # numpy's fresh result, adopted internally
    host = result.get("host")
    assert host.flags.writeable
    host[0] = 9.0
    result.mark_changed("host")
    assert result[0] == 9.0
    # Its memory is not registered as explicitly adopted: adopting a copy works.
    SmartArray(np.array(host), copy=False)


def test_adopting_a_buffer_object_registers_its_memory() -> None:
    buffer = bytearray(32)
    s = SmartArray(np.frombuffer(buffer, dtype=np.float64), copy=False, label="buf")
    s[:] = 1.0
    assert np.frombuffer(buffer)[0] == 1.0
    with pytest.raises(ValueError, match="already adopted by buf"):
        SmartArray(memoryview(buffer).cast("d"), copy=False)


# --- other paths that could wrap a caller's ndarray ---------------------------------------


def test_numpy_results_sharing_a_callers_ndarray_are_copied() -> None:
    s = sa.asarray(np.arange(3.0))
    nd = np.zeros(3)
    same, other = np.atleast_1d(s, nd)  # numpy returns nd itself
    assert same.base is s  # a view of the SmartArray argument stays a view
    assert not np.shares_memory(other.get("host"), nd)
    nd[0] = 5.0
    assert other[0] == 0.0
    assert nd.flags.writeable
    _, broadcast = np.broadcast_arrays(s, nd[:1])
    assert not np.shares_memory(broadcast.get("host"), nd)
    np.testing.assert_array_equal(np.asarray(broadcast), [5.0, 5.0, 5.0])


def test_out_ndarray_is_returned_as_is() -> None:
    s = sa.asarray(np.arange(3.0))
    nd = np.zeros(3)
    assert np.add(s, 1, out=nd) is nd
    np.testing.assert_array_equal(nd, [1.0, 2.0, 3.0])


@njit
def pick(a: Any, b: Any, first: bool) -> Any:
    return a if first else b


def test_jit_result_that_is_a_plain_ndarray_argument_is_copied() -> None:
    s = sa.asarray(np.arange(3.0))
    nd = np.zeros(3)
    assert pick(s, nd, True) is s
    result = pick(s, nd, False)  # typed as a SmartArray (the branches unify)
    assert isinstance(result, SmartArray)
    assert not np.shares_memory(result.get("host"), nd)
    np.testing.assert_array_equal(np.asarray(result), nd)


# --- finalizers never block (issue 24, item 11) ------------------------------------------------

_GC_LOOP = """
import gc, sys
import numpy as np
import smartarray as sa
gc.set_threshold(50, 5, 5)  # collections at almost any allocation, lock held or not
for i in range(int(sys.argv[1])):
    x = [sa.SmartArray(np.zeros(2))]
    x.append(x)  # a SmartArray in a reference cycle: freed by the cyclic collector
    x[0].get("host")  # its host buffer handed out (registered)
    del x
    sa.SmartArray(np.zeros(2)).get("host")  # registers under the lock: a collection may run
    y = [sa.SmartArray(np.zeros(2), copy=False)]  # adopted memory, also freed by collection
    y.append(y)
    del y
print("done")
"""


def test_collections_inside_the_registry_lock_never_hang() -> None:
    """The reproduction from the issue: it hung within seconds in ``_release``."""
    result = subprocess.run(
        [sys.executable, "-c", _GC_LOOP, "20000"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["done"]


def test_a_release_queued_while_the_registry_is_held_is_applied_when_it_is_let_go() -> None:
    """A finalizer that runs on the thread holding the registry lock queues its release; the
    holder applies it before letting go, so the memory can be adopted again at once."""
    memory = np.zeros(4)
    first = SmartArray(memory, copy=False)
    assert not memory.flags.writeable
    outcome: list[Any] = []

    def release_inside_the_lock() -> None:
        nonlocal first
        with adoption._registry():
            del first
            gc.collect()  # the finalizer runs here, on this thread, with the lock held
            outcome.append(memory.flags.writeable)  # still locked: the release is queued
        outcome.append(memory.flags.writeable)  # applied on the way out

    worker = threading.Thread(target=release_inside_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the finalizer waited for a lock its own thread holds"
    assert outcome == [False, True]
    again = SmartArray(memory, copy=False)  # nothing left registered for that memory
    assert again.tolist() == [0.0] * 4


def test_a_release_still_queued_does_not_refuse_a_new_adoption() -> None:
    """A release queued by a finalizer (it found the lock taken) is applied before the next
    adoption looks for overlaps: the freed memory is not reported as still adopted."""
    memory = np.zeros(4)
    first = SmartArray(memory, copy=False)

    def free_under_the_bare_lock() -> None:
        nonlocal first
        with adoption._lock:  # bare lock: nothing applies the queue when it is let go
            del first
            gc.collect()  # the finalizer finds the lock taken: it queues its release

    worker = threading.Thread(target=free_under_the_bare_lock, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the finalizer waited for a lock its own thread holds"
    assert adoption._pending and not memory.flags.writeable
    again = SmartArray(memory, copy=False)
    assert not adoption._pending
    assert again.tolist() == [0.0] * 4 and not memory.flags.writeable  # locked by ``again``
    del again
    gc.collect()
    assert memory.flags.writeable
