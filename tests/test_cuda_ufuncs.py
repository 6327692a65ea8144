"""CUDA ufuncs over SmartArrays: smartarray.cuda_ufunc, the dispatch hooks, the decorators.

A stand-in with the CUDA ufunc calling convention (device arrays in, ``out=``/``stream=``
keywords, a device array out) drives the wrapper; numba-cuda's own dispatchers around
hand-written kernels drive the hooks; and ``@vectorize``/``@guvectorize(target='cuda')``
themselves are built and called at the end (in the simulator too: issue 24). The real
ufuncs are exercised on hardware in tests/test_gpu.py as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from helpers import (
    copies,
    numba_add_ufunc,
    numba_double_and_triple_rows_gufunc,
    numba_double_rows_gufunc,
    numba_ufunc_support,
    vectorized_add,
)
from numba import cuda

import smartarray as sa

pytestmark = pytest.mark.device

N = 8


class FakeCudaUfunc:
    """Calls like numba's CUDAUFuncDispatcher, but runs a simulator kernel."""

    __name__ = "fake_add"

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, a: Any, b: Any, out: Any = None, stream: Any = 0) -> Any:
        for arg in (a, b):
            assert not isinstance(arg, (sa.SmartArray, np.ndarray)), "expected device arrays"
        self.calls.append((a, b, out))
        if out is None:
            out = cuda.device_array(a.shape, dtype=a.dtype)
        vectorized_add[1, N](a, b, out)
        return out


class FakeCudaGufunc(FakeCudaUfunc):
    engine = SimpleNamespace(nin=2, nout=1)

    def __call__(self, a: Any, b: Any, out: Any = None, stream: Any = 0) -> Any:
        return super().__call__(a, b, out, stream)


def test_inputs_stay_valid_and_result_is_a_device_smartarray() -> None:
    add = sa.cuda_ufunc(FakeCudaUfunc())
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    with sa.track_transfers() as t:
        z = add(x, y)
    assert (t.h2d_count, t.d2h_count) == (2, 0)
    assert isinstance(z, sa.SmartArray) and z.location == "gpu"
    assert x.location == "both" and y.location == "both"
    with sa.track_transfers() as t:
        z2 = add(z, sa.In(x))
    assert t.count == 0
    np.testing.assert_array_equal(np.asarray(z2), 2 * np.arange(N) + 1)


def test_out_is_written_in_place_on_the_device() -> None:
    add = sa.cuda_ufunc(FakeCudaUfunc())
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    out = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        returned = add(x, x, out=out)
    assert returned is out
    assert (t.h2d_count, t.d2h_count) == (1, 0)  # out is overwritten: never uploaded
    assert out.location == "gpu"
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(N))


def test_gufunc_positional_output() -> None:
    gufunc = sa.cuda_ufunc(FakeCudaGufunc())
    assert gufunc.nin == 2
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    out = sa.zeros(N, where="gpu")
    assert gufunc(x, x, out) is out
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(N))
    with pytest.raises(ValueError, match="both positional and keyword"):  # as numba-cuda
        gufunc(x, x, out, out=out)


def test_plain_device_arrays_pass_through() -> None:
    add = sa.cuda_ufunc(FakeCudaUfunc())
    d = cuda.to_device(np.ones(N))
    result = add(d, d)
    assert not isinstance(result, sa.SmartArray)
    np.testing.assert_array_equal(result.copy_to_host(), np.full(N, 2.0))


def test_intent_misuse_is_refused() -> None:
    add = sa.cuda_ufunc(FakeCudaUfunc())
    x = sa.SmartArray(np.ones(N))
    with pytest.raises(TypeError, match="Out"):
        add(sa.Out(x), x)
    with pytest.raises(TypeError, match="In"):
        add(x, x, out=sa.In(x))
    assert x.location == "host"


def test_failing_ufunc_leaves_output_host_authoritative() -> None:
    def broken(a: Any, b: Any, out: Any = None, stream: Any = 0) -> Any:
        out[0] = 123.0  # a partial write, then a failure
        raise RuntimeError("launch failed")

    wrapped = sa.cuda_ufunc(broken)
    x = sa.SmartArray(np.ones(N))
    out = sa.SmartArray(np.zeros(N))
    out.get("gpu")
    with pytest.raises(RuntimeError, match="launch failed"):
        wrapped(x, x, out=out)
    assert out.location == "host"
    np.testing.assert_array_equal(np.asarray(out), np.zeros(N))


def test_non_c_contiguous_multidimensional_arguments_are_refused_before_copying() -> None:
    add = sa.cuda_ufunc(FakeCudaUfunc())
    f = sa.SmartArray(np.asfortranarray(np.ones((2, 4))))
    c = sa.SmartArray(np.ones((2, 4)))
    with sa.track_transfers() as t, pytest.raises(ValueError, match="C-contiguous"):
        add(c, c, out=f)
    with pytest.raises(ValueError, match="C-contiguous"):
        add(c.T, c.T)
    assert t.count == 0 and f.location == "host" and c.location == "host"


# --- plain numba-cuda ufunc objects (no wrapper) ---------------------------------------
#
# numba-cuda's own CUDAUFuncDispatcher and CUDAGeneralizedUFunc (tests/helpers.py), built
# around hand-written kernels shaped like the ones @vectorize/@guvectorize generate. The
# dispatch code under test is numba-cuda's; on a GPU these tests run unchanged on hardware.


@pytest.fixture
def numba_add() -> Iterator[Any]:
    with numba_ufunc_support():
        yield numba_add_ufunc()


@pytest.fixture
def numba_double_rows() -> Iterator[Any]:
    with numba_ufunc_support():
        yield numba_double_rows_gufunc()


def test_hooks_are_installed_once() -> None:
    from numba.cuda.vectorizers import CUDAGeneralizedUFunc, CUDAUFuncDispatcher

    from smartarray._cuda.ufuncs import install_dispatch_hooks

    before = (CUDAUFuncDispatcher.__call__, CUDAUFuncDispatcher.reduce)
    assert install_dispatch_hooks() is True
    assert (CUDAUFuncDispatcher.__call__, CUDAUFuncDispatcher.reduce) == before
    assert getattr(CUDAGeneralizedUFunc.__call__, "__smartarray_hook__", False)


def test_plain_ufunc_returns_a_device_smartarray_and_keeps_inputs_valid(numba_add: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    with sa.track_transfers() as t:
        z = numba_add(x, y)
        z = numba_add(z, x)
    assert (t.h2d_count, t.d2h_count) == (2, 0)
    assert isinstance(z, sa.SmartArray) and z.location == "gpu"
    assert x.location == "both" and y.location == "both"
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(z), 2 * np.arange(N) + 1)
        np.testing.assert_array_equal(np.asarray(x), np.arange(N))
    assert (t.h2d_count, t.d2h_count) == (0, 1)


def test_plain_ufunc_writes_out_in_place(numba_add: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    out = sa.SmartArray(np.full(N, -1.0))
    with sa.track_transfers() as t:
        assert numba_add(x, x, out=out) is out
        assert numba_add(sa.In(out), x, out=sa.Out(out)) is out
    assert (t.h2d_count, t.d2h_count) == (1, 0)  # out is overwritten whole: never uploaded
    assert out.location == "gpu" and x.location == "both"
    np.testing.assert_array_equal(np.asarray(out), 3 * np.arange(N))


def test_plain_ufunc_on_a_view_writes_the_parent(numba_add: Any) -> None:
    parent = sa.SmartArray(np.zeros(2 * N))
    ones = sa.SmartArray(np.ones(N))
    numba_add(ones, ones, out=parent[N:])
    expected = np.r_[np.zeros(N), np.full(N, 2.0)]
    np.testing.assert_array_equal(np.asarray(parent), expected)


def test_plain_ufunc_mixing_a_smartarray_and_an_ndarray(numba_add: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        z = numba_add(x, np.ones(N))  # numba uploads the ndarray itself, as it always does
    assert t.h2d_count == 1 and t.records[0].array == x.label
    assert isinstance(z, sa.SmartArray) and z.location == "gpu"
    np.testing.assert_array_equal(np.asarray(z), np.arange(N) + 1)


def test_plain_ufunc_over_2d_arrays(numba_add: Any) -> None:
    x = sa.SmartArray(np.arange(2 * N, dtype=np.float64).reshape(2, N))
    z = numba_add(x, x)
    assert isinstance(z, sa.SmartArray) and z.shape == (2, N)
    np.testing.assert_array_equal(np.asarray(z), 2 * np.asarray(x))
    with sa.track_transfers() as t, pytest.raises(ValueError, match="C-contiguous"):
        numba_add(x.T, x.T)
    assert t.count == 0


def test_plain_ufunc_without_smartarrays_is_untouched(numba_add: Any) -> None:
    d = cuda.to_device(np.ones(N))
    result = numba_add(d, d)
    assert not isinstance(result, sa.SmartArray)
    np.testing.assert_array_equal(result.copy_to_host(), np.full(N, 2.0))


def test_plain_ufunc_signature_mismatch_loses_nothing(numba_add: Any) -> None:
    ints = sa.SmartArray(np.arange(N, dtype=np.int32))
    out = sa.SmartArray(np.full(N, 5.0))
    with pytest.raises(TypeError, match="No matching version"):
        numba_add(ints, ints, out=out)
    assert out.location == "host"
    np.testing.assert_array_equal(np.asarray(out), np.full(N, 5.0))
    np.testing.assert_array_equal(np.asarray(ints), np.arange(N))


def test_plain_ufunc_reduce_reads_the_device_copy(numba_add: Any) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        assert numba_add.reduce(x) == np.arange(N).sum()
        assert numba_add.reduce(sa.In(x)) == np.arange(N).sum()
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    assert x.location == "both"
    # numba-cuda reduces in place: the SmartArray's device copy must not be what it reduced.
    x.mark_changed("gpu")  # the device copy becomes the only current one: read it back
    np.testing.assert_array_equal(np.asarray(x), np.arange(N))
    with pytest.raises(TypeError, match="only reads"):
        numba_add.reduce(sa.Out(x))
    with pytest.raises(ValueError, match="contiguous 1-d"):
        numba_add.reduce(x.reshape(2, N // 2))
    with pytest.raises(ValueError, match="contiguous 1-d"):
        numba_add.reduce(x[::2])
    with pytest.raises(TypeError, match="empty"):
        numba_add.reduce(x[:0])
    assert numba_add.reduce(cuda.to_device(np.ones(N))) == N  # plain device arrays: untouched


def test_plain_gufunc_result_output_and_positional_output(numba_double_rows: Any) -> None:
    a = sa.SmartArray(np.arange(12, dtype=np.float64).reshape(4, 3))
    with sa.track_transfers() as t:
        doubled = numba_double_rows(a)
        out = sa.empty((4, 3), where="gpu")
        assert numba_double_rows(doubled, out) is out
        assert numba_double_rows(a, out=doubled) is doubled
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    assert isinstance(doubled, sa.SmartArray) and doubled.location == "gpu"
    assert a.location == "both"
    np.testing.assert_array_equal(np.asarray(out), 4 * np.asarray(a))
    np.testing.assert_array_equal(np.asarray(doubled), 2 * np.asarray(a))


def test_plain_gufunc_with_two_outputs(numba_double_rows: Any) -> None:
    gufunc = numba_double_and_triple_rows_gufunc()
    a = sa.SmartArray(np.arange(12, dtype=np.float64).reshape(4, 3))
    twice, thrice = sa.empty((4, 3), where="gpu"), sa.empty((4, 3), where="gpu")
    with numba_ufunc_support():
        assert gufunc(a, out=(twice, thrice)) == (twice, thrice)
        both = sa.SmartArray(np.full((8, 3), -1.0))  # one allocation behind both outputs
        with sa.track_transfers() as t:
            gufunc(a, both[:4], both[4:])
    # Each output overwrites every byte of its half of `both` (issue 21: validity per byte
    # range): nothing of `both` is uploaded; `a` is current on the device already.
    assert copies(t) == [] and both.location == "gpu"
    np.testing.assert_array_equal(np.asarray(twice), 2 * np.asarray(a))
    np.testing.assert_array_equal(np.asarray(thrice), 3 * np.asarray(a))
    np.testing.assert_array_equal(np.asarray(both), np.r_[2 * np.asarray(a), 3 * np.asarray(a)])


def test_plain_ufunc_refuses_broadcasting_through_the_host(numba_add: Any) -> None:
    matrix = sa.SmartArray(np.ones((2, N)))
    row = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t, pytest.raises(ValueError, match="broadcast"):
        numba_add(matrix, row)
    assert t.count == 0 and matrix.location == "host" and row.location == "host"
    full = sa.SmartArray(np.broadcast_to(np.arange(N, dtype=np.float64), (2, N)).copy())
    np.testing.assert_array_equal(np.asarray(numba_add(matrix, full)), 1 + np.asarray(full))


def test_plain_ufunc_reduce_of_one_element(numba_add: Any) -> None:
    one = sa.SmartArray(np.array([5.0]))
    assert numba_add.reduce(one) == 5.0
    one.get("gpu")
    one.mark_changed("gpu")
    assert numba_add.reduce(one) == 5.0


# --- @vectorize / @guvectorize(target='cuda') themselves (issue 24) ---------------------
#
# Built by numba's decorators in every device tier: in the simulator, smartarray supplies what
# numba-cuda's ufunc code lacks there (smartarray._cuda.simulator_ufuncs).


def _vectorized_add() -> Any:
    from numba import vectorize

    @vectorize(["float64(float64, float64)", "float32(float32, float32)"], target="cuda")
    def add(a, b):  # type: ignore[no-untyped-def]
        return a + b

    return add


def test_vectorize_builds_and_runs_with_smartarrays() -> None:
    add = _vectorized_add()
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    out = sa.empty(N, where="gpu")
    with sa.track_transfers() as t:
        z = add(x, y)  # x and y go up once; z is a new SmartArray on the device
        add(z, y, out=out)  # nothing copied
        total = add.reduce(out)  # reads a device-side copy of out
    assert (t.h2d_count, t.d2h_count) == (2, 0)
    assert isinstance(z, sa.SmartArray) and z.location == "gpu" and out.location == "gpu"
    assert x.location == "both" and y.location == "both"
    np.testing.assert_array_equal(np.asarray(out), np.arange(N) + 2.0)
    assert total == (np.arange(N) + 2.0).sum()
    # Plain numpy and Numba device arrays: numba-cuda's own behaviour, untouched.
    f32 = np.arange(N, dtype=np.float32)
    assert add(f32, f32).dtype == np.float32
    np.testing.assert_array_equal(add(f32, f32), 2 * f32)
    np.testing.assert_array_equal(add(np.ones((2, N)), 1.0), np.full((2, N), 2.0))
    d = cuda.to_device(np.arange(N, dtype=np.float64))
    np.testing.assert_array_equal(add(d, d).copy_to_host(), 2 * np.arange(N))
    np.testing.assert_array_equal(add(d, cuda.to_device(np.ones(1))).copy_to_host(), d + 1)


def test_vectorize_signature_without_return_type() -> None:
    from numba import vectorize

    @vectorize(["(float64, float64)"], target="cuda")
    def mul(a, b):  # type: ignore[no-untyped-def]
        return a * b

    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    z = mul(x, x)
    assert z.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(z), np.arange(N) ** 2)


@cuda.jit(device=True)
def _twice(a):  # type: ignore[no-untyped-def]
    return 2 * a


@pytest.mark.skipif(sa.tier() != "simulator", reason="the simulator's limitation")
def test_vectorize_in_the_simulator_names_a_return_type_it_cannot_infer() -> None:
    from numba import vectorize

    def twice(a):  # type: ignore[no-untyped-def]
        return _twice(a)  # a CUDA device function: Numba's CPU inference cannot type it

    with pytest.raises(TypeError, match=r"give it in the signature, e\.g\. 'float64\("):
        vectorize(["(float64,)"], target="cuda")(twice)
    add_twice = vectorize(["float64(float64)"], target="cuda")(twice)  # with it: fine
    np.testing.assert_array_equal(np.asarray(add_twice(sa.SmartArray(np.ones(N)))), 2.0)


def test_guvectorize_builds_and_runs_with_smartarrays() -> None:
    from numba import guvectorize

    @guvectorize(["void(float64[:], float64[:])"], "(n)->(n)", target="cuda")
    def double(row, out):  # type: ignore[no-untyped-def]
        for i in range(row.shape[0]):
            out[i] = 2 * row[i]

    a = sa.SmartArray(np.arange(12, dtype=np.float64).reshape(4, 3))
    with sa.track_transfers() as t:
        doubled = double(a)
    assert (t.h2d_count, t.d2h_count) == (1, 0) and doubled.location == "gpu"
    np.testing.assert_array_equal(np.asarray(doubled), 2 * np.asarray(a))
    np.testing.assert_array_equal(double(np.ones(3)), np.full(3, 2.0))  # scalar broadcast


def test_simulator_support_is_installed_in_the_simulator_only() -> None:
    from numba.cuda.vectorizers import CUDAGeneralizedUFunc, CUDAUFuncMechanism, CUDAVectorize

    from smartarray._cuda.simulator_ufuncs import install_simulator_ufuncs

    patched = (
        CUDAVectorize._compile_core,
        CUDAUFuncMechanism.broadcast_device,
        CUDAGeneralizedUFunc._broadcast_scalar_input,
        CUDAGeneralizedUFunc._broadcast_add_axis,
    )
    simulator = sa.tier() == "simulator"
    assert install_simulator_ufuncs() is simulator  # again: idempotent
    assert (
        CUDAVectorize._compile_core,
        CUDAUFuncMechanism.broadcast_device,
        CUDAGeneralizedUFunc._broadcast_scalar_input,
        CUDAGeneralizedUFunc._broadcast_add_axis,
    ) == patched
    marks = [getattr(f, "__smartarray_simulator__", False) for f in patched]
    assert marks == [simulator] * 4
