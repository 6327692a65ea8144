"""Array creation functions, numpy style, each with a ``where=`` argument."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

import numpy as np

from .._array import SmartArray
from .._core import backend as _backend
from .._core.errors import normalize_where
from . import protocols

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from .._array_typing import (
        _AnyShape,
        _ArrayOf,
        _DTypeLike,
        _DTypeT,
        _HasArray,
        _ObjT,
        _ScalarT,
        _ShapeLike,
        _ShapeT,
    )

# The types follow numpy's stubs for its own functions: no dtype gives float64 (a ``*_like``
# function: the prototype's dtype, and shape unless ``shape`` is given), a dtype naming a
# scalar type (``np.int32``, ``np.dtype(np.int32)``) gives that type, any other dtype
# (``'f4'``, ``float``) an array of unknown dtype. ``full`` without a dtype has the fill
# value's type.


@overload
def asarray(
    obj: _ScalarT,
    dtype: None = None,
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray[tuple[()], np.dtype[_ScalarT]]: ...
@overload
def asarray(
    obj: np.ndarray[_ShapeT, _DTypeT],
    dtype: None = None,
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray[_ShapeT, _DTypeT]: ...
@overload
def asarray(
    obj: SmartArray[_ShapeT, _DTypeT],
    dtype: None = None,
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray[_ShapeT, _DTypeT]: ...
@overload
def asarray(  # (any other object is a type variable, as for SmartArray's constructor)
    obj: _ObjT,
    dtype: _DTypeLike[_ScalarT],
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def asarray(
    obj: _ObjT,
    dtype: DTypeLike | None = None,
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def asarray(
    obj: Any,
    dtype: DTypeLike | None = None,
    order: str | None = None,
    where: str = "host",
    *,
    host_memory: str | None = None,
) -> SmartArray[Any, Any]:
    """Convert ``obj`` to a SmartArray: a SmartArray is returned as is, anything else copied.

    A SmartArray of the right dtype (and layout, for ``order='C'``/``'F'``) is returned
    itself, its copy on ``where`` made current. Any other data, ndarrays included, is
    **copied** (as ``cupy.asarray`` copies host data): a SmartArray cannot see writes made
    through a foreign ndarray, so sharing its buffer could leave a device copy silently
    stale. To share an ndarray's memory on purpose, use ``SmartArray(a, copy=False)``, which
    makes ``a`` read-only while the SmartArray lives (see the docs' "Creating arrays").
    """
    side = normalize_where(where)
    if order not in (None, "C", "F", "A", "K"):
        raise ValueError(f"order must be 'C', 'F', 'A' or 'K'; got {order!r}")
    if isinstance(obj, SmartArray):
        flags = obj.flags
        layout_ok = (
            (order == "C" and flags.c_contiguous)
            or (order == "F" and flags.f_contiguous)
            or order not in ("C", "F")
        )
        if (dtype is None or np.dtype(dtype) == obj.dtype) and layout_ok:
            if side == "gpu":
                obj.to_gpu()
            return obj
    return SmartArray(obj, dtype=dtype, order=order, where=side, host_memory=host_memory)


@overload
def empty(
    shape: _ShapeLike,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.float64]]: ...
@overload
def empty(
    shape: _ShapeLike,
    dtype: _DTypeLike[_ScalarT],
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def empty(
    shape: _ShapeLike,
    dtype: DTypeLike,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def empty(
    shape: _ShapeLike,
    dtype: DTypeLike | None = float,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[Any, Any]:
    """A new uninitialised SmartArray.

    Its buffers are made where first used; with ``where='gpu'`` the device buffer is made at
    once (counted by the device memory budget) and the host's when the host first uses the
    array. Nothing is ever copied for the undefined contents.
    """
    return SmartArray(
        shape=shape,
        dtype=dtype,
        order=order,
        where=where,
        host_memory=host_memory,
        stream=stream,
    )


# ``full``'s fill value for ``zeros``/``zeros_like``: all-zero bytes of whatever dtype (numpy
# zeros text as b'' and '', where ``full(..., 0)`` would write b'0' and '0').
_ZERO_BYTES: Any = object()


@overload
def full(
    shape: _ShapeLike,
    fill_value: _ArrayOf[_ScalarT],
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def full(  # type: ignore[overload-overlap]  # (a bool is an int too: numpy's stubs do the same)
    shape: _ShapeLike,
    fill_value: bool,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...
@overload
def full(
    shape: _ShapeLike,
    fill_value: int,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.int_]]: ...
@overload
def full(
    shape: _ShapeLike,
    fill_value: float,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.float64]]: ...
@overload
def full(
    shape: _ShapeLike,
    fill_value: complex,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.complex128]]: ...
@overload
def full(
    shape: _ShapeLike,
    fill_value: Any,
    dtype: _DTypeLike[_ScalarT],
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def full(
    shape: _ShapeLike,
    fill_value: Any,
    dtype: DTypeLike | None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def full(
    shape: _ShapeLike,
    fill_value: Any,
    dtype: DTypeLike | None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[Any, Any]:
    """A new SmartArray filled with ``fill_value``, each side's buffer filled where it is
    made (never copied); with ``where='gpu'`` the device buffer is made and filled at once, and
    the array is current on both sides (a host read fills the host buffer on the host). An
    array ``fill_value`` is written on the host (and uploaded, with ``where='gpu'``)."""
    side = normalize_where(where)
    if fill_value is _ZERO_BYTES:
        dtype = np.dtype(float if dtype is None else dtype)
        value: np.ndarray = np.zeros((), dtype=dtype)  # numpy's zeros: b'' for text, not b'0'
    else:
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        dtype = np.dtype(dtype)
        value = np.asarray(fill_value, dtype=dtype)
    if value.ndim:
        # An array fill_value (broadcast like numpy.full): filled on the host, then uploaded.
        if side == "gpu":
            _backend.require_device()
            _backend.check_device_dtype(dtype)
        array = empty(shape, dtype, order, "host", host_memory=host_memory)
        np.broadcast_to(value, array.shape)  # numpy's ValueError before anything is written
        array[...] = value
        if side == "gpu":
            array.to_gpu(stream)
        return array
    array = empty(shape, dtype, order, where, host_memory=host_memory, stream=stream)
    alloc = array._alloc
    if side == "gpu" and alloc.host_memory != "mapped":
        # Filled on the device now, and on the host when its buffer is made: no copy, both
        # copies current.
        if not alloc.fill_device(value[()], stream):  # (dtypes not made filled: text, records)
            with alloc.lock:  # (allocated again if another thread evicted it meanwhile)
                device = alloc.prepare_device_write(True, stream)
                _backend.device_fill(device, value[()], stream)
                alloc.device_written(stream)
    elif not alloc.set_fill(value[()]):  # (else filled where it is first used: no copy)
        array.fill(value[()])
    return array


@overload
def zeros(
    shape: _ShapeLike,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.float64]]: ...
@overload
def zeros(
    shape: _ShapeLike,
    dtype: _DTypeLike[_ScalarT],
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def zeros(
    shape: _ShapeLike,
    dtype: DTypeLike,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def zeros(
    shape: _ShapeLike,
    dtype: DTypeLike | None = float,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[Any, Any]:
    """A new SmartArray of zeros (its device buffer made and filled at once with
    ``where='gpu'``; see :func:`full`)."""
    return full(shape, _ZERO_BYTES, dtype, order, where, host_memory=host_memory, stream=stream)


@overload
def ones(
    shape: _ShapeLike,
    dtype: None = None,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[np.float64]]: ...
@overload
def ones(
    shape: _ShapeLike,
    dtype: _DTypeLike[_ScalarT],
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def ones(
    shape: _ShapeLike,
    dtype: DTypeLike,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def ones(
    shape: _ShapeLike,
    dtype: DTypeLike | None = float,
    order: str = "C",
    where: str = "host",
    *,
    host_memory: str | None = None,
    stream: Any = None,
) -> SmartArray[Any, Any]:
    """A new SmartArray of ones (its device buffer made and filled at once with
    ``where='gpu'``; see :func:`full`)."""
    if dtype is None:  # numpy's default (full's would be the fill value's: int64)
        dtype = float
    return full(shape, 1, dtype, order, where, host_memory=host_memory, stream=stream)


def _like_args(
    prototype: Any, dtype: Any, order: str, shape: Any, where: str | None
) -> tuple[Any, Any, str, str, list[int] | None]:
    """shape, dtype, order ('C'/'F'), where, and the axes in memory order for order='K'.

    The axes are not None when ``order='K'`` keeps a layout that is neither C nor F (e.g. a
    transposed 3-d prototype): the new array is then laid out in that axis order, as numpy's.
    """
    if isinstance(prototype, SmartArray):
        default_where = "gpu" if prototype._alloc.on_device_side(prototype._span()) else "host"
        flags = prototype.flags
    else:
        prototype = np.asarray(prototype)
        default_where = "host"
        flags = prototype.flags
    axes = None
    if order == "K" and shape is None and not (flags.c_contiguous or flags.f_contiguous):
        strides = prototype.strides
        axes = sorted(range(prototype.ndim), key=lambda i: -abs(strides[i]))
        if axes == list(range(prototype.ndim)):
            axes = None  # plain C order
        elif axes == list(range(prototype.ndim))[::-1]:
            axes, order = None, "F"
    if order in ("K", "A"):
        order = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
    return (
        prototype.shape if shape is None else shape,
        prototype.dtype if dtype is None else dtype,
        order,
        default_where if where is None else where,
        axes,
    )


def _in_axis_order(make: Any, shape: Any, axes: list[int] | None) -> SmartArray[Any, Any]:
    """``make(shape_in_memory_order)`` seen with ``shape``: the axes laid out in ``axes`` order."""
    if axes is None:
        return make(shape)
    base = make(tuple(shape[i] for i in axes))
    view = base.transpose(*np.argsort(axes))
    return SmartArray._view(base._alloc, 0, view.shape, view.strides, view.dtype, True, None)


@overload
def empty_like(
    prototype: _HasArray[_ShapeT, _DTypeT],
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_ShapeT, _DTypeT]: ...
@overload
def empty_like(
    prototype: _HasArray[Any, _DTypeT],
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, _DTypeT]: ...
@overload
def empty_like(
    prototype: Any,
    dtype: _DTypeLike[_ScalarT],
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def empty_like(
    prototype: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def empty_like(
    prototype: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[Any, Any]:
    """A new uninitialised SmartArray shaped like ``prototype``.

    ``where`` defaults to where ``prototype``'s data is current (``'gpu'`` for a device-only
    SmartArray, or one made with no data that only the device used yet, such as
    ``zeros(n, where='gpu')``), so results of kernel chains stay on the device.
    """
    shape, dtype, order, where, axes = _like_args(prototype, dtype, order, shape, where)
    return _in_axis_order(lambda s: empty(s, dtype, order, where), shape, axes)


@overload
def full_like(
    prototype: _HasArray[_ShapeT, _DTypeT],
    fill_value: Any,
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_ShapeT, _DTypeT]: ...
@overload
def full_like(
    prototype: _HasArray[Any, _DTypeT],
    fill_value: Any,
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, _DTypeT]: ...
@overload
def full_like(
    prototype: Any,
    fill_value: Any,
    dtype: _DTypeLike[_ScalarT],
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def full_like(
    prototype: Any,
    fill_value: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def full_like(
    prototype: Any,
    fill_value: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[Any, Any]:
    """A new SmartArray shaped like ``prototype`` filled with ``fill_value``."""
    shape, dtype, order, where, axes = _like_args(prototype, dtype, order, shape, where)
    if np.ndim(fill_value):
        axes = None  # an array fill_value is laid out for the prototype's own axis order
    return _in_axis_order(lambda s: full(s, fill_value, dtype, order, where), shape, axes)


@overload
def zeros_like(
    prototype: _HasArray[_ShapeT, _DTypeT],
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_ShapeT, _DTypeT]: ...
@overload
def zeros_like(
    prototype: _HasArray[Any, _DTypeT],
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, _DTypeT]: ...
@overload
def zeros_like(
    prototype: Any,
    dtype: _DTypeLike[_ScalarT],
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def zeros_like(
    prototype: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def zeros_like(
    prototype: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[Any, Any]:
    """A new SmartArray of zeros shaped like ``prototype``."""
    return full_like(prototype, _ZERO_BYTES, dtype, order, shape=shape, where=where)


@overload
def ones_like(
    prototype: _HasArray[_ShapeT, _DTypeT],
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_ShapeT, _DTypeT]: ...
@overload
def ones_like(
    prototype: _HasArray[Any, _DTypeT],
    dtype: None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, _DTypeT]: ...
@overload
def ones_like(
    prototype: Any,
    dtype: _DTypeLike[_ScalarT],
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[_ScalarT]]: ...
@overload
def ones_like(
    prototype: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
def ones_like(
    prototype: Any,
    dtype: DTypeLike | None = None,
    order: str = "K",
    subok: bool = True,
    shape: _ShapeLike | None = None,
    *,
    where: str | None = None,
    device: Any = None,
) -> SmartArray[Any, Any]:
    """A new SmartArray of ones shaped like ``prototype``."""
    return full_like(prototype, 1, dtype, order, shape=shape, where=where)


# np.empty_like(a), np.zeros_like(a)... with a SmartArray prototype make SmartArrays.
protocols.register_functions(
    {
        np.empty_like: empty_like,
        np.zeros_like: zeros_like,
        np.ones_like: ones_like,
        np.full_like: full_like,
    }
)
