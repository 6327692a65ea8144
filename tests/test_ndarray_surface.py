"""ndarray surface found missing by users (issue #11, item 10).

Setting ``shape``, the (read-only) buffer protocol, ``round()``, numpy's named-tuple results
(``np.linalg.eigh``, ``svd``...), functions that cannot be overridden (``np.vectorize``,
Generator methods) and the Numba type's wording in typing errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import inc
from numba import njit
from numba.core.errors import TypingError

import smartarray as sa
from smartarray import SmartArray


@njit
def column_sums(x: Any) -> Any:
    return x.sum(axis=0)


@njit
def add_text(x: Any) -> Any:
    return x + "text"


# --- setting shape ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("derive", "shape"),
    [
        (lambda x: x, (2, 3)),
        (lambda x: x, (3, -1)),
        (lambda x: x[::2], (3, 1)),
        (lambda x: x.reshape(2, 3), (6,)),
        (lambda x: x.reshape(3, 2).T, (3, 2)),  # F-contiguous: C-order reshape copies
        (lambda x: x.reshape(2, 3).T, (6,)),  # needs a copy: refused
        (lambda x: x, (4,)),  # wrong size
    ],
)
def test_setting_shape_like_numpy(derive: Callable[[Any], Any], shape: Any) -> None:
    expected = derive(np.arange(6.0))
    a = derive(sa.asarray(np.arange(6.0)))
    try:
        expected.shape = shape
    except Exception as numpy_error:
        before = (a.shape, a.strides)
        with pytest.raises(type(numpy_error), match=str(numpy_error)[:20]):
            a.shape = shape
        assert (a.shape, a.strides) == before
        return
    a.shape = shape
    assert (a.shape, a.strides) == (expected.shape, expected.strides)
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_setting_shape_changes_only_that_object_and_refreshes_caches() -> None:
    a = sa.asarray(np.arange(6.0))
    other = a[:]
    assert column_sums(a[None, :]).shape == (6,)  # caches a Numba type and jit views
    a.shape = (2, 3)
    assert other.shape == (6,)
    np.testing.assert_array_equal(np.asarray(column_sums(a)), [3.0, 5.0, 7.0])
    a[1, 2] = 50.0
    assert other[5] == 50.0  # still the same memory


@pytest.mark.device
def test_setting_shape_of_a_device_only_array_copies_nothing() -> None:
    a = sa.zeros(8, where="gpu")
    inc[1, 8](a)  # current on the device only
    with sa.no_transfers():
        a.shape = (2, 4)
    assert a.location == "gpu"
    flat = a.reshape(-1)
    inc[1, 8](flat)
    np.testing.assert_array_equal(np.asarray(a), np.full((2, 4), 2.0))


# --- buffer protocol ---------------------------------------------------------------------


def test_no_buffer_protocol_so_numba_never_probes_it() -> None:
    """SmartArray exports no buffer (``__buffer__``): on Python 3.12+ Numba's dispatcher would
    request one on every ``@njit`` call and kernel launch to fingerprint the argument (a host
    sync, and 2.6 vs 0.6 us per call measured on an H100 machine), and numpy would take it
    before ``__array__`` (losing void dtypes). ``memoryview(np.asarray(a))`` is the spelling."""
    from numba._dispatcher import compute_fingerprint

    a = sa.asarray(np.arange(6.0).reshape(2, 3))
    assert not hasattr(a, "__buffer__")
    with sa.track_transfers() as t, pytest.raises(NotImplementedError):
        compute_fingerprint(a)  # Numba then types it through ``_numba_type_``
    assert t.count == 0
    with pytest.raises(TypeError):
        memoryview(a)  # type: ignore[arg-type]
    view = memoryview(np.asarray(a))
    assert view.shape == (2, 3) and view.tobytes() == np.arange(6.0).tobytes()
    assert not view.readonly and memoryview(np.asarray(a.T)).readonly is False
    assert memoryview(np.asarray(a.diagonal())).readonly  # a read-only view's


def test_numba_typeof_is_registered_for_the_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """``numba.typeof`` gives the SmartArray type even where Numba's generic typeof would find
    a buffer first (what Python 3.12+ does for any class defining ``__buffer__``)."""
    import numba
    from numba.core import types
    from numba.core.typing import typeof as numba_typeof

    a = sa.asarray(np.arange(3.0))
    buffer_type = types.Buffer(types.float64, 1, "C", readonly=True)
    monkeypatch.setattr(numba_typeof, "_typeof_buffer", lambda val, c: buffer_type)
    assert numba.typeof(a) == a._numba_type_
    dispatch = numba_typeof.typeof_impl.dispatch
    assert dispatch(type(a)) is not dispatch(object)


# --- round() and named results -------------------------------------------------------------


def test_round_like_numpy() -> None:
    data = np.array([1.234, 5.678])
    a = sa.asarray(data)
    with pytest.raises(TypeError):  # numpy 2 defines no ndarray.__round__
        round(data, 2)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="__round__"):
        round(a, 2)  # type: ignore[call-overload]
    for rounded in (a.round(2), np.round(a, 2), np.around(a, 2)):
        assert isinstance(rounded, SmartArray)
        np.testing.assert_array_equal(np.asarray(rounded), np.round(data, 2))


@pytest.mark.parametrize(
    "function",
    [np.linalg.eigh, np.linalg.eig, np.linalg.svd, np.linalg.qr, np.linalg.slogdet],
)
def test_named_tuple_results_hold_smartarrays(function: Callable[..., Any]) -> None:
    data = np.array([[2.0, 1.0], [1.0, 3.0]])
    got = function(sa.asarray(data))
    expected = function(data)
    assert type(got) is type(expected)
    assert got._fields == expected._fields
    for value, reference in zip(got, expected, strict=True):
        if isinstance(reference, np.ndarray):
            assert isinstance(value, SmartArray)
        np.testing.assert_allclose(np.asarray(value), reference)


def test_functions_numpy_cannot_dispatch_return_ndarrays() -> None:
    # np.vectorize and Generator methods are not NEP-18 functions: like for any array-like,
    # they read the SmartArray through __array__ and return plain ndarrays.
    a = sa.asarray(np.arange(4.0))
    doubled = np.vectorize(lambda v: 2 * v)(a)
    assert type(doubled) is np.ndarray
    np.testing.assert_array_equal(doubled, np.arange(4.0) * 2)
    permuted = np.random.default_rng(1).permutation(a)
    assert type(permuted) is np.ndarray
    np.testing.assert_array_equal(permuted, np.random.default_rng(1).permutation(np.arange(4.0)))
    assert type(sa.asarray(permuted)) is SmartArray


# --- Numba wording -----------------------------------------------------------------------


def test_numba_type_reads_like_numbas_array_type() -> None:
    a = sa.asarray(np.arange(3.0))
    assert str(a._numba_type_) == "array(float64, 1d, C) (SmartArray)"
    assert str(sa.In(a)._numba_type_) == "readonly array(float64, 1d, C) (SmartArray)"
    with pytest.raises(TypingError, match=r"add\(array\(float64, 1d, C\) \(SmartArray\)"):
        add_text(a)


# --- views numpy returns writable: np.unstack and getfield -----------------------------------


@pytest.mark.skipif(not hasattr(np, "unstack"), reason="np.unstack: numpy 2.1+")
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unstack_gives_writable_views_like_numpy(axis: int) -> None:
    a = SmartArray(np.arange(6.0).reshape(2, 3))
    reference = np.arange(6.0).reshape(2, 3)
    pieces, expected = np.unstack(a, axis=axis), np.unstack(reference, axis=axis)
    assert isinstance(pieces, tuple) and len(pieces) == len(expected)
    for piece, want in zip(pieces, expected, strict=True):
        assert isinstance(piece, SmartArray) and piece.flags.writeable
        np.testing.assert_array_equal(piece, want)
        piece[0] = -1.0  # written through, as into the ndarray's view
        want[0] = -1.0
    np.testing.assert_array_equal(a, reference)


@pytest.mark.skipif(not hasattr(np, "unstack"), reason="np.unstack: numpy 2.1+")
def test_unstack_of_a_read_only_array_is_read_only() -> None:
    a = np.broadcast_to(SmartArray(np.arange(3.0)), (2, 3))
    for piece in np.unstack(a):
        assert not piece.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            piece[0] = 1.0
    np.testing.assert_array_equal(a, np.broadcast_to(np.arange(3.0), (2, 3)))


def test_getfield_is_a_writable_view_like_numpy() -> None:
    kind = np.dtype([("x", "f8"), ("y", "i4")])
    a = SmartArray(np.zeros(3, dtype=kind))
    reference = np.zeros(3, dtype=kind)
    field, want = a.getfield(np.dtype("i4"), 8), reference.getfield(np.dtype("i4"), 8)
    assert isinstance(field, SmartArray) and field.flags.writeable
    field[...] = [1, 2, 3]
    want[...] = [1, 2, 3]
    assert a.tolist() == reference.tolist()
    np.testing.assert_array_equal(a["y"], [1, 2, 3])


@pytest.mark.device
def test_writing_an_unstacked_view_marks_the_device_copy_stale() -> None:
    if not hasattr(np, "unstack"):
        pytest.skip("np.unstack: numpy 2.1+")
    a = SmartArray(np.zeros((2, 4)))
    inc[1, 8](a.reshape(8))  # only the device copy is current: all ones
    with sa.track_transfers() as ledger:
        rows = np.unstack(a)  # views: nothing copied
        assert ledger.count == 0
        rows[1][...] = 5.0  # overwrites row 1: nothing downloaded, its device copy stale
        # row 0 is current on the device only, row 1 on the host only (issue 21)
        assert a.location == "mixed" and rows[0].location == "gpu" and rows[1].location == "host"
    assert ledger.count == 0
    with sa.track_transfers() as ledger:
        np.testing.assert_array_equal(a, [[1.0] * 4, [5.0] * 4])
    assert [(r.direction, r.offset, r.nbytes) for r in ledger.records] == [("d2h", 0, 32)]
    with sa.track_transfers() as ledger:
        inc[1, 8](a.reshape(8))
    # the upload of the written host bytes (row 1) only
    assert [(r.direction, r.offset, r.nbytes) for r in ledger.records] == [("h2d", 32, 32)]
    np.testing.assert_array_equal(a, [[2.0] * 4, [6.0] * 4])
