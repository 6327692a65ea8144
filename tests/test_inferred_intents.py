"""Bare SmartArray arguments get the intent the function's own code implies (issue 9).

Kernels, device functions, ``@njit`` functions and CUDA gufuncs, in the device tiers (the
simulator runs numba-cuda's real launch path and, with the test shim of
``helpers.numba_ufunc_support``, its real gufunc dispatch). Ledger counts are exact.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import pytest
from helpers import (
    build_gufunc,
    copies,
    counts,
    gufunc_assign,
    gufunc_multiply,
    inc,
    libc_memset,
    numba_ufunc_support,
)
from numba import cuda

import smartarray as sa
from smartarray._cuda import launch as _launch_intents

pytestmark = pytest.mark.device

N = 16


@cuda.jit
def axpy(a, x, y):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < y.size:
        y[i] += a * x[i]


@cuda.jit
def copy_shifted(src, dst):  # type: ignore[no-untyped-def]  # dst[i] = src[i] (src read-only)
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@cuda.jit
def copy_back(dst, src):  # type: ignore[no-untyped-def]  # the same, parameters swapped
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


# --- a 10-launch chain: bare == hand-annotated ------------------------------------------


def _chain(annotated: bool) -> tuple[list[tuple[str, int]], sa.SmartArray, sa.SmartArray]:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    with sa.track_transfers() as t:
        for _ in range(10):
            if annotated:
                axpy[1, N](2.0, sa.In(x), sa.InOut(y))
            else:
                axpy[1, N](2.0, x, y)
    return [(r.direction, r.nbytes) for r in t.records], x, y


def test_bare_chain_costs_exactly_what_the_annotated_chain_costs() -> None:
    bare, x, y = _chain(annotated=False)
    annotated, _, _ = _chain(annotated=True)
    assert bare == annotated == [("h2d", 8 * N), ("h2d", 8 * N)]
    assert x.location == "both" and y.location == "gpu"
    with sa.track_transfers() as t:
        total = x.sum()  # a host read of a read-only input: no download
        first = x[0]
    assert counts(t) == (0, 0) and total == np.arange(N).sum() and first == 0.0
    with sa.track_transfers() as t:
        result = np.asarray(y)
    assert counts(t) == (0, 1)
    np.testing.assert_array_equal(result, 1 + 20.0 * np.arange(N))


def test_explicit_intents_win() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.zeros(N))
    copy_shifted[1, N](sa.InOut(x), y)  # InOut on a read-only parameter: treated as written
    assert x.location == "gpu"
    z = sa.SmartArray(np.zeros(N))
    copy_shifted[1, N](x, sa.Out(z))
    assert z.location == "gpu"
    np.testing.assert_array_equal(np.asarray(z), np.arange(N))


def test_read_only_argument_is_a_read_only_device_array_in_the_simulator() -> None:
    # In the simulator an inferred In gives a read-only view: a missed write would raise.
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.zeros(N))
    copy_shifted[1, N](x, y)
    assert x.location == "both" and y.location == "gpu"


# --- writes through every alias kind are seen (no stale data) ----------------------------


@cuda.jit(device=True)
def _store_first(a, value):  # type: ignore[no-untyped-def]
    a[0] = value


@cuda.jit
def w_slice(x, y):  # type: ignore[no-untyped-def]
    v = x[1:]
    v[0] = y[0]


@cuda.jit
def w_transpose(x, y):  # type: ignore[no-untyped-def]
    t = x.T
    t[0, 1] = y[0]


@cuda.jit
def w_row(x, y):  # type: ignore[no-untyped-def]
    row = x[1]
    row[0] = y[0]


@cuda.jit
def w_tuple_unpacking(x, y):  # type: ignore[no-untyped-def]
    pair = (y, x)
    source, target = pair
    target[1, 0] = source[0]


@cuda.jit
def w_reassignment_in_a_loop(x, y):  # type: ignore[no-untyped-def]
    target = y[:0]
    for i in range(2):
        if i == 1:
            target = x[1]
    target[0] = y[0]


@cuda.jit
def w_device_function(x, y):  # type: ignore[no-untyped-def]
    _store_first(x[1], y[0])


@cuda.jit
def w_atomic(x, y):  # type: ignore[no-untyped-def]
    cuda.atomic.add(x, (1, 0), y[0])


@pytest.mark.parametrize(
    "kernel",
    [
        w_slice,
        w_transpose,
        w_row,
        w_tuple_unpacking,
        w_reassignment_in_a_loop,
        w_device_function,
        w_atomic,
    ],
    ids=lambda k: k.__name__,
)
def test_writes_through_aliases_are_seen(kernel: Any) -> None:
    x = sa.SmartArray(np.zeros((2, 2)))
    y = sa.SmartArray(np.array([5.0]))
    kernel[1, 1](x, y)
    assert x.location == "gpu"
    # flow-insensitive: ``target`` may also be a view of y, so y counts as written too
    assert y.location == ("gpu" if kernel is w_reassignment_in_a_loop else "both")
    expected = np.zeros((2, 2))
    expected[1, 0] = 5.0
    if kernel is w_slice:  # x[1:][0] is the whole second row
        expected[1, :] = 5.0
    np.testing.assert_array_equal(np.asarray(x), expected)
    np.testing.assert_array_equal(np.asarray(y), [5.0])


# --- one allocation behind several arguments -----------------------------------------------


@pytest.mark.parametrize("order", ["reader first", "writer first"])
def test_shared_allocation_is_written_if_any_argument_may_write(order: str) -> None:
    x = sa.SmartArray(np.arange(N + 1, dtype=np.float64))
    with sa.track_transfers() as t:
        if order == "reader first":
            copy_shifted[1, N](x[1:], x[:-1])  # x[i] = x[i + 1]
        else:
            copy_back[1, N](x[:-1], x[1:])
    # Each argument uploads only its own bytes not uploaded yet (issue 21): the first one
    # its view, the second the one element of x the first did not cover; no byte twice.
    nbytes = 8 * N
    assert copies(t) == (
        [("h2d", 8, nbytes), ("h2d", 0, 8)]
        if order == "reader first"
        else [("h2d", 0, nbytes), ("h2d", nbytes, 8)]
    )
    assert x.location == "gpu"
    result = np.asarray(x)
    assert result[-1] == N and result[0] in (1.0, 2.0)  # (the simulator's thread order)


def test_same_array_read_and_written_through_an_intent() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    copy_shifted[1, N](x, sa.InOut(x))  # bare x (read-only param), allocation written
    assert x.location == "gpu"
    assert _launch_intents.readonly_allocations((False, True), True, (x, sa.InOut(x))) == ([])


def test_plans_for_tuples_and_bare_arrays() -> None:
    x = sa.SmartArray(np.zeros(2))
    y = sa.SmartArray(np.zeros(2))
    plan = _launch_intents.readonly_allocations((False, True), True, (x, (y,), 1.0))
    assert plan == [x._alloc]  # the extra argument falls into "may write"
    assert _launch_intents.readonly_allocations((True,), True, (x,)) is None
    assert _launch_intents.readonly_allocations((False,), True, (sa.Out(x),)) is None
    assert _launch_intents.readonly_allocations((False,), True, (1.0, np.zeros(2))) is None


def test_analysis_runs_once_per_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    original = _launch_intents._access.analyse

    def counting(func: Any) -> Any:
        calls.append(func)
        return original(func)

    @cuda.jit
    def fresh_kernel(a, b):  # type: ignore[no-untyped-def]
        i = cuda.grid(1)
        if i < b.size:
            b[i] = a[i]

    monkeypatch.setattr(_launch_intents._access, "analyse", counting)
    fresh_kernel[1, 4](np.zeros(4), np.zeros(4))  # no SmartArray: nothing analysed
    assert calls == []
    a, b = sa.SmartArray(np.ones(4)), sa.SmartArray(np.zeros(4))
    for _ in range(3):
        fresh_kernel[1, 4](a, b)
    assert len(calls) == 1
    assert a.location == "both" and b.location == "gpu"


# --- @njit between kernels ----------------------------------------------------------------


@numba.njit
def energy(u):  # type: ignore[no-untyped-def]
    return (u * u).sum()


@numba.njit
def double_in_place(u):  # type: ignore[no-untyped-def]
    u *= 2.0


def test_kernel_njit_reader_kernel_loop_uploads_once() -> None:
    u = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        for _ in range(10):
            inc[1, N](u)
            energy(u)
    # 1 upload for the whole loop; each energy() reads what the kernel wrote (1 download)
    assert counts(t) == (1, 10)
    assert u.location == "both"
    np.testing.assert_array_equal(np.asarray(u), np.full(N, 10.0))


def test_explicit_inout_to_an_njit_reader_still_invalidates() -> None:
    u = sa.SmartArray(np.zeros(N))
    inc[1, N](u)
    with sa.track_transfers() as t:
        energy(sa.InOut(u))  # the caller's word wins over the inference
    assert counts(t) == (0, 1) and u.location == "host"
    energy(u)  # the same compiled overload, bare: read-only
    assert u.location == "host"
    u.to_gpu()
    energy(u)
    assert u.location == "both"


def test_njit_that_writes_still_invalidates() -> None:
    u = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        inc[1, N](u)  # upload
        double_in_place(u)  # download; the device copy is stale now
        inc[1, N](u)  # upload again
    assert counts(t) == (2, 1)
    np.testing.assert_array_equal(np.asarray(u), np.full(N, 3.0))


# --- CUDA gufuncs that read their outputs (real @guvectorize through the shim) ------------


@pytest.fixture
def multiply() -> Any:
    with numba_ufunc_support():
        yield build_gufunc(gufunc_multiply)


@pytest.fixture
def assign() -> Any:
    with numba_ufunc_support():
        yield build_gufunc(gufunc_assign)


@pytest.mark.parametrize(
    "pass_output",
    [
        lambda g, x, y: g(x, out=y),
        lambda g, x, y: g(x, out=sa.InOut(y)),
        lambda g, x, y: g(x, y),
    ],
    ids=["out=y", "out=InOut(y)", "positional"],
)
def test_gufunc_reading_its_output_gets_the_old_values(
    multiply: Any, pass_output: Callable[..., Any]
) -> None:
    x = sa.SmartArray(np.arange(1.0, N + 1))
    y = sa.SmartArray(np.full(N, 3.0))
    with sa.track_transfers() as t:
        assert pass_output(multiply, x, y) is y
    assert counts(t) == (2, 0)  # y's old values are uploaded: the kernel reads them
    np.testing.assert_array_equal(np.asarray(y), 3.0 * np.arange(1.0, N + 1))


def test_gufunc_chain_uploads_once_and_downloads_once(multiply: Any) -> None:
    x = sa.SmartArray(np.arange(1.0, N + 1))
    y = sa.SmartArray(np.full(N, 2.0))
    with sa.track_transfers() as t:
        for _ in range(4):
            multiply(x, out=y)
        result = np.asarray(y)
    assert counts(t) == (2, 1)
    assert x.location == "both"
    np.testing.assert_array_equal(result, 2.0 * np.arange(1.0, N + 1) ** 4)


def test_gufunc_that_only_writes_its_output_skips_the_upload(assign: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.full(N, 3.0))
    with sa.track_transfers() as t:
        assign(x, out=y)
    assert counts(t) == (1, 0)
    np.testing.assert_array_equal(np.asarray(y), np.arange(N))
    z = sa.SmartArray(np.full(N, 3.0))
    with sa.track_transfers() as t:
        assign(x, out=sa.InOut(z))  # InOut: uploaded although the kernel never reads it
    assert counts(t) == (1, 0)


def test_gufunc_out_intent_is_the_callers_promise(assign: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.full(N, 3.0))
    x.to_gpu()
    with sa.track_transfers() as t:
        assign(x, out=sa.Out(y))
    assert counts(t) == (0, 0)
    np.testing.assert_array_equal(np.asarray(y), np.arange(N))


def test_gufunc_mixed_with_a_numba_device_array_returns_a_device_array(multiply: Any) -> None:
    from helpers import numba_add_ufunc

    with numba_ufunc_support():
        add = numba_add_ufunc()
        x = sa.SmartArray(np.arange(N, dtype=np.float64))
        d = cuda.to_device(np.ones(N))
        result = add(x, d)
        assert not isinstance(result, sa.SmartArray)
        np.testing.assert_array_equal(result.copy_to_host(), np.arange(N) + 1.0)
        only_smart = add(x, x)
        assert isinstance(only_smart, sa.SmartArray)


def test_explain_intents_of_kernels_and_gufuncs(multiply: Any, assign: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.zeros(N))
    report = sa.explain_intents(axpy, 2.0, x, y)
    assert report.kind == "kernel" and report.intents() == ("-", "In", "InOut")
    assert any("element store" in reason for reason in report.arguments[2].reasons)
    assert sa.explain_intents(axpy, 2.0, sa.InOut(x), y).arguments[1].source == "explicit"
    assert sa.explain_intents(multiply, x, y).intents() == ("In", "InOut")
    assert sa.explain_intents(assign, x, y).intents() == ("In", "Out")
    assert sa.explain_intents(assign, x, sa.InOut(y)).intents() == ("In", "InOut")


@numba.jit(forceobj=True, looplift=True)
def _lifted_reader(u):  # type: ignore[no-untyped-def]
    keep = object()  # object mode for the function; its loop is lifted and compiled
    total = 0.0
    for i in range(u.shape[0]):
        total += u[i]
    return total, keep


def test_loops_lifted_out_of_object_mode_stay_pessimistic() -> None:
    u = sa.SmartArray(np.arange(4.0))
    u.to_gpu()
    assert _lifted_reader(u)[0] == 6.0
    assert u.location == "host"  # the lifted loop's parameters are not analysed


@cuda.jit
def _sum_into(x, out):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        s = 0.0
        for j in range(x.size):
            s += x[j]  # a reduction into a number: reads x, writes nothing of it
        out[0] = s


@pytest.mark.device
def test_a_reduction_kernel_only_reads_its_input() -> None:
    x, out = sa.SmartArray(np.arange(4.0)), sa.zeros(1)
    with sa.track_transfers() as t:
        for _ in range(3):
            _sum_into[1, 1](x, out)
        assert x.location == "both" and out.location == "gpu"
        assert float(np.asarray(x).sum()) == 6.0  # the host copy is still current
        assert out[0] == 6.0
    # x up once (out, made with no data, is filled on the device); out down once.
    assert (t.h2d_count, t.d2h_count) == (1, 1)


# --- writes through the operator module, a positional out, a raw address (issue 24) --------

_MEMSET = libc_memset()


def _jit_inplace(fn: Any) -> Any:
    """``@njit f(a, v)`` that calls ``fn(a, v)`` (an in-place function of ``operator``)."""

    @numba.njit
    def f(a, v):  # type: ignore[no-untyped-def]
        fn(a, v)

    return f


@numba.njit
def _nj_operator_setitem(a, v):  # type: ignore[no-untyped-def]
    operator.setitem(a, 1, v)


@numba.njit
def _nj_clip_into(a, v):  # type: ignore[no-untyped-def]
    np.clip(np.full(a.size, v), 0.0, 2.5, a)


@numba.njit
def _nj_around_into(a, v):  # type: ignore[no-untyped-def]
    np.around(np.full(a.size, v + 0.04), 1, a)


@numba.njit
def _nj_method_clip_into(a, v):  # type: ignore[no-untyped-def]
    a.clip(0, v, a)  # a method of the argument itself, into itself


@numba.njit
def _nj_outer_into(a, v):  # type: ignore[no-untyped-def]
    np.outer(np.full(2, v), np.ones(a.size // 2), a.reshape(2, a.size // 2))


@numba.njit
def _nj_memset(a, v):  # type: ignore[no-untyped-def]
    _MEMSET(a.ctypes.data, 0, a.nbytes)


@numba.njit
def _nj_memset_ctypes(a, v):  # type: ignore[no-untyped-def]
    _MEMSET(a.ctypes, 0, a.nbytes)


def _expected(name: str, values: np.ndarray, v: Any) -> np.ndarray:
    out = values.copy()
    if name == "setitem":
        out[1] = v
    elif name == "clip":
        out[:] = min(v, 2.5)
    elif name == "method_clip":
        out[:] = np.clip(values, 0, v)
    elif name in ("around", "outer"):
        out[:] = round(v + 0.04, 1) if name == "around" else v
    elif name.startswith("memset"):
        out[:] = 0
    else:
        getattr(operator, name)(out, v)
    return out


_FLOAT_INPLACE = ["iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow"]
_INT_INPLACE = ["ilshift", "irshift", "iand", "ior", "ixor"]
_WRITERS = [
    *((name, _jit_inplace(getattr(operator, name)), np.float64) for name in _FLOAT_INPLACE),
    *((name, _jit_inplace(getattr(operator, name)), np.int64) for name in _INT_INPLACE),
    ("iadd", _jit_inplace(operator.__iadd__), np.float64),
    ("setitem", _nj_operator_setitem, np.float64),
    ("clip", _nj_clip_into, np.float64),
    ("around", _nj_around_into, np.float64),
    ("method_clip", _nj_method_clip_into, np.float64),
    ("outer", _nj_outer_into, np.float64),
]
if _MEMSET is not None:
    _WRITERS += [("memset", _nj_memset, np.float64), ("memset_ctypes", _nj_memset_ctypes, np.int64)]


@cuda.jit
def _copy_as_float(src, dst):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@pytest.mark.parametrize(
    "name, writer, dtype", _WRITERS, ids=[f"{w[0]}-{np.dtype(w[2])}" for w in _WRITERS]
)
def test_njit_writes_through_operator_out_and_addresses_invalidate(
    name: str, writer: Any, dtype: Any
) -> None:
    # Current on both sides, then written on the host by @njit code: the device copy must go
    # stale, and a kernel reading the array afterwards must see the host write (one upload).
    start = np.arange(2, 2 + N).astype(dtype)
    v = dtype(3)
    a = sa.SmartArray(start.copy())
    a.get("gpu")
    assert a.location == "both"
    with sa.track_transfers() as t:
        writer(a, v)
    assert counts(t) == (0, 0)
    expected = _expected(name, start, v)
    assert a.location == "host" and not a.is_valid("gpu")
    seen = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        _copy_as_float[1, N](a, sa.Out(seen))
    assert counts(t) == (1, 0)  # a uploaded (it was written); nothing else moves
    np.testing.assert_array_equal(np.asarray(seen), expected.astype(np.float64))
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_njit_write_after_a_kernel_write_is_not_lost() -> None:
    # The device copy is the current one; @njit downloads it, writes the host through
    # operator.setitem: a kernel reading afterwards must get the host write uploaded.
    a = sa.SmartArray(np.zeros(N))
    inc[1, N](a)
    with sa.track_transfers() as t:
        _nj_operator_setitem(a, 7.0)
    assert counts(t) == (0, 1) and a.location == "host"
    inc[1, N](a)
    expected = np.full(N, 2.0)
    expected[1] = 8.0
    np.testing.assert_array_equal(np.asarray(a), expected)


@cuda.jit
def _kernel_operator_setitem(x, y):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        operator.setitem(x, i, y[i] * 2.0)


@cuda.jit
def _kernel_clip_into(x, y):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        np.clip(y, 0.0, 1.0, x)  # (the simulator runs NumPy; a GPU cannot compile this)


@pytest.mark.parametrize("kernel", [_kernel_operator_setitem, _kernel_clip_into])
def test_kernels_writing_through_operator_or_positional_out_are_inout(kernel: Any) -> None:
    if sa.tier() != "simulator" and kernel is _kernel_clip_into:
        pytest.skip("np.clip does not compile for a GPU")
    x = sa.SmartArray(np.full(N, 5.0))
    y = sa.SmartArray(np.linspace(0.0, 1.5, N))
    x.get("gpu")
    assert sa.explain_intents(kernel, x, y).intents() == ("InOut", "In")
    with sa.track_transfers() as t:
        kernel[1, N](x, y)
    assert counts(t) == (1, 0)  # y uploaded; x was current on the device
    assert x.location == "gpu" and y.location == "both"
    expected = y.get("host") * 2.0 if kernel is _kernel_operator_setitem else np.clip(y, 0, 1)
    np.testing.assert_array_equal(np.asarray(x), np.asarray(expected))
