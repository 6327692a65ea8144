"""Explicit signatures (issue #11, item 5): ``@njit("float64(float64[:])")`` takes SmartArrays.

The first SmartArray call compiles the SmartArray twin of each explicit signature that accepts
the argument; later calls reuse it. Tests marked ``device`` check the validity flags and the
ledger with a device copy (tiers 2 and 3).
"""

from __future__ import annotations

import threading
from typing import Any

import numba
import numpy as np
import pytest
from helpers import inc, run_in_threads
from numba import cuda, njit, types

import smartarray
from smartarray import In, SmartArray, SmartArrayType
from smartarray._numba.signatures import twin_signature

READONLY_1D = types.Array(types.float64, 1, "A", readonly=True)


def outcome(func: Any, *args: Any) -> Any:
    """``func(*args)``, or the exception it raised."""
    try:
        return func(*args)
    except Exception as exc:
        return exc


def compilations(dispatcher: Any) -> int:
    """How many signatures ``dispatcher`` compiled (or loaded from its cache) so far."""
    stats = dispatcher.stats
    return sum(stats.cache_misses.values()) + sum(stats.cache_hits.values())


def arange(n: int = 6, dtype: Any = np.float64) -> SmartArray:
    return smartarray.asarray(np.arange(n, dtype=dtype))


@njit("float64(float64[:])")
def total(a: Any) -> float:
    return a.sum()


@njit(["float64[:](float64[::1])", "float64[:](float64[:])"])
def head(a: Any) -> Any:
    return a[:2]


@numba.jit("void(float64[:,:], float64)", nopython=True)
def set_corner(m: Any, value: float) -> None:
    m[0, 0] = value


@njit(numba.float64(READONLY_1D))
def total_readonly(a: Any) -> float:
    return a.sum()


@njit("float64(UniTuple(float64[:], 2))")
def pair_total(pair: Any) -> float:
    return pair[0].sum() + pair[1].sum()


@njit("float64[::1](float64[::1])", parallel=True)
def doubled(a: Any) -> Any:
    out = np.empty_like(a)
    for i in numba.prange(a.shape[0]):
        out[i] = 2.0 * a[i]
    return out


@njit
def calls_head(a: Any) -> Any:
    return head(a)


# --- results equal to ndarray calls ---------------------------------------------------------


def test_plain_signature_accepts_smartarrays_like_ndarrays() -> None:
    a = arange()
    assert total(a) == total(np.arange(6.0)) == 15.0
    assert total(a[::2]) == total(np.arange(6.0)[::2]) == 6.0  # strided view, layout 'A'
    assert set(total.signatures) == {
        (types.Array(types.float64, 1, "A"),),
        (SmartArrayType(types.float64, 1, "A"),),
    }


def test_twin_compiled_once_then_reused() -> None:
    @njit(["int64(int64[:])", "int64(int64[:, :])"])
    def first(a: Any) -> int:
        return a.ravel()[0]

    before = compilations(first)
    assert first(arange(4, np.int64)) == 0
    assert compilations(first) == before + 1  # only the 1-d twin
    for _ in range(3):
        assert first(arange(4, np.int64)[1:]) == 1
        assert first(np.arange(4)) == 0
    assert compilations(first) == before + 1
    assert first(smartarray.asarray(np.ones((2, 2), dtype=np.int64))) == 1
    assert compilations(first) == before + 2  # the 2-d twin, on its first use


def test_returned_arrays_come_back_as_smartarrays() -> None:
    a = arange()
    r = head(a)  # the 'C' twin: exact match for a contiguous array
    assert isinstance(r, SmartArray) and r.base is a
    np.testing.assert_array_equal(r.get("host"), head(np.arange(6.0)))
    v = a[::2]
    r = head(v)  # the 'A' twin
    assert isinstance(r, SmartArray)
    np.testing.assert_array_equal(r.get("host"), [0.0, 2.0])
    r[0] = 9.0  # a view of a: the write goes through the SmartArray API
    assert a[0] == 9.0
    assert SmartArrayType(types.float64, 1, "C") in {sig[0] for sig in head.signatures}


def test_two_dimensional_writes_and_scalar_conversion() -> None:
    m = smartarray.zeros((2, 3))
    set_corner(m, 3)  # int -> float64 converts as for ndarrays
    expected = np.zeros((2, 3))
    set_corner(expected, 3)
    np.testing.assert_array_equal(m.get("host"), expected)
    set_corner(m.T, 4.0)  # transposed view: layout 'A'
    assert m[0, 0] == 4.0


def test_readonly_signature_takes_smartarrays_and_intents() -> None:
    a = arange()
    assert total_readonly(a) == total_readonly(In(a)) == total_readonly(a.readonly()) == 15.0
    assert (SmartArrayType(types.float64, 1, "A", readonly=True),) in total_readonly.signatures


def test_tuples_of_smartarrays() -> None:
    a = arange()
    assert pair_total((a, a[1:])) == pair_total((np.arange(6.0), np.arange(1.0, 6.0))) == 30.0


def test_parallel_signature() -> None:
    a = arange(8)
    r = doubled(a)
    assert isinstance(r, SmartArray)
    np.testing.assert_array_equal(r.get("host"), doubled(np.arange(8.0)))


def test_ndarrays_keep_the_plain_signature() -> None:
    a = arange()
    total(a)  # the twin exists now
    x = np.arange(6.0)
    assert total(x) == 15.0
    assert total.overloads[(types.Array(types.float64, 1, "A"),)] is not None
    assert twin_signature(total.typingctx, (numba.typeof(x),), total.nopython_signatures[0]) is None


def test_return_type_holding_arrays_in_a_list() -> None:
    # An args-only signature: Numba infers list(array(int64, 1d, C)) for ndarrays, which a
    # SmartArray twin cannot return; the twin's return type is inferred instead.
    rows = njit((types.int64[:, ::1],))(lambda m: list(iter(m)))
    data = np.arange(6).reshape(2, 3)
    got = rows(smartarray.asarray(data))
    assert all(isinstance(row, SmartArray) for row in got)
    np.testing.assert_array_equal([row.get("host") for row in got], rows(data))


# --- jit-to-jit calls ------------------------------------------------------------------------


def test_jit_to_jit_call_uses_the_twin() -> None:
    a = arange()
    r = calls_head(a)
    assert isinstance(r, SmartArray) and r.base is a  # not a bare ndarray over a's host buffer
    np.testing.assert_array_equal(r.get("host"), [0.0, 1.0])
    r2 = calls_head(np.arange(6.0))
    assert type(r2) is np.ndarray


# --- threads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("from_jit", [False, True])
def test_twin_compilation_leaves_other_threads_frozen(
    monkeypatch: pytest.MonkeyPatch, from_jit: bool
) -> None:
    # Thread 0 compiles the twin, paused inside the compilation; meanwhile threads 1 and 2
    # call the same function with plain arguments and must see it exactly as frozen as it is
    # without smartarray: normal dispatch with a scalar conversion, a TypeError for an array
    # type no signature takes (not "compilation disabled", not a new specialisation).
    @njit("float64(float64[:], float64)")
    def weighted(a: Any, w: float) -> float:
        return a.sum() * w

    @njit
    def calls_weighted(a: Any, w: float) -> float:
        return weighted(a, w)

    in_compilation, others_done = threading.Event(), threading.Event()
    lock, finished = threading.Lock(), []
    compile_overload = weighted._compiler.compile

    def paused(*args: Any, **kws: Any) -> Any:
        in_compilation.set()
        # Bounded: where the other threads cannot finish before this compilation does (they
        # wait for the compiler lock held here), the test fails instead of hanging.
        others_done.wait(timeout=5)
        return compile_overload(*args, **kws)

    monkeypatch.setattr(weighted._compiler, "compile", paused)
    declared = set(weighted.signatures)
    calls = {
        "conversion": (np.ones(3), 2),  # the int 2 converts to float64
        "wrong type": (np.arange(3), 1.0),  # int64 array: no signature takes it
    }
    seen: dict[str, Any] = {}

    def worker(k: int) -> None:
        if k == 0:
            seen["twin"] = (calls_weighted if from_jit else weighted)(arange(4), 2.0)
            return
        name = list(calls)[k - 1]
        try:
            assert in_compilation.wait(timeout=60)
            seen[name + " can compile"] = weighted._can_compile
            seen[name] = outcome(weighted, *calls[name])
        finally:
            with lock:
                finished.append(k)
                if len(finished) == len(calls):
                    others_done.set()

    run_in_threads(worker, 1 + len(calls))
    assert seen["twin"] == 12.0
    assert seen["conversion"] == 6.0
    assert type(seen["wrong type"]) is TypeError
    assert "No matching definition" in str(seen["wrong type"])
    assert seen["conversion can compile"] is seen["wrong type can compile"] is False
    twin = (smartarray.numba_type(np.float64, 1), types.float64)
    assert set(weighted.signatures) == {*declared, twin}  # nothing for the int64 array
    assert weighted._can_compile is False


# --- no twin: the clear error ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "func"),
    [
        (lambda: arange(4, np.int32), total),  # another dtype
        (lambda: smartarray.zeros((2, 2)), total),  # another number of dimensions
        (lambda: In(arange()), total),  # read-only into a writable signature
        (lambda: arange()[::2], doubled),  # strided into a 'C' signature
    ],
)
def test_no_matching_signature_gives_a_clear_error(make: Any, func: Any) -> None:
    arg = make()
    array = arg.array if isinstance(arg, In) else arg
    before = array.get("host").copy()
    # 'host' for arrays made from data; 'both' for zeros (made where first used: no copy).
    location = array.location
    assert location == (
        "both" if isinstance(arg, smartarray.SmartArray) and arg.ndim == 2 else "host"
    )
    signatures = list(func.signatures)
    with pytest.raises(TypeError, match=r"No matching definition .*SmartArray.*explicit signat"):
        func(arg)
    np.testing.assert_array_equal(array.get("host"), before)
    assert array.location == location
    assert list(func.signatures) == signatures  # nothing compiled


def test_twin_signature_rules() -> None:
    sig = numba.float64(types.Array(types.float64, 1, "C"), types.float64)
    ctx = total.typingctx
    smart_c = SmartArrayType(types.float64, 1, "C")
    smart_a = SmartArrayType(types.float64, 1, "A")
    twin = twin_signature(ctx, (smart_c, types.int64), sig)
    assert twin.args == (smart_c, types.float64) and twin.return_type == types.float64
    assert twin_signature(ctx, (smart_a, types.int64), sig) is None  # layout 'A' into 'C'
    assert twin_signature(ctx, (smart_c,), sig) is None  # wrong arity
    array_sig = types.Array(types.float64, 1, "A")(types.Array(types.float64, 1, "A"))
    assert twin_signature(ctx, (smart_c,), array_sig).return_type == smart_a


# --- coherence with a device copy (simulator or GPU) -----------------------------------------


@pytest.mark.device
def test_writing_signature_invalidates_the_device_copy() -> None:
    m = smartarray.zeros((2, 3)).to_gpu()
    with smartarray.track_transfers() as t:
        set_corner(m, 5.0)
        assert m.location == "host"
        set_corner(m, 6.0)  # the same twin: no compile, no copy
    assert (t.h2d_count, t.d2h_count) == (0, 0)
    a = smartarray.zeros(16)
    with smartarray.track_transfers() as t:
        inc[1, 32](a)  # no copy: zeros are made and filled on the device where first used
        # D2H; a writable signature, but total() provably never writes its argument
        # (inferred intents, docs/intents.md): the device copy stays current
        assert total(a) == 16.0
        assert a.location == "both"
        inc[1, 32](a)  # no upload
    assert (t.h2d_count, t.d2h_count) == (0, 1)


@pytest.mark.device
def test_readonly_signature_keeps_the_device_copy() -> None:
    a = smartarray.zeros(16)
    inc[1, 32](a)
    with smartarray.track_transfers() as t:
        assert total_readonly(a) == 16.0  # D2H once
        assert total_readonly(a) == 16.0
        assert a.location == "both"
        inc[1, 32](a)  # the device copy is still current: no upload
    assert (t.h2d_count, t.d2h_count) == (0, 1)


@pytest.mark.device
def test_kernel_with_explicit_signature() -> None:
    @cuda.jit("void(float64[:])")
    def add_one(a: Any) -> None:
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1.0

    a = smartarray.zeros(8)
    with smartarray.track_transfers() as t:
        add_one[1, 8](a)
        add_one[1, 8](a)
        np.testing.assert_array_equal(a.get("host"), np.full(8, 2.0))
    assert (t.h2d_count, t.d2h_count) == (0, 1)  # (zeros are made on the device: no upload)
