"""Construction: ``SmartArray(obj, copy, shape, dtype, order, where, ...)``.

``SmartArray.__init__`` (in :mod:`smartarray._array`, with the signature and docstring users
read) hands its arguments to :func:`construct`, registered as ``_hooks.construct``: a new
allocation (:func:`new_allocation`, also used by the creation functions), a view of another
SmartArray, an adopted or copied device array, or an adopted or copied host array (a DLPack
producer is read as one of the last two).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .. import _hooks
from .._array import SmartArray
from .._core import adoption as _adoption
from .._core import backend as _backend
from .._core import host_buffers as _host_buffers
from .._core import host_exports as _host_exports
from .._core.coherence import UNDEFINED, Allocation, State
from .._core.errors import HostMemory, Where, normalize_host_memory, normalize_where
from .._core.layout import (
    _check_new_size,
    _check_order,
    _contiguity,
    _contiguous_strides,
    _normalize_shape,
)


def construct(
    array: SmartArray,
    obj: Any,
    copy: bool,
    shape: int | tuple[int, ...] | None,
    dtype: Any,
    order: str | None,
    where: str,
    host_memory: str | None,
    stream: Any,
    label: str | None,
) -> None:
    """Initialise ``array`` (``SmartArray.__init__``'s arguments, as given)."""
    if (
        type(obj) is np.ndarray
        and copy is True
        and shape is None
        and dtype is None
        and order is None
        and where == "host"
        and host_memory is None
        and _backend.default_host_memory(obj.dtype) == "pageable"
    ):  # SmartArray(ndarray), the common case in fewer steps: what _from_host does for it
        _copy_of_ndarray(array, obj, label)
        return
    where_ = normalize_where(where)
    memory = None if host_memory is None else normalize_host_memory(host_memory)
    if order not in (None, "C", "F", "A", "K"):
        raise ValueError(f"order must be 'C', 'F', 'A' or 'K'; got {order!r}")
    if obj is None:
        if shape is None:
            raise ValueError("SmartArray() needs data (obj=...) or a shape (shape=...) to allocate")
        if order in ("A", "K"):
            raise ValueError("only 'C' or 'F' order is permitted for a new array")
        shape_ = _normalize_shape(shape)
        dtype_ = np.dtype(np.float64 if dtype is None else dtype)
        # numpy's checks at creation, although buffers are made where first used (issue 31)
        nbytes = _check_new_size(shape_, dtype_)
        if where_ == "host" or memory == "mapped":
            _host_buffers.check_host_fits(nbytes, shape_, dtype_)
        alloc = new_allocation(
            shape_,
            dtype_,
            "F" if order == "F" else "C",
            where_,
            memory,
            stream,
            label,
        )
        array._init_view(alloc, 0, alloc.shape, _contiguous_strides(alloc), dtype_)
        return
    if (
        shape is not None
        and np.shape(obj) != tuple(np.atleast_1d(shape))
        and not (isinstance(shape, numbers.Integral) and np.shape(obj) == (shape,))
    ):
        raise ValueError(f"shape={shape!r} does not match the data's shape {np.shape(obj)}")
    if isinstance(obj, SmartArray):
        _from_smartarray(array, obj, copy, dtype, order, where_, stream)
    elif _backend.is_device_array(obj):
        _from_device(array, obj, copy, dtype, label, stream)
    elif (dlpack := _hooks.dlpack_source(obj)) is not None:
        side, source = dlpack  # host memory through np.from_dlpack, or CUDA memory
        if side == "gpu":
            _from_device(array, source, copy, dtype, label, stream)
        else:
            _from_host(array, source, copy, dtype, order, where_, memory, stream, label)
    else:
        _from_host(array, obj, copy, dtype, order, where_, memory, stream, label)


def _copy_of_ndarray(array: SmartArray, obj: np.ndarray, label: str | None) -> None:
    """``SmartArray(obj)`` for an ndarray ``obj`` in pageable memory: a copy, in its own
    layout (``order='K'``), in a light allocation (:meth:`Allocation.on_host`)."""
    host = obj.copy(order="K")
    flags = host.flags
    if flags.c_contiguous:
        layout = "C"
    elif flags.f_contiguous:
        layout = "F"
    else:
        host = np.ascontiguousarray(host)
        layout = "C"
    if label is not None:
        alloc = Allocation.on_host(host, layout, host_memory="pageable", label=label)
        array._init_view(alloc, 0, host.shape, host.strides, host.dtype)
        return
    # No allocation until one is needed (as for a new numpy result: SmartArray._own_host).
    array._own_host = host
    array._offset = 0
    array._shape = host.shape
    array._strides = host.strides
    array._dtype = host.dtype
    array._writeable = True
    array._base = None
    array._alloc_if_made = None
    array._host_ro = array._host_rw = array._host_scalar = array._host_1d = None


def _from_smartarray(
    array: SmartArray,
    obj: SmartArray,
    copy: bool,
    dtype: Any,
    order: str | None,
    where: Where,
    stream: Any,
) -> None:
    if dtype is not None and np.dtype(dtype) != obj.dtype:
        if not copy:
            raise ValueError(
                f"copy=False cannot change dtype {obj.dtype} to {np.dtype(dtype)}; "
                "use copy=True or .astype()"
            )
        source = obj.astype(dtype, order=order or "K")
        base = None
    elif copy:
        source = obj.copy(order or "K")
        base = None
    else:
        _check_order(order, obj.flags)
        source = obj
        base = obj if obj._base is None else obj._base
    array._init_view(
        source._alloc,
        source._offset,
        source._shape,
        source._strides,
        source._dtype,
        source._writeable,
        base,
    )
    if where == "gpu":
        array._device_view(stream)  # (made current, not handed out)


def _from_device(
    array: SmartArray, obj: Any, copy: bool, dtype: Any, label: str | None, stream: Any
) -> None:
    device = _backend.unbound(_backend.as_device_array(obj))
    if dtype is not None and np.dtype(dtype) != device.dtype:
        raise ValueError(
            f"cannot adopt a {device.dtype} device array as {np.dtype(dtype)}; adopt it "
            "as is and call .astype()"
        )
    flags = _contiguity(device.shape, device.strides, device.dtype.itemsize)
    if flags is None:
        raise ValueError(
            "only contiguous device arrays can be adopted; make a contiguous copy first "
            "(e.g. cupy.ascontiguousarray or copy_to_device into a new device array)"
        )
    _backend.check_device_dtype(device.dtype)
    strides = [tuple(device.strides)]
    if copy:  # a device buffer of smartarray's own, within the device memory budget

        def write(new: Any) -> None:
            _backend.copy_d2d(device, new, stream)
            strides[0] = tuple(new.strides)

        alloc = Allocation.on_device(
            tuple(device.shape),
            np.dtype(device.dtype),
            flags,
            host_memory=_backend.default_host_memory(),
            label=label,
            stream=stream,
            write=write,
        )
    else:
        alloc = Allocation(
            tuple(device.shape),
            np.dtype(device.dtype),
            flags,
            host=None,
            device=device,
            state=State.DEVICE,
            host_memory=_backend.default_host_memory(),
            label=label,
        )
    if not copy:  # (a copy on ``stream`` was recorded by on_device, under the lock)
        # Whoever made the data may still be running: later device work waits for the
        # default stream.
        alloc.device_written(None)
    array._init_view(alloc, 0, alloc.shape, strides[0], alloc.dtype)


def _from_host(
    array: SmartArray,
    obj: Any,
    copy: bool,
    dtype: Any,
    order: str | None,
    where: Where,
    memory: HostMemory | None,
    stream: Any,
    label: str | None,
) -> None:
    if not copy:
        if memory not in (None, "pageable"):
            raise ValueError(
                f"copy=False adopts the caller's pageable memory; host_memory={memory!r} "
                "needs copy=True"
            )
        owner = _host_exports.exporting_allocation(obj)
        if owner is not None:  # (adopting it would lock owner's host copy read-only)
            raise ValueError(
                f"copy=False cannot adopt a view of {owner.label}'s host copy handed out "
                "by np.asarray() (two SmartArrays over one buffer would each miss the "
                "other's writes): use that SmartArray, or a view of it, or copy=True"
            )
        if isinstance(obj, np.ndarray):
            if dtype is not None and np.dtype(dtype) != obj.dtype:
                raise ValueError(
                    f"copy=False cannot adopt a {obj.dtype} ndarray as {np.dtype(dtype)}; "
                    "use copy=True"
                )
            # A view of our own: the caller's ndarray is made read-only below, this
            # view (made before) stays writeable.
            host = obj.view(np.ndarray)
        else:
            try:  # buffer and array-interface objects can be adopted; lists cannot
                host = np.asarray(obj, dtype=dtype, copy=False)
            except ValueError:
                raise ValueError(
                    f"copy=False cannot adopt a {type(obj).__name__} without copying; "
                    "pass an ndarray or use copy=True"
                ) from None
        layout = _contiguity(host.shape, host.strides, host.itemsize)
        if layout is None:
            raise ValueError(
                "copy=False needs a C- or F-contiguous ndarray, got a non-contiguous one; "
                "pass copy=True or np.ascontiguousarray(a)"
            )
        _check_order(order, host.flags)
        memory = "pageable"
    else:
        host = np.array(obj, dtype=dtype, order=order or "K", copy=True)  # type: ignore[call-overload]
        if host.dtype.hasobject and where == "gpu":
            _backend.check_device_dtype(host.dtype)
        layout = _contiguity(host.shape, host.strides, host.itemsize)
        if layout is None:
            host = np.ascontiguousarray(host)
            layout = "C"
        if memory is None:
            memory = _backend.default_host_memory(host.dtype)
        if memory != "pageable":
            buffer = _host_buffers.host_empty(host.shape, host.dtype, layout, memory)
            buffer[...] = host
            host = buffer
    if where == "gpu":
        _backend.require_device()
        _backend.check_device_dtype(host.dtype)
    alloc = Allocation.on_host(host, layout, host_memory=memory, label=label)
    if not copy:
        # Writes through the caller's ndarray would be invisible to the coherence state:
        # lock it read-only while this memory is adopted (and refuse a second adoption).
        _adoption.adopt(obj if isinstance(obj, np.ndarray) else None, host, alloc, alloc.label)
    # An adopted read-only ndarray gives a read-only SmartArray: its memory is not ours.
    writeable = bool(host.flags.writeable)
    array._init_view(alloc, 0, alloc.shape, tuple(host.strides), alloc.dtype, writeable)
    if where == "gpu":
        alloc.ensure_device(stream)


def new_allocation(
    shape: tuple[int, ...],
    dtype: np.dtype,
    order: str,
    where: Where,
    memory: HostMemory | None,
    stream: Any,
    label: str | None,
) -> Allocation:
    if memory is None:
        memory = _backend.default_host_memory(dtype)
    if where == "gpu":
        _backend.require_device()
        _backend.check_device_dtype(dtype)
        if memory == "mapped":
            return Allocation(
                shape,
                dtype,
                order,
                host=None,
                device=None,
                state=State.BOTH,
                host_memory=memory,
                label=label,
            )
        if dtype.kind in _FILLED_KINDS:
            # Undefined bytes (``full`` fills them: Allocation.fill_device): the device buffer
            # is made now, the memory asked for, and the host's where first used; no copy.
            alloc = Allocation.filled(
                shape, dtype, order, UNDEFINED, host_memory=memory, label=label
            )
            alloc.ensure_device(stream)
            return alloc
        return Allocation.on_device(
            shape, dtype, order, host_memory=memory, label=label, stream=stream
        )
    if memory != "mapped" and dtype.kind in _FILLED_KINDS:
        # Nothing to move: each side's buffer is made where it is first used (no copy).
        return Allocation.filled(shape, dtype, order, UNDEFINED, host_memory=memory, label=label)
    host = _host_buffers.host_empty(shape, dtype, order, memory)
    return Allocation.on_host(host, order, host_memory=memory, label=label)


# Dtypes of arrays made where first used (numbers, booleans, dates; the device can fill them).
_FILLED_KINDS = frozenset("biufcmM")

_hooks.construct = construct
