"""A lighter SmartArray (issue 30, item 1): what host-only arrays do not make until asked.

A new numpy result (``x + y``, ``np.sin(x)``, ``x.sum(axis=0)``…) and ``SmartArray(ndarray)``
have no allocation at all (``_own_host``: the host buffer only) until something but a
fast-path host read asks for one; the allocation they then get, like any made over a host
buffer (:meth:`Allocation.on_host`), is a light one: no ledger number until its label is read,
and the attributes a device operation or a hand-out sets start as class attributes. Views
share their base's allocation and compute their extent when first asked. Here: that these are
not made early (a cheap internal check), and that nothing is lost when they are made late
(exact copies, values, labels, threads).
"""

from __future__ import annotations

import pickle
import threading
import types

import numpy as np
import pytest
from helpers import counts, inc, run_in_threads

import smartarray as sa
import smartarray._array as sa_array
from smartarray._core.coherence import Allocation, State


def made(array: sa.SmartArray) -> bool:
    """True once ``array`` has its allocation (the cheap internal check)."""
    return array._alloc_if_made is not None


def test_results_and_copies_have_no_allocation_until_asked() -> None:
    x = sa.SmartArray(np.arange(16.0))
    y = sa.SmartArray(np.ones(16))
    assert not made(x) and not made(y)  # SmartArray(ndarray): a copy, nothing else yet
    results = [x + y, 2 * x, -x, np.sin(x), np.add(x, y), (x + y) * y]
    for r in results:
        assert type(r) is sa.SmartArray and not made(r)
    # fast-path host reads need none: operators, reductions, element reads
    assert float((x + y).sum()) == float(np.arange(16.0).sum() + 16)
    z = x * 3
    assert z[5] == 15.0  # (the first element read of an array takes the general path)
    assert not made(x) and not made(y)
    np.testing.assert_array_equal(results[0], np.arange(16.0) + 1)


def test_the_allocation_is_made_on_first_need_and_only_once() -> None:
    r = sa.SmartArray(np.arange(8.0)) + 1
    assert not made(r)
    assert r.location == "host" and made(r)  # anything but a fast-path host read
    alloc = r._alloc
    assert r._own_host is None and r._alloc_if_made is alloc
    assert alloc.state is State.HOST and alloc.host is not None
    np.testing.assert_array_equal(alloc.host, np.arange(8.0) + 1)
    v = r[2:6]  # a view shares it
    assert v._alloc is alloc and v._alloc_if_made is alloc


def test_a_view_of_an_array_without_allocation_shares_the_one_made_for_it() -> None:
    r = sa.SmartArray(np.arange(10.0)) * 2
    v = r[1:9:2]
    assert made(r) and v._alloc is r._alloc and v._extent_cache is None  # (extent: later)
    v[0] = -1.0
    assert r[1] == -1.0
    np.testing.assert_array_equal(v, [-1.0, 6.0, 10.0, 14.0])


def test_light_allocations_number_their_label_when_first_read() -> None:
    a = Allocation.on_host(np.zeros(4), "C", host_memory="pageable")
    b = Allocation.on_host(np.zeros(4), "C", host_memory="pageable")
    assert a._number is None and b._number is None  # (no ledger number yet)
    assert b.label != a.label and a.label == a.label
    assert a.label.startswith("SmartArray#")
    named = Allocation.on_host(np.zeros(4), "C", host_memory="pageable", label="named")
    assert named.label == "named" and named._number is None
    assert sa.SmartArray(np.zeros(3), label="x").label == "x"


def test_two_threads_making_one_allocation_get_the_same() -> None:
    for _ in range(50):
        r = sa.SmartArray(np.arange(32.0)) + 1
        seen: list[Allocation] = [None] * 8  # type: ignore[list-item]

        def worker(k: int, r: sa.SmartArray = r, seen: list[Allocation] = seen) -> None:
            seen[k] = r._alloc

        run_in_threads(worker, 8)
        assert all(alloc is seen[0] for alloc in seen) and r._alloc is seen[0]


def test_two_threads_numbering_one_label_get_the_same() -> None:
    for _ in range(50):
        alloc = Allocation.on_host(np.zeros(2), "C", host_memory="pageable")
        labels: list[str] = [""] * 8

        def worker(k: int, alloc: Allocation = alloc, labels: list[str] = labels) -> None:
            labels[k] = alloc.label

        run_in_threads(worker, 8)
        assert len(set(labels)) == 1


def test_exports_and_hand_outs_of_results() -> None:
    r = sa.SmartArray(np.arange(6.0)) + 1
    h = np.asarray(r)  # a tracked export: needs the allocation
    assert made(r) and len(r._alloc.host_exports) == 1
    np.testing.assert_array_equal(h, np.arange(6.0) + 1)
    del h
    s = sa.SmartArray(np.arange(6.0)) * 2
    host = s.get("host")
    host[0] = 42.0
    s.mark_changed("host")
    assert s[0] == 42.0
    t = pickle.loads(pickle.dumps(sa.SmartArray(np.arange(3.0)) + 1))
    np.testing.assert_array_equal(t, [1.0, 2.0, 3.0])
    u = sa.SmartArray(np.arange(4.0)) - 1
    assert memoryview(np.asarray(u)).tolist() == [-1.0, 0.0, 1.0, 2.0]


def test_writes_to_results() -> None:
    r = sa.SmartArray(np.zeros(5)) + 1
    r[2] = 7.0  # (the general path makes the allocation, then the write is fast)
    r += 1
    r[0:2] = 3.0
    np.testing.assert_array_equal(r, [3.0, 3.0, 8.0, 2.0, 2.0])
    q = sa.SmartArray(np.zeros(3)) + 1
    q += 1  # an in-place operator makes the allocation first
    assert made(q)
    np.testing.assert_array_equal(q, [2.0, 2.0, 2.0])


def test_a_copy_of_an_ndarray_is_a_copy() -> None:
    nd = np.arange(6.0)
    a = sa.SmartArray(nd)
    nd[0] = 99.0
    assert a[0] == 0.0
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    b = sa.SmartArray(f)
    assert b.flags.f_contiguous and not b.flags.c_contiguous
    np.testing.assert_array_equal(b, f)
    t = np.arange(24.0).reshape(2, 3, 4).transpose(1, 0, 2)  # neither C nor F: made C
    np.testing.assert_array_equal(sa.SmartArray(t), t)


def test_a_ufunc_of_a_transposed_3d_array() -> None:
    # A result numpy lays out in the operand's memory order, neither C- nor F-contiguous, was
    # an AssertionError ("_own needs a contiguous ndarray") on the fast path.
    base = np.arange(24.0).reshape(2, 3, 4)
    x = sa.SmartArray(base).transpose(1, 0, 2)
    np.testing.assert_array_equal(np.sin(x), np.sin(base.transpose(1, 0, 2)))
    np.testing.assert_array_equal(x + 1, base.transpose(1, 0, 2) + 1)


def test_njit_on_results() -> None:
    from numba import njit

    @njit
    def total(a):  # type: ignore[no-untyped-def]
        s = 0.0
        for v in a:
            s += v
        return s

    @njit
    def double(a):  # type: ignore[no-untyped-def]
        for i in range(a.size):
            a[i] *= 2

    r = sa.SmartArray(np.arange(4.0)) + 1
    assert total(r) == 10.0
    double(r)
    np.testing.assert_array_equal(r, [2.0, 4.0, 6.0, 8.0])


@pytest.mark.device
def test_first_device_use_of_a_result_copies_exactly_once() -> None:
    x = sa.SmartArray(np.arange(64.0))
    r = x + 1
    assert not made(r)
    with sa.track_transfers() as t:
        inc[1, 64](r)  # uploads r once, marks it changed on the device
        assert counts(t) == (1, 0) and t.h2d_bytes == r.nbytes
        assert r.location == "gpu"
        np.testing.assert_array_equal(r, np.arange(64.0) + 2)  # one download
        assert counts(t) == (1, 1)
        assert [rec.array for rec in t.records] == [r.label, r.label]
    with sa.track_transfers() as t:
        r[3] = 0.0  # host write: only its bytes stale on the device
        inc[1, 64](r)  # 8 bytes up
        assert counts(t) == (1, 0) and t.h2d_bytes == 8
    expected = np.arange(64.0) + 3
    expected[3] = 1.0
    np.testing.assert_array_equal(r, expected)


@pytest.mark.device
def test_a_copy_made_on_the_device_after_threads_race_to_make_its_allocation() -> None:
    r = sa.SmartArray(np.arange(16.0)) * 1
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            r.to_gpu()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with sa.track_transfers() as t:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors and counts(t) == (1, 0) and r.location == "both"


def test_a_light_allocation_has_every_attribute_a_full_one_has() -> None:
    # Allocation.on_host skips __init__: every attribute __init__ sets must be set there or
    # be a class default (an attribute added to __init__ alone breaks light allocations).
    full = Allocation((4,), np.dtype(np.float64), "C", host=np.zeros(4), device=None,
                      state=State.HOST, host_memory="pageable")  # fmt: skip
    light = Allocation.on_host(np.zeros(4), "C", host_memory="pageable")
    missing = [name for name in vars(full) if not hasattr(light, name)]
    assert not missing, missing
    for name in vars(light):  # (the containers updated in place are its own)
        value = getattr(light, name)
        if isinstance(value, (list, dict)):
            assert value is not getattr(Allocation, name, None), name


# Set by every constructor, with no class-level default (CPython 3.12 specialises no read of
# an instance attribute that a class attribute shadows): the slots of SmartArray's first base
# (smartarray._array.FIELDS) but ``_own_host``, which only the arrays made without an
# allocation have.
_PER_INSTANCE = tuple(name for name in sa_array.FIELDS if name != "_own_host")


def _class_default(cls: type, name: str) -> bool:
    """Whether ``cls`` gives instances a value for ``name`` (a slot's descriptor does not)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return not isinstance(vars(klass)[name], types.MemberDescriptorType)
    return False


def test_every_constructor_sets_the_attributes_that_have_no_class_default() -> None:
    # (a slot of SmartArray's first base is no default: unset, it is missing)
    assert len(_PER_INSTANCE) == 11
    assert not [name for name in _PER_INSTANCE if _class_default(sa.SmartArray, name)]
    assert not hasattr(Allocation, "_host_token")
    # (and any attribute the class body declares with no value, but the light arrays'
    # ``_own_host``: each constructor must set it too)
    declared = {
        name for name in sa.SmartArray.__annotations__ if not _class_default(sa.SmartArray, name)
    }
    every = (declared - {"_own_host"}) | set(_PER_INSTANCE)
    x = sa.SmartArray(np.arange(8.0))
    m = sa.SmartArray(np.arange(8.0).reshape(2, 4), label="m")
    arrays = {
        "SmartArray(ndarray)": x,
        "with a label": m,
        "a result": x + x,
        "a slice": x[1:5],
        "a slice of a result": (x * 2)[2:],
        "a strided slice": x[::2],
        "a row": m[1],
        "a transpose": m.T,
        "a reshape": x.reshape(2, 4),
        "zeros": sa.zeros(4),
        "a pickled copy": pickle.loads(pickle.dumps(x[2:6])),
        "a field": sa.SmartArray(np.zeros(3, dtype=[("a", "f8"), ("b", "i4")]))["b"],
    }
    for what, array in arrays.items():
        missing = sorted(name for name in every if not hasattr(array, name))
        assert not missing, (what, missing)
        assert array._alloc_if_made is not None or array._own_host is not None, what
        assert array._alloc._host_token is None or array._alloc.state is State.HOST, what


def test_an_object_never_initialised_says_so() -> None:
    class NeverInitialised(sa.SmartArray):  # type: ignore[type-arg]
        def __init__(self) -> None:
            pass

    with pytest.raises(AttributeError, match="not initialised"):
        getattr(NeverInitialised(), "_alloc")  # noqa: B009
