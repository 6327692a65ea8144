"""Host fast paths (smartarray._numpy.fastpath): taken in the steady state, same results and errors.

The coherence side (flags, copies, pending asynchronous copies) is covered by the state
machines in test_stateful.py and test_stream_ordering.py; here: that the fast paths are
really taken, and that they answer exactly what the full path (and numpy) answers.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from helpers import run_in_threads
from hypothesis import given, settings
from hypothesis import strategies as st

import smartarray as sa
from smartarray import _hooks
from smartarray._numpy import protocols as _numpy_protocols
from smartarray._numpy.fastpath import operator_methods


class _FullPathUsed(Exception):
    pass


def forbid_full_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, fail if an operation goes through the full numpy-protocol machinery."""

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise _FullPathUsed

    monkeypatch.setattr(_numpy_protocols, "_Call", forbidden)
    monkeypatch.setattr(_numpy_protocols, "call_on_host", forbidden)
    # (the class reaches them through its hooks)
    monkeypatch.setattr(_hooks, "host_call", forbidden)
    monkeypatch.setattr(_hooks, "call_on_host", forbidden)


def ready(values: Any) -> sa.SmartArray:
    """A SmartArray in the steady state: host copy current, views cached by a first use."""
    array = sa.SmartArray(np.asarray(values))
    array[...] = array.get("host")  # caches the writable host view (full path)
    np.asarray(array)  # caches the read-only one
    return array


def test_steady_state_operations_take_the_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = ready(np.arange(16.0)), ready(np.ones(16))
    forbid_full_path(monkeypatch)
    plain = np.arange(16.0)
    assert x[3] == 3.0
    x[3] = 1.5
    x[4:6] = 2.5
    x[6:8] = np.array([7.0, 8.0])
    expected = plain.copy()
    expected[3], expected[4:6], expected[6:8] = 1.5, 2.5, [7.0, 8.0]
    np.testing.assert_array_equal(np.asarray(x + y), expected + 1)
    np.testing.assert_array_equal(np.asarray(plain + x), plain + expected)
    np.testing.assert_array_equal(np.asarray(2.0 * x), 2.0 * expected)
    np.testing.assert_array_equal(np.asarray(np.sin(x)), np.sin(expected))
    np.testing.assert_array_equal(np.asarray(np.add.accumulate(x)), np.cumsum(expected))
    np.testing.assert_array_equal(np.asarray(np.concatenate([x, y])), np.r_[expected, np.ones(16)])
    assert x.sum() == expected.sum() and np.sum(x) == expected.sum()
    assert x.max() == expected.max() and np.mean(x) == expected.mean()
    x += y
    x -= 1.0
    np.testing.assert_array_equal(np.asarray(x), expected)
    chained = (x + y) * 2.0 - np.sqrt(x + 1.0)  # new results as operands
    chained += (x * y).sum()  # a new result written in place
    want = (expected + 1) * 2.0 - np.sqrt(expected + 1.0)
    np.testing.assert_allclose(np.asarray(chained), want + (expected * np.ones(16)).sum())
    view = x[2:10:2]
    assert isinstance(view, sa.SmartArray) and view.base is x


def test_fresh_results_own_their_memory() -> None:
    x, y = ready(np.arange(4.0)), ready(np.ones(4))
    z = x + y
    assert z.base is None and z.flags.writeable and z.location == "host"
    assert z._alloc is not x._alloc and z._alloc is not y._alloc
    z[0] = 100.0
    assert x[0] == 0.0 and y[0] == 1.0
    assert z.label != x.label  # a new allocation, named in the ledger like any other


# --- 1-d slices: the layout computed directly equals numpy's -----------------------------------

_bound = st.one_of(st.none(), st.integers(-25, 25))


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 20),
    base=st.sampled_from(["whole", "stepped", "reversed", "offset"]),
    key=st.builds(slice, _bound, _bound, st.one_of(st.none(), st.integers(-4, 4).filter(bool))),
)
def test_1d_slice_layout_matches_numpy(size: int, base: str, key: slice) -> None:
    plain = np.arange(float(size))
    array = sa.SmartArray(plain.copy())
    bases = {
        "whole": (array, plain),
        "stepped": (array[::2], plain[::2]),
        "reversed": (array[::-1], plain[::-1]),
        "offset": (array[3:], plain[3:]),
    }
    array, plain = bases[base]
    got = array[key]
    through_template = array._apply_view(lambda t: t[key])  # the general (full) path
    for attribute in ("_offset", "_shape", "_strides", "_writeable"):
        assert getattr(got, attribute) == getattr(through_template, attribute), attribute
    assert got._base is through_template._base and got._alloc is through_template._alloc
    np.testing.assert_array_equal(np.asarray(got), plain[key])


_nd_item = st.one_of(
    st.integers(-6, 6),
    st.builds(slice, _bound, _bound, st.one_of(st.none(), st.integers(-3, 3).filter(bool))),
    st.just(Ellipsis),
    # (keys the direct layout leaves to the general path: numpy's result all the same)
    st.sampled_from(
        [None, True, np.int64(1), slice(None, None, 0), slice(1.5, 2), slice(None, None, 2**62)]
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple),
    base=st.sampled_from(["whole", "reversed", "stepped", "transposed"]),
    key=st.one_of(_nd_item, st.lists(_nd_item, max_size=4).map(tuple)),
)
def test_nd_basic_indexing_matches_numpy(shape: tuple[int, ...], base: str, key: Any) -> None:
    """Rows, blocks, columns, strided and reversed slices, Ellipsis, of any layout: numpy's
    result (a scalar, or a view with numpy's shape and strides over the same bytes, which
    writes through) or numpy's error, whichever path computes it."""
    plain = np.arange(float(np.prod(shape))).reshape(shape).copy()  # (numpy's copy's layout)
    array = sa.SmartArray(plain.copy())
    assert array.strides == plain.strides
    if shape and base == "reversed":
        array, plain = array[::-1], plain[::-1]
    elif shape and base == "stepped":
        array, plain = array[::2], plain[::2]
    elif base == "transposed":
        array, plain = array.T, plain.T
    try:
        expected = plain[key]
    except Exception as error:  # (numpy's error, whichever it is)
        with pytest.raises(type(error)) as ours:
            array[key]
        assert str(ours.value) == str(error)
        return
    got = array[key]
    if not isinstance(expected, np.ndarray):  # a scalar
        assert not isinstance(got, sa.SmartArray) and got == expected
        return
    assert isinstance(got, sa.SmartArray)
    assert got.shape == expected.shape and got.strides == expected.strides
    np.testing.assert_array_equal(np.asarray(got), expected)
    if expected.size and expected.base is not None and np.shares_memory(expected, plain):
        got[...] = -1.0  # a view: writes reach its base's bytes, as numpy's do
        expected[...] = -1.0
        np.testing.assert_array_equal(np.asarray(array), plain)


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("axes", [(), (None,)])
def test_transpose_reverses_the_layout_like_numpy(
    shape: tuple[int, ...], axes: tuple[Any, ...]
) -> None:
    key = (Ellipsis, slice(None, None, -1)) if shape else Ellipsis  # (a layout of its own)
    plain = np.arange(float(np.prod(shape))).reshape(shape)[key]
    array = sa.SmartArray(np.arange(float(np.prod(shape))).reshape(shape))[key]
    for got, expected in ((array.transpose(*axes), plain.transpose(*axes)), (array.T, plain.T)):
        assert got.shape == expected.shape and got.strides == expected.strides
        np.testing.assert_array_equal(np.asarray(got), expected)
        assert got.base is array.base and got.flags.writeable


@pytest.mark.parametrize(
    ("key", "error"),
    [(slice(None, None, 0), ValueError), (slice("a", None), TypeError), (slice(1.5, 2), TypeError)],
)
def test_bad_slices_fail_like_numpy(key: slice, error: type[Exception]) -> None:
    plain = np.arange(5.0)
    with pytest.raises(error) as numpy_error:
        plain[key]
    with pytest.raises(error) as ours:
        sa.SmartArray(plain)[key]
    assert str(ours.value) == str(numpy_error.value)


# --- operators: every mixin operator, every kind of operand ------------------------------------

_OPERATORS = sorted(operator_methods())
_OPERANDS = {
    "smartarray": lambda values: ready(values),
    "ndarray": lambda values: np.asarray(values),
    "python scalar": lambda values: 3,
    "numpy scalar": lambda values: np.float32(2.5),
}


def _numpy_equivalent(name: str, left: Any, right: Any) -> Any:
    """What numpy answers for ``left.<name>(right)`` on plain values."""
    method = getattr(np.ndarray, name)
    return method(left) if right is None else method(left, right)


@pytest.mark.parametrize("name", _OPERATORS)
@pytest.mark.parametrize("operand", list(_OPERANDS))
@pytest.mark.parametrize("dtype", ["int64", "float64"])
@pytest.mark.parametrize("shape", [(), (2, 2)])
def test_operators_match_numpy(name: str, operand: str, dtype: str, shape: tuple[int, ...]) -> None:
    values = (np.arange(int(np.prod(shape))) + 1).reshape(shape).astype(dtype)
    if name in ("__matmul__", "__rmatmul__", "__imatmul__") and shape != (2, 2):
        pytest.skip("matmul needs matrices")
    unary = operator_methods()[name].__code__.co_argcount == 1
    other = None if unary else _OPERANDS[operand](values)
    plain_other = (
        None if unary else (np.asarray(other) if isinstance(other, sa.SmartArray) else other)
    )
    if unary and operand != "smartarray":
        pytest.skip("unary operators have one operand")
    array = ready(values)
    try:
        expected = _numpy_equivalent(name, values.copy(), plain_other)
    except Exception as exc:
        with pytest.raises(type(exc)) as ours:
            getattr(array, name)() if unary else getattr(array, name)(other)
        assert str(ours.value) == str(exc)
        np.testing.assert_array_equal(np.asarray(array), values)  # unchanged
        return
    got = getattr(array, name)() if unary else getattr(array, name)(other)
    if expected is NotImplemented:
        assert got is NotImplemented or got is not None
        return
    if name.startswith("__i") and name != "__invert__":
        assert got is array
    for mine, theirs in zip(
        *(r if type(r) is tuple else (r,) for r in (got, expected)), strict=True
    ):
        if isinstance(theirs, np.ndarray):
            assert isinstance(mine, sa.SmartArray)
            mine = np.asarray(mine)
        assert np.asarray(mine).dtype == np.asarray(theirs).dtype
        np.testing.assert_array_equal(mine, theirs)


def test_reflected_and_unary_through_python_operators() -> None:
    x = ready(np.array([1.0, -2.0, 3.0]))
    plain = np.array([1.0, -2.0, 3.0])
    for got, want in [
        (1.0 - x, 1.0 - plain),
        (2**x, 2**plain),
        (divmod(x, 2.0), divmod(plain, 2.0)),
        (abs(x), abs(plain)),
        (-x, -plain),
        (x < 2, plain < 2),
        (x == x, plain == plain),
    ]:
        for mine, theirs in zip(
            *(r if type(r) is tuple else (r,) for r in (got, want)), strict=True
        ):
            assert isinstance(mine, sa.SmartArray)
            np.testing.assert_array_equal(np.asarray(mine), theirs)


# --- element and slice writes: numpy's errors, nothing written ---------------------------------


@pytest.mark.parametrize(
    ("dtype", "key", "value"),
    [
        ("float64", 16, 1.0),
        ("float64", -17, 1.0),
        ("int8", 0, 1000),
        ("uint8", 1, -1),
        ("float64", slice(0, 2), np.ones(3)),
        ("int64", slice(None), np.array([1.5] * 16)),
        ("float64", slice(2, 4), 1j),
    ],
)
def test_fast_write_errors_match_numpy(dtype: str, key: Any, value: Any) -> None:
    plain = np.arange(16).astype(dtype)
    array = ready(plain)
    try:
        plain.copy()[key] = value
    except Exception as exc:
        with pytest.raises(type(exc)) as ours:
            array[key] = value
        assert str(ours.value) == str(exc)
    else:
        array[key] = value  # (a cast numpy allows, e.g. float to int with unsafe casting)
        expected = plain.copy()
        expected[key] = value
        np.testing.assert_array_equal(np.asarray(array), expected)
        return
    np.testing.assert_array_equal(np.asarray(array), plain)
    assert array.location == "host"


def test_read_only_arrays_refuse_fast_writes_with_the_usual_error() -> None:
    base = ready(np.arange(9.0).reshape(3, 3))
    diagonal = base.diagonal()  # a read-only view, like numpy's
    diagonal.get("host")  # must not cache a writable view
    np.asarray(diagonal)
    for write in (
        lambda: diagonal.__setitem__(0, 5.0),
        lambda: diagonal.__setitem__(slice(None), 5.0),
        lambda: operator.iadd(diagonal, 1.0),
    ):
        with pytest.raises(ValueError, match="assignment destination is read-only"):
            write()
    np.testing.assert_array_equal(np.asarray(base), np.arange(9.0).reshape(3, 3))


def test_element_reads_fail_like_numpy() -> None:
    plain = np.arange(4.0)
    array = ready(plain)
    for key in (4, -5, (9,), (0, 0)):
        with pytest.raises(IndexError) as numpy_error:
            plain[key]
        with pytest.raises(IndexError) as ours:
            array[key]
        assert str(ours.value) == str(numpy_error.value)
    matrix = ready(np.arange(6.0).reshape(2, 3))
    assert matrix[1, 2] == 5.0
    assert isinstance(matrix[1], sa.SmartArray)  # an int on a 2-d array is a row view


def test_ndarray_members_are_forwarded_without_getattr() -> None:
    assert "__getattr__" not in vars(sa.SmartArray)
    x = ready(np.array([3.0, 1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(x.cumsum()), [3.0, 4.0, 6.0])
    x.sort()
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0, 3.0])
    assert x.ctypes.data == x.get("host").ctypes.data
    assert sa.SmartArray.cumsum.__name__ == "cumsum" and sa.SmartArray.cumsum.__doc__
    for refused in ("resize", "setflags", "byteswap"):
        assert not hasattr(x, refused)
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        x.no_such_thing  # noqa: B018


@pytest.mark.device
def test_fast_writes_racing_uploads_leave_no_stale_device_copy() -> None:
    a = ready(np.zeros(64))

    def worker(k: int) -> None:
        for j in range(300):
            if k == 0:
                a.get("gpu")  # uploads whenever a write made the device copy stale
            else:
                a[k] = float(j)
                a[8 * k : 8 * k + 4] = float(j)
                operator.iadd(a, 0.0)

    run_in_threads(worker, 4)
    host = np.asarray(a).copy()
    if a.is_valid("gpu"):
        np.testing.assert_array_equal(a.get("gpu").copy_to_host(), host)
    np.testing.assert_array_equal(host[1:4], [299.0] * 3)
