"""Regression tests for ndarray behaviours SmartArray once got wrong, each compared with numpy's.

- ``a.flat`` is an iterator like ``numpy.flatiter`` (``next``, ``index``, ``coords``,
  ``base``, ``copy``, indexing, comparisons), whose reads are never stale and whose writes
  mark the host copy changed;
- ``np.einsum`` (and other numpy functions returning views: ``np.rot90``,
  ``np.linalg.matrix_transpose``, ``sliding_window_view``, ``np.trim_zeros``…) give views
  as writable as numpy's, made without reading data;
- pickling keeps the label, writability and host memory kind; views pickle as copies.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import inc, run_python

import smartarray
from smartarray import SmartArray

# (name, ndarray) pairs: layouts whose flat iteration order differs from memory order too.
LAYOUTS: dict[str, Callable[[], np.ndarray]] = {
    "1d": lambda: np.arange(5.0),
    "c2d": lambda: np.arange(12.0).reshape(3, 4),
    "transposed": lambda: np.arange(12.0).reshape(3, 4).T,
    "c3d": lambda: np.arange(24.0).reshape(2, 3, 4),
    "strided3d": lambda: np.arange(48.0).reshape(2, 4, 6)[:, ::2, 1::2],
    "fortran": lambda: np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "0d": lambda: np.array(7.0),
    "empty": lambda: np.zeros((3, 0)),
    "int": lambda: np.arange(6, dtype=np.int32).reshape(2, 3),
}


def pair(layout: str) -> tuple[np.ndarray, SmartArray]:
    """An ndarray of ``layout`` and a SmartArray view with exactly its layout."""
    x = LAYOUTS[layout]()
    base = SmartArray(x.base if x.base is not None else x)
    a = base if x.base is None else _same_view(base, x)
    assert a.shape == x.shape and a.strides == x.strides
    return x, a


def _same_view(base: SmartArray, x: np.ndarray) -> SmartArray:
    # The views LAYOUTS makes, applied to the SmartArray holding their base.
    offset = x.__array_interface__["data"][0] - x.base.__array_interface__["data"][0]
    return SmartArray._view(base._alloc, offset, x.shape, x.strides, x.dtype, True, base)


# --- a.flat ------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_flat_iterates_like_numpy_flatiter(layout: str) -> None:
    x, a = pair(layout)
    expected, got = x.flat, a.flat
    assert iter(got) is got and got.base is a and x.flat.base is x
    assert len(got) == len(expected)
    while True:
        assert (got.index, got.coords) == (expected.index, expected.coords)
        try:
            want = next(expected)
        except StopIteration:
            with pytest.raises(StopIteration):
                next(got)
            break
        value = next(got)
        assert value == want and type(value) is type(want)
    assert (got.index, got.coords) == (expected.index, expected.coords)
    assert list(a.flat) == list(x.flat)
    assert [v for v in a.flat] == [v for v in x.flat]


def test_flat_iteration_after_partial_next_and_shape_change() -> None:
    x, a = pair("c2d")
    it, expected = a.flat, x.flat
    for _ in range(5):
        next(it), next(expected)
    a.shape = (4, 3)  # a new host view for the array: iteration continues where it was
    assert next(it) == next(expected) and it.index == 6
    a[2, 0] = x[1, 2] = -7.0  # writes between two next() calls are seen, as numpy's are
    assert next(it) == next(expected) == -7.0
    a.flat[7] = x.flat[7] = -8.0
    assert next(it) == next(expected) == -8.0
    assert list(it) == list(expected) and it.index == expected.index == 12


@pytest.mark.parametrize("layout", ["1d", "c2d", "transposed", "strided3d", "0d", "empty"])
def test_flat_indexing_like_numpy(layout: str) -> None:
    x, a = pair(layout)
    n = x.size
    keys: list[Any] = [..., slice(None), slice(1, None, 2), [], np.ones(n, dtype=bool)]
    if n:
        keys += [0, -1, n - 1, np.int64(0), [0, n - 1], np.array([[0], [n - 1]])]
        keys += [slice(n - 1, None, -1), np.arange(n) % 2 == 0]
    for key in keys:
        want = x.flat[key]
        got = a.flat[key]
        if isinstance(want, np.ndarray):
            assert type(got) is SmartArray and got.label != a.label  # a copy, as numpy's
            assert got.flags.writeable == want.flags.writeable
            np.testing.assert_array_equal(np.asarray(got), want, strict=True)
        else:
            assert got == want and type(got) is type(want)
    with pytest.raises(IndexError):
        x.flat[n]
    with pytest.raises(IndexError):
        a.flat[n]


@pytest.mark.parametrize("layout", ["1d", "c2d", "transposed", "strided3d", "fortran"])
def test_flat_assignment_like_numpy(layout: str) -> None:
    x, a = pair(layout)
    n = x.size
    writes: list[tuple[Any, Any]] = [
        (slice(2, 5), -1.0),
        (slice(2, 5), [7.0, 8.0, 9.0]),
        ([0, n - 1], [10.0, 11.0]),
        (np.arange(n) % 3 == 0, 12.0),
        (-1, 13.0),
        (..., [1.0, 2.0]),  # repeated, like numpy
    ]
    for key, value in writes:
        x.flat[key] = value
        a.flat[key] = value
        np.testing.assert_array_equal(np.asarray(a), x)
    a.flat = [5.0, 6.0, 7.0]
    x.flat = [5.0, 6.0, 7.0]
    np.testing.assert_array_equal(np.asarray(a), x)
    a.flat[SmartArray([1, 2])] = SmartArray([3.0, 4.0])  # SmartArray keys and values
    x.flat[[1, 2]] = [3.0, 4.0]
    np.testing.assert_array_equal(np.asarray(a), x)


def test_flat_bad_assignments_change_nothing() -> None:
    a = SmartArray(np.arange(4.0))
    with pytest.raises(IndexError):
        a.flat[4] = 1.0
    with pytest.raises(ValueError):
        a.flat[0] = "not a number"
    with pytest.raises(ValueError, match="read-only"):
        np.broadcast_to(a, (2, 4)).flat[0] = 1.0
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))


@pytest.mark.parametrize("layout", ["1d", "c2d", "transposed", "strided3d", "0d", "empty"])
def test_flat_copy_array_and_comparisons_like_numpy(layout: str) -> None:
    x, a = pair(layout)
    copied = a.flat.copy()
    assert type(copied) is SmartArray and copied.label != a.label
    np.testing.assert_array_equal(np.asarray(copied), x.flat.copy(), strict=True)
    if copied.size:
        copied[0] = -5.0  # a copy: the array is unchanged
        assert np.asarray(a).flat[0] == x.flat[0]
    converted = np.asarray(a.flat)
    np.testing.assert_array_equal(converted, np.asarray(x.flat), strict=True)
    # a writable view for a C-contiguous array (a tracked export, like np.asarray(a)), a
    # read-only copy otherwise: numpy's rule
    assert converted.flags.writeable == np.asarray(x.flat).flags.writeable
    assert np.shares_memory(converted, np.asarray(a)) == (x.flags.c_contiguous and x.size > 0)
    assert np.asarray(a.flat, dtype=np.float32).dtype == np.float32
    writable = np.array(a.flat)
    assert writable.flags.writeable and not np.shares_memory(writable, np.asarray(a))
    if not x.flags.c_contiguous:
        with pytest.raises(ValueError, match="copy"):
            np.asarray(a.flat, copy=False)
    value = x.flat[0] if x.size else 0.0
    for compare in (
        lambda f: f == value,
        lambda f: f != value,
        lambda f: f < value,
        lambda f: f <= value,
        lambda f: f > value,
        lambda f: f >= value,
    ):
        got = compare(a.flat)
        assert type(got) is SmartArray
        np.testing.assert_array_equal(np.asarray(got), compare(x.flat), strict=True)
    np.testing.assert_array_equal(np.asarray(a.flat == x.flat), x.flat == x.flat)


def test_flat_is_unhashable_and_unpicklable_like_numpy() -> None:
    x, a = pair("c2d")
    for flat in (x.flat, a.flat):
        with pytest.raises(TypeError):
            hash(flat)
        with pytest.raises(TypeError, match="pickle"):
            pickle.dumps(flat)
        with pytest.raises(TypeError, match="pickle"):
            copy.copy(flat)


@pytest.mark.device
def test_flat_reads_of_device_only_data_download_once() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)  # only the device copy is current
    with smartarray.track_transfers() as ledger:
        it = a.flat
        assert next(it) == 1.0  # one download
        assert next(it) == 2.0
        assert a.flat[3] == 4.0 and list(a.flat) == [1.0, 2.0, 3.0, 4.0]
        assert a.location == "both"
    assert (ledger.h2d_count, ledger.d2h_count) == (0, 1)
    with smartarray.track_transfers() as ledger:
        inc[1, 4](a)  # a kernel writes between two next() calls
        assert next(it) == 4.0  # never stale: one download
        assert next(it) == 5.0
    assert (ledger.h2d_count, ledger.d2h_count) == (0, 1)


@pytest.mark.device
def test_flat_writes_mark_the_host_copy_changed() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)
    with smartarray.track_transfers() as ledger:
        a.flat[1:3] = [0.0, 0.0]  # one download, then the device copy is stale
        assert a.location == "host"
        inc[1, 4](a)  # one upload
        assert list(a.flat) == [2.0, 1.0, 1.0, 5.0]  # one download
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 2)


@pytest.mark.device
def test_flat_bad_index_of_device_only_data_copies_nothing() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)
    with smartarray.no_transfers():
        with pytest.raises(IndexError):
            a.flat[4]
        with pytest.raises(IndexError):
            a.flat[[0, 9]] = 1.0
        with pytest.raises(ValueError):
            a.flat[0] = "not a number"
        copied = a.flat.copy()  # C-contiguous: copied on the device
    assert a.location == "gpu" and copied.location == "gpu"
    assert a.tolist() == copied.tolist() == [1.0, 2.0, 3.0, 4.0]


# --- numpy functions returning views -------------------------------------------------------


def _read_only(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.flags.writeable = False
    return x


VIEW_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "einsum diagonal": lambda m: np.einsum("ii->i", m),
    "einsum transpose": lambda m: np.einsum("ij->ji", m),
    "einsum identity": lambda m: np.einsum("ij", m),
    "einsum ellipsis": lambda m: np.einsum("...i->i...", m),
    "einsum optimize": lambda m: np.einsum("ii->i", m, optimize=True),
    "einsum dtype": lambda m: np.einsum("ii->i", m, dtype=np.float32),
    "einsum interleaved": lambda m: np.einsum(m, [0, 0], [0]),
    "einsum out=None": lambda m: np.einsum("ii->i", m, out=None),
    "einsum sum": lambda m: np.einsum("ij->i", m),
    "einsum trace": lambda m: np.einsum("ii", m),
    "diagonal": lambda m: np.diagonal(m),
    "method diagonal": lambda m: m.diagonal(1),
    "linalg.diagonal": lambda m: np.linalg.diagonal(m),
    "rot90": lambda m: np.rot90(m),
    "rot90 k=2": lambda m: np.rot90(m, 2, axes=(1, 0)),
    "linalg.matrix_transpose": lambda m: np.linalg.matrix_transpose(m),
    "matrix_transpose": lambda m: np.matrix_transpose(m),
    "sliding_window_view": lambda m: np.lib.stride_tricks.sliding_window_view(m, (2, 2)),
    "sliding_window_view writeable": lambda m: np.lib.stride_tricks.sliding_window_view(
        m, 2, axis=1, writeable=True
    ),
    "trim_zeros": lambda m: np.trim_zeros(m[0]),
    "real_if_close": lambda m: np.real_if_close(m),
    "diag": lambda m: np.diag(m),
    "broadcast_to": lambda m: np.broadcast_to(m, (2, 3, 3)),
    "transpose": lambda m: np.transpose(m),
}


@pytest.mark.parametrize("writeable", [True, False], ids=["writable", "read-only"])
@pytest.mark.parametrize("name", list(VIEW_FUNCTIONS))
def test_view_functions_match_numpy(name: str, writeable: bool) -> None:
    function = VIEW_FUNCTIONS[name]
    x = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 0.0]])
    if not writeable:
        x = _read_only(x)
    a = SmartArray(x, copy=False) if not writeable else SmartArray(x)
    want, got = function(x), function(a)
    if not isinstance(want, np.ndarray):
        assert got == want and type(got) is type(want)
        return
    assert type(got) is SmartArray
    np.testing.assert_array_equal(np.asarray(got), want, strict=True)
    assert got.strides == want.strides
    assert got.flags.writeable == want.flags.writeable
    is_view = np.shares_memory(want, x)
    assert (got.label == a.label) == is_view
    if want is x:
        assert got is a
    if got.flags.writeable and is_view and want.size:
        # Writes through the view reach the array and mark its host copy changed.
        want[(0,) * want.ndim] = 42.0
        got[(0,) * got.ndim] = 42.0
        np.testing.assert_array_equal(np.asarray(a), x)


@pytest.mark.device
def test_einsum_view_of_device_only_data_copies_nothing_and_writes_are_tracked() -> None:
    a = SmartArray(np.zeros((4, 4)))
    flat = a.reshape(-1)
    inc[1, 16](flat)  # only the device copy is current
    with smartarray.no_transfers():
        diagonal = np.einsum("ii->i", a)  # made on the layout: nothing copied
        rotated = np.rot90(a)
        assert diagonal.flags.writeable and rotated.flags.writeable
    with smartarray.track_transfers() as ledger:
        # Overwrites the diagonal's four elements (its rows' ranges, issue 21): nothing to
        # download, and only those bytes' device copy is stale.
        diagonal[...] = 5.0
        assert a.location == "mixed" and diagonal.location == "host"
        inc[1, 16](flat)  # uploads the four elements, one copy each (between them: newer bytes)
        # One download of the diagonal's elements across the device-only bytes between them
        # (rotated[3, 0] is a[0, 0], among them).
        assert np.trace(a) == 24.0 and rotated[3, 0] == 6.0
    assert [(r.direction, r.offset, r.nbytes) for r in ledger.records] == [
        ("h2d", 0, 8),
        ("h2d", 40, 8),
        ("h2d", 80, 8),
        ("h2d", 120, 8),
        ("d2h", 0, 128),
    ]


def test_einsum_errors_are_numpy_s() -> None:
    a = SmartArray(np.zeros((2, 3)))
    for call in (
        lambda m: np.einsum("ii->i", m),
        lambda m: np.einsum("ij->k", m),
        lambda m: np.einsum("i->i", m),
    ):
        with pytest.raises(ValueError) as expected:
            call(np.zeros((2, 3)))
        with pytest.raises(ValueError) as got:
            call(a)
        assert str(got.value) == str(expected.value)


def test_einsum_of_several_operands_still_computes() -> None:
    x, y = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    a = SmartArray(x)
    np.testing.assert_array_equal(np.asarray(np.einsum("ij,j->i", a, y)), x @ y)
    np.testing.assert_array_equal(np.asarray(np.einsum("j,ij->i", y, a)), x @ y)
    out = SmartArray(np.zeros(2))
    assert np.einsum("ij->i", a, out=out) is out
    np.testing.assert_array_equal(np.asarray(out), x.sum(1))


def test_broadcast_arrays_like_numpy_but_read_only() -> None:
    x, y = np.arange(3.0), np.zeros((2, 1))
    a, b = SmartArray(x), SmartArray(y)
    want, got = np.broadcast_arrays(x, y), np.broadcast_arrays(a, b)
    assert type(got) is type(want) is tuple
    for w, g, source in zip(want, got, (a, b), strict=True):
        assert type(g) is SmartArray and g.label == source.label
        np.testing.assert_array_equal(np.asarray(g), w, strict=True)
        assert g.strides == w.strides
        assert not g.flags.writeable  # numpy's: writable, with a FutureWarning on write
    full = SmartArray(np.ones((2, 3)))
    kept = np.broadcast_arrays(a, full)
    assert kept[1] is full and np.broadcast_arrays(np.ones((2, 3)), x)[0].flags.writeable
    with pytest.raises(ValueError) as expected:
        np.broadcast_arrays(x, np.zeros(2))
    with pytest.raises(ValueError) as raised:
        np.broadcast_arrays(a, SmartArray(np.zeros(2)))
    assert str(raised.value) == str(expected.value)
    mixed = np.broadcast_arrays(a, y)  # with an ndarray: numpy's own path, on the host copy
    np.testing.assert_array_equal(np.asarray(mixed[0]), want[0])


@pytest.mark.device
def test_broadcast_arrays_of_device_only_data_copy_nothing() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)
    with smartarray.no_transfers():
        wide, column = np.broadcast_arrays(a, SmartArray(np.zeros((3, 1))))
    assert a.location == "gpu"
    assert wide.tolist() == [[1.0, 2.0, 3.0, 4.0]] * 3 and column.shape == (3, 4)


# --- pickling and copying ------------------------------------------------------------------

PICKLED_LAYOUTS = ["1d", "c2d", "transposed", "strided3d", "fortran", "0d", "empty", "int"]


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("layout", PICKLED_LAYOUTS)
def test_pickle_round_trips_like_numpy(layout: str, protocol: int) -> None:
    x, a = pair(layout)
    restored = pickle.loads(pickle.dumps(a, protocol=protocol))
    expected = pickle.loads(pickle.dumps(x, protocol=protocol))
    assert type(restored) is SmartArray
    np.testing.assert_array_equal(np.asarray(restored), expected, strict=True)
    assert restored.strides == expected.strides  # a view is pickled as a copy, like numpy's
    assert restored.flags.c_contiguous == expected.flags.c_contiguous
    assert restored.flags.f_contiguous == expected.flags.f_contiguous
    assert restored.flags.writeable and restored.base is None
    assert restored.location == "host" and restored.host_memory == a.host_memory
    assert restored.label != a.label  # a default label is per process: a new one
    if restored.size:
        restored[(0,) * restored.ndim] = 99
        np.testing.assert_array_equal(np.asarray(a), x)  # a copy


@pytest.mark.parametrize("protocol", [2, 5])
def test_pickle_keeps_label_and_read_only(protocol: int) -> None:
    a = SmartArray(np.arange(6.0).reshape(2, 3), label="weights")
    restored = pickle.loads(pickle.dumps(a.T, protocol=protocol))
    assert restored.label == "weights" and restored.flags.writeable
    np.testing.assert_array_equal(np.asarray(restored), np.arange(6.0).reshape(2, 3).T)
    frozen = SmartArray(_read_only(np.arange(3)), copy=False, label="frozen")
    for view in (frozen, frozen[::2], np.broadcast_to(a[0], (2, 3)), a.diagonal()):
        restored = pickle.loads(pickle.dumps(view, protocol=protocol))
        assert not restored.flags.writeable  # read-only arrays stay read-only
        np.testing.assert_array_equal(np.asarray(restored), np.asarray(view))
        with pytest.raises(ValueError, match="read-only"):
            restored[0] = 1
    # Out-of-band buffers (pickle protocol 5, as Dask ships them) keep all of that too.
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
    restored = pickle.loads(data, buffers=[bytes(b.raw()) for b in buffers])
    assert restored.label == "weights" and restored.flags.writeable
    restored[0, 0] = -1.0
    assert a[0, 0] == 0.0


def test_pickle_of_object_and_structured_data() -> None:
    objects = np.array([[1, "x"], [None, [2]]], dtype=object)
    records = np.array([(1, 2.0), (3, 4.0)], dtype=[("i", "i4"), ("f", "f8")])
    for x in (objects, records, np.array(["ab", "c"])):
        restored = pickle.loads(pickle.dumps(SmartArray(x, label="data")))
        assert restored.dtype == x.dtype and restored.label == "data"
        assert restored.tolist() == x.tolist()


class _OlderPickle:
    """Pickles as SmartArrays did before labels were kept: ``_unpickle(data)``."""

    def __reduce__(self) -> tuple[Any, ...]:
        from smartarray._array import _unpickle

        return (_unpickle, (np.arange(3.0),))


def test_pickles_of_older_versions_still_load() -> None:
    restored = pickle.loads(pickle.dumps(_OlderPickle()))
    assert type(restored) is SmartArray and restored.tolist() == [0.0, 1.0, 2.0]


# ``pickle.dumps(SmartArray([0.0, 1.0, 2.0], label="old"), protocol=2)`` as written by smartarray
# before the package had layers (commit 9ec7425): it names smartarray._pickling.restore.
_FLAT_LAYOUT_PICKLE = (
    b"\x80\x02csmartarray._pickling\nrestore\nq\x00(cnumpy._core.multiarray\n_reconstruct\n"
    b"q\x01cnumpy\nndarray\nq\x02K\x00\x85q\x03c_codecs\nencode\nq\x04X\x01\x00\x00\x00bq"
    b"\x05X\x06\x00\x00\x00latin1q\x06\x86q\x07Rq\x08\x87q\tRq\n(K\x01K\x03\x85q\x0bcnumpy"
    b"\ndtype\nq\x0cX\x02\x00\x00\x00f8q\r\x89\x88\x87q\x0eRq\x0f(K\x03X\x01\x00\x00\x00<q"
    b"\x10NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tq\x11b\x89h\x04X\x19\x00\x00\x00\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xc3\xb0?\x00\x00\x00\x00\x00\x00"
    b"\x00@q\x12h\x06\x86q\x13Rq\x14tq\x15bX\x03\x00\x00\x00oldq\x16\x88X\x08\x00\x00\x00pa"
    b"geableq\x17tq\x18Rq\x19."
)


def test_pickles_of_the_flat_layout_still_load() -> None:
    restored = pickle.loads(_FLAT_LAYOUT_PICKLE)
    assert type(restored) is SmartArray and restored.tolist() == [0.0, 1.0, 2.0]
    assert restored.label == "old" and restored.host_memory == "pageable"
    # This version writes the same name, so that older versions read its pickles too.
    assert pickle.dumps(restored, protocol=2)[:32] == _FLAT_LAYOUT_PICKLE[:32]


@pytest.mark.parametrize(
    ("old", "name", "now"),
    [
        ("_pickling", "restore", "smartarray._numpy.pickling"),
        ("_numba_types", "SmartArrayType", "smartarray._numba.types"),
        ("_numba_cpu", "_jit_constants", "smartarray._numba.cpu"),  # in Numba's disk cache
        ("_errors", "TransferError", "smartarray._core.errors"),
        ("_errors", "DeviceUnavailableError", "smartarray._core.errors"),
        ("_errors", "SmartArrayKeptError", "smartarray._core.errors"),
        ("_transfer", "TransferStats", "smartarray._core.transfer"),
        ("_transfer", "TransferRecord", "smartarray._core.transfer"),
        ("_explain", "IntentReport", "smartarray._cuda.explain"),
        ("_cuda_ufuncs", "SmartUFunc", "smartarray._cuda.ufuncs"),
        ("_dask", "to_numpy", "smartarray._interop.dask"),
    ],
)
def test_names_of_the_flat_layout_still_resolve(old: str, name: str, now: str) -> None:
    """Pickles and Numba's on-disk cache (``cache=True``) written before the package had
    layers name these: each still loads as the object that holds that code now."""
    import importlib

    reference = f"csmartarray.{old}\n{name}\n.".encode()  # a pickle of just that global
    assert pickle.loads(reference) is getattr(importlib.import_module(now), name)
    assert importlib.import_module(f"smartarray.{old}") is importlib.import_module(now)


def test_an_exception_pickled_before_the_layers_loads() -> None:
    old = (  # pickle.dumps(TransferError("refused"), protocol=2), written by commit 9ec7425
        b"\x80\x02csmartarray._errors\nTransferError\n"
        b"q\x00X\x07\x00\x00\x00refusedq\x01\x85q\x02Rq\x03."
    )
    error = pickle.loads(old)
    assert type(error) is smartarray.TransferError and str(error) == "refused"


def test_host_memory_kind_round_trips_where_this_process_has_it() -> None:
    from smartarray._numpy import pickling as _pickling

    data = np.arange(4.0)
    restored = _pickling.restore(data.copy(), "kind", True, "pinned")
    expected = "pageable" if smartarray.tier() == "host-only" else "pinned"
    assert restored.host_memory == expected and restored.label == "kind"
    mapped = _pickling.restore(data.copy(), None, True, "mapped")
    if smartarray.tier() == "host-only":
        assert mapped.host_memory == "pageable" and mapped.location == "host"
    else:
        assert mapped.host_memory == "mapped" and mapped.location == "both"
    np.testing.assert_array_equal(np.asarray(mapped), data)
    objects = _pickling.restore(np.array([1, None], dtype=object), None, True, "pinned")
    assert objects.host_memory == "pageable"


@pytest.mark.device
@pytest.mark.parametrize("host_memory", ["pageable", "pinned", "mapped"])
def test_pickle_keeps_host_memory_kind(host_memory: str) -> None:
    a = SmartArray(np.arange(4.0), host_memory=host_memory, label="kept")
    restored = pickle.loads(pickle.dumps(a))
    assert restored.host_memory == host_memory and restored.label == "kept"
    assert restored.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("simulator", [False, True], ids=["host-only", "simulator"])
def test_pickle_loads_in_another_process(tmp_path: Path, simulator: bool) -> None:
    kind = "pageable" if smartarray.tier() == "host-only" else "pinned"
    a = SmartArray(np.arange(6.0).reshape(2, 3), host_memory=kind, label="shipped")
    frozen = SmartArray(_read_only(np.arange(3)), copy=False)
    (tmp_path / "arrays.pickle").write_bytes(pickle.dumps([a.T, frozen]))
    script = (
        "import pickle, sys\n"
        "import smartarray\n"
        "t, frozen = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "print(type(t).__name__, t.label, t.flags.writeable, t.strides, t.host_memory,\n"
        "      t.location, t.tolist(), frozen.flags.writeable, smartarray.tier())\n"
    )
    proc = run_python(
        ["-c", script, str(tmp_path / "arrays.pickle")], simulator=simulator, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    # F order, as numpy restores a.T; a pinned array arrives pinned where the process has
    # CUDA, pageable where it has not.
    there = "pinned" if kind == "pinned" and simulator else "pageable"
    tier = "simulator" if simulator else "host-only"
    assert (
        proc.stdout.split()
        == (
            f"SmartArray shipped True (8, 24) {there} host "
            f"[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] False {tier}"
        ).split()
    )


@pytest.mark.device
def test_pickle_of_device_only_data_downloads_only_stale_bytes() -> None:
    a = SmartArray(np.arange(8.0), label="on-device")
    inc[1, 8](a)  # only the device copy is current
    view = a[1::2]
    with smartarray.track_transfers() as ledger:
        data = pickle.dumps(view)
        again = pickle.dumps(a)  # only the bytes still stale on the host are downloaded
    # The view reads its elements' bytes in one copy across the gaps between them (8..64:
    # closer than the coalescing gap). The gaps copied along keep their state (issue 21: a
    # coalesced copy changes the state of the requested bytes only), so a then reads its
    # other elements, again in one copy across the gaps (0..56).
    assert [(r.direction, r.offset, r.nbytes) for r in ledger.records] == [
        ("d2h", 8, 56),
        ("d2h", 0, 56),
    ]
    assert a.location == "both"
    restored = pickle.loads(data)
    assert restored.tolist() == [2.0, 4.0, 6.0, 8.0] and restored.label == "on-device"
    assert restored.location == "host" and restored.strides == (8,)
    assert pickle.loads(again).tolist() == list(np.arange(8.0) + 1)
    with smartarray.track_transfers() as ledger:
        inc[1, 4](restored)  # an ordinary array: one upload for the kernel
        assert restored.tolist() == [3.0, 5.0, 7.0, 9.0]
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 1)


@pytest.mark.parametrize("layout", PICKLED_LAYOUTS)
def test_copy_and_deepcopy_like_numpy(layout: str) -> None:
    x, a = pair(layout)
    x = _read_only(x) if layout == "int" else x
    a = SmartArray(x, copy=False) if layout == "int" else a
    for make in (copy.copy, copy.deepcopy):
        want, got = make(x), make(a)
        assert type(got) is SmartArray and got.label != a.label  # a new array
        np.testing.assert_array_equal(np.asarray(got), want, strict=True)
        assert got.strides == want.strides
        assert got.flags.writeable == want.flags.writeable  # copies are writable, as numpy's
        if got.size:
            got[(0,) * got.ndim] = 99
            np.testing.assert_array_equal(np.asarray(a), x)


@pytest.mark.device
def test_copy_of_device_only_data_stays_on_the_device() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)
    with smartarray.no_transfers():
        shallow, deep = copy.copy(a), copy.deepcopy(a)
    assert shallow.location == deep.location == "gpu"
    assert shallow.tolist() == deep.tolist() == a.tolist() == [1.0, 2.0, 3.0, 4.0]
