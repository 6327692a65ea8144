"""Setting ``shape`` while another thread uses the array (review 6's race).

The shape setter changes two attributes (``_shape`` and ``_strides``) that other threads read
without the allocation's lock, and it drops caches made for the old layout that other threads
may be making at that moment. Before the fix a slice taken in another thread could get the new
shape's strides with a 1-d shape (a view whose strides reach past the buffer), and a host view
made for the old layout could be cached after the setter dropped it. Numpy's own setter is one
C call, atomic for other Python threads; these tests hold SmartArray to the same: every result
a reading thread gets has one of the two layouts, and the caches left at the end are those of
the array's layout.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from smartarray import SmartArray

ROUNDS = 4000


def _toggle_shape(array: SmartArray, stop: threading.Event) -> None:
    while not stop.is_set():
        array.shape = (4, 4)
        array.shape = (16,)


def _race(array: SmartArray, read) -> list:
    """Run ``read(array)`` ROUNDS times while another thread toggles the array's shape
    between (16,) and (4, 4); the results that have neither layout's form."""
    stop = threading.Event()
    writer = threading.Thread(target=_toggle_shape, args=(array, stop))
    writer.start()
    bad = []
    try:
        for _ in range(ROUNDS):
            problem = read(array)
            if problem is not None:
                bad.append(problem)
    finally:
        stop.set()
        writer.join()
    return bad


def _check_caches(array: SmartArray, data: bool = True) -> None:
    """The host views cached on ``array`` (if any) have its layout, and so do its results
    (with ``data``: its data is still ``np.arange(16.0)``)."""
    for name in ("_host_rw", "_host_ro", "_host_1d", "_template_cache"):
        view = getattr(array, name)
        if view is not None:
            assert view.shape == array.shape, name
            assert view.strides == array.strides, name
    for name in ("_jit_rw", "_jit_ro"):
        view = array.__dict__.get(name)
        if view is not None:
            assert view.shape == array.shape, name
    if data:
        np.testing.assert_array_equal(np.asarray(array), np.arange(16.0).reshape(array.shape))
    assert (array + 0).shape == array.shape


def test_a_slice_taken_while_the_shape_changes_has_one_layout_or_the_other(fast_switching):
    array = SmartArray(np.arange(16.0))

    def read(array):
        view = array[1:3]
        layout = (view.shape, view.strides)
        if layout not in {((2,), (8,)), ((2, 4), (32, 8))}:
            return layout
        data = np.asarray(view).ravel()
        first = 1 if view.ndim == 1 else 4  # elements 1 and 2, or rows 1 and 2
        if not np.array_equal(data, np.arange(first, first + data.size, dtype=float)):
            return ("data", layout, data)
        return None

    assert _race(array, read) == []
    _check_caches(array)


def test_host_views_cached_while_the_shape_changes_have_the_arrays_layout(fast_switching):
    array = SmartArray(np.arange(16.0))

    def read(array):
        # every cache made on first use: host views (read-only, writable, element), template
        array._host_rw = array._host_ro = array._host_1d = None
        array._host_scalar = array._template_cache = None
        total = float(np.sum(array))  # a host read (caches _host_ro)
        array += 0.0  # a host write (caches _host_rw)
        first = np.asarray(array[0]).ravel()  # an element (1-d) or the first row
        if total != 120.0 or not np.array_equal(first, np.arange(first.size, dtype=float)):
            return (total, first)
        return None

    assert _race(array, read) == []
    _check_caches(array)
    # and the caches made from now on too
    np.sum(array)
    array += 0.0
    _check_caches(array)


# --- Deterministic: the other thread's setter run at each point where CPython may switch ----
#
# With the GIL, CPython switches threads only at calls (and backward jumps, and a function's
# start). _at_each_call runs a scenario once for each call a given function makes, and sets
# the array's shape at that call (its start, or its return for a call into C), as another
# thread could. A point where the allocation's lock is held is skipped: the other thread
# would wait for it.


def _setter_at_call(array, new_shape, code, n):
    """A profile function that sets ``array.shape = new_shape`` at the ``n``-th call event
    of a frame of ``code`` (of any frame for None), and the list it appends the event to."""
    events = [0]
    fired: list[str] = []

    def profile(frame, event, arg):
        if fired:
            return
        if event in ("call", "return"):
            frame = frame.f_back
        elif event not in ("c_call", "c_return"):
            return
        if frame is None or (code is not None and frame.f_code is not code):
            return
        if array._alloc.lock._is_owned():
            return  # (the other thread would wait for the lock)
        if events[0] == n:
            fired.append(event)
            array.shape = new_shape
        events[0] += 1

    return profile, fired


def _at_each_call(function, scenario, check) -> int:
    """For n = 0, 1, ...: ``array, new_shape, run = scenario()``; run ``run()`` with
    ``array.shape = new_shape`` done at the n-th call event of ``function``'s frame (of any
    frame below ``run`` for ``function`` None), then ``check(array, result)`` (``result``:
    what ``run`` returned, or the exception it raised). Returns how many points were tried."""
    code = None if function is None else function.__code__
    n = 0
    while True:
        array, new_shape, run = scenario()
        profile, fired = _setter_at_call(array, new_shape, code, n)
        sys.setprofile(profile)
        try:
            result = run()
        except Exception as error:  # (checked by ``check``)
            result = error
        finally:
            sys.setprofile(None)
        if not fired:
            return n
        check(array, result)
        n += 1


@pytest.mark.device
def test_an_element_read_of_a_mixed_array_has_one_layout_at_every_switch_point():
    from smartarray._array import SmartArray as Cls

    def scenario():
        array = SmartArray(np.arange(16.0))
        np.sum(array)  # (caches the host view)
        device = array.get("gpu")
        device[1:2].copy_to_device(np.array([100.0]))  # element 1, on the device only
        array[0:4].mark_changed("gpu")  # bytes 0-31 current on the device: MIXED
        assert array._alloc.state.name == "MIXED"
        return array, (4, 4), lambda: array[1]

    def check(array, result):
        if array.shape == (16,):
            assert result == 100.0  # the device's element 1
        else:  # old layout's element 1, or new layout's row 1 (elements 4-7)
            if np.ndim(result) == 0:
                assert result == 100.0
            else:
                np.testing.assert_array_equal(result, [4.0, 5.0, 6.0, 7.0])

    assert _at_each_call(Cls._index, scenario, check) > 0


@pytest.mark.device
def test_an_element_write_to_a_mixed_array_has_one_layout_at_every_switch_point():
    from smartarray._array import SmartArray as Cls

    def scenario():
        array = SmartArray(np.arange(16.0))
        array.shape = (4, 4)
        array += 0.0  # (caches the writable host view, 2-d)
        device = array.get("gpu")
        device[0:1].copy_to_device(np.full((1, 4), 100.0))  # row 0, on the device only
        array[0].mark_changed("gpu")  # bytes 0-31 current on the device: MIXED
        assert array._alloc.state.name == "MIXED"

        def run():
            array[1] = 5.0

        return array, (16,), run

    def check(array, result):
        assert result is None
        data = np.asarray(array).ravel()
        before = np.arange(16.0)
        before[:4] = 100.0
        old_layout = before.copy()
        old_layout[4:8] = 5.0  # row 1 of (4, 4)
        new_layout = before.copy()
        new_layout[1] = 5.0  # element 1 of (16,)
        assert np.array_equal(data, old_layout) or np.array_equal(data, new_layout), data

    assert _at_each_call(Cls._assign, scenario, check) > 0


def test_a_host_view_made_while_the_shape_changes_is_not_cached_at_every_switch_point():
    from smartarray._array import SmartArray as Cls

    def scenario():
        array = SmartArray(np.arange(16.0))
        assert array._alloc is not None  # (made now: _at_each_call looks at its lock)
        return array, (4, 4), lambda: array._host_view(write=False)

    def check(array, result):
        assert result.shape in {(16,), (4, 4)}
        np.testing.assert_array_equal(result.ravel(), np.arange(16.0))
        _check_caches(array)

    assert _at_each_call(Cls._host_view, scenario, check) > 0


def test_a_jit_argument_whose_shape_changes_while_it_is_passed_is_refused():
    import numba

    import smartarray._numba.cpu as cpu

    @numba.njit
    def total(x):
        return x.sum()

    @numba.njit(_nrt=False)
    def total_without_nrt(x):
        return x.sum()

    for function in (total, total_without_nrt):
        array = SmartArray(np.arange(16.0))
        assert function(array) == 120.0
        array.shape = (4, 4)  # (drops the jit view: the next call takes the slow path)
        prepare = cpu._prepare_host

        def reshaped(obj, write, native, array=array, prepare=prepare):
            array.shape = (16,)  # another thread, between the typing (2-d) and the unboxing
            return prepare(obj, write, native)

        cpu._prepare_host = reshaped
        try:
            with pytest.raises(TypeError, match=r"another thread set its \.shape"):
                function(array)
        finally:
            cpu._prepare_host = prepare
        assert function(array) == 120.0  # (1-d now)
        np.testing.assert_array_equal(np.asarray(array), np.arange(16.0))


def test_an_intent_kept_across_a_shape_change_has_the_new_type():
    import numba

    from smartarray import In

    @numba.njit
    def rows(x):
        return x.shape[0]

    array = SmartArray(np.arange(16.0))
    intent = In(array)
    assert rows(intent) == 16
    array.shape = (4, 4)
    assert rows(intent) == 4
    assert intent._numba_type_.ndim == 2


_OPERATIONS = {
    # operation: (run, check of its result; ``shape``: the array's shape when checked)
    "element": (lambda a: a[1], lambda result, shape: _either(result, 1.0, [4.0, 5.0, 6.0, 7.0])),
    "slice": (
        lambda a: a[1:3],
        lambda result, shape: _either(
            np.asarray(result), [1.0, 2.0], np.arange(4.0, 12.0).reshape(2, 4)
        ),
    ),
    "asarray": (
        lambda a: np.asarray(a).copy(),
        lambda result, shape: _either(result, np.arange(16.0), np.arange(16.0).reshape(4, 4)),
    ),
    "sum": (lambda a: a.sum(), lambda result, shape: _either(result, 120.0)),
    "add": (
        lambda a: np.asarray(a + 1.0),
        lambda result, shape: _either(
            result, np.arange(1.0, 17.0), np.arange(1.0, 17.0).reshape(4, 4)
        ),
    ),
}


def _either(result, *expected) -> None:
    assert not isinstance(result, Exception), result
    assert any(
        np.shape(result) == np.shape(option) and np.array_equal(result, option)
        for option in expected
    ), result


def _cached_on_host(run):
    """A scenario for _at_each_call: ``np.arange(16.0)``, current on the host with its host
    views cached, its shape set to (4, 4) while ``run(array)`` runs."""

    def scenario():
        array = SmartArray(np.arange(16.0))
        np.sum(array)  # (caches made)
        array += 0.0
        return array, (4, 4), lambda: run(array)

    return scenario


@pytest.mark.parametrize("operation", sorted(_OPERATIONS))
def test_every_switch_point_of_a_read_gives_one_layout(operation):
    run, check_result = _OPERATIONS[operation]

    def check(array, result):
        check_result(result, array.shape)
        np.testing.assert_array_equal(np.asarray(array).ravel(), np.arange(16.0))
        _check_caches(array)

    assert _at_each_call(None, _cached_on_host(run), check) > 0


def _add_self_in_place(a):
    a += a


@pytest.mark.parametrize(
    "operation",
    [_add_self_in_place, lambda a: np.add(a, a, out=a), lambda a: np.multiply(a, 2.0, out=a)],
    ids=["a += a", "np.add(a, a, out=a)", "np.multiply(a, 2, out=a)"],
)
def test_every_switch_point_of_an_in_place_write_of_itself_succeeds(operation):
    """Review 2: ``a += a`` read its operand with one layout and wrote with the other (a
    spurious broadcast error); numpy's, one C call, sees one layout."""

    def check(array, result):
        assert not isinstance(result, Exception), result
        np.testing.assert_array_equal(np.asarray(array).ravel(), np.arange(16.0) * 2)
        _check_caches(array, data=False)

    assert _at_each_call(None, _cached_on_host(operation), check) > 0


@pytest.mark.device
@pytest.mark.parametrize(
    "operation",
    [lambda a: np.add(a, a, out=a), lambda a: np.multiply(a, 2.0, out=a)],
    ids=["np.add(a, a, out=a)", "np.multiply(a, 2, out=a)"],
)
def test_every_switch_point_of_a_write_of_itself_with_a_device_copy_succeeds(operation):
    """The checks made before a device-current output is fetched read its shape and its
    inputs' with one layout (review 2: a spurious broadcast error)."""

    def scenario():
        array = SmartArray(np.arange(16.0))
        array.to_gpu()  # (current on both sides: the checks run)
        return array, (4, 4), lambda: operation(array)

    def check(array, result):
        assert not isinstance(result, Exception), result
        np.testing.assert_array_equal(np.asarray(array).ravel(), np.arange(16.0) * 2)

    assert _at_each_call(None, scenario, check) > 0


@pytest.mark.parametrize("value", [5.0, np.float32(5.0), "5"])
def test_every_switch_point_of_an_element_write_gives_one_layout(value):
    def scenario():
        array = SmartArray(np.arange(16.0))
        array.shape = (4, 4)
        array += 0.0

        def run():
            array[1] = value

        return array, (16,), run

    def check(array, result):
        assert result is None
        old_layout = np.arange(16.0)
        old_layout[4:8] = 5.0
        new_layout = np.arange(16.0)
        new_layout[1] = 5.0
        _either(np.asarray(array).ravel(), old_layout, new_layout)
        _check_caches(array, data=False)

    assert _at_each_call(None, scenario, check) > 0


# --- Reads of data current on the device only (the host copy stale) -----------------------

_DEVICE_DATA = np.arange(16.0) + 100.0  # (the host copy keeps np.arange(16.0): stale)

_DEVICE_READS = {
    # operation: (run, shape before, shape set meanwhile, the results either layout gives
    # from the current data)
    "a[1, 1]": (lambda a: a[1, 1], (4, 4), (2, 8), lambda data: (data[5], data[9])),
    "a.item(1, 1)": (lambda a: a.item(1, 1), (4, 4), (2, 8), lambda data: (data[5], data[9])),
    "a[1]": (lambda a: np.asarray(a[1]).copy(), (16,), (4, 4), lambda d: (d[1], d[4:8])),
    "a[(1,)]": (lambda a: np.asarray(a[(1,)]).copy(), (16,), (4, 4), lambda d: (d[1], d[4:8])),
    "a.ravel('K')": (lambda a: np.asarray(a.ravel("K")).copy(), (4, 4), (2, 8), lambda d: (d,)),
}


@pytest.mark.device
@pytest.mark.parametrize("state", ["DEVICE", "MIXED"])
@pytest.mark.parametrize("operation", sorted(_DEVICE_READS))
def test_every_switch_point_of_a_read_of_device_data_gives_one_layout(operation, state):
    run, before, after, expected = _DEVICE_READS[operation]
    data = _DEVICE_DATA.copy()
    if state == "MIXED":  # elements 0-7 current on the device only, 8-15 on both sides
        data[8:] = np.arange(8.0, 16.0)

    def scenario():
        array = SmartArray(np.arange(16.0).reshape(before))
        array.get("gpu").copy_to_device(data.reshape(before))
        if state == "DEVICE":
            array.mark_changed("gpu")
        else:
            array.ravel()[:8].mark_changed("gpu")
        assert array._alloc.state.name == state
        return array, after, lambda: run(array)

    def check(array, result):
        _either(np.asarray(result), *(np.asarray(option) for option in expected(data)))

    assert _at_each_call(None, scenario, check) > 0


@pytest.mark.parametrize(
    "operation",
    [
        lambda x, y: np.add(x, 1.0, out=y),  # (array_ufunc)
        lambda x, y: np.copyto(y, x),  # (call_on_host, through __array_function__)
    ],
    ids=["ufunc out=", "copyto"],
)
def test_two_threads_writing_each_others_inputs_do_not_deadlock(fast_switching, operation):
    a = SmartArray(np.zeros(4))
    b = SmartArray(np.zeros(4))

    def loop(x, y):
        for _ in range(3000):
            operation(x, y)

    threads = [
        threading.Thread(target=loop, args=(a, b), daemon=True),
        threading.Thread(target=loop, args=(b, a), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "deadlock"
