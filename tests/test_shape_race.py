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


@pytest.fixture
def fast_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # thread switches as often as CPython allows
    yield
    sys.setswitchinterval(old)


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


def _check_caches(array: SmartArray) -> None:
    """The host views cached on ``array`` (if any) have its layout, and so do its results."""
    for name in ("_host_rw", "_host_ro", "_host_1d", "_template_cache"):
        view = getattr(array, name)
        if view is not None:
            assert view.shape == array.shape, name
            assert view.strides == array.strides, name
    for name in ("_jit_rw", "_jit_ro"):
        view = array.__dict__.get(name)
        if view is not None:
            assert view.shape == array.shape, name
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
