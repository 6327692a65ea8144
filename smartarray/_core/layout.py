"""Layout and indexing helpers for SmartArray views.

A SmartArray view is a layout (byte offset, shape, strides, dtype) over its allocation's
buffers. The helpers here classify index keys, compute contiguity and strides, validate
assignments before any data moves, and present ndarray-style flags; none of them touches data.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .coherence import Allocation

# Views are computed on a *template*: an ndarray with the view's layout whose data pointer is
# this fake, never-dereferenced address. numpy's view operations only do pointer arithmetic,
# so a view's layout is known without touching (or syncing) any data.
_FAKE_BASE = 1 << 44

# Values a fast ``a[key] = value`` may assign: numpy converts them before writing anything.
SCALAR_VALUES: frozenset[type] = frozenset(
    {int, float, complex, bool} | {t for t in np.sctypeDict.values() if np.dtype(t).kind in "biufc"}
)


def _is_basic_index(key: Any) -> bool:
    items = key if type(key) is tuple else (key,)
    for item in items:
        if item is None or item is Ellipsis:
            continue
        if isinstance(item, slice):
            continue
        if isinstance(item, (bool, np.bool_)):
            return False
        if isinstance(item, (int, np.integer)):
            continue
        return False
    return True


def _view_key(key: Any) -> tuple[Any, ...]:
    """A basic index that selects the same elements but always gives a view, never a scalar.

    Indexing the layout template with a key that would give a scalar would read memory.
    """
    items = key if type(key) is tuple else (key,)
    if any(item is Ellipsis for item in items):
        return items
    return (*items, Ellipsis)


def _selects_scalar(key: Any, ndim: int) -> bool:
    items = key if type(key) is tuple else (key,)
    return all(isinstance(i, (int, np.integer)) for i in items) and len(items) == ndim


# Slice steps past this take the general path: numpy clamps a step to the range of a C
# ``Py_ssize_t`` (and its stride then wraps around), which ``slice.indices`` does not.
_BIG_STEP = 1 << 31


def _basic_view_layout(
    shape: tuple[int, ...], strides: tuple[int, ...], key: Any
) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """The layout of the view numpy makes for ``a[key]``, ``a`` of ``shape`` and ``strides``:
    (byte offset from ``a``'s, shape, strides), computed as numpy's ``get_view_from_index``
    does, without an ndarray. For the common keys only: a Python int, a slice, or a tuple of
    those and at most one ``Ellipsis``, that select a view (not a scalar). None for any other
    key, an int out of bounds, a bad slice or too many indices: those take the general path
    (numpy's result, or numpy's error)."""
    kind = type(key)
    # (The commonest keys first, in fewer steps: their code repeats the loop's below, inline,
    # since a shared helper's call costs a 2-d slice 14% more. Change both together.)
    if kind is slice and shape:
        try:
            start, stop, step = key.indices(shape[0])
        except (TypeError, ValueError):
            return None
        if not -_BIG_STEP <= step <= _BIG_STEP:  # (numpy clamps a step to a C integer's range)
            return None
        length = len(range(start, stop, step))
        if not length:  # numpy's layout of an empty slice
            start, step = 0, 1
        stride = strides[0]
        return start * stride, (length, *shape[1:]), (stride * step, *strides[1:])
    if kind is int and len(shape) > 1:  # (a 1-d array's: a scalar)
        size = shape[0]
        index = key + size if key < 0 else key
        if not 0 <= index < size:
            return None
        return index * strides[0], shape[1:], strides[1:]
    items = key if kind is tuple else (key,)
    ellipsis = False
    ints = 0
    for item in items:
        kind = type(item)
        if kind is int:  # (not bool, which numpy reads as a mask)
            ints += 1
        elif kind is not slice:
            if item is not Ellipsis or ellipsis:
                return None
            ellipsis = True
    ndim = len(shape)
    indexed = len(items) - ellipsis
    if indexed > ndim or (ints == ndim and not ellipsis):  # (too many; or a scalar)
        return None
    offset = 0
    new_shape: list[int] = []
    new_strides: list[int] = []
    axis = 0
    for item in items:
        if item is Ellipsis:
            end = axis + ndim - indexed
            new_shape += shape[axis:end]
            new_strides += strides[axis:end]
            axis = end
            continue
        size = shape[axis]
        stride = strides[axis]
        if type(item) is int:
            index = item + size if item < 0 else item
            if not 0 <= index < size:
                return None
            offset += index * stride
        else:
            try:
                start, stop, step = item.indices(size)
            except (TypeError, ValueError):
                return None
            if not -_BIG_STEP <= step <= _BIG_STEP:
                return None
            length = len(range(start, stop, step))
            if not length:  # numpy's layout of an empty slice
                start, step = 0, 1
            offset += start * stride
            new_shape.append(length)
            new_strides.append(stride * step)
        axis += 1
    new_shape += shape[axis:]
    new_strides += strides[axis:]
    return offset, tuple(new_shape), tuple(new_strides)


def _contiguous_strides(alloc: Allocation) -> tuple[int, ...]:
    if alloc.nbytes == 0 and alloc.dtype.itemsize:
        return (0,) * len(alloc.shape)  # numpy 2.4 gives new empty arrays zero strides
    strides: list[int] = []
    step = alloc.dtype.itemsize
    dims = alloc.shape if alloc.order == "F" else alloc.shape[::-1]
    for n in dims:
        strides.append(step)
        step *= max(n, 1)
    return tuple(strides) if alloc.order == "F" else tuple(reversed(strides))


def _contiguity(shape: tuple[int, ...], strides: Any, itemsize: int) -> str | None:
    """'C' or 'F' for a contiguous layout (C preferred), None otherwise."""
    if strides is None:
        return "C"
    strides = tuple(strides)
    for order in ("C", "F"):
        step = itemsize
        dims = range(len(shape) - 1, -1, -1) if order == "C" else range(len(shape))
        ok = True
        for i in dims:
            if shape[i] != 1 and strides[i] != step:
                ok = False
                break
            step *= shape[i]
        if ok or 0 in shape:
            return order
    return None


# dtype kinds whose element assignment from numeric data cannot fail half-way.
_NUMERIC_KINDS = "biufcmM"


def _normalize_shape(shape: Any) -> tuple[int, ...]:
    """A shape argument as a tuple of ints, with numpy's errors for bad ones."""
    dims: tuple[int, ...]
    try:
        dims = (operator.index(shape),)
    except TypeError:
        dims = tuple(operator.index(n) for n in shape)
    if any(n < 0 for n in dims):
        raise ValueError("negative dimensions are not allowed")
    return dims


_INTP_MAX = int(np.iinfo(np.intp).max)
_MAX_DIMS = 64  # numpy 2's limit on the number of axes (NPY_MAXDIMS)
TOO_BIG = (
    "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size."
)


def _check_new_size(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """The bytes of a new array of ``shape`` and ``dtype``, refused as numpy refuses it.

    numpy checks this when it allocates; SmartArray buffers are made where they are first
    used, so the creation functions call this first: an array no machine could hold is
    refused when it is made, not at its first use. Nothing is allocated.

    Raises
    ------
    ValueError
        numpy's errors, with the shape and the sizes: more than 64 axes; a dimension larger
        than the largest ``intp``; or ``size * itemsize`` beyond it (the product of the
        nonzero dimensions, as numpy computes it, so ``(0, 2**62, 2**62)`` is refused too).
    """
    if len(shape) > _MAX_DIMS:
        raise ValueError(
            f"maximum supported dimension for an ndarray is currently {_MAX_DIMS}, "
            f"found {len(shape)} in shape {shape}; nothing was allocated"
        )
    nbytes = dtype.itemsize
    for dim in shape:
        if dim > _INTP_MAX:
            raise ValueError(
                f"Maximum allowed dimension exceeded: {dim} in shape {shape} (the largest is "
                f"{_INTP_MAX}); nothing was allocated"
            )
        if dim:  # (numpy skips empty axes when it checks the product)
            nbytes *= dim
    if nbytes > _INTP_MAX:
        need = (
            f"its nonzero dimensions times the item size make {nbytes} bytes"
            if 0 in shape
            else f"would need {nbytes} bytes"
        )
        raise ValueError(
            f"{TOO_BIG} Shape {shape} of {dtype}: {need}, more than {_INTP_MAX}; nothing was "
            "allocated (use a smaller shape or a smaller dtype)"
        )
    return 0 if 0 in shape else nbytes


def _check_order(order: str | None, flags: Any) -> None:
    """``copy=False`` with ``order='C'``/``'F'`` needs data that already has that layout."""
    if (order == "C" and not flags.c_contiguous) or (order == "F" and not flags.f_contiguous):
        raise ValueError(f"copy=False cannot give order={order!r} without copying the data")


def _is_field_index(key: Any, dtype: np.dtype) -> bool:
    """True for a structured array's field name or list of field names."""
    if dtype.names is None:
        return False
    if isinstance(key, str):
        return True
    return type(key) is list and bool(key) and all(isinstance(k, str) for k in key)


def _layout_probe(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A writable array of ``shape`` whose elements all share one real element (zero strides).

    Indexing, reshaping and assigning to it raise exactly the errors numpy would raise for an
    array of that shape, without reading or writing any of the real array's data.
    """
    return np.lib.stride_tricks.as_strided(
        np.zeros(1, dtype), shape, (0,) * len(shape), writeable=True
    )


def _convert_text_values(value: Any, dtype: np.dtype) -> Any:
    """Strings and Python objects assigned to a numeric array, converted before any write.

    numpy converts such values element by element while writing, so a bad one (``'x'``) fails
    half-way, after part of the array was written; converted first, it fails before.
    """
    if dtype.kind not in _NUMERIC_KINDS or isinstance(value, (int, float, complex, np.number)):
        return value  # (bool is an int)
    try:
        kind = (value if isinstance(value, np.ndarray) else np.asarray(value)).dtype.kind
    except Exception:  # not array-like: numpy's own assignment will raise the right error
        return value
    if kind in "OSU":
        return np.asarray(value, dtype=dtype)
    return value


def _validate_assignment(shape: tuple[int, ...], dtype: np.dtype, key: Any, value: Any) -> None:
    """Check that ``a[key] = value`` succeeds, without touching the array's data.

    The assignment is made into a zero-strided probe of the array's shape and dtype, so it
    raises numpy's own ``IndexError``/``ValueError``/``TypeError`` for a bad key, shape or
    value (and a value that cannot be converted fails here, not half-way through the copy).
    """
    _layout_probe(shape, dtype)[key] = value


class _Flags:
    """``ndarray.flags`` of a SmartArray: readable like numpy's, but not settable."""

    __slots__ = ("_flags",)

    def __init__(self, flags: Any) -> None:
        object.__setattr__(self, "_flags", flags)

    def __getattr__(self, name: str) -> Any:
        if name == "_flags":  # not yet set (copy/pickle): no recursion
            raise AttributeError(name)
        return getattr(self._flags, name)

    def __getitem__(self, key: str) -> Any:
        return self._flags[key]

    def __setattr__(self, name: str, value: Any) -> None:
        raise ValueError(
            "SmartArray flags cannot be set; use smartarray.In(a) to pass an array read-only"
        )

    def __setitem__(self, key: str, value: Any) -> None:
        self.__setattr__(key, value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Flags):
            other = other._flags
        return bool(self._flags == other)

    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> _Flags:
        return self  # immutable

    def __deepcopy__(self, memo: dict) -> _Flags:
        return self

    def __repr__(self) -> str:
        return repr(self._flags)

    __str__ = __repr__
