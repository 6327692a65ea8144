"""SmartArray as a numpy drop-in: differential tests against numpy.

Every test runs the same operation on an ndarray and on a SmartArray holding the same data and
checks that the results agree (values, dtypes, shapes, result kinds, exceptions). Views must be
SmartArrays sharing their base's coherence state, so writes through them are checked too.

The tests marked ``device`` check, in the simulator tier, that the same operations keep the
validity flags right when the only current copy is on the device.
"""

from __future__ import annotations

import copy
import operator
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import copies
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import smartarray as sa
from smartarray import SmartArray

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- helpers -------------------------------------------------------------------------------


def host(a: SmartArray) -> np.ndarray:
    """A copy of ``a``'s data as an ndarray (a read: may copy device->host once)."""
    return np.array(a, copy=True)


def assert_same(result: Any, expected: Any) -> None:
    """``result`` (from a SmartArray) matches ``expected`` (from numpy) in kind, dtype, value."""
    if isinstance(expected, np.ndarray):
        assert isinstance(result, SmartArray), f"expected a SmartArray, got {type(result)}"
        assert result.dtype == expected.dtype
        assert result.shape == expected.shape
        np.testing.assert_array_equal(host(result), expected, strict=True)
    elif isinstance(expected, (tuple, list)):
        assert type(result) is type(expected)
        assert len(result) == len(expected)
        for r, e in zip(result, expected, strict=True):
            assert_same(r, e)
    else:
        assert type(result) is type(expected), f"{type(result)} != {type(expected)}"
        if isinstance(expected, (float, complex, np.floating, np.complexfloating)):
            np.testing.assert_equal(result, expected)
        else:
            assert result == expected


def assert_raises_same(numpy_call: Callable[[], Any], smart_call: Callable[[], Any]) -> Exception:
    """Both calls raise an exception of the same type; the SmartArray one is returned."""
    with pytest.raises(Exception) as expected:
        numpy_call()
    with pytest.raises(type(expected.value)) as got:
        smart_call()
    assert type(got.value) is type(expected.value)
    return got.value


def assert_shares_state(view: SmartArray, base: SmartArray) -> None:
    """``view`` is a SmartArray view of ``base`` (whose bytes are all in one state): same
    allocation, so its bytes are in that state too; a view with no bytes of a buffer with
    some is current on both sides (issue 21)."""
    assert isinstance(view, SmartArray)
    assert view.label == base.label
    assert view._alloc is base._alloc
    no_bytes = view.nbytes == 0 and view._alloc.nbytes > 0
    assert view.location == ("both" if no_bytes else base.location)


# Sample arrays: (numpy array, SmartArray with the same layout). Views are made the same way
# on both sides so that strides and flags match.
def _c2d() -> np.ndarray:
    return np.arange(12.0).reshape(3, 4)


SAMPLES: dict[str, Callable[[], tuple[np.ndarray, SmartArray]]] = {
    "c2d": lambda: (_c2d(), SmartArray(_c2d())),
    "f2d": lambda: (np.asfortranarray(_c2d()), SmartArray(np.asfortranarray(_c2d()))),
    "zero_d": lambda: (np.array(3.5), SmartArray(np.array(3.5))),
    "empty": lambda: (np.zeros((0, 3)), SmartArray(np.zeros((0, 3)))),
    "negative_strides": lambda: (_c2d()[::-1, ::-2], SmartArray(_c2d())[::-1, ::-2]),
    "transposed_3d": lambda: (
        np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1),
        SmartArray(np.arange(24).reshape(2, 3, 4)).transpose(2, 0, 1),
    ),
    "int32": lambda: (np.arange(5, dtype=np.int32), SmartArray(np.arange(5, dtype=np.int32))),
    "bool": lambda: (np.array([True, False, True]), SmartArray(np.array([True, False, True]))),
    "complex": lambda: (
        np.array([1 + 2j, 3 - 4j, 0j]),
        SmartArray(np.array([1 + 2j, 3 - 4j, 0j])),
    ),
    "structured": lambda: (
        np.array([(1, 2.5), (3, 4.5)], dtype=[("a", "i4"), ("b", "f8")]),
        SmartArray(np.array([(1, 2.5), (3, 4.5)], dtype=[("a", "i4"), ("b", "f8")])),
    ),
}


@pytest.fixture(params=sorted(SAMPLES))
def sample(request: pytest.FixtureRequest) -> tuple[np.ndarray, SmartArray]:
    return SAMPLES[request.param]()


# --- attributes ----------------------------------------------------------------------------


def test_attributes_match(sample: tuple[np.ndarray, SmartArray]) -> None:
    x, a = sample
    assert a.shape == x.shape
    assert a.dtype == x.dtype
    assert a.ndim == x.ndim
    assert a.size == x.size and type(a.size) is int
    assert a.strides == x.strides
    assert a.itemsize == x.itemsize
    assert a.nbytes == x.nbytes
    for flag in ("c_contiguous", "f_contiguous", "writeable", "aligned"):
        assert getattr(a.flags, flag) == getattr(x.flags, flag), flag
        assert a.flags[flag.upper()] == x.flags[flag.upper()], flag
    np.testing.assert_array_equal(host(a), x, strict=True)


def test_transpose_attribute(sample: tuple[np.ndarray, SmartArray]) -> None:
    x, a = sample
    t = a.T
    assert_shares_state(t, a)
    assert t.shape == x.T.shape and t.strides == x.T.strides
    np.testing.assert_array_equal(host(t), x.T, strict=True)


def test_len_and_iter(sample: tuple[np.ndarray, SmartArray]) -> None:
    x, a = sample
    if x.ndim == 0:
        assert_raises_same(lambda: len(x), lambda: len(a))
        assert_raises_same(lambda: iter(x), lambda: iter(a))
        return
    assert len(a) == len(x)
    items = list(a)
    assert len(items) == len(x)
    for got, expected in zip(items, x, strict=True):
        if isinstance(expected, np.ndarray):
            assert_same(got, expected)
        else:
            assert type(got) is type(expected) and got == expected


def test_iteration_rows_are_views() -> None:
    a = SmartArray(_c2d())
    for row in a:
        row[0] = -1  # writes through the row view
    np.testing.assert_array_equal(host(a)[:, 0], [-1, -1, -1])


def test_flags_are_an_immutable_snapshot() -> None:
    a = SmartArray(_c2d())
    f = a.flags
    assert copy.copy(f) is f and copy.deepcopy(f) is f
    assert f == _c2d().flags and f == a.flags
    assert repr(f) == repr(_c2d().flags).replace("OWNDATA : True", "OWNDATA : False")


def test_flags_cannot_be_set() -> None:
    a = SmartArray(_c2d())
    with pytest.raises(ValueError, match="flags"):
        a.flags.writeable = False
    with pytest.raises(ValueError, match="flags"):
        a.flags["WRITEABLE"] = False
    assert a.flags.writeable and a[1:].flags.writeable
    a[0, 0] = 5.0
    assert a[0, 0] == 5.0


# --- __getitem__ ---------------------------------------------------------------------------

GETITEM_KEYS = [
    1,
    -1,
    (1, 2),
    (-1, -4),
    np.int64(2),
    (np.int32(1), 3),
    slice(1, None),
    slice(None, None, -1),
    (slice(None), slice(None, None, 2)),
    (Ellipsis, 1),
    (1, Ellipsis, 2),
    None,
    (None, 1),
    (),
    Ellipsis,
    [0, 2],
    np.array([2, 0, 2]),
    (slice(None), [1, 3]),
    ([0, 2], [1, 3]),
    np.array([True, False, True]),
    _c2d() > 5,
    True,
    np.array(1),
]


@pytest.mark.parametrize("key", GETITEM_KEYS, ids=repr)
def test_getitem_matches_numpy(key: Any) -> None:
    x = _c2d()
    a = SmartArray(x)
    expected = x[key]
    got = a[key]
    assert_same(got, expected)
    if isinstance(expected, np.ndarray):
        assert got.strides == expected.strides or not np.shares_memory(expected, x)


@pytest.mark.parametrize("key", [_c2d() > 5, [0, 2], (slice(None), [1, 3])], ids=repr)
def test_getitem_with_smartarray_keys(key: Any) -> None:
    x = _c2d()
    a = SmartArray(x)
    smart_key = (
        tuple(SmartArray(np.asarray(k)) if isinstance(k, list) else k for k in key)
        if isinstance(key, tuple)
        else SmartArray(np.asarray(key))
    )
    assert_same(a[smart_key], x[key])


@pytest.mark.parametrize(
    "key",
    [3, -4, (0, 4), (1, 2, 3), 1.0, "x", (slice(None), 1.5), [0, 3], np.array([[True]])],
    ids=repr,
)
def test_getitem_errors_match_numpy(key: Any) -> None:
    x = _c2d()
    a = SmartArray(x)
    assert_raises_same(lambda: x[key], lambda: a[key])
    np.testing.assert_array_equal(host(a), x)


def test_scalars_come_back_as_numpy_scalars() -> None:
    for x in (np.arange(3, dtype=np.int16), np.array([1.5, 2.5], dtype=np.float32)):
        a = SmartArray(x)
        assert type(a[1]) is type(x[1]) and a[1] == x[1]
    z = SmartArray(np.array(7, dtype=np.uint8))
    assert type(z[()]) is np.uint8 and z[()] == 7
    assert isinstance(z[...], SmartArray) and z[...].shape == ()


@SETTINGS
@given(data=st.data())
def test_basic_index_views_share_state(data: st.DataObject) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), label="shape")
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    a = SmartArray(x)
    key = data.draw(hnp.basic_indices(shape, allow_newaxis=True), label="key")
    expected = x[key]
    got = a[key]
    assert_same(got, expected)
    if not isinstance(expected, np.ndarray):
        return
    assert got.strides == expected.strides
    assert_shares_state(got, a)
    assert got.base is a
    # A write through the view shows in the base, exactly as with numpy.
    got[...] = -1.0
    expected[...] = -1.0
    np.testing.assert_array_equal(host(a), x)


@SETTINGS
@given(data=st.data())
def test_advanced_index_get_and_set(data: st.DataObject) -> None:
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=5), label="shape")
    x = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
    a = SmartArray(x)
    key = data.draw(hnp.integer_array_indices(shape), label="key")
    assert_same(a[key], x[key])
    value = data.draw(st.integers(-100, 100), label="value")
    a[key] = value
    x[key] = value
    np.testing.assert_array_equal(host(a), x, strict=True)


def test_views_write_through_to_base_and_siblings() -> None:
    x = _c2d()
    a = SmartArray(x)
    row = a[1]
    column = a[:, 2]
    transposed = a.T
    reshaped = a.reshape(4, 3)
    assert all(v.base is a for v in (row, column, transposed, reshaped))
    row[2] = 100.0
    assert a[1, 2] == 100.0
    assert column[1] == 100.0
    assert transposed[2, 1] == 100.0
    assert reshaped[2, 0] == 100.0
    nested = a[1:][0]
    assert nested.base is a  # like numpy: the base is the memory's owner
    nested[:] = 7.0
    np.testing.assert_array_equal(host(a)[1], np.full(4, 7.0))


# --- __setitem__ ---------------------------------------------------------------------------

SETITEM_CASES = [
    (0, 5.0),
    ((1, 2), -3),
    (slice(None), 1.5),
    (slice(None), np.arange(4.0)),  # broadcast a row over all rows
    ((slice(None), 0), [7, 8, 9]),
    ((slice(None), slice(None, 1)), [[1], [2], [3]]),
    (Ellipsis, np.array(2, dtype=np.int8)),
    ([0, 2], 9.0),
    (([0, 2], [1, 3]), [10.0, 20.0]),
    (np.array([True, False, True]), np.ones(4)),
    (_c2d() > 6, 0.0),
    (_c2d() > 6, np.arange(5.0)),
    ((slice(None, None, -1), slice(None, None, 2)), np.zeros((3, 2))),
    (1, np.ones((1, 4))),  # leading length-1 dimensions are dropped, as numpy does
    (None, 4.0),
    ((), np.arange(12.0).reshape(3, 4)[::-1]),
    (slice(0, 0), [1.0, 2.0, 3.0, 4.0]),
]


@pytest.mark.parametrize(("key", "value"), SETITEM_CASES, ids=repr)
def test_setitem_matches_numpy(key: Any, value: Any) -> None:
    x = _c2d()
    a = SmartArray(x)
    x[key] = value
    a[key] = value
    np.testing.assert_array_equal(host(a), x, strict=True)


@pytest.mark.parametrize(("key", "value"), SETITEM_CASES, ids=repr)
def test_setitem_with_smartarray_values(key: Any, value: Any) -> None:
    x = _c2d()
    a = SmartArray(x)
    x[key] = np.asarray(value)
    a[key] = SmartArray(np.asarray(value))
    np.testing.assert_array_equal(host(a), x, strict=True)


def test_setitem_with_smartarray_key_and_overlapping_value() -> None:
    x = _c2d()
    a = SmartArray(x)
    mask = x > 5
    x[mask] = -x[mask]
    a[SmartArray(mask)] = -a[SmartArray(mask)]
    np.testing.assert_array_equal(host(a), x)
    # Overlapping source and destination (numpy copies as needed).
    x[1:] = x[:-1]
    a[1:] = a[:-1]
    np.testing.assert_array_equal(host(a), x)
    x[::-1] = x
    a[::-1] = a
    np.testing.assert_array_equal(host(a), x)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (0, [1.0, 2.0]),  # bad shape
        (slice(None), np.ones((2, 4))),
        ((slice(None), 0), np.ones((1, 1, 4))),
        (0, "abc"),  # bad value
        (0, [1.0, "x", 3.0, 4.0]),
        ((0, 0), 1j),  # complex into float
        ((0, 0), [1.0, 2.0]),  # sequence into one element
        (3, 1.0),  # out of bounds
        ([0, 5], 1.0),
        (np.array([True, False]), 1.0),  # boolean index of the wrong shape
        (1.5, 0.0),  # bad index type
        ((0, 0), None),
    ],
    ids=repr,
)
def test_setitem_errors_match_numpy(key: Any, value: Any) -> None:
    x = _c2d()
    a = SmartArray(_c2d())
    ok = True
    try:
        x[key] = value
    except Exception as exc:  # numpy raised: SmartArray must raise the same
        ok = False
        with pytest.raises(type(exc)):
            a[key] = value
        # Nothing written (numpy itself may leave part of a bad sequence written: stricter)
        np.testing.assert_array_equal(host(a), _c2d())
    if ok:  # numpy accepted it (e.g. None -> nan): so must SmartArray
        a[key] = value
        np.testing.assert_array_equal(host(a), x)


def test_setitem_on_zero_d_and_empty() -> None:
    z = SmartArray(np.array(1.0))
    z[()] = 4.0
    assert z[()] == 4.0
    z[...] = 5
    assert float(z) == 5.0
    e = SmartArray(np.zeros((0, 3)))
    e[:] = 1.0
    e[...] = np.ones(3)
    assert host(e).shape == (0, 3)


# --- __array__ -----------------------------------------------------------------------------


def test_asarray_is_a_view_of_the_host_copy() -> None:
    a = SmartArray(_c2d())
    view = np.asarray(a)
    assert view.flags.writeable and type(view) is np.ndarray
    np.testing.assert_array_equal(view, _c2d())
    view[0, 0] = 1.0  # writes through np.asarray(a) reach a, as for an ndarray
    np.add(view, 1, out=view)
    assert a[0, 0] == 2.0 and a[2, 3] == 12.0
    a[0, 0] = 42.0  # the view shares memory with the host copy
    assert view[0, 0] == 42.0
    # Changing the returned array's metadata does not change the SmartArray.
    view.shape = (12,)
    assert a.shape == (3, 4) and (a + 0).shape == (3, 4)
    # A read-only SmartArray gives a read-only view.
    diagonal = np.asarray(a.diagonal())
    with pytest.raises(ValueError, match="read-only"):
        diagonal[0] = 1.0


def test_array_copy_keyword() -> None:
    a = SmartArray(_c2d())
    copied = np.asarray(a, copy=True)
    assert copied.flags.writeable and type(copied) is np.ndarray
    copied[0, 0] = -1.0
    assert a[0, 0] == 0.0
    no_copy = np.asarray(a, copy=False)
    assert no_copy.flags.writeable and np.shares_memory(no_copy, np.asarray(a))
    a[1, 1] = 3.0
    assert no_copy[1, 1] == 3.0
    full = np.array(a)
    assert full.flags.writeable and not np.shares_memory(full, no_copy)
    cast = np.asarray(a, dtype=np.int32)
    assert cast.dtype == np.int32 and cast[1, 1] == 3
    with pytest.raises(ValueError):
        np.asarray(a, dtype=np.int32, copy=False)
    assert a.__array__().dtype == np.float64
    assert a.__array__(np.float32, copy=True).dtype == np.float32


# --- NEP-13 ufuncs -------------------------------------------------------------------------

UNARY_UFUNCS = [np.negative, np.sqrt, np.exp, np.isnan, np.sin, np.abs, np.floor, np.sign]
BINARY_UFUNCS = [
    np.add,
    np.subtract,
    np.multiply,
    np.true_divide,
    np.floor_divide,
    np.power,
    np.maximum,
    np.equal,
    np.less,
    np.logical_and,
    np.arctan2,
    np.heaviside,
]


@pytest.mark.parametrize("ufunc", UNARY_UFUNCS, ids=lambda u: u.__name__)
def test_unary_ufuncs(ufunc: np.ufunc) -> None:
    x = np.array([[0.25, 4.0, -1.5], [9.0, 0.0, 2.5]])
    with np.errstate(invalid="ignore"):
        assert_same(ufunc(SmartArray(x)), ufunc(x))


@pytest.mark.parametrize("ufunc", BINARY_UFUNCS, ids=lambda u: u.__name__)
@pytest.mark.parametrize("order", ["sa-sa", "sa-nd", "nd-sa", "sa-scalar", "scalar-sa"])
def test_binary_ufuncs(ufunc: np.ufunc, order: str) -> None:
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = np.array([2.0, 0.5, 3.0])
    s = 2
    left, right = order.split("-")
    wrap = {"sa": lambda v: SmartArray(v), "nd": lambda v: v, "scalar": lambda v: s}
    lhs_x, rhs_y = (x, y) if left != "scalar" else (s, y)
    if right == "scalar":
        rhs_y = s
    expected = ufunc(lhs_x, rhs_y)
    got = ufunc(wrap[left](lhs_x), wrap[right](rhs_y))
    assert_same(got, expected)


def test_ufunc_out_keyword() -> None:
    x = _c2d()
    a = SmartArray(x)
    out = sa.zeros((3, 4))
    result = np.add(a, 1, out=out)
    assert result is out
    np.testing.assert_array_equal(host(out), x + 1)
    assert np.multiply(a, 2, out=(out,)) is out
    np.testing.assert_array_equal(host(out), x * 2)
    nd_out = np.zeros((3, 4))
    result_nd = np.add(a, 1, out=nd_out)
    assert result_nd is nd_out  # numpy's rule: the out argument itself is returned
    np.testing.assert_array_equal(nd_out, x + 1)
    view_out = out[:, 1:3]
    assert np.subtract(a[:, :2], 1, out=view_out) is view_out
    expected = x * 2
    expected[:, 1:3] = x[:, :2] - 1
    np.testing.assert_array_equal(host(out), expected)
    # Two outputs.
    q, r = sa.empty((3, 4)), np.empty((3, 4))
    result2 = np.divmod(a, 5, out=(q, r))
    assert result2[0] is q and result2[1] is r
    np.testing.assert_array_equal(host(q), x // 5)
    np.testing.assert_array_equal(r, x % 5)


def test_ufunc_where_keyword() -> None:
    x = _c2d()
    mask = x % 3 == 0
    expected = np.full((3, 4), -1.0)
    np.add(x, 100, out=expected, where=mask)
    out = sa.full((3, 4), -1.0)
    assert np.add(SmartArray(x), 100, out=out, where=SmartArray(mask)) is out
    np.testing.assert_array_equal(host(out), expected)
    # where= in a reduction
    assert_same(
        np.add.reduce(SmartArray(x), axis=1, where=SmartArray(mask)),
        np.add.reduce(x, axis=1, where=mask),
    )


def test_ufunc_methods() -> None:
    x = np.arange(1.0, 13.0).reshape(3, 4)
    a = SmartArray(x)
    assert_same(np.add.reduce(a), np.add.reduce(x))
    assert_same(np.add.reduce(a, axis=None), np.add.reduce(x, axis=None))
    assert_same(
        np.multiply.reduce(a, axis=1, keepdims=True), np.multiply.reduce(x, 1, None, None, True)
    )
    assert_same(
        np.maximum.reduce(a, axis=1, initial=7.0), np.maximum.reduce(x, axis=1, initial=7.0)
    )
    assert_same(np.add.accumulate(a, axis=1), np.add.accumulate(x, axis=1))
    assert_same(np.add.reduceat(a[0], [0, 2]), np.add.reduceat(x[0], [0, 2]))
    assert_same(np.multiply.outer(a[0], a[:, 1]), np.multiply.outer(x[0], x[:, 1]))
    assert_same(np.subtract.outer(a[0], x[:, 1]), np.subtract.outer(x[0], x[:, 1]))
    out = sa.zeros(4)
    assert np.add.reduce(a, axis=0, out=out) is out
    np.testing.assert_array_equal(host(out), x.sum(axis=0))
    # ufunc.at writes in place (unbuffered; repeated indices accumulate)
    y = np.zeros(5)
    b = SmartArray(y)
    assert np.add.at(b, [0, 0, 3], 1.5) is None
    np.add.at(y, [0, 0, 3], 1.5)
    np.testing.assert_array_equal(host(b), y)
    np.negative.at(b, SmartArray(np.array([3])))
    np.negative.at(y, [3])
    np.testing.assert_array_equal(host(b), y)


def test_ufunc_errors_match_numpy() -> None:
    xi = np.arange(4)
    ai = SmartArray(xi)
    assert_raises_same(lambda: np.add(xi, 1.5, out=xi), lambda: np.add(ai, 1.5, out=ai))
    assert_raises_same(lambda: np.add(xi, np.ones(3)), lambda: np.add(ai, np.ones(3)))
    assert_raises_same(lambda: np.add.reduce(xi, axis=2), lambda: np.add.reduce(ai, axis=2))
    assert_raises_same(lambda: np.add.at(xi, [9], 1), lambda: np.add.at(ai, [9], 1))
    np.testing.assert_array_equal(host(ai), np.arange(4), strict=True)


# --- NEP-18 functions ----------------------------------------------------------------------

NEW_ARRAY_FUNCTIONS: list[tuple[str, Callable[..., Any]]] = [
    ("concatenate", lambda a, b: np.concatenate([a, b])),
    ("stack", lambda a, b: np.stack((a, b), axis=1)),
    ("where", lambda a, b: np.where(a > 4, a, b)),
    ("where1", lambda a, b: np.where(a > 4)),
    ("sort", lambda a, b: np.sort(b, axis=0)),
    ("argsort", lambda a, b: np.argsort(b, axis=1)),
    ("cumsum", lambda a, b: np.cumsum(a, axis=1)),
    ("clip", lambda a, b: np.clip(a, 2, 8)),
    ("dot", lambda a, b: np.dot(a, b.T)),
    ("unique", lambda a, b: np.unique(b)),
    ("sum", lambda a, b: np.sum(a, axis=0)),
    ("mean", lambda a, b: np.mean(a)),
    ("median", lambda a, b: np.median(b, axis=1)),
    ("nonzero", lambda a, b: np.nonzero(a)),
    ("isclose", lambda a, b: np.isclose(a, b)),
    ("allclose", lambda a, b: np.allclose(a, b)),
    ("array_equal", lambda a, b: np.array_equal(a, a)),
    ("take", lambda a, b: np.take(a, [0, 5, 7])),
    ("repeat", lambda a, b: np.repeat(a, 2, axis=0)),
    ("tile", lambda a, b: np.tile(b, (2, 1))),
    ("diff", lambda a, b: np.diff(b)),
    ("einsum", lambda a, b: np.einsum("ij,ij->i", a, b)),
    ("linalg.norm", lambda a, b: np.linalg.norm(a, axis=1)),
    ("round", lambda a, b: np.round(b / 3, 2)),
    ("copy", lambda a, b: np.copy(a)),
    ("zeros_like", lambda a, b: np.zeros_like(a, dtype=np.int32)),
    ("ones_like", lambda a, b: np.ones_like(b)),
    ("full_like", lambda a, b: np.full_like(a, 7)),
    ("shape", lambda a, b: np.shape(a)),
    ("ndim", lambda a, b: np.ndim(b)),
    ("size", lambda a, b: np.size(a, 1)),
    ("diag", lambda a, b: np.diag(np.diag(a))),
    ("split-arrays", lambda a, b: np.split(b, np.array([1]))),
]


MIXED = {"concatenate", "stack", "where", "dot", "isclose", "allclose", "einsum"}


@pytest.mark.parametrize(
    ("name", "func"), NEW_ARRAY_FUNCTIONS, ids=[n for n, _ in NEW_ARRAY_FUNCTIONS]
)
def test_functions_match_numpy(name: str, func: Callable[..., Any]) -> None:
    x = _c2d()
    y = np.array([[3.0, 1.0, 2.0, 9.0], [0.0, 5.0, 4.0, 4.0], [8.0, 7.0, 6.0, 1.0]])
    expected = func(x, y)
    assert_same(func(SmartArray(x), SmartArray(y)), expected)
    if name in MIXED:  # SmartArray and ndarray arguments together
        assert_same(func(SmartArray(x), y), expected)
        assert_same(func(x, SmartArray(y)), expected)


VIEW_FUNCTIONS: list[tuple[str, Callable[[Any], Any]]] = [
    ("transpose", np.transpose),
    ("transpose-axes", lambda a: np.transpose(a, (1, 0))),
    ("reshape", lambda a: np.reshape(a, (4, 3))),
    ("reshape-shape-kw", lambda a: np.reshape(a, shape=(2, 6))),
    ("reshape-F", lambda a: np.reshape(a.T, (6, 2), order="F")),
    ("ravel", np.ravel),
    ("squeeze", lambda a: np.squeeze(a[None, :, None])),
    ("moveaxis", lambda a: np.moveaxis(a, 0, -1)),
    ("swapaxes", lambda a: np.swapaxes(a, 0, 1)),
    ("expand_dims", lambda a: np.expand_dims(a, 1)),
    ("flip", np.flip),
    ("fliplr", np.fliplr),
    ("atleast_3d", np.atleast_3d),
    ("rollaxis", lambda a: np.rollaxis(a, 1)),
    ("permute_dims", np.permute_dims),
    ("matrix_transpose", np.matrix_transpose),
    ("method-transpose", lambda a: a.transpose()),
    ("method-swapaxes", lambda a: a.swapaxes(1, 0)),
    ("method-squeeze", lambda a: a[:1].squeeze()),
    ("method-view", lambda a: a.view()),
    ("method-reshape", lambda a: a.reshape(2, 2, 3)),
    ("method-ravel", lambda a: a.ravel()),
    ("mT", lambda a: a.mT),
]


@pytest.mark.parametrize(("name", "func"), VIEW_FUNCTIONS, ids=[n for n, _ in VIEW_FUNCTIONS])
def test_view_functions_give_views_sharing_state(name: str, func: Callable[[Any], Any]) -> None:
    x = _c2d()
    a = SmartArray(x)
    expected = func(x)
    got = func(a)
    assert_same(got, expected)
    assert got.strides == expected.strides
    assert_shares_state(got, a)
    assert got.base is a
    assert got.flags.writeable
    got[...] = -got
    expected[...] = -expected
    np.testing.assert_array_equal(host(a), x)


LIKE_FUNCTIONS: list[tuple[str, Callable[[Any], Any]]] = [
    ("empty_like", np.empty_like),
    ("zeros_like", np.zeros_like),
    ("ones_like", np.ones_like),
    ("full_like", lambda v: np.full_like(v, 3)),
    ("zeros_like-F", lambda v: np.zeros_like(v, order="F")),
    ("ones_like-dtype", lambda v: np.ones_like(v, dtype=np.int16)),
    ("zeros_like-shape", lambda v: np.zeros_like(v, shape=(2, 5))),
    ("sa.full_like", lambda v: (sa.full_like if isinstance(v, SmartArray) else np.full_like)(v, 2)),
]


@pytest.mark.parametrize(("name", "like"), LIKE_FUNCTIONS, ids=[n for n, _ in LIKE_FUNCTIONS])
def test_like_functions_keep_the_layout(
    sample: tuple[np.ndarray, SmartArray], name: str, like: Callable[[Any], Any]
) -> None:
    x, a = sample
    expected = like(x)
    got = like(a)
    assert isinstance(got, SmartArray) and got.base is None and got.label != a.label
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert got.strides == expected.strides  # order='K' keeps the prototype's axis order
    if name != "empty_like":
        np.testing.assert_array_equal(host(got), expected, strict=True)
    if got.size:
        got[...] = got[(0,) * got.ndim]  # new, writable memory: the prototype is untouched
    np.testing.assert_array_equal(host(a), x)


def test_split_gives_views() -> None:
    x = _c2d()
    a = SmartArray(x)
    for func in (lambda v: np.split(v, 2, axis=1), lambda v: np.array_split(v, [1])):
        expected = func(x)
        got = func(a)
        assert type(got) is list and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert_same(g, e)
            assert g.base is a
    pieces = np.hsplit(a, 2)
    pieces[1][0, 0] = 99.0
    assert a[0, 2] == 99.0


def test_read_only_view_functions() -> None:
    x = _c2d()
    a = SmartArray(x)
    for func in (np.diagonal, lambda v: v.diagonal(1), lambda v: np.broadcast_to(v[0], (2, 4))):
        expected = func(x)
        got = func(a)
        assert_same(got, expected)
        assert not got.flags.writeable and not expected.flags.writeable
        assert_raises_same(
            lambda e=expected: e.__setitem__(0, 1), lambda g=got: g.__setitem__(0, 1)
        )
    np.testing.assert_array_equal(host(a), x)


WRITING_FUNCTIONS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("copyto", lambda t, v: np.copyto(t, v)),
    ("copyto-where", lambda t, v: np.copyto(t, 5.0, where=v > 6)),
    ("put", lambda t, v: np.put(t, [0, 5, 11], [-1.0, -2.0, -3.0])),
    ("place", lambda t, v: np.place(t, v > 8, [0.5, 1.5])),
    ("putmask", lambda t, v: np.putmask(t, v < 3, v * 10)),
    ("fill_diagonal", lambda t, v: np.fill_diagonal(t, 42.0)),
    ("put_along_axis", lambda t, v: np.put_along_axis(t, np.array([[1], [0], [3]]), 8.0, axis=1)),
    ("sort-method", lambda t, v: t[::-1].sort(axis=0)),
    ("partition-method", lambda t, v: t[:, ::-1].partition(1)),
    ("put-method", lambda t, v: t.put([1, 2], [3.0, 4.0])),
    ("sum-out", lambda t, v: np.sum(v, axis=0, out=t[0])),
    ("clip-out", lambda t, v: np.clip(v, 3, 4, out=t)),
    ("cumsum-out", lambda t, v: v.cumsum(axis=1, out=t)),
]


@pytest.mark.parametrize(("name", "func"), WRITING_FUNCTIONS, ids=[n for n, _ in WRITING_FUNCTIONS])
def test_functions_writing_their_target(name: str, func: Callable[[Any, Any], Any]) -> None:
    source = np.array([[3.0, 1.0, 2.0, 9.0], [0.0, 5.0, 4.0, 4.0], [8.0, 7.0, 6.0, 1.0]])
    x = _c2d()
    a = SmartArray(x)
    expected = func(x, source)
    got = func(a, SmartArray(source))
    if expected is None:
        assert got is None
    np.testing.assert_array_equal(host(a), x)
    assert not np.array_equal(x, _c2d())  # the case really writes something


# --- operators -----------------------------------------------------------------------------

BINARY_OPERATORS = [
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.lt,
    operator.le,
    operator.eq,
    operator.ne,
    operator.gt,
    operator.ge,
    divmod,
]
INT_OPERATORS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


def _operands(kind: str, x: np.ndarray) -> tuple[Any, Any]:
    return {"sa": (x, SmartArray(x)), "nd": (x, x), "scalar": (3, 3), "float": (1.5, 1.5)}[kind]


@pytest.mark.parametrize("op", BINARY_OPERATORS + INT_OPERATORS, ids=lambda o: o.__name__)
@pytest.mark.parametrize(
    "kinds", ["sa-sa", "sa-nd", "nd-sa", "sa-scalar", "scalar-sa", "sa-float", "float-sa"]
)
def test_binary_operators(op: Callable[[Any, Any], Any], kinds: str) -> None:
    left, right = kinds.split("-")
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    y = np.array([3, 1, 2], dtype=np.int64)
    lx, ls = _operands(left, x)
    ry, rs = _operands(right, y)
    if op in INT_OPERATORS and "float" in kinds:
        assert_raises_same(lambda: op(lx, ry), lambda: op(ls, rs))
        return
    with np.errstate(divide="ignore"):
        expected = op(lx, ry)
        got = op(ls, rs)
    assert_same(got, expected)


def test_matmul_operator() -> None:
    x = np.arange(6.0).reshape(2, 3)
    y = np.arange(12.0).reshape(3, 4)
    assert_same(SmartArray(x) @ SmartArray(y), x @ y)
    assert_same(x @ SmartArray(y), x @ y)
    assert_same(SmartArray(x) @ y, x @ y)
    assert_raises_same(lambda: y @ x, lambda: SmartArray(y) @ x)


@pytest.mark.parametrize("op", [operator.neg, operator.pos, abs, operator.invert])
def test_unary_operators(op: Callable[[Any], Any]) -> None:
    for x in (np.array([-2, 0, 3], dtype=np.int32), np.array([1.5, -0.0]), np.array([True])):
        try:
            expected = op(x)
        except TypeError:  # e.g. -bool: numpy refuses, so must SmartArray
            assert_raises_same(lambda x=x: op(x), lambda x=x: op(SmartArray(x)))
        else:
            assert_same(op(SmartArray(x)), expected)


INPLACE_OPERATORS = [
    operator.iadd,
    operator.isub,
    operator.imul,
    operator.ifloordiv,
    operator.imod,
    operator.ipow,
    operator.iand,
    operator.ior,
    operator.ixor,
    operator.ilshift,
]


@pytest.mark.parametrize("op", INPLACE_OPERATORS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("kind", ["sa", "nd", "scalar", "view"])
def test_inplace_operators(op: Callable[[Any, Any], Any], kind: str) -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
    other = np.array([1, 2, 1], dtype=np.int64)
    a = SmartArray(x)
    rhs = {"sa": SmartArray(other), "nd": other, "scalar": 2, "view": a[0]}[kind]
    rhs_np = x[0] if kind == "view" else (2 if kind == "scalar" else other)
    result = op(a, rhs)
    expected = op(x, rhs_np)
    assert result is a  # in place: the same object
    np.testing.assert_array_equal(host(a), expected, strict=True)


@pytest.mark.parametrize("op", [operator.iadd, operator.imul, operator.itruediv, operator.isub])
def test_inplace_ndarray_with_smartarray_stays_ndarray(op: Callable[[Any, Any], Any]) -> None:
    x = np.arange(1.0, 7.0).reshape(2, 3)
    expected = op(x.copy(), x)
    target = x.copy()
    result = op(target, SmartArray(x))
    assert result is target and type(result) is np.ndarray
    np.testing.assert_array_equal(result, expected)


def test_inplace_casting_errors_match_numpy() -> None:
    x = np.arange(3)
    a = SmartArray(np.arange(3))
    assert_raises_same(lambda: operator.itruediv(x, 2), lambda: operator.itruediv(a, 2))
    assert_raises_same(lambda: operator.iadd(x, 1.5), lambda: operator.iadd(a, 1.5))
    assert_raises_same(lambda: operator.iadd(x, np.ones(2)), lambda: operator.iadd(a, np.ones(2)))
    np.testing.assert_array_equal(host(a), np.arange(3), strict=True)


def test_float_inplace_true_divide() -> None:
    x = np.arange(1.0, 5.0)
    a = SmartArray(x)
    a /= SmartArray(np.full(4, 2.0))
    a /= 2
    np.testing.assert_array_equal(host(a), x / 4)


# --- methods -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.complex128, np.bool_, "U4", np.uint8])
def test_astype(dtype: Any) -> None:
    x = np.array([[0.0, 1.5, -2.0], [3.0, 250.7, 0.25]])
    with np.errstate(invalid="ignore"):
        assert_same(SmartArray(x).astype(dtype), x.astype(dtype))


def test_astype_copy_false() -> None:
    a = SmartArray(_c2d())
    assert a.astype(np.float64, copy=False) is a
    assert a.astype(np.float64) is not a
    f = a.astype(np.float64, order="F", copy=False)
    assert f is not a and f.flags.f_contiguous
    assert a.astype(np.float32, copy=False).dtype == np.float32
    assert_raises_same(
        lambda: _c2d().astype(np.int32, casting="safe"),
        lambda: a.astype(np.int32, casting="safe"),
    )


@pytest.mark.parametrize("order", ["C", "F", "K", "A"])
def test_copy_orders(sample: tuple[np.ndarray, SmartArray], order: str) -> None:
    x, a = sample
    expected = x.copy(order)
    got = a.copy(order)
    assert_same(got, expected)
    assert got.flags.c_contiguous == expected.flags.c_contiguous
    assert got.flags.f_contiguous == expected.flags.f_contiguous
    assert got.label != a.label and got.base is None  # a new allocation
    assert got.flags.writeable
    if got.size:
        got[...] = got[(0,) * got.ndim]
        assert x.size == 1 or not np.array_equal(host(got), x)
    np.testing.assert_array_equal(host(a), x)  # the original is untouched


RESHAPES = [
    ((12,), "C"),
    ((4, 3), "C"),
    ((2, -1), "C"),
    ((4, 3), "F"),
    ((2, 2, 3), "F"),
    ((12,), "A"),
    ((1, 12, 1), "C"),
]


# (base data, view operation): applied to an ndarray and to a SmartArray of the same data.
RESHAPE_LAYOUTS: dict[str, tuple[Callable[[], np.ndarray], Callable[[Any], Any]]] = {
    "c2d": (_c2d, lambda v: v),
    "f2d": (lambda: np.asfortranarray(_c2d()), lambda v: v),
    "transposed": (_c2d, lambda v: v.T),
    "negative_strides": (lambda: np.arange(24.0).reshape(3, 8), lambda v: v[::-1, ::-2]),
    "strided_rows": (lambda: np.arange(24.0).reshape(6, 4), lambda v: v[::2]),
}


@pytest.mark.parametrize(("shape", "order"), RESHAPES, ids=repr)
@pytest.mark.parametrize("layout", sorted(RESHAPE_LAYOUTS))
def test_reshape_matches_numpy(shape: tuple[int, ...], order: str, layout: str) -> None:
    make, view = RESHAPE_LAYOUTS[layout]
    x, a = view(make()), view(SmartArray(make()))
    assert a.strides == x.strides and a.size == 12
    expected = x.reshape(shape, order=order)
    got = a.reshape(shape, order=order)
    assert_same(got, expected)
    assert_same(a.reshape(*shape, order=order), expected)
    is_view = np.shares_memory(expected, x)
    got[...] = -1
    expected[...] = -1
    if is_view:  # a view with numpy must be a view sharing state here too
        assert got.strides == expected.strides
        assert got.label == a.label
    else:
        assert got.label != a.label
    np.testing.assert_array_equal(host(a), x)


def test_reshape_copy_keyword_and_errors() -> None:
    x = _c2d()
    a = SmartArray(x)
    assert_raises_same(lambda: x.T.reshape(12, copy=False), lambda: a.T.reshape(12, copy=False))
    copied = a.reshape(12, copy=True)
    copied[0] = 99
    assert a[0, 0] == 0
    assert_raises_same(lambda: x.reshape(5), lambda: a.reshape(5))
    assert_raises_same(lambda: x.reshape(5, -1), lambda: a.reshape(5, -1))
    assert_raises_same(lambda: x.reshape(-1, -1), lambda: a.reshape(-1, -1))
    assert_raises_same(lambda: x.reshape(12, order="K"), lambda: a.reshape(12, order="K"))
    assert_same(a[0:1, 0:1].reshape(()), x[0:1, 0:1].reshape(()))
    assert_same(a[0:1, 0:1].reshape([]), x[0:1, 0:1].reshape([]))


@pytest.mark.parametrize("order", ["C", "F", "A", "K"])
@pytest.mark.parametrize("layout", ["c2d", "f2d", "negative_strides", "transposed_3d", "zero_d"])
def test_ravel_and_flatten(order: str, layout: str) -> None:
    x, a = SAMPLES[layout]()
    expected = x.ravel(order)
    got = a.ravel(order)
    assert_same(got, expected)
    is_view = np.shares_memory(expected, x)
    assert (got.label == a.label) == is_view
    if got.flags.writeable:
        got[...] = 0
        if is_view:
            assert not host(a).any()
        else:
            np.testing.assert_array_equal(host(a), x)
    x2, a2 = SAMPLES[layout]()
    flat = a2.flatten(order)
    assert_same(flat, x2.flatten(order))
    flat[...] = 0
    np.testing.assert_array_equal(host(a2), x2)  # always a copy


def test_fill() -> None:
    for x, value in ((_c2d(), 2.5), (np.arange(4), 7), (np.zeros(3, dtype=bool), 1)):
        a = SmartArray(x)
        x.fill(value)
        assert a.fill(value) is None
        np.testing.assert_array_equal(host(a), x, strict=True)
    a = SmartArray(_c2d())
    a[1].fill(-1.0)
    np.testing.assert_array_equal(host(a)[1], np.full(4, -1.0))
    np.testing.assert_array_equal(host(a)[0], _c2d()[0])
    assert_raises_same(lambda: np.zeros(3).fill("x"), lambda: a.fill("x"))
    assert_raises_same(lambda: np.zeros(3).fill(1j), lambda: a.fill(1j))
    assert_raises_same(lambda: np.zeros(3).fill([1, 2]), lambda: a.fill([1, 2]))


REDUCTIONS = ["sum", "mean", "min", "max", "any", "all", "prod", "std", "argmax", "cumsum"]


@pytest.mark.parametrize("method", REDUCTIONS)
@pytest.mark.parametrize(
    "kwargs", [{}, {"axis": 0}, {"axis": 1}, {"axis": -1, "keepdims": True}, {"axis": (0, 1)}]
)
def test_reductions(method: str, kwargs: dict[str, Any]) -> None:
    x = np.array([[3.0, 0.0, 2.0], [1.0, 5.0, 4.0]])
    a = SmartArray(x)
    if method in ("argmax", "cumsum") and (
        isinstance(kwargs.get("axis"), tuple) or ("keepdims" in kwargs and method == "cumsum")
    ):
        assert_raises_same(
            lambda: getattr(x, method)(**kwargs), lambda: getattr(a, method)(**kwargs)
        )
        return
    assert_same(getattr(a, method)(**kwargs), getattr(x, method)(**kwargs))
    assert_same(getattr(np, method)(a, **kwargs), getattr(np, method)(x, **kwargs))


def test_reductions_on_int_bool_and_empty() -> None:
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert_same(SmartArray(xi).sum(), xi.sum())
    assert_same(SmartArray(xi).mean(axis=0), xi.mean(axis=0))
    assert_same(SmartArray(xi).max(axis=1, keepdims=True), xi.max(axis=1, keepdims=True))
    xb = np.array([[True, False], [True, True]])
    assert_same(SmartArray(xb).all(axis=1), xb.all(axis=1))
    assert_same(SmartArray(xb).any(), xb.any())
    assert_same(SmartArray(xb).sum(), xb.sum())
    e = np.zeros((0, 3))
    assert_same(SmartArray(e).sum(axis=0), e.sum(axis=0))
    assert_raises_same(lambda: e.min(), lambda: SmartArray(e).min())
    assert_same(SmartArray(e).max(initial=-1.0), e.max(initial=-1.0))


def test_tolist_and_item(sample: tuple[np.ndarray, SmartArray]) -> None:
    x, a = sample
    assert a.tolist() == x.tolist()
    assert type(a.tolist()) is type(x.tolist())
    if x.size == 1:
        assert a.item() == x.item() and type(a.item()) is type(x.item())
    elif x.size:
        assert a.item(1) == x.item(1) and type(a.item(1)) is type(x.item(1))
        assert_raises_same(lambda: x.item(), lambda: a.item())
    assert_raises_same(lambda: x.item(x.size), lambda: a.item(a.size))


def test_repr_and_str(sample: tuple[np.ndarray, SmartArray]) -> None:
    x, a = sample
    assert str(a) == str(x)
    text = repr(a)
    assert text.startswith("SmartArray(") and text.endswith(")")
    # Same body as numpy's repr, with continuation lines aligned under the new prefix.
    expected = "SmartArray" + repr(x)[len("array") :].replace("\n      ", "\n" + " " * 11)
    assert text == expected
    if x.size:  # (an empty array's repr has shape=..., which np.array does not take)
        namespace = {"SmartArray": np.array, "dtype": np.dtype, "int32": np.int32}
        rebuilt = eval(text, namespace)
        np.testing.assert_array_equal(rebuilt, x)
    assert format(a) == format(x)


def test_repr_long_and_3d() -> None:
    x = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    text = repr(SmartArray(x))
    rebuilt = eval(text, {"SmartArray": np.array, "int16": np.int16})
    np.testing.assert_array_equal(rebuilt, x, strict=False)
    assert text.splitlines()[1].startswith(" " * len("SmartArray(["))
    big = np.arange(2000.0)
    assert repr(SmartArray(big)) == "SmartArray" + repr(big)[len("array") :].replace(
        "\n      ", "\n" + " " * 11
    )
    assert "..." in repr(SmartArray(big))


@pytest.mark.parametrize(
    "data",
    [np.array(0.0), np.array([3]), np.array([[0]]), np.array([]), np.arange(3), np.array(2j)],
    ids=repr,
)
def test_bool_and_scalar_conversions(data: np.ndarray) -> None:
    a = SmartArray(data)
    try:
        expected = bool(data)
    except Exception as exc:
        with pytest.raises(type(exc)):
            bool(a)
    else:
        assert bool(a) is expected
    for convert in (int, float, complex, operator.index):
        try:
            expected_value = convert(data)
        except Exception as exc:
            with pytest.raises(type(exc)):
                convert(a)
        else:
            assert convert(a) == expected_value and type(convert(a)) is type(expected_value)


def test_truth_value_error_message() -> None:
    with pytest.raises(ValueError, match="ambiguous"):
        bool(SmartArray(np.arange(3)))
    with pytest.raises(ValueError, match="ambiguous"):
        if SmartArray(np.arange(3)) > 0:
            pass


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_pickle(sample: tuple[np.ndarray, SmartArray], protocol: int) -> None:
    x, a = sample
    restored = pickle.loads(pickle.dumps(a, protocol=protocol))
    assert_same(restored, x)
    assert restored.location == "host" and restored.label != a.label
    assert restored.flags.writeable
    if restored.size:
        restored[(0,) * restored.ndim] = restored[(-1,) * restored.ndim]
    np.testing.assert_array_equal(host(a), x)


def test_copy_and_deepcopy(sample: tuple[np.ndarray, SmartArray]) -> None:
    x, a = sample
    for make in (copy.copy, copy.deepcopy):
        expected = make(x)
        got = make(a)
        assert_same(got, expected)
        assert got.flags.c_contiguous == expected.flags.c_contiguous
        assert got.flags.f_contiguous == expected.flags.f_contiguous
        assert got.label != a.label
        got.fill(got.flat[0] if got.size else 0)
        np.testing.assert_array_equal(host(a), x)


def test_deepcopy_object_dtype_and_memo() -> None:
    inner = [1, 2]
    x = np.empty(2, dtype=object)
    x[0], x[1] = inner, "s"
    a = SmartArray(x)
    deep = copy.deepcopy(a)
    assert deep[0] == inner and deep[0] is not inner  # elements deep-copied, like numpy
    assert copy.deepcopy(x)[0] is not inner
    shallow = copy.copy(a)
    assert shallow[0] is inner
    pair = copy.deepcopy([a, a])
    assert pair[0] is pair[1]


# --- special arrays ------------------------------------------------------------------------


def test_zero_d_arrays() -> None:
    x = np.array(2.5)
    a = SmartArray(x)
    assert a.shape == () and a.ndim == 0 and a.size == 1
    assert_same(a + 1, x + 1)
    assert_same(a[()], x[()])
    assert_same(a[...], x[...])
    assert_same(a[None], x[None])
    assert_same(a.reshape(1, 1), x.reshape(1, 1))
    assert_same(np.sqrt(a), np.sqrt(x))
    assert_same(a.sum(), x.sum())
    assert float(a) == 2.5 and a.tolist() == 2.5 and a.item() == 2.5
    assert_same(np.real(SmartArray(np.array(1 + 2j))), np.real(np.array(1 + 2j)))
    a[...] = 4
    assert a[()] == 4.0


def test_empty_arrays() -> None:
    x = np.zeros((0, 3), dtype=np.int16)
    a = SmartArray(x)
    assert len(a) == 0 and list(a) == [] and a.size == 0
    assert_same(a + 1, x + 1)
    assert_same(a.T, x.T)
    assert_same(a.reshape(3, 0), x.reshape(3, 0))
    assert_same(a[1:], x[1:])
    assert_same(a.sum(axis=1), x.sum(axis=1))
    assert a.tolist() == [] and repr(a) == "SmartArray([], shape=(0, 3), dtype=int16)"
    e = sa.empty(0)
    assert e.shape == (0,) and host(e).size == 0
    for shape, order in (((0, 3), "C"), ((2, 0), "F"), ((0,), "C"), ((2, 0, 3), "C")):
        made = sa.zeros(shape, order=order)
        assert made.strides == np.zeros(shape, order=order).strides  # type: ignore[call-overload]
        assert_same(made, np.zeros(shape, order=order))  # type: ignore[call-overload]


def test_fortran_ordered_arrays() -> None:
    x = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    a = SmartArray(x)
    assert a.flags.f_contiguous and not a.flags.c_contiguous and a.strides == x.strides
    assert_same(a + 1, x + 1)
    assert (a + 1).flags.f_contiguous == (x + 1).flags.f_contiguous
    assert_same(a.T, x.T)
    assert a.T.flags.c_contiguous
    assert_same(a[:, 1], x[:, 1])
    f = sa.empty((2, 3), order="F")
    assert f.flags.f_contiguous and f.strides == np.empty((2, 3), order="F").strides
    g = sa.asarray(np.arange(6.0).reshape(2, 3), order="F")
    assert g.flags.f_contiguous and host(g).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_negative_stride_views() -> None:
    x = np.arange(10.0)
    a = SmartArray(x)
    r = a[::-2]
    assert r.strides == x[::-2].strides == (-16,)
    assert_same(r, x[::-2])
    r[0] = 100.0
    assert a[9] == 100.0
    x[9] = 100.0
    assert_same(r + a[::2], x[::-2] + x[::2])
    assert_same(np.flip(a), np.flip(x))
    assert_same(r.copy(), x[::-2].copy())
    assert r.copy().flags.c_contiguous


def test_complex_real_imag_views() -> None:
    x = np.array([1 + 2j, 3 - 4j])
    a = SmartArray(x)
    re, im = a.real, a.imag
    assert_same(re, x.real)
    assert_same(im, x.imag)
    assert re.strides == x.real.strides and re.base is a and im.base is a
    re[0] = 10.0
    im[1] = 40.0
    assert a[0] == 10 + 2j and a[1] == 3 + 40j
    a.imag = 0.5
    a.real = SmartArray(np.array([7.0, 8.0]))
    np.testing.assert_array_equal(host(a), [7 + 0.5j, 8 + 0.5j])
    assert_same(np.imag(a), np.imag(host(a)))
    assert_same(np.abs(a), np.abs(host(a)))
    assert_same(a.conj(), host(a).conj())


def test_real_imag_of_real_arrays() -> None:
    x = np.arange(3.0)
    a = SmartArray(x)
    assert_same(a.real, x.real)
    assert_same(a.imag, x.imag)
    assert a.imag.flags.writeable == x.imag.flags.writeable
    assert_raises_same(lambda: x.imag.__setitem__(0, 1), lambda: a.imag.__setitem__(0, 1))
    assert_raises_same(lambda: setattr(x, "imag", 1), lambda: setattr(a, "imag", 1))
    a.real = 5.0
    np.testing.assert_array_equal(host(a), np.full(3, 5.0))


def test_structured_dtype() -> None:
    dtype = np.dtype([("a", "i4"), ("b", "f8")])
    x = np.array([(1, 2.5), (3, 4.5)], dtype=dtype)
    a = SmartArray(x)
    assert_same(a["a"], x["a"])
    assert_same(a[["b", "a"]], x[["b", "a"]])
    field = a["b"]
    assert field.base is a and field.flags.writeable and field.strides == x["b"].strides
    field[1] = -1.0  # a field is a writable view, like numpy
    assert a[1]["b"] == -1.0
    a["a"] = [7, 8]
    x["b"][1] = -1.0
    x["a"] = [7, 8]
    np.testing.assert_array_equal(host(a), x)
    a[0] = (0, 0.0)
    x[0] = (0, 0.0)
    assert host(a).tolist() == x.tolist()
    assert type(a[0]) is np.void
    assert_raises_same(lambda: x["c"], lambda: a["c"])


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.bool_, np.float32])
def test_int_and_bool_dtypes(dtype: Any) -> None:
    x = np.array([0, 1, 1, 0, 1], dtype=dtype)
    a = SmartArray(x)
    assert_same(a + a, x + x)
    assert_same(a * 2, x * 2)
    assert_same(a == 1, x == 1)
    assert_same(a[1:3], x[1:3])
    assert_same(a.sum(), x.sum())
    assert_same(np.cumsum(a), np.cumsum(x))
    assert_same(a.astype(np.float64), x.astype(np.float64))
    assert_same(~a if dtype is not np.float32 else -a, ~x if dtype is not np.float32 else -x)


@SETTINGS
@given(
    x=hnp.arrays(
        dtype=st.sampled_from([np.float64, np.int32, np.bool_, np.complex64]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
    ),
    data=st.data(),
)
def test_elementwise_differential(x: np.ndarray, data: st.DataObject) -> None:
    a = SmartArray(x)
    np.testing.assert_array_equal(host(a), x)
    y = data.draw(hnp.arrays(dtype=x.dtype, shape=hnp.broadcastable_shapes(x.shape)), label="y")
    b = SmartArray(y)
    with np.errstate(all="ignore"):
        for ufunc in (np.add, np.multiply, np.maximum, np.not_equal):
            assert_same(ufunc(a, b), ufunc(x, y))
            assert_same(ufunc(y, a), ufunc(y, x))
        if x.dtype != np.bool_:
            assert_same(a - y, x - y)
        assert_same(a.sum(), x.sum())
        assert_same(a.T, x.T)
    np.testing.assert_equal(a.tolist(), x.tolist())


@SETTINGS
@given(
    x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4)),
    data=st.data(),
)
def test_setitem_differential(x: np.ndarray, data: st.DataObject) -> None:
    a = SmartArray(x)
    key = data.draw(hnp.basic_indices(x.shape), label="key")
    target_shape = x[key].shape
    # A shape that broadcasts *to* the target: some trailing dimensions, each kept or 1.
    kept = data.draw(st.integers(0, len(target_shape)), label="kept")
    trailing = target_shape[len(target_shape) - kept :]
    ones = data.draw(st.lists(st.booleans(), min_size=kept, max_size=kept), label="ones")
    value_shape = tuple(1 if one else n for n, one in zip(trailing, ones, strict=True))
    value = data.draw(hnp.arrays(np.float64, value_shape), label="value")
    x[key] = value
    a[key] = SmartArray(value) if data.draw(st.booleans(), label="smart") else value
    np.testing.assert_array_equal(host(a), x)


# --- coherence when the only current copy is on the device (tiers 2 and 3) ----------------


def _device_only(x: np.ndarray) -> SmartArray:
    """A SmartArray whose only current copy is on the device, holding ``x``."""
    a = SmartArray(np.zeros_like(x), where="gpu")
    device = a.get("gpu")
    # (a Numba device array takes no ``[...] =``; copy_to_device works on both tiers, and
    # is the user's own copy, outside smartarray's ledger)
    device.copy_to_device(np.ascontiguousarray(x))
    a.mark_changed("gpu")
    assert a.location == "gpu" and not a.is_valid("host")
    return a


DEVICE_VIEWS: list[tuple[str, Callable[[Any], Any]]] = [
    ("slice", lambda a: a[2:5]),
    ("row", lambda a: a[1]),
    ("newaxis", lambda a: a[None, ..., 1]),
    ("T", lambda a: a.T),
    ("reshape", lambda a: a.reshape(4, 3)),
    ("reshape-F", lambda a: a.T.reshape(2, 6, order="F")),
    ("ravel", lambda a: a.ravel()),
    ("ravel-K", lambda a: a.ravel("K")),
    ("transpose", np.transpose),
    ("np.reshape", lambda a: np.reshape(a, -1)),
    ("squeeze", lambda a: np.squeeze(a[:1])),
    ("moveaxis", lambda a: np.moveaxis(a, 0, 1)),
    ("flip", np.flip),
    ("split", lambda a: np.split(a, 3)[1]),
    ("diagonal", np.diagonal),
    ("broadcast_to", lambda a: np.broadcast_to(a[0], (2, 4))),
    ("view", lambda a: a.view(np.int64)),
    ("real", lambda a: a.real),
    ("negative-strides", lambda a: a[::-1, ::2]),
]


# The one download (byte offset, bytes) that reading each view of a 3x4 float64 array (96
# bytes) makes: only the bytes the view covers (issue 21); views not listed cover all 96.
# A strided view's rows are stale ranges closer than the coalescing gap: one copy from its
# first to its last byte.
DEVICE_VIEW_BYTES = {
    "slice": (64, 32),  # a[2:5] is row 2
    "row": (32, 32),
    "newaxis": (8, 72),  # column 1: elements at bytes 8, 40, 72
    "squeeze": (0, 32),  # row 0
    "split": (32, 32),  # row 1
    "diagonal": (0, 88),  # elements at bytes 0, 40, 80
    "broadcast_to": (0, 32),  # row 0, repeated
    "negative-strides": (0, 88),  # columns 0 and 2 of every row
}


@pytest.mark.device
@pytest.mark.parametrize(("name", "make_view"), DEVICE_VIEWS, ids=[n for n, _ in DEVICE_VIEWS])
def test_device_only_views_need_no_transfer(name: str, make_view: Callable[[Any], Any]) -> None:
    x = np.arange(12.0).reshape(3, 4)
    a = _device_only(x)
    with sa.track_transfers() as t:
        view = make_view(a)
        _ = (view.shape, view.strides, view.flags.c_contiguous, view.dtype, len(view))
    assert t.d2h_count == 0 and t.h2d_count == 0
    assert a.location == "gpu" and view.location == "gpu"
    with sa.track_transfers() as t:
        values = host(view)
    offset, nbytes = DEVICE_VIEW_BYTES.get(name, (0, 96))
    assert copies(t) == [("d2h", offset, nbytes)]
    np.testing.assert_array_equal(values, make_view(x))
    assert view.location == "both"
    # The rest of the array is still current only on the device (not downloaded).
    assert a.location == ("both" if nbytes == 96 else "gpu")


DEVICE_READS: list[tuple[str, Callable[[Any], Any]]] = [
    ("scalar", lambda a: a[1, 2]),
    ("sum", lambda a: a.sum()),
    ("np.asarray", lambda a: np.asarray(a).tolist()),
    ("repr", repr),
    ("str", str),
    ("tolist", lambda a: a.tolist()),
    ("iter", lambda a: [r.tolist() for r in a]),
    ("compare", lambda a: (a == 5.0).tolist()),
    ("ufunc", lambda a: np.add(a, 1).tolist()),
    ("fancy", lambda a: a[[0, 2]].tolist()),
    ("mask", lambda a: a[a > 5].tolist()),
    ("view-read", lambda a: a[1:, ::2].tolist()),
    ("astype", lambda a: a.astype(np.int32).tolist()),
    ("pickle", lambda a: pickle.loads(pickle.dumps(a)).tolist()),
    ("item", lambda a: a.item(5)),
    ("bool", lambda a: bool(a[0, 1])),
    ("flatten", lambda a: a.flatten("F").tolist()),
]


@pytest.mark.device
@pytest.mark.parametrize(("name", "read"), DEVICE_READS, ids=[n for n, _ in DEVICE_READS])
def test_device_only_reads_copy_exactly_once(name: str, read: Callable[[Any], Any]) -> None:
    x = np.arange(12.0).reshape(3, 4)
    x[1, 2] = 50.0
    a = _device_only(x)
    with sa.track_transfers() as t:
        first = read(a)
        second = read(a)
    # Every byte read is downloaded once, the first time. Iterating reads the three rows one
    # at a time (a copy each); a[1:, ::2] needs bytes 32..88 only (rows 1 and 2, columns 0
    # and 2: one copy, the gaps between them included), a scalar read only its element's
    # bytes (a[1, 2]: 48..56, a[0, 1]: 8..16; a.item(5): 40..48), and the rest stays on the
    # device.
    read_view = {
        "view-read": a[1:, ::2],
        "scalar": a[1:2, 2:3],
        "bool": a[0:1, 1:2],
        "item": a[1:2, 1:2],
    }
    expected_copies = {
        "iter": [("d2h", 0, 32), ("d2h", 32, 32), ("d2h", 64, 32)],
        "view-read": [("d2h", 32, 56)],
        "scalar": [("d2h", 48, 8)],
        "bool": [("d2h", 8, 8)],
        "item": [("d2h", 40, 8)],
    }.get(name, [("d2h", 0, 96)])
    assert copies(t) == expected_copies
    if name in read_view:
        assert a.location == "gpu" and read_view[name].location == "both"
        assert not a.is_valid("host") and a.is_valid("gpu")
    else:
        assert a.location == "both" and a.is_valid("host") and a.is_valid("gpu")
    expected = read(SmartArray(x))
    assert first == expected and second == expected


DEVICE_WRITES: list[tuple[str, Callable[[Any], Any]]] = [
    ("setitem", lambda a: a.__setitem__((1, 2), -7.0)),
    ("setitem-view", lambda a: a[1:].__setitem__((0, 2), -7.0)),
    ("setitem-fancy", lambda a: a.__setitem__(([1], [2]), -7.0)),
    ("setitem-mask", lambda a: a.__setitem__(a == 50.0, -7.0)),
    ("iadd", lambda a: (operator.iadd(a, 0.0), a.__setitem__((1, 2), -7.0))),
    ("ufunc-out", lambda a: (np.add(a, 0.0, out=a), a.__setitem__((1, 2), -7.0))),
    ("copyto", lambda a: np.copyto(a[1], [4.0, 5.0, -7.0, 7.0])),
    ("put", lambda a: np.put(a, [6], [-7.0])),
    ("putmask", lambda a: np.putmask(a, a == 50.0, -7.0)),
    ("place", lambda a: np.place(a, a == 50.0, [-7.0])),
    ("ufunc-at", lambda a: np.subtract.at(a, ([1], [2]), 57.0)),
    ("fill-view", lambda a: a[1:2, 2:3].fill(-7.0)),
    ("real-view", lambda a: a.real.__setitem__((1, 2), -7.0)),
    ("T-view", lambda a: a.T.__setitem__((2, 1), -7.0)),
    ("sort-method", lambda a: (a[1, 2:3].sort(), a.__setitem__((1, 2), -7.0))),
    ("sort-row", lambda a: a[1].sort()),
    ("fill_diagonal", lambda a: np.fill_diagonal(a[:, 1:], -7.0)),
    ("put_along_axis", lambda a: np.put_along_axis(a, np.array([[2], [0], [1]]), -7.0, axis=1)),
    ("partition", lambda a: a[1].partition(1)),
]


# For the writes of DEVICE_WRITES to a 3x4 float64 array (96 bytes) that write a view
# (issue 21): whether a stale host copy of the written bytes is downloaded first, and the
# written bytes (byte offset, bytes). Writes not listed download and write all 96 bytes (a
# fancy or mask index, an in-place ufunc, or a numpy function writes the whole array).
DEVICE_WRITE_BYTES = {
    "setitem": (False, (48, 8)),  # a[1, 2]: one element, overwritten
    "setitem-view": (False, (48, 8)),
    "copyto": (True, (32, 32)),  # row 1 (numpy functions read their output first)
    "fill-view": (False, (48, 8)),
    "real-view": (False, (48, 8)),
    "T-view": (False, (48, 8)),
    "sort-method": (True, (48, 8)),  # a[1, 2:3].sort() reads it; a[1, 2] = ... then writes it
    "sort-row": (True, (32, 32)),
    # a[:, 1:]: bytes 8..32, 40..64, 72..96, closer than the coalescing gap: one copy
    "fill_diagonal": (True, (8, 88)),
    "partition": (True, (32, 32)),
}


@pytest.mark.device
@pytest.mark.parametrize("start", ["gpu", "both"])
@pytest.mark.parametrize(("name", "write"), DEVICE_WRITES, ids=[n for n, _ in DEVICE_WRITES])
def test_host_writes_invalidate_the_device_copy(
    name: str, write: Callable[[Any], Any], start: str
) -> None:
    x = np.arange(12.0).reshape(3, 4)
    x[1, 2] = 50.0
    a = _device_only(x)
    if start == "both":
        a.to_host()
    assert a.location == start
    with sa.track_transfers() as t:
        write(a)
    # The bytes written (byte offset, bytes; see DEVICE_WRITE_BYTES) become stale on the
    # device, and only those. A stale host copy of them is downloaded first, unless the
    # write overwrites all of them (one element assigned or filled).
    downloaded, written = DEVICE_WRITE_BYTES.get(name, (True, (0, 96)))
    assert copies(t) == ([("d2h", *written)] if downloaded and start == "gpu" else [])
    assert not a.is_valid("gpu")
    if start == "gpu" and written != (0, 96):
        # The written bytes are current on the host only, the others on the device only.
        assert a.location == "mixed" and not a.is_valid("host")
    else:
        assert a.is_valid("host") and a.location == "host"
    write(x)  # the same write on numpy
    np.testing.assert_array_equal(host(a), x)
    with sa.track_transfers() as t:
        device = a.get("gpu")
    assert copies(t) == [("h2d", *written)] and a.location == "both"
    np.testing.assert_array_equal(device.copy_to_host(), x)


@pytest.mark.device
def test_zeros_on_device_then_views_reads_and_writes() -> None:
    z = sa.zeros(8, where="gpu")  # filled on the device now, on the host where first used
    assert z.location == "both"
    with sa.track_transfers() as t:
        assert z[2:5].sum() == 0.0 and z[7] == 0.0
    assert t.count == 0 and z.location == "both"
    a = _device_only(np.zeros(8))  # (as a kernel leaves it)
    with sa.track_transfers() as t:
        view = a[2:5]
        assert view.shape == (3,)
    assert t.count == 0
    with sa.track_transfers() as t:
        assert view.sum() == 0.0
        assert a[7] == 0.0
    # The view's 24 bytes first; then a[7] reads its own 8 bytes only (issue 21).
    assert copies(t) == [("d2h", 16, 24), ("d2h", 56, 8)]
    assert a.location == "gpu" and a[2:5].location == a[7:].location == "both"
    view[1] = 3.0
    assert not a.is_valid("gpu") and a[3] == 3.0
    filled = _device_only(np.full(8, 2.0))
    with sa.track_transfers() as t:
        filled.fill(5.0)  # overwrites everything: the stale host copy is not fetched
    assert t.count == 0 and filled.location == "host"
    assert host(filled).tolist() == [5.0] * 8


@pytest.mark.device
def test_device_only_copy_and_like_stay_on_device() -> None:
    x = np.arange(6.0)
    a = _device_only(x)
    with sa.track_transfers() as t:
        c = a.copy()
        z = np.zeros_like(a)
        e = np.empty_like(a)
        r = a.reshape(2, 3)
    assert t.count == 0
    # z and e are made on the device (their device buffers made now), current on both sides
    # (a fill, or undefined bytes: their host buffers are made where first used, no copy)
    assert c.location == "gpu" and z.location == "both" and e.location == "both"
    assert z._alloc.device is not None and e._alloc.device is not None
    assert r.location == "gpu" and a.location == "gpu"
    np.testing.assert_array_equal(host(c), x)
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(host(z), np.zeros(6))
    assert t.count == 0


@pytest.mark.device
def test_both_state_ndarray_inplace_with_device_operand() -> None:
    x = np.arange(4.0)
    a = _device_only(x)
    target = np.ones(4)
    with sa.track_transfers() as t:
        target += a
    assert type(target) is np.ndarray and t.d2h_count == 1
    np.testing.assert_array_equal(target, x + 1)
    assert a.location == "both"  # read, not written


@pytest.mark.device
def test_gufunc_out_on_a_device_backed_array() -> None:
    x = np.arange(9.0).reshape(3, 3)
    out = SmartArray(np.eye(3), where="gpu")
    assert out.location == "both"
    assert np.matmul(SmartArray(x), x, out=out) is out
    assert out.location == "host"
    np.testing.assert_array_equal(host(out), x @ x)
    inplace = _device_only(np.eye(3))
    inplace @= SmartArray(x)
    assert inplace.location == "host"
    np.testing.assert_array_equal(host(inplace), x)
