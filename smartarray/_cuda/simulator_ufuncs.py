"""CUDA ufuncs in Numba's CUDA simulator: ``@vectorize``/``@guvectorize(target='cuda')`` there.

numba-cuda's CUDA ufunc code (``numba.cuda.vectorizers``) runs in the simulator as it is,
except in four places that assume a real device:

- ``CUDAVectorize._compile_core`` reads the device function's return type from its compiled
  overload. The simulator compiles nothing and its overloads carry no signature, so
  ``@vectorize(target='cuda')`` fails at decoration with ``'FakeOverload' object has no
  attribute 'signature'``.
- The call paths ask ``cuda.is_cuda_array``, which the simulator's ``cuda`` module lacks.
- Broadcasting a device argument builds a ``DeviceNDArray`` over the argument's ``gpu_data``
  (``CUDAUFuncMechanism.broadcast_device``; ``CUDAGeneralizedUFunc._broadcast_scalar_input``
  and ``_broadcast_add_axis``), which the simulator's device arrays (``FakeCUDAArray``, views
  of host memory) do not have.

:func:`install_simulator_ufuncs` (run when smartarray is imported) supplies each, in the
simulator tier only; on a GPU and without CUDA it changes nothing. The return type is the
signature's (or, for a signature that gives none, what Numba's CPU type inference finds for
the same function); ``is_cuda_array`` is the simulator's own ``is_cuda_ndarray``; a broadcast
is a ``FakeCUDAArray`` view with the strides numba-cuda gives the ``DeviceNDArray``. The
generated kernels then run as every simulated kernel does, in Python threads, and
SmartArrays go through :mod:`smartarray._cuda.ufuncs` exactly as on a GPU.
"""

from __future__ import annotations

from typing import Any

from numpy.lib.stride_tricks import as_strided

_MARK = "__smartarray_simulator__"


def _return_type(pyfunc: Any, sig: Any) -> Any:
    """The return type of ``pyfunc`` for ``sig``: the signature's, else Numba's CPU inference."""
    if sig.return_type is not None:
        return sig.return_type
    from numba import njit

    try:
        dispatcher = njit(sig.args)(pyfunc)
        return dispatcher.overloads[tuple(sig.args)].signature.return_type
    except Exception as error:
        raise TypeError(
            f"@vectorize(target='cuda') of {pyfunc.__name__!r} for {sig}: Numba's CUDA "
            "simulator compiles nothing, so it cannot infer the return type of this function "
            f"({type(error).__name__}); give it in the signature, e.g. "
            "'float64(float64, float64)'"
        ) from None


def _compile_core(self: Any, sig: Any) -> tuple[Any, Any]:
    """``CUDAVectorize._compile_core`` for the simulator (no compiled overloads)."""
    from numba import cuda

    device_function = cuda.jit(sig, device=True, inline="always")(self.pyfunc)
    return device_function, _return_type(self.pyfunc, sig)


def _strided(ary: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return FakeCUDAArray(as_strided(ary._ary, shape=shape, strides=strides))


def _broadcast_device(self: Any, ary: Any, shape: tuple[int, ...]) -> Any:
    """``CUDAUFuncMechanism.broadcast_device``: numba-cuda's strides, on a simulator array."""
    differs = [ax for ax in range(len(shape)) if ax >= ary.ndim or ary.shape[ax] != shape[ax]]
    strides = [0] * (len(shape) - len(ary.shape)) + list(ary.strides)
    for ax in differs:
        strides[ax] = 0
    return _strided(ary, tuple(shape), tuple(strides))


def _broadcast_scalar_input(self: Any, ary: Any, shape: int) -> Any:
    """``CUDAGeneralizedUFunc._broadcast_scalar_input`` for simulator device arrays."""
    return _strided(ary, (shape,), (0,))


def _broadcast_add_axis(self: Any, ary: Any, newshape: tuple[int, ...]) -> Any:
    """``CUDAGeneralizedUFunc._broadcast_add_axis`` for simulator device arrays."""
    added = len(newshape) - len(ary.shape)
    return _strided(ary, tuple(newshape), (0,) * added + tuple(ary.strides))


def install_simulator_ufuncs() -> bool:
    """In the CUDA simulator, supply what numba-cuda's CUDA ufuncs lack there (idempotent).

    Returns True in the simulator tier (where it installs), False elsewhere (where it
    changes nothing).
    """
    from numba.cuda.core import config

    if not config.ENABLE_CUDASIM:
        return False
    from numba import cuda
    from numba.cuda import vectorizers
    from numba.cuda.simulator.cudadrv.devicearray import is_cuda_ndarray

    if not hasattr(cuda, "is_cuda_array"):
        cuda.is_cuda_array = is_cuda_ndarray
    for cls, name, replacement in (
        (vectorizers.CUDAVectorize, "_compile_core", _compile_core),
        (vectorizers.CUDAUFuncMechanism, "broadcast_device", _broadcast_device),
        (vectorizers.CUDAGeneralizedUFunc, "_broadcast_scalar_input", _broadcast_scalar_input),
        (vectorizers.CUDAGeneralizedUFunc, "_broadcast_add_axis", _broadcast_add_axis),
    ):
        if not getattr(getattr(cls, name), _MARK, False):
            setattr(replacement, _MARK, True)
            setattr(cls, name, replacement)
    return True
