"""Array creation functions, numpy style, each with a ``where=`` argument."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _backend
from ._array import SmartArray
from ._errors import normalize_where


def asarray(
    obj: Any,
    dtype: Any = None,
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray:
    """Convert ``obj`` to a SmartArray, without copying when possible.

    A SmartArray of the right dtype is returned as is (its copy on ``where`` made current);
    a contiguous ndarray is adopted without a copy; anything else is copied.
    """
    side = normalize_where(where)
    if isinstance(obj, SmartArray) and (dtype is None or np.dtype(dtype) == obj.dtype):
        if side == "gpu":
            obj.to_gpu()
        return obj
    if isinstance(obj, np.ndarray) and host_memory in (None, "pageable"):
        if (dtype is None or np.dtype(dtype) == obj.dtype) and (
            obj.flags.c_contiguous or obj.flags.f_contiguous
        ):
            return SmartArray(obj, copy=False, where=side)
    return SmartArray(obj, dtype=dtype, order=order, where=side, host_memory=host_memory)


def empty(
    shape: Any,
    dtype: Any = float,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray:
    """A new uninitialised SmartArray (on the device only with ``where='gpu'``)."""
    return SmartArray(
        shape=shape,
        dtype=dtype,
        order=order,
        where=where,
        host_memory=host_memory,
        stream=stream,
    )


def full(
    shape: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray:
    """A new SmartArray filled with ``fill_value``; filled on the device with ``where='gpu'``."""
    if dtype is None:
        dtype = np.asarray(fill_value).dtype
    dtype = np.dtype(dtype)
    value = np.asarray(fill_value, dtype=dtype)
    if value.ndim:
        raise ValueError("full() on the device needs a scalar fill_value")
    array = empty(shape, dtype, order, where, host_memory=host_memory, stream=stream)
    alloc = array._alloc
    if normalize_where(where) == "gpu" and alloc.host_memory != "mapped":
        _backend.device_fill(alloc.device, value[()], stream)
        alloc.device_written(stream)
    else:
        array.fill(value[()])
    return array


def zeros(
    shape: Any,
    dtype: Any = float,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray:
    """A new SmartArray of zeros (made on the device with ``where='gpu'``)."""
    return full(shape, 0, dtype, order, where, host_memory=host_memory, stream=stream)


def ones(
    shape: Any,
    dtype: Any = float,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray:
    """A new SmartArray of ones (made on the device with ``where='gpu'``)."""
    return full(shape, 1, dtype, order, where, host_memory=host_memory, stream=stream)


def _like_args(
    prototype: Any, dtype: Any, order: str, shape: Any, where: str | None
) -> tuple[Any, Any, str, str]:
    if isinstance(prototype, SmartArray):
        default_where = "host" if prototype.is_valid("host") else "gpu"
        flags = prototype.flags
    else:
        prototype = np.asarray(prototype)
        default_where = "host"
        flags = prototype.flags
    if order in ("K", "A"):
        order = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    return (
        prototype.shape if shape is None else shape,
        prototype.dtype if dtype is None else dtype,
        order,
        default_where if where is None else where,
    )


def empty_like(
    prototype: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray:
    """A new uninitialised SmartArray shaped like ``prototype``.

    ``where`` defaults to where ``prototype``'s data is current (``'gpu'`` for a device-only
    SmartArray), so results of kernel chains stay on the device.
    """
    shape, dtype, order, where = _like_args(prototype, dtype, order, shape, where)
    return empty(shape, dtype, order, where)


def full_like(
    prototype: Any,
    fill_value: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray:
    """A new SmartArray shaped like ``prototype`` filled with ``fill_value``."""
    shape, dtype, order, where = _like_args(prototype, dtype, order, shape, where)
    return full(shape, fill_value, dtype, order, where)


def zeros_like(
    prototype: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray:
    """A new SmartArray of zeros shaped like ``prototype``."""
    return full_like(prototype, 0, dtype, order, shape=shape, where=where)


def ones_like(
    prototype: Any,
    dtype: Any = None,
    order: str = "K",
    subok: bool = True,
    shape: Any = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray:
    """A new SmartArray of ones shaped like ``prototype``."""
    return full_like(prototype, 1, dtype, order, shape=shape, where=where)
