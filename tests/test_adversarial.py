"""Regression tests for bugs found by using SmartArrays as an adversarial NumPy + Numba user.

Each test names the path that lost data, served stale data, or failed where an ndarray works.
Tests marked ``device`` need the CUDA simulator or a GPU (tier 2/3).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import inc
from numba import njit, types, vectorize
from numba.experimental import jitclass
from numba.typed import Dict, List

import smartarray
from smartarray import SmartArray, SmartArrayKeptError


@vectorize(["float64(float64)"])
def plus_one(x: float) -> float:
    return x + 1


@vectorize(["float64(float64, float64)"])
def plus(x: float, y: float) -> float:
    return x + y


# --- Numba CPU @vectorize (DUFunc) with outputs -----------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda f, a: f(a, out=a),
        lambda f, a: f(a, a),
        lambda f, a: f(a, out=(a,)),
    ],
    ids=["out=a", "positional", "out=(a,)"],
)
def test_cpu_vectorize_writes_a_smartarray_output(call: Any) -> None:
    # Numba's DUFunc hands __array_ufunc__ its arguments unnormalised (out=a, not out=(a,);
    # positional outputs as inputs): out=a was tested for truth (ValueError) and a positional
    # output was unwrapped read-only ("output array is read-only").
    a = SmartArray(np.arange(4.0))
    result = call(plus_one, a)
    assert result is a
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0, 4.0])


def test_cpu_vectorize_output_view_of_the_input_allocation() -> None:
    a = SmartArray(np.arange(6.0))
    reference = np.arange(6.0)
    plus(a[::2], 10.0, out=a[1::2])
    plus(reference[::2], 10.0, out=reference[1::2])
    np.testing.assert_array_equal(a, reference)
    result = plus(a, 1.0, out=a[::-1])
    plus(reference, 1.0, out=reference[::-1])
    assert isinstance(result, SmartArray)
    np.testing.assert_array_equal(a, reference)


def test_cpu_vectorize_bad_output_changes_nothing() -> None:
    a = SmartArray(np.arange(4.0))
    ints = SmartArray(np.arange(4))
    with pytest.raises(TypeError, match="both positionally and as out="):
        plus_one(a, a, out=a)
    with pytest.raises(TypeError, match="Cannot cast"):
        plus_one(a, out=ints)
    np.testing.assert_array_equal(a, np.arange(4.0))
    np.testing.assert_array_equal(ints, np.arange(4))


@pytest.mark.device
def test_cpu_vectorize_output_with_a_current_device_copy() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)  # only the device copy is current
    with smartarray.track_transfers() as ledger:
        plus_one(a, out=a)  # host ufunc: one download, the device copy is then stale
        assert a.location == "host"
        inc[1, 4](a)  # one upload
        assert a.tolist() == [3.0, 4.0, 5.0, 6.0]  # one download
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 2)


# --- @njit functions returning arithmetic on an argument ------------------------------------


@njit
def scaled(x: Any) -> Any:
    return x * 2.0


@njit
def negated(x: Any) -> Any:
    return -x


@njit
def compared(x: Any) -> Any:
    return x > 1.0


@njit
def scaled_then_written(x: Any) -> Any:
    y = x + 1.0
    y[0] = 5.0  # writes the new array, not x
    return y


@njit
def repeated_in_a_tuple(x: Any) -> Any:
    return (x,) + (x,)  # noqa: RUF005  # concatenation keeps x itself: the caller may write it


@pytest.mark.parametrize("function", [scaled, negated, compared, scaled_then_written])
def test_njit_returning_a_new_array_from_an_argument_only_reads_it(function: Any) -> None:
    # x * 2.0 is a new array: returning it used to count as returning a view of x, so every
    # call marked x's device copy stale (one needless upload at the next kernel).
    a = SmartArray(np.arange(4.0))
    result = function(a)
    np.testing.assert_array_equal(result, function.py_func(np.arange(4.0)))
    report = smartarray.explain_intents(function, a)
    assert "In (inferred)" in str(report), report
    np.testing.assert_array_equal(a, np.arange(4.0))


def test_njit_returning_an_argument_in_a_tuple_still_writes_it() -> None:
    a = SmartArray(np.arange(4.0))
    first, _ = repeated_in_a_tuple(a)
    assert "InOut (inferred)" in str(smartarray.explain_intents(repeated_in_a_tuple, a))
    first[0] = 9.0
    assert a[0] == 9.0


@pytest.mark.device
def test_njit_returning_a_new_array_keeps_the_device_copy() -> None:
    a = SmartArray(np.arange(4.0))
    a.to_gpu()
    with smartarray.track_transfers() as ledger:
        scaled(a)
        assert a.location == "both"
        inc[1, 4](a)
    assert (ledger.h2d_count, ledger.d2h_count) == (0, 0)
    np.testing.assert_array_equal(a, np.arange(4.0) + 1)


# --- numpy functions that read only dtypes or layouts ----------------------------------------


@pytest.mark.device
@pytest.mark.parametrize(
    ("function", "expected"),
    [
        (lambda a: np.result_type(a, np.float32), np.dtype(np.float64)),
        (np.iscomplexobj, False),
        (np.isrealobj, True),
        (lambda a: np.may_share_memory(a, a[1:]), True),
        (lambda a: np.may_share_memory(a[:4], a[4:]), False),
        (lambda a: np.shares_memory(a[::2], a[1::2]), False),
    ],
    ids=["result_type", "iscomplexobj", "isrealobj", "may_share", "disjoint", "shares"],
)
def test_dtype_and_layout_functions_copy_nothing(function: Any, expected: Any) -> None:
    a = SmartArray(np.arange(8.0))
    inc[1, 8](a)  # only the device copy is current
    with smartarray.no_transfers():
        assert function(a) == expected
    assert a.location == "gpu"


def test_memory_overlap_of_different_arrays_is_numpys() -> None:
    a = SmartArray(np.arange(8.0))
    b = SmartArray(np.arange(8.0))
    assert not np.may_share_memory(a, b)
    assert not np.shares_memory(a, np.arange(8.0))
    assert np.shares_memory(a, a.T)
    assert np.result_type(a.astype(np.float32), 1.0) == np.float32


# --- a.flat assignments ----------------------------------------------------------------------


def test_flat_assignment_writes_like_an_ndarray() -> None:
    # a.flat was the read-only host view's iterator: a.flat[i] = v raised numpy's
    # "underlying array is read-only" where an ndarray is written.
    a = SmartArray(np.arange(6.0).reshape(2, 3))
    reference = np.arange(6.0).reshape(2, 3)
    for target in (a, reference):
        target.flat[2:4] = 9.0
        target.flat[[0, 5]] = [7.0, 8.0]
        target.T.flat[1] = -1.0
        target.flat[np.arange(6) > 4] = 100.0
    np.testing.assert_array_equal(a, reference)
    assert a.flat[3] == reference.flat[3]
    np.testing.assert_array_equal(a.flat[1:4], reference.flat[1:4])
    assert len(a.flat) == 6 and list(a.flat) == list(reference.flat)
    a.flat = [1.0, 2.0]
    reference.flat = [1.0, 2.0]
    np.testing.assert_array_equal(a, reference)
    np.testing.assert_array_equal(np.asarray(a.flat), reference.ravel())


def test_flat_assignment_to_a_read_only_view_changes_nothing() -> None:
    a = SmartArray(np.arange(4.0))
    with pytest.raises(ValueError, match="read-only"):
        np.broadcast_to(a, (2, 4)).flat[0] = 1.0
    with pytest.raises(ValueError):
        a.flat[0] = "not a number"
    np.testing.assert_array_equal(a, np.arange(4.0))


@pytest.mark.device
def test_flat_assignment_marks_the_device_copy_stale() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)  # only the device copy is current
    with smartarray.track_transfers() as ledger:
        a.flat[0] = 0.0  # one download, then the device copy is stale
        assert a.location == "host"
        inc[1, 4](a)  # one upload
        assert a.tolist() == [1.0, 3.0, 4.0, 5.0]  # one download
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 2)


@pytest.mark.device
def test_writing_iterators_numpy_cannot_dispatch() -> None:
    # np.nditer writes through the writable np.asarray view: found before the next launch.
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)  # only the device copy is current
    with smartarray.track_transfers() as ledger:
        with np.nditer(a, op_flags=[["readwrite"]]) as items:
            for item in items:
                item[...] = 2 * item
        assert a.location == "host"  # the write was found: the device copy is stale
        inc[1, 4](a)
        assert a.tolist() == [3.0, 5.0, 7.0, 9.0]
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 2)
    # Generator methods with out= take ndarrays only: numpy refuses, nothing changes.
    with pytest.raises(ValueError, match="writable"):
        np.random.default_rng(0).random(out=a)
    assert a.location == "both"
    np.testing.assert_array_equal(a.get("gpu").copy_to_host(), [3.0, 5.0, 7.0, 9.0])


# --- SmartArrays kept by typed containers that outlive the call ------------------------------


@njit
def append_to(container: Any, x: Any) -> None:
    container.append(x)


@njit
def append_through_a_helper(container: Any, x: Any) -> None:
    append_to(container, x)


@njit
def typed_list_of(x: Any) -> Any:
    kept = List()
    kept.append(x)
    return kept


@njit
def sum_through_a_local_list(x: Any) -> float:
    rows = List()
    rows.append(x)
    rows.append(x[1:])
    total = 0.0
    for row in rows:
        total += row.sum()
    return total


@njit
def sum_through_a_local_dict(x: Any) -> float:
    by_key = Dict()
    by_key[0] = x
    return by_key[0].sum()


@njit
def write_first(container: Any) -> None:
    container[0][0] = 77.0


@jitclass([("values", types.float64[:])])
class Holder:
    def __init__(self, values: Any) -> None:
        self.values = values


def _list_of_ndarrays() -> Any:
    kept = List()
    kept.append(np.zeros(4))
    return kept


def _dict_set(a: SmartArray) -> None:
    kept = Dict.empty(types.int64, types.float64[:])
    kept[0] = a


# issue 31: a NumbaTypeSafetyWarning ("unsafe cast ... Precision may be lost") printed before
# the right SmartArrayKeptError; only the error shows now.
@pytest.mark.filterwarnings("error::numba.core.errors.NumbaTypeSafetyWarning")
@pytest.mark.parametrize(
    "keep",
    [
        lambda a: List().append(a),
        lambda a: List([a]),
        _dict_set,
        typed_list_of,
        lambda a: append_to(_list_of_ndarrays(), a),
        lambda a: append_through_a_helper(_list_of_ndarrays(), a),
        Holder,
    ],
    ids=["List.append", "List([a])", "Dict[k]=a", "returned", "param", "helper", "jitclass"],
)
def test_a_typed_container_cannot_keep_a_smartarray(keep: Any) -> None:
    # A typed List/Dict or jitclass kept the host buffer: later @njit calls wrote it through
    # the container with the device copy still marked current (and read the host copy after
    # a kernel wrote the device): silent stale data.
    a = SmartArray(np.arange(4.0))
    with pytest.raises(SmartArrayKeptError, match="typed container") as error:
        keep(a)
    assert "mark_changed('host')" in str(error.value)
    np.testing.assert_array_equal(a, np.arange(4.0))
    assert a.location == "host"


@pytest.mark.filterwarnings("error::numba.core.errors.NumbaTypeSafetyWarning")
def test_typed_containers_that_die_with_the_call_take_smartarrays() -> None:
    a = SmartArray(np.arange(4.0))
    assert sum_through_a_local_list(a) == 12.0
    assert sum_through_a_local_dict(a) == 6.0


def test_a_typed_list_of_host_buffers_is_the_documented_way() -> None:
    a = SmartArray(np.arange(4.0))
    kept = List()
    kept.append(a.get("host"))
    write_first(kept)
    a.mark_changed("host")
    assert a[0] == 77.0


@pytest.mark.device
def test_a_refused_container_call_keeps_the_device_copy() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)  # only the device copy is current
    with smartarray.no_transfers(), pytest.raises(SmartArrayKeptError):
        List().append(a)
    assert a.location == "gpu"
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]


# --- numpy functions that write their argument on request ------------------------------------


def test_nan_to_num_without_copy_writes_the_smartarray() -> None:
    # np.nan_to_num(a, copy=False) failed with numpy's read-only error.
    a = SmartArray(np.array([np.nan, np.inf, 1.0]))
    result = np.nan_to_num(a, copy=False, nan=5.0)
    assert result is a
    np.testing.assert_array_equal(a, np.nan_to_num(np.array([np.nan, np.inf, 1.0]), nan=5.0))
    b = SmartArray(np.array([np.nan, 1.0]))
    copied = np.nan_to_num(b)
    assert isinstance(copied, SmartArray)
    np.testing.assert_array_equal(copied, [0.0, 1.0])
    assert np.isnan(b[0])


@pytest.mark.device
def test_nan_to_num_without_copy_marks_the_device_copy_stale() -> None:
    a = SmartArray(np.array([np.nan, 1.0]))
    a.to_gpu()
    with smartarray.track_transfers() as ledger:
        np.nan_to_num(a, copy=False)
        assert a.location == "host"
        inc[1, 2](a)
        assert a.tolist() == [1.0, 2.0]
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 1)


@pytest.mark.device
def test_require_writeable_gives_the_tracked_host_view() -> None:
    # np.require cannot be dispatched: it gets np.asarray's writable view, as an ndarray
    # would give itself, and writes through it reach the SmartArray (and its device copy).
    a = SmartArray(np.arange(3.0))
    inc[1, 3](a)
    view = np.require(a, requirements="W")
    assert type(view) is np.ndarray and view.flags.writeable
    view[0] = 99.0
    assert a[0] == 99.0
    inc[1, 3](a)
    assert a.tolist() == [100.0, 3.0, 4.0]
