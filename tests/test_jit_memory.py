"""Compiled code frees what it allocates from SmartArrays (issue #11, item 1).

Numba's runtime (NRT) counts every allocation and free when its statistics are switched on;
each test calls a jitted function 50 times and requires as many frees as allocations.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from numba import njit
from numba.core.runtime import _nrt_python, rtsys

import smartarray
from smartarray import SmartArray


@pytest.fixture
def nrt_stats() -> Iterator[None]:
    _nrt_python.memsys_enable_stats()
    try:
        yield
    finally:
        _nrt_python.memsys_disable_stats()


@njit
def times_two(a: Any) -> Any:
    return a * 2


@njit
def expression(a: Any) -> Any:
    return np.sin(a) + a * a - 1.0


@njit
def square_root(a: Any) -> Any:
    return np.sqrt(a)


@njit
def middle(a: Any) -> Any:
    return a[1:3]


@njit
def times_two_sum(a: Any) -> float:
    return (a * 2).sum()


@njit
def first_plus_last(a: Any) -> float:
    return a[0] + a[-1]


@njit
def reduced(a: Any) -> float:
    return (a * 2).sum() + np.cos(a).sum()


@njit
def mixed(a: Any, b: Any) -> Any:
    return a + b


@njit
def intermediate_then_slice(a: Any) -> Any:
    return (a + 1)[::2]


def _leaked(call: Callable[[], Any]) -> tuple[int, int, int]:
    """(allocations, frees, meminfo allocations - meminfo frees) over 50 calls."""
    call()  # compile first
    before = rtsys.get_allocation_stats()
    for _ in range(50):
        result = call()
        del result
    after = rtsys.get_allocation_stats()
    return (
        after.alloc - before.alloc,
        after.free - before.free,
        (after.mi_alloc - before.mi_alloc) - (after.mi_free - before.mi_free),
    )


CASES = {
    "return a * 2": (times_two, lambda a: a * 2),
    "array expression": (expression, lambda a: np.sin(a) + a * a - 1.0),
    "ufunc result": (square_root, np.sqrt),
    "slice returned": (middle, lambda a: a[1:3]),
    "results reduced inside": (reduced, lambda a: (a * 2).sum() + np.cos(a).sum()),
    "slice of a temporary": (intermediate_then_slice, lambda a: (a + 1)[::2]),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("shape", [(6,), (3, 4)])
def test_no_nrt_leak_over_50_calls(case: str, shape: tuple[int, ...], nrt_stats: None) -> None:
    function, reference = CASES[case]
    data = np.arange(float(np.prod(shape))).reshape(shape) + 1.0
    a = smartarray.asarray(data)
    allocations, frees, meminfos_alive = _leaked(lambda: function(a))
    # Unboxing the argument allocates nothing (its cached meminfo is reused): a returned
    # slice of it allocates nothing either; every other case makes a new array.
    if case == "slice returned":
        assert allocations == 0
    else:
        assert allocations > 0
    assert frees == allocations
    assert meminfos_alive == 0
    result = function(a)
    expected = reference(data)
    if isinstance(expected, np.ndarray):
        assert isinstance(result, SmartArray)
        np.testing.assert_allclose(np.asarray(result), expected)
    else:
        assert result == pytest.approx(expected)


def test_no_nrt_leak_with_an_ndarray_operand(nrt_stats: None) -> None:
    a = smartarray.asarray(np.arange(5.0))
    b = np.ones(5)
    allocations, frees, meminfos_alive = _leaked(lambda: mixed(a, b))
    assert allocations == frees > 0
    assert meminfos_alive == 0
    np.testing.assert_array_equal(np.asarray(mixed(a, b)), np.arange(5.0) + 1)
    np.testing.assert_array_equal(np.asarray(mixed(b, a)), np.arange(5.0) + 1)


def test_no_nrt_leak_with_a_read_only_intent(nrt_stats: None) -> None:
    a = smartarray.asarray(np.arange(5.0))
    allocations, frees, meminfos_alive = _leaked(lambda: times_two(smartarray.In(a)))
    assert allocations == frees > 0
    assert meminfos_alive == 0


def test_results_stay_alive_after_the_call(nrt_stats: None) -> None:
    # The fix hands the fresh array's only reference on: results must still own their data.
    a = smartarray.asarray(np.arange(4.0))
    results = [times_two(a) for _ in range(3)]
    for r in results:
        np.testing.assert_array_equal(np.asarray(r), [0.0, 2.0, 4.0, 6.0])


def test_the_cached_argument_meminfo_goes_with_its_array(nrt_stats: None) -> None:
    # The unboxing reuses one meminfo per SmartArray (and jit view): no allocation per call,
    # and none left behind once the array is gone.
    first_plus_last(smartarray.asarray(np.ones(2)))  # compile first
    gc.collect()
    before = rtsys.get_allocation_stats()
    a = smartarray.asarray(np.arange(6.0))
    for _ in range(20):
        assert first_plus_last(a) == 5.0
    del a
    gc.collect()
    after = rtsys.get_allocation_stats()
    # The first call takes the slow path (Numba's own unboxing: one meminfo, freed after the
    # call) and caches one meminfo, freed with its array; the 19 others allocate nothing.
    assert after.mi_alloc - before.mi_alloc == 2
    assert after.mi_free - before.mi_free == 2


def test_a_returned_slice_outlives_its_argument(nrt_stats: None) -> None:
    a = smartarray.asarray(np.arange(6.0))
    part = middle(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(np.asarray(part), [1.0, 2.0])
    assert middle(part)[0] == 2.0


def test_a_new_shape_unboxes_the_new_layout() -> None:
    a = smartarray.asarray(np.arange(6.0))
    assert times_two_sum(a) == 30.0
    a.shape = (2, 3)
    np.testing.assert_array_equal(np.asarray(times_two(a)), np.arange(6.0).reshape(2, 3) * 2)
    a.shape = (6,)
    assert times_two_sum(a) == 30.0
