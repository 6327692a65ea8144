"""SmartArrays as arguments of functions compiled without Numba's runtime (``_nrt=False``).

Such code has no NRT meminfos: the unboxing must neither make nor count references on one
(it failed to compile, "NRT required but not enabled"), and keeps the argument's host buffer
alive by a Python reference released after the call. The coherence rules are those of any
``@njit`` call. Tests marked ``device`` need the CUDA simulator or a GPU (tier 2/3). The
fast-path tests of tests/test_numba_cpu.py run with and without NRT.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import textwrap
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import inc, run_python
from numba import njit
from numba.core.errors import TypingError
from numba.core.runtime import _nrt_python, rtsys

import smartarray
from smartarray import In, InOut, SmartArray

# --- jitted functions (compiled once per process) -------------------------------------------


@njit(_nrt=False)
def scale(a: Any, k: float) -> None:
    for i in range(a.shape[0]):
        a[i] *= k


@njit(_nrt=False)
def total(a: Any) -> float:  # reads only: inferred read-only
    return a.sum()


@njit(_nrt=False)
def ident(a: Any) -> Any:
    return a


@njit(_nrt=False)
def bump_pair(pair: Any) -> Any:
    pair[0][0] += 1.0
    return pair[0][0] + pair[1][0], (pair[1], pair[0])


@njit(_nrt=False)
def set_corner(m: Any, value: float) -> None:
    m[0, 0] = value


@njit("float64(float64[:])", _nrt=False)
def explicit_total(a: Any) -> float:  # plain signature: the SmartArray twin has no NRT either
    return a.sum()


def arange(n: int = 6) -> SmartArray:
    return smartarray.asarray(np.arange(float(n)))


# --- host: what such functions can do --------------------------------------------------------


def test_writes_reads_and_returned_arguments() -> None:
    a = arange(4)
    scale(a, 2.0)
    np.testing.assert_array_equal(a.get("host"), [0.0, 2.0, 4.0, 6.0])
    assert total(a) == 12.0 and total(In(a)) == 12.0
    assert ident(a) is a
    assert ident(a) is a  # the compiled fast path too
    assert ident(In(a)) is a and ident(InOut(a)) is a
    view = a[::2]  # a strided SmartArray view: writes land in its base
    scale(view, 10.0)
    np.testing.assert_array_equal(a.get("host"), [0.0, 2.0, 40.0, 6.0])
    assert ident(view) is view
    m = smartarray.asarray(np.zeros((2, 3)))
    set_corner(m, 7.0)
    assert m[0, 0] == 7.0 and total(m) == 7.0
    assert explicit_total(a) == 48.0 and explicit_total(np.ones(2)) == 2.0


def test_tuples_of_smartarrays() -> None:
    a, b = arange(3), smartarray.asarray(np.full(2, 5.0))
    s, (first, second) = bump_pair((a, b))
    assert s == 6.0 and first is b and second is a
    assert a[0] == 1.0
    s, (first, second) = bump_pair((InOut(a), In(b)))
    assert s == 7.0 and first is b and second is a


def test_read_only_arguments_stay_read_only() -> None:
    a = arange(3)
    with pytest.raises(TypingError, match="readonly"):
        scale(In(a), 2.0)
    with pytest.raises(TypingError, match="readonly"):
        scale(a.readonly(), 2.0)
    np.testing.assert_array_equal(a.get("host"), [0.0, 1.0, 2.0])


def test_returning_a_view_is_refused_as_for_ndarrays() -> None:
    # Without NRT, Numba returns only arrays passed in as arguments (a view would outlive
    # nothing that owns it): a SmartArray argument is no exception.
    @njit(_nrt=False)
    def middle(a: Any) -> Any:
        return a[1:3]

    with pytest.raises(TypingError, match="Only accept returning of array passed into"):
        middle(arange())

    @njit(_nrt=False)
    def middle_in_a_tuple(a: Any) -> Any:  # not refused: boxed as its argument, whole
        return a[1:3], 1

    a, x = arange(), np.arange(6.0)
    assert middle_in_a_tuple(x)[0] is x  # Numba's own boxing of such an ndarray
    assert middle_in_a_tuple(a)[0] is a
    assert middle_in_a_tuple(In(a))[0] is a


def test_no_meminfo_is_made_and_nothing_leaks() -> None:
    a = arange(8)
    _nrt_python.memsys_enable_stats()
    try:
        before = rtsys.get_allocation_stats()
        for _ in range(50):
            scale(a, 1.0)
            assert ident(a) is a
            total(In(a))
        after = rtsys.get_allocation_stats()
    finally:
        _nrt_python.memsys_disable_stats()
    assert (after.alloc, after.free, after.mi_alloc, after.mi_free) == (
        before.alloc,
        before.free,
        before.mi_alloc,
        before.mi_free,
    )
    assert not any(key.endswith(("_mi", "_native")) for key in a.__dict__)
    views = (a.__dict__["_jit_rw"], a.__dict__["_jit_ro"])
    references = [sys.getrefcount(view) for view in views]
    for _ in range(100):
        scale(a, 1.0)
        ident(a)
        total(In(a))
        bump_pair((a, In(a)))
    assert [sys.getrefcount(view) for view in views] == references  # each call released it


# A ctypes callback runs Python code in the middle of a compiled call (it takes the GIL).
_DURING_CALL: list[Callable[[], None]] = []


def _run_during_call() -> None:
    for action in _DURING_CALL:
        action()


_HOOK = ctypes.CFUNCTYPE(None)(_run_during_call)


@njit(_nrt=False)
def write_around_hook(a: Any) -> Any:
    a[0] = 5.0
    _HOOK()
    a[1] = 6.0
    return a


def test_jit_view_kept_alive_until_the_call_returns() -> None:
    a = arange(4)
    assert write_around_hook(a) is a  # compiled; the jit view exists
    view = weakref.ref(a.__dict__["_jit_rw"])
    alive: list[bool] = []

    def drop_the_view() -> None:
        a.shape = (2, 2)  # drops everything cached for the old layout, the jit view too
        gc.collect()
        alive.append(view() is not None)  # still held by the running call

    _DURING_CALL.append(drop_the_view)
    try:
        assert write_around_hook(a) is a
    finally:
        _DURING_CALL.clear()
    assert alive == [True]
    gc.collect()
    assert view() is None  # released after the call
    np.testing.assert_array_equal(a.get("host"), [[5.0, 6.0], [2.0, 3.0]])


_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from numba import njit
    import smartarray
    from smartarray import In

    device = smartarray.tier() != "host-only"
    for options in ({}, {"_nrt": False}):
        @njit(**options)
        def scale(a, k):
            for i in range(a.shape[0]):
                a[i] *= k
            return a

        @njit(**options)
        def total(a):
            return a.sum()

        a = smartarray.asarray(np.arange(4.0))
        if device:
            a.to_gpu()
        with smartarray.track_transfers() as t:
            assert total(In(a)) == 6.0 and total(a) == 6.0
            assert a.location == ("both" if device else "host"), a.location
            assert scale(a, 2.0) is a
            assert a.location == "host"
        assert (t.h2d_count, t.d2h_count) == (0, 0)
        assert list(a.get("host")) == [0.0, 2.0, 4.0, 6.0]
    print("ok")
    """
)


def test_numba_disable_nrt_environment() -> None:
    # NUMBA_DISABLE_NRT=1 must be set before Numba is imported: a fresh process, in this
    # tier. (Numba 0.68 reads no such variable and compiles the default functions with NRT;
    # the _nrt=False ones run without it either way.)
    out = run_python(
        ["-c", f"import os; os.environ['NUMBA_DISABLE_NRT'] = '1'\n{_SCRIPT}"],
        simulator=smartarray.tier() == "simulator",
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# --- coherence with a device (simulator or GPU) ----------------------------------------------


@pytest.mark.device
def test_write_call_invalidates_device_copy() -> None:
    a = arange(4).to_gpu()
    assert a.location == "both"
    with smartarray.track_transfers() as t:
        scale(a, 2.0)
        assert a.location == "host"
        a.to_gpu()
    assert (t.h2d_count, t.d2h_count) == (1, 0)


@pytest.mark.device
def test_readonly_and_reading_calls_leave_device_copy_valid() -> None:
    a = arange(4).to_gpu()
    with smartarray.track_transfers() as t:
        assert total(In(a)) == 6.0
        assert total(a) == 6.0  # inferred read-only
        assert total(a.readonly()) == 6.0
        assert a.location == "both"
        a.to_gpu()
    assert (t.h2d_count, t.d2h_count) == (0, 0)


@pytest.mark.device
def test_device_only_array_is_downloaded_once() -> None:
    a = smartarray.zeros(8, where="gpu")
    inc[1, 32](a)
    with smartarray.track_transfers() as t:
        assert total(In(a)) == 8.0
        assert total(In(a)) == 8.0  # fast path: state BOTH is fine for a reader
        scale(a, 2.0)
        scale(a, 2.0)  # fast path: state HOST
        assert ident(a) is a
    assert (t.h2d_count, t.d2h_count) == (0, 1)
    assert a.location == "host"
    np.testing.assert_array_equal(a.get("host"), np.full(8, 4.0))
