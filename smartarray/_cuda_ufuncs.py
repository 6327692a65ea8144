"""CUDA ufuncs (``@vectorize``/``@guvectorize`` with ``target='cuda'``) over SmartArrays.

Numba's CUDA ufuncs detect device arrays only through ``__cuda_array_interface__``. Passing
SmartArrays to them directly works on a GPU: the interface makes the device copy current and,
since whoever reads it may write, marks the device copy changed (also for inputs). Results come
back as Numba device arrays.

:func:`cuda_ufunc` wraps such a ufunc so that SmartArrays are handled precisely instead:
inputs are made current on the device and stay valid on both sides, outputs (``out=``, or
positional outputs of a gufunc) are written in place on the device and marked changed there,
and a result the ufunc allocates comes back as a device-resident SmartArray.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._array import SmartArray
from ._intents import In, Out, _Intent


def _check_intents(inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> None:
    # Before anything is copied, so a misuse changes nothing.
    if any(isinstance(value, Out) for value in inputs):
        raise TypeError("smartarray.Out() marks an output; pass it as out=, not as an input")
    if any(isinstance(value, In) for value in outputs):
        raise TypeError("smartarray.In() marks a read-only input; it cannot be an output")


def _check_elementwise_layouts(values: tuple[Any, ...]) -> None:
    # numba's CUDA ufuncs ravel multi-dimensional arguments; a non-C-contiguous device array
    # cannot be ravelled in place, so numba would go through the host behind the ledger's
    # back (and, for an output, write a temporary instead of the array itself).
    for value in values:
        array = value.array if isinstance(value, _Intent) else value
        if isinstance(array, SmartArray) and array.ndim > 1 and not array.flags.c_contiguous:
            raise ValueError(
                f"CUDA ufuncs need C-contiguous multi-dimensional arguments; got a "
                f"{array.shape} array with strides {array.strides}: pass a.copy(order='C')"
            )


def _unwrap_input(value: Any, stream: Any, touched: list[SmartArray]) -> Any:
    if isinstance(value, _Intent):
        value = value.array
    if isinstance(value, SmartArray):
        touched.append(value)
        return value._device_view(stream)
    return value


def _unwrap_output(value: Any, stream: Any, written: list[SmartArray]) -> Any:
    if isinstance(value, _Intent):
        value = value.array
    if isinstance(value, SmartArray):
        alloc = value._alloc
        whole = value._covers_allocation()
        device = value._device_view(stream, prepare=lambda s: alloc.prepare_device_write(whole, s))
        alloc.begin_device_write()
        written.append(value)
        return device
    return value


class SmartUFunc:
    """A CUDA ufunc or gufunc that keeps SmartArray arguments on the device.

    Parameters
    ----------
    ufunc
        The object returned by ``numba.vectorize(..., target='cuda')`` or
        ``numba.guvectorize(..., target='cuda')``.
    """

    def __init__(self, ufunc: Callable[..., Any]) -> None:
        self.ufunc = ufunc
        engine = getattr(ufunc, "engine", None)
        # gufuncs take their outputs positionally after nin inputs; ufuncs only via out=.
        self.nin: int | None = engine.nin if engine is not None else None
        self.__name__ = getattr(ufunc, "__name__", type(ufunc).__name__)
        self.__doc__ = getattr(ufunc, "__doc__", None)

    def __call__(self, *args: Any, out: Any = None, stream: Any = 0) -> Any:
        nin = len(args) if self.nin is None else self.nin
        inputs, positional_outputs = args[:nin], args[nin:]
        if positional_outputs and out is not None:
            raise TypeError("pass outputs either positionally or as out=, not both")
        outputs: tuple[Any, ...]
        if positional_outputs:
            outputs = positional_outputs
        elif out is None:
            outputs = ()
        else:
            outputs = out if isinstance(out, tuple) else (out,)
        _check_intents(inputs, outputs)
        if self.nin is None:
            _check_elementwise_layouts((*inputs, *outputs))
        for value in outputs:
            target = value.array if isinstance(value, _Intent) else value
            if isinstance(target, SmartArray):
                target._check_writeable()
        read: list[SmartArray] = []
        written: list[SmartArray] = []
        device_inputs = [_unwrap_input(a, stream, read) for a in inputs]
        device_outputs = [_unwrap_output(o, stream, written) for o in outputs]
        if positional_outputs:
            result = self.ufunc(*device_inputs, *device_outputs, stream=stream)
        elif device_outputs:
            target = device_outputs[0] if len(device_outputs) == 1 else tuple(device_outputs)
            result = self.ufunc(*device_inputs, out=target, stream=stream)
        else:
            result = self.ufunc(*device_inputs, stream=stream)
        for array in written:
            array._alloc.device_written(stream)
        for array in read:
            array._alloc.device_read(stream)
        if outputs:
            given = tuple(o.array if isinstance(o, _Intent) else o for o in outputs)
            return given[0] if len(given) == 1 else given
        if not read:
            return result
        results = tuple(
            SmartArray(r, copy=False) for r in (result if isinstance(result, tuple) else (result,))
        )
        for array in results:  # written on the device by this call, on its stream
            array._alloc.device_written(stream)
        return results if isinstance(result, tuple) else results[0]

    def __repr__(self) -> str:
        return f"smartarray.cuda_ufunc({self.__name__})"


def cuda_ufunc(ufunc: Callable[..., Any]) -> SmartUFunc:
    """Wrap a CUDA ufunc/gufunc so SmartArray arguments and results stay on the device.

    Examples
    --------
    >>> @smartarray.cuda_ufunc                                          # doctest: +SKIP
    ... @numba.vectorize(["float32(float32, float32)"], target="cuda")
    ... def add(a, b):
    ...     return a + b
    >>> z = add(x, y)            # x, y SmartArrays: z is a device-resident SmartArray
    """
    return SmartUFunc(ufunc)
