"""smartarray.cuda_ufunc: the state logic, tested with a stand-in for a CUDA ufunc.

Numba's CUDA ufuncs cannot run in the simulator, so here a stand-in with the same calling
convention (device arrays in, ``out=``/``stream=`` keywords, a device array out) drives the
wrapper. The real ufuncs are exercised in tests/test_gpu.py on hardware.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from numba import cuda

import smartarray as sa

pytestmark = pytest.mark.device

N = 8


@cuda.jit
def _add_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


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
        _add_kernel[1, N](a, b, out)
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
    with pytest.raises(TypeError, match="either positionally or as out="):
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
