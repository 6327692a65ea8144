"""Bad input to the host-level entry points: the right exception, and nothing changed.

After every refused call the array's data and validity flags (``is_valid('host')``,
``is_valid('gpu')``, ``location``) must be what they were, and no copy may have been made.
In the simulator tier the same checks also run on arrays whose data is on both sides
(``'both'``) or only on the device (``'gpu'``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import smartarray as sa
from smartarray import SmartArray

DATA = np.arange(12.0).reshape(3, 4)


def make(state: str, data: np.ndarray = DATA) -> SmartArray:
    """A SmartArray holding ``data`` whose current copies are ``state``."""
    if state == "host":
        a = SmartArray(data)
    else:
        a = SmartArray(data, where="gpu")  # uploaded: both copies current
        if state == "gpu":
            a.get("gpu")
            a.mark_changed("gpu")  # as if a kernel had written it
    assert a.location == state
    return a


def flags(a: SmartArray) -> tuple[bool, bool, str]:
    return a.is_valid("host"), a.is_valid("gpu"), a.location


@contextmanager
def refused(
    a: SmartArray, exception: type[BaseException], match: str | None = None
) -> Iterator[None]:
    """The block raises ``exception`` and leaves ``a``'s flags and data as they were."""
    before = flags(a)
    expected = DATA if a.shape == DATA.shape and a.dtype == DATA.dtype else None
    with sa.track_transfers() as t, pytest.raises(exception, match=match):
        yield
    assert flags(a) == before
    assert t.count == 0, f"a refused call copied data: {t}"
    if expected is not None:
        np.testing.assert_array_equal(np.array(a, copy=True), expected)


STATES = [
    "host",
    pytest.param("both", marks=pytest.mark.device),
    pytest.param("gpu", marks=pytest.mark.device),
]


@pytest.fixture(params=STATES)
def state(request: pytest.FixtureRequest) -> str:
    return request.param


# --- where, host_memory, order, shape -----------------------------------------------------

BAD_WHERE: list[Any] = ["cpu", "cuda", "GPU", "", None, 0, ("host",)]


@pytest.mark.parametrize("where", BAD_WHERE, ids=repr)
def test_bad_where_names_the_allowed_values(where: Any) -> None:
    calls: list[Callable[[], Any]] = [
        lambda: SmartArray(DATA, where=where),
        lambda: SmartArray(shape=3, where=where),
        lambda: sa.asarray(DATA, where=where),
        lambda: sa.empty(3, where=where),
        lambda: sa.zeros(3, where=where),
        lambda: sa.ones(3, where=where),
        lambda: sa.full(3, 1.0, where=where),
        lambda: sa.full((2, 3), [1.0, 2.0, 3.0], where=where),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"'host'.*'gpu'") as info:
            call()
        assert repr(where) in str(info.value)


@pytest.mark.parametrize("where", BAD_WHERE, ids=repr)
def test_bad_where_on_an_array(where: Any, state: str) -> None:
    a = make(state)
    calls: list[Callable[[], Any]] = [
        lambda: a.get(where),
        lambda: a.is_valid(where),
        lambda: a.mark_changed(where),
        lambda: sa.asarray(a, where=where),
    ]
    if where is not None:  # where=None means "where the prototype's data is" for *_like
        calls += [lambda: sa.empty_like(a, where=where), lambda: sa.zeros_like(a, where=where)]
    for call in calls:
        with refused(a, ValueError, r"'host'.*'gpu'"):
            call()


@pytest.mark.parametrize("memory", ["paged", "PINNED", "device", "", 1])
def test_bad_host_memory(memory: Any) -> None:
    for call in (
        lambda: SmartArray(DATA, host_memory=memory),
        lambda: SmartArray(shape=2, host_memory=memory),
        lambda: sa.zeros(2, host_memory=memory),
        lambda: sa.asarray([1, 2], host_memory=memory),
    ):
        with pytest.raises(ValueError, match="'pinned', 'pageable', 'mapped'"):
            call()


@pytest.mark.parametrize("memory", ["pinned", "mapped"])
def test_copy_false_needs_pageable_memory(memory: str) -> None:
    data = DATA.copy()
    with pytest.raises(ValueError, match="copy=False"):
        SmartArray(data, copy=False, host_memory=memory)
    np.testing.assert_array_equal(data, DATA)


@pytest.mark.parametrize("order", ["X", "c", "f", "", 0])
def test_bad_order(order: Any) -> None:
    for call in (
        lambda: SmartArray(DATA, order=order),
        lambda: SmartArray(shape=(2, 2), order=order),
        lambda: sa.asarray([1, 2], order=order),
        lambda: sa.empty(3, order=order),
        lambda: sa.zeros(3, order=order),
    ):
        with pytest.raises(ValueError, match="order"):
            call()


@pytest.mark.parametrize("order", ["A", "K"])
def test_new_arrays_need_c_or_f_order(order: str) -> None:
    with pytest.raises(ValueError) as expected:
        np.empty(3, order=order)  # type: ignore[call-overload]
    with pytest.raises(type(expected.value), match="'C' or 'F'"):
        sa.empty(3, order=order)
    with pytest.raises(ValueError, match="'C' or 'F'"):
        SmartArray(shape=3, order=order)


@pytest.mark.parametrize(
    "shape",
    [(-1,), -2, (2, -3), 2.5, (2, 1.5), "3", (None,), [[2]]],
    ids=repr,
)
def test_bad_shapes_match_numpy(shape: Any) -> None:
    with pytest.raises(Exception) as expected:
        np.empty(shape)
    for call in (
        lambda: sa.empty(shape),
        lambda: sa.zeros(shape),
        lambda: SmartArray(shape=shape),
    ):
        with pytest.raises(type(expected.value)):
            call()


# issue 31: impossible shapes were accepted at creation (buffers are made lazily), and the
# error came at first use; numpy refuses them when the array is made.
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((2**62,), np.float64),  # nbytes beyond intp
        ((2**61,), np.float64),  # exactly 2**64 bytes
        ((2**40, 2**40), np.float64),  # (nbytes wrapped to 0 before)
        ((0, 2**62, 2**62), np.uint8),  # numpy checks the nonzero dimensions' product
        ((2**63,), np.uint8),  # a dimension beyond intp
        ((1,) * 65, np.float64),  # more axes than numpy allows
    ],
    ids=lambda v: f"{len(v)} axes" if isinstance(v, tuple) and len(v) > 4 else repr(v),
)
@pytest.mark.parametrize("where", ["host", "gpu"])
def test_impossible_shapes_are_refused_at_creation_as_numpy_does(
    shape: tuple[int, ...], dtype: type, where: str
) -> None:
    with pytest.raises(ValueError) as expected:
        np.empty(shape, dtype=dtype)
    for call in (
        lambda: sa.empty(shape, dtype=dtype, where=where),
        lambda: sa.zeros(shape, dtype=dtype, where=where),
        lambda: sa.full(shape, 1, dtype=dtype, where=where),
        lambda: sa.zeros_like(np.zeros(1, dtype), shape=shape, where=where),
        lambda: SmartArray(shape=shape, dtype=dtype, where=where),
    ):
        with sa.track_transfers() as t, pytest.raises(ValueError) as error:
            call()  # before any device check: the same error in every tier
        message = str(error.value)
        assert message.startswith(str(expected.value)[:40]), (message, expected.value)
        assert "nothing was allocated" in message and str(shape) in message
        assert t.nbytes == 0


def test_shapes_that_fit_intp_but_not_this_machine_are_a_memory_error() -> None:
    # numpy raises MemoryError when it allocates 80 TB; smartarray when the array is made.
    from smartarray._core.host_buffers import machine_memory

    memory = machine_memory()
    if memory is None:  # pragma: no cover - neither /proc/meminfo nor sysconf
        pytest.skip("this machine's memory cannot be read")
    n = sum(memory) // 8 + 1  # one float64 more than RAM + swap
    assert n * 8 <= np.iinfo(np.intp).max
    for call in (
        lambda: sa.zeros(n),
        lambda: SmartArray(shape=(n,)),
        lambda: sa.empty_like(np.zeros(1), shape=(n,)),
    ):
        with pytest.raises(
            MemoryError,
            match=r"^Unable to allocate .* with shape \(\d+,\) and "
            r"data type float64: more than this machine's memory",
        ) as error:
            call()
        assert "GiB RAM" in str(error.value) and "where='gpu'" in str(error.value)
    big = sa.zeros(max(1, sum(memory) // 8 // 4), dtype=np.float64)  # lazily made: fits
    assert big.location == "both" and big.nbytes <= sum(memory)
    del big


def test_shape_mismatch_with_data() -> None:
    with pytest.raises(ValueError, match="does not match"):
        SmartArray([1, 2, 3], shape=(2,))
    with pytest.raises(ValueError, match="does not match"):
        SmartArray(DATA, shape=(4, 3))
    with pytest.raises(ValueError, match="needs data"):
        SmartArray()
    assert SmartArray([1, 2, 3], shape=3).shape == (3,)  # a matching shape is fine


@pytest.mark.parametrize("fill", ["abc", [1.0, 2.0], [[1.0], [2.0], [3.0]], {"a": 1}])
def test_full_with_bad_fill_value_matches_numpy(fill: Any) -> None:
    with pytest.raises(Exception) as expected:
        np.full((2, 3), fill, dtype=np.float64)
    with pytest.raises(type(expected.value)):
        sa.full((2, 3), fill, dtype=np.float64)


def test_full_overflow_matches_numpy() -> None:
    with pytest.raises(OverflowError):
        np.full(3, 300, dtype=np.int8)
    with pytest.raises(OverflowError):
        sa.full(3, 300, dtype=np.int8)


# --- copy=False ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "kwargs"),
    [
        (DATA[:, ::2], {}),  # non-contiguous
        (DATA[::-1], {}),  # negative strides
        (DATA, {"dtype": np.float32}),  # dtype change
        (DATA, {"dtype": np.int64}),
        (DATA, {"order": "F"}),  # layout change
        (np.asfortranarray(DATA), {"order": "C"}),
        ([1.0, 2.0], {}),  # not an array at all: numpy 2's copy=False refuses too
    ],
    ids=["strided", "reversed", "float32", "int64", "to-F", "to-C", "list"],
)
def test_copy_false_refuses_to_copy(data: Any, kwargs: dict[str, Any]) -> None:
    snapshot = np.array(data, copy=True)
    with pytest.raises(ValueError, match="copy"):
        SmartArray(data, copy=False, **kwargs)
    np.testing.assert_array_equal(data, snapshot)


def test_copy_false_from_smartarray(state: str) -> None:
    a = make(state)
    with refused(a, ValueError, "dtype"):
        SmartArray(a, copy=False, dtype=np.float32)
    with refused(a, ValueError, "copy=False"):
        SmartArray(a.T, copy=False, order="C")


def test_adopted_read_only_ndarray_stays_read_only() -> None:
    data = DATA.copy()
    data.flags.writeable = False
    a = SmartArray(data, copy=False)
    assert not a.flags.writeable
    with refused(a, ValueError, "read-only"):
        a[0, 0] = 1.0
    with refused(a, ValueError, "read-only"):
        a.fill(0.0)
    with refused(a, ValueError, "read-only"):
        a += 1
    np.testing.assert_array_equal(data, DATA)


# --- indexing ------------------------------------------------------------------------------

BAD_KEYS: list[Any] = [
    3,
    -4,
    (0, 4),
    (1, 2, 3),
    (slice(None), -5),
    [0, 3],
    ([0, 1], [4, 0]),
    np.array([True, False]),
    np.ones((3, 4, 1), dtype=bool),
    1.0,
    "x",
    (0, "1"),
    [[0, 1], [0, 9]],
]


@pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
def test_bad_getitem(key: Any, state: str) -> None:
    a = make(state)
    with pytest.raises(Exception) as expected:
        DATA[key]
    with refused(a, type(expected.value)):
        a[key]


@pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
def test_bad_setitem_index(key: Any, state: str) -> None:
    a = make(state)
    x = DATA.copy()
    with pytest.raises(Exception) as expected:
        x[key] = 1.0
    with refused(a, type(expected.value)):
        a[key] = 1.0


BAD_VALUES: list[tuple[Any, Any]] = [
    (0, [1.0, 2.0]),
    (slice(None), np.ones((2, 4))),
    (slice(None), np.ones((3, 5))),
    ((slice(None), 0), np.ones((1, 1, 4))),
    ([0, 2], np.ones((3, 4))),
    (DATA > 5, [1.0, 2.0]),
    ((0, 0), [1.0, 2.0]),
    (0, "abc"),
    (0, ["1", "2", "x", "4"]),
    ((0, 0), 1j),
    ((0, 0), {"a": 1}),
    (Ellipsis, object()),
]


@pytest.mark.parametrize(("key", "value"), BAD_VALUES, ids=repr)
def test_bad_setitem_value(key: Any, value: Any, state: str) -> None:
    a = make(state)
    x = DATA.copy()
    with pytest.raises(Exception) as expected:
        x[key] = value
    with refused(a, type(expected.value)):
        a[key] = value
    if np.asarray(value).dtype.kind == "f":  # a bad shape is refused for SmartArray values too
        with refused(a, type(expected.value)):
            a[key] = SmartArray(np.asarray(value))


def test_bad_structured_setitem(state: str) -> None:
    data = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")])
    a = make(state, data)
    x = data.copy()
    with pytest.raises(ValueError):
        x[:] = [(5, 6.0), (7, "x")]  # numpy fails half-way: x[0] is written
    before = flags(a)
    with sa.track_transfers() as t, pytest.raises(ValueError):
        a[:] = [(5, 6.0), (7, "x")]
    assert flags(a) == before and t.count == 0
    if state == "host":  # no device copy to protect: numpy's own behaviour
        assert np.array(a, copy=True).tolist() == x.tolist()
    else:  # checked before writing: nothing changed
        assert np.array(a, copy=True).tolist() == data.tolist()
    with refused(a, ValueError, "no field"):
        a["c"] = 1
    with refused(a, IndexError):
        a[2] = (1, 1.0)


def test_bad_setitem_through_a_view(state: str) -> None:
    a = make(state)
    view = a[1:, ::2]
    with refused(a, ValueError):
        view[...] = np.ones(3)
    with refused(a, IndexError):
        view[2, 0] = 1.0
    with refused(a, ValueError):
        view.fill("x")


# --- read-only views -----------------------------------------------------------------------

READ_ONLY_VIEWS: list[tuple[str, Callable[[Any], Any]]] = [
    ("np.diagonal", np.diagonal),
    ("diagonal-method", lambda v: v.diagonal(1)),
    ("broadcast_to", lambda v: np.broadcast_to(v[0], (5, 4))),
    ("broadcast_to-2d", lambda v: np.broadcast_to(v, (2, 3, 4))),
    ("diagonal-T", lambda v: np.diagonal(v).T),
]

WRITES: list[tuple[str, Callable[[Any], Any]]] = [
    ("setitem", lambda v: v.__setitem__(0, 1.0)),
    ("setitem-all", lambda v: v.__setitem__(Ellipsis, 1.0)),
    ("fill", lambda v: v.fill(1.0)),
    ("iadd", lambda v: operator.iadd(v, 1.0)),
    ("ufunc-out", lambda v: np.add(v, 1.0, out=v)),
    ("ufunc-at", lambda v: np.add.at(v, [0], 1.0)),
    ("copyto", lambda v: np.copyto(v, 1.0)),
    ("put", lambda v: np.put(v, [0], 1.0)),
    ("putmask", lambda v: np.putmask(v, np.ones(v.shape, bool), 1.0)),
    ("sort-method", lambda v: v.sort()),
]


@pytest.mark.parametrize(
    ("view_name", "make_view"), READ_ONLY_VIEWS, ids=[n for n, _ in READ_ONLY_VIEWS]
)
@pytest.mark.parametrize(("write_name", "write"), WRITES, ids=[n for n, _ in WRITES])
def test_writes_to_read_only_views_are_refused(
    view_name: str,
    make_view: Callable[[Any], Any],
    write_name: str,
    write: Callable[[Any], Any],
    state: str,
) -> None:
    a = make(state)
    x = DATA.copy()
    expected_view = make_view(x)
    assert not expected_view.flags.writeable
    if write_name != "ufunc-at":  # (numpy 2.4's ufunc.at writes read-only arrays anyway)
        with pytest.raises(ValueError, match="read-only"):
            write(expected_view)  # numpy refuses these too
    view = make_view(a)
    assert not view.flags.writeable
    with refused(a, ValueError, "read-only"):
        write(view)


def test_writes_through_np_asarray_reach_the_array(state: str) -> None:
    a = make(state)
    host = np.asarray(a)  # a read: may copy the data to the host once
    host[0, 0] = -1.0
    host += 1
    expected = DATA + 1
    expected[0, 0] = 0.0
    assert flags(a) == (True, False, "host")  # the writes were found: the device copy is stale
    np.testing.assert_array_equal(np.array(a, copy=True), expected)


def test_writes_through_np_asarray_of_a_read_only_view_fail_loudly(state: str) -> None:
    a = make(state)
    view = np.asarray(a.diagonal())  # a read-only SmartArray gives a read-only view
    before = flags(a)
    with pytest.raises(ValueError, match="read-only"):
        view[0] = -1.0
    with pytest.raises(ValueError, match="read-only"):
        np.copyto(view, 0.0)
    assert flags(a) == before
    np.testing.assert_array_equal(np.array(a, copy=True), DATA)


def test_write_intents_on_read_only_views(state: str) -> None:
    a = make(state)
    for intent in (sa.Out, sa.InOut):
        with refused(a, ValueError, "read-only"):
            intent(a[:, ::-1].diagonal())
    assert sa.In(a.diagonal()).array.shape == (3,)  # reading is fine


# --- refused methods and attributes --------------------------------------------------------


@pytest.mark.parametrize("name", ["resize", "setflags", "byteswap"])
def test_refused_methods(name: str, state: str) -> None:
    a = make(state)
    assert hasattr(np.ndarray, name)
    assert not hasattr(a, name)
    with refused(a, AttributeError, "SmartArray"):
        getattr(a, name)(3)


def test_flags_and_unknown_attributes(state: str) -> None:
    a = make(state)
    with refused(a, ValueError, "flags"):
        a.flags.writeable = False
    with refused(a, ValueError, "flags"):
        a.flags["C_CONTIGUOUS"] = False
    with refused(a, AttributeError, "no attribute"):
        a.no_such_attribute  # noqa: B018
    with refused(a, AttributeError, "no attribute"):
        a._private_thing  # noqa: B018
    with refused(a, TypeError, "ndarray"):
        a.view(np.ndarray)
    with refused(a, TypeError):
        a.astype("not a dtype")
    with refused(a, ValueError):
        a.view(np.dtype("V5"))  # 32-byte rows are not a multiple of 5 bytes


# --- reshape and friends -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((5,), {}),
        ((5, -1), {}),
        ((-1, -1), {}),
        ((2, 2, 2), {}),
        ((12,), {"order": "K"}),
        ((12,), {"order": "Q"}),
        ((2.5,), {}),
    ],
    ids=repr,
)
def test_bad_reshape(args: tuple[Any, ...], kwargs: dict[str, Any], state: str) -> None:
    a = make(state)
    with pytest.raises(Exception) as expected:
        DATA.reshape(*args, **kwargs)
    with refused(a, type(expected.value)):
        a.reshape(*args, **kwargs)
    with refused(a, type(expected.value)):
        np.reshape(a, args if len(args) > 1 else args[0], **kwargs)


def test_reshape_copy_false_needing_a_copy(state: str) -> None:
    a = make(state)
    with refused(a, ValueError):
        a.T.reshape(12, copy=False)


def test_bad_view_operations(state: str) -> None:
    a = make(state)
    for call, exc in (
        (lambda: a.transpose(0, 0), ValueError),
        (lambda: a.swapaxes(0, 2), np.exceptions.AxisError),
        (lambda: a.squeeze(0), ValueError),
        (lambda: np.moveaxis(a, 0, 5), np.exceptions.AxisError),
        (lambda: a.ravel("Q"), ValueError),
        (lambda: a.flatten("Q"), ValueError),
        (lambda: np.split(a, 5), ValueError),
        (lambda: np.broadcast_to(a, (4,)), ValueError),
        (lambda: a[None].mT.mT.T.reshape(5), ValueError),
    ):
        with refused(a, exc):
            call()


# --- ufuncs and operators --------------------------------------------------------------------


def test_bad_ufunc_calls(state: str) -> None:
    a = make(state, np.arange(12).reshape(3, 4)) if state != "gpu" else None
    if a is None:  # an integer array only on the device
        a = SmartArray(np.arange(12).reshape(3, 4), where="gpu")
        a.get("gpu")
        a.mark_changed("gpu")
    before = flags(a)
    calls: list[tuple[Callable[[], Any], type[BaseException]]] = [
        (lambda: operator.iadd(a, 1.5), TypeError),  # same_kind casting refused
        (lambda: operator.itruediv(a, 2), TypeError),
        (lambda: np.sqrt(a, out=a), TypeError),
        (lambda: np.add(a, np.ones(3, dtype=int), out=a), ValueError),
        (lambda: np.add(a, np.ones((2, 3, 4), dtype=int), out=a), ValueError),
        (lambda: np.add(a, 1, out=a, where=np.ones(5, dtype=bool)), ValueError),
        (lambda: np.add(a, "x", out=a), TypeError),
        (lambda: np.add(a, 1, out=a[0]), ValueError),
        (lambda: np.add(a, 1, out=a.diagonal()), ValueError),
    ]
    for call, exc in calls:
        with sa.track_transfers() as t, pytest.raises(exc):
            call()
        assert flags(a) == before and t.count == 0
    np.testing.assert_array_equal(np.array(a, copy=True), np.arange(12).reshape(3, 4))


def test_truth_value_of_arrays() -> None:
    a = SmartArray(DATA)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(SmartArray(np.zeros(0)))
    with pytest.raises(TypeError):
        len(SmartArray(np.array(1.0)))
    with pytest.raises(TypeError, match="only integer scalar arrays"):
        operator.index(SmartArray(np.array(1.5)))


def test_mark_changed_on_a_stale_copy_is_refused(state: str) -> None:
    a = make(state)
    if a.location == "host":
        with refused(a, RuntimeError, "stale"):
            a.mark_changed("gpu")
    elif a.location == "gpu":
        with refused(a, RuntimeError, "stale"):
            a.mark_changed("host")
    else:
        a.mark_changed("host")  # both copies current: either may be declared changed
        assert a.location == "host"


@pytest.mark.parametrize("side", ["host", "gpu", "device"])
def test_mark_changed_on_a_read_only_array_is_refused(state: str, side: str) -> None:
    # Nothing can have been written through a read-only array: declaring a write would make
    # a copy current that may be read-only itself (an adopted read-only ndarray: every later
    # download into it failed, and the array could never be read again).
    a = make(state)
    for view in (np.broadcast_to(a, (2, *DATA.shape)), a.diagonal()):
        with refused(a, ValueError, "read-only SmartArray"):
            view.mark_changed(side)
    data = DATA.copy()
    data.flags.writeable = False
    adopted = SmartArray(data, copy=False, where="host" if state == "host" else "gpu")
    with refused(adopted, ValueError, r"mark_changed\('(host|gpu)'\) on a read-only"):
        adopted.mark_changed(side)
    np.testing.assert_array_equal(adopted[1:], DATA[1:])  # still readable


# --- no device (tier 1) ---------------------------------------------------------------------

DEVICE_REQUESTS: list[tuple[str, Callable[[SmartArray], Any]]] = [
    ("SmartArray-where", lambda a: SmartArray(DATA, where="gpu")),
    ("SmartArray-device-alias", lambda a: SmartArray(DATA, where="device")),
    ("SmartArray-shape", lambda a: SmartArray(shape=(2, 2), where="gpu")),
    ("SmartArray-from-smartarray", lambda a: SmartArray(a, where="gpu")),
    ("SmartArray-pinned", lambda a: SmartArray(DATA, host_memory="pinned")),
    ("SmartArray-mapped", lambda a: SmartArray(shape=3, host_memory="mapped")),
    ("asarray", lambda a: sa.asarray(DATA, where="gpu")),
    ("asarray-smartarray", lambda a: sa.asarray(a, where="gpu")),
    ("empty", lambda a: sa.empty(3, where="gpu")),
    ("zeros", lambda a: sa.zeros(3, where="gpu")),
    ("ones", lambda a: sa.ones(3, where="gpu")),
    ("full", lambda a: sa.full(3, 2.0, where="gpu")),
    ("full-array", lambda a: sa.full((2, 2), [1.0, 2.0], where="gpu")),
    ("zeros_like", lambda a: sa.zeros_like(a, where="gpu")),
    ("empty_like", lambda a: sa.empty_like(a, where="gpu")),
    ("get", lambda a: a.get("gpu")),
    ("get-view", lambda a: a[1:].get("device")),
    ("to_gpu", lambda a: a.to_gpu()),
]


@pytest.mark.hostonly
@pytest.mark.parametrize(
    ("name", "request_device"), DEVICE_REQUESTS, ids=[n for n, _ in DEVICE_REQUESTS]
)
def test_device_requests_without_cuda(
    name: str, request_device: Callable[[SmartArray], Any]
) -> None:
    a = SmartArray(DATA)
    with sa.track_transfers() as t, pytest.raises(sa.DeviceUnavailableError) as info:
        request_device(a)
    assert "NUMBA_ENABLE_CUDASIM" in str(info.value)
    assert t.count == 0
    assert flags(a) == (True, False, "host")
    np.testing.assert_array_equal(np.array(a, copy=True), DATA)
    assert isinstance(info.value, RuntimeError)  # DeviceUnavailableError is a RuntimeError


@pytest.mark.hostonly
def test_no_cuda_array_interface_without_cuda() -> None:
    a = SmartArray(DATA)
    assert not hasattr(a, "__cuda_array_interface__")
    with refused(a, AttributeError, "needs a real CUDA GPU"):
        a.__cuda_array_interface__  # noqa: B018


# --- dtypes the device cannot hold (tiers 2 and 3) -----------------------------------------

OBJECTS = np.array([1, "two", None], dtype=object)


@pytest.mark.device
@pytest.mark.parametrize(
    "create",
    [
        lambda: SmartArray(OBJECTS, where="gpu"),
        lambda: SmartArray(OBJECTS, where="device"),
        lambda: SmartArray(shape=3, dtype=object, where="gpu"),
        lambda: SmartArray(SmartArray(OBJECTS), where="gpu"),
        lambda: sa.asarray(OBJECTS, where="gpu"),
        lambda: sa.empty(3, dtype=object, where="gpu"),
        lambda: sa.zeros(3, dtype=object, where="gpu"),
        lambda: sa.full(3, None, dtype=object, where="gpu"),
        lambda: SmartArray(np.zeros(2, dtype=[("a", "O"), ("b", "f8")]), where="gpu"),
    ],
    ids=[
        "SmartArray",
        "device-alias",
        "shape",
        "from-smartarray",
        "asarray",
        "empty",
        "zeros",
        "full",
        "structured-with-object",
    ],
)
def test_object_dtype_on_the_device_is_a_type_error(create: Callable[[], Any]) -> None:
    with sa.track_transfers() as t, pytest.raises(TypeError, match="object"):
        create()
    assert t.count == 0


@pytest.mark.device
def test_object_array_stays_on_the_host() -> None:
    a = SmartArray(OBJECTS)
    for request in (
        lambda: a.get("gpu"),
        lambda: a.to_gpu(),
        lambda: a[1:].get("gpu"),
        lambda: sa.asarray(a, where="gpu"),
        lambda: sa.zeros_like(a, where="gpu"),
        lambda: sa.InOut(a).to_device([]),
    ):
        with sa.track_transfers() as t, pytest.raises(TypeError, match="object"):
            request()
        assert t.count == 0 and flags(a) == (True, False, "host")
        assert a.tolist() == [1, "two", None]


@pytest.mark.parametrize(
    "make",
    [
        lambda: sa.SmartArray(np.arange(4.0)),
        lambda: sa.zeros(4),
        lambda: sa.SmartArray([0, 1, 2, 3]),
    ],
    ids=["copy", "zeros", "list"],
)
def test_a_second_init_is_refused_and_changes_nothing(make: Any) -> None:
    # (Before: the new layout beside the old allocation, and reads past the old buffer.)
    a = make()
    before = np.array(a)
    with pytest.raises(TypeError, match="already made"):
        a.__init__(np.arange(10.0))
    assert a.shape == (4,)
    np.testing.assert_array_equal(np.asarray(a), before)
    assert a.sum() == before.sum()
