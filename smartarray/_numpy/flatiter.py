"""``a.flat`` of a SmartArray: an iterator like numpy's ``flatiter`` that reads and writes
through the coherence state (reads never stale, writes mark the host copy changed)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .. import _hooks
from .._array import SmartArray
from .._core import backend as _backend
from .._core.coherence import State
from .._core.layout import _layout_probe
from . import protocols

_DEVICE = State.DEVICE
_MIXED = State.MIXED


class FlatIterator:
    """``a.flat`` of a SmartArray: numpy's ``flatiter``, reading and writing through the
    coherence state.

    Like ``numpy.flatiter`` it is an iterator over the elements in C order (``next(a.flat)``,
    ``iter(it) is it``) with the current position in ``index`` and ``coords``, the array in
    ``base``, and ``len``, ``copy()``, comparisons and indexing. Every read makes the host
    copy current first (one download if only the device copy was current, none after that
    until the device copy is written again), so it never shows stale data, even when a
    kernel writes the array between two ``next`` calls. ``a.flat[key] = value`` (and
    ``a.flat = value``) writes the host copy (made current first, one copy if it was stale)
    and marks the device copy stale, like ``a[key] = value``.

    Indexing returns what numpy's does, as SmartArrays: an element for an integer, a new 1-d
    array (a copy) otherwise. ``np.asarray(a.flat)`` is what numpy gives: for a C-contiguous
    array the view ``np.asarray(a)`` gives (writable, watched for writes), a read-only copy
    otherwise.
    """

    __slots__ = ("_array", "_index", "_reading", "_size")
    __hash__ = None  # type: ignore[assignment]  # (numpy's flatiter is unhashable too)

    def __init__(self, array: SmartArray) -> None:
        self._array = array
        self._index = 0
        self._size = array.size
        # numpy's flatiter over the host view being read, kept at ``_index``.
        self._reading: np.flatiter | None = None

    @property
    def base(self) -> SmartArray:
        """The SmartArray being iterated over."""
        return self._array

    @property
    def index(self) -> int:
        """Flat index of the next element ``next`` returns."""
        return self._index

    @property
    def coords(self) -> tuple[int, ...]:
        """N-dimensional index of the next element ``next`` returns (past the end, numpy's
        value: the first axis counted one further, or all zeros for a non-C-contiguous array
        of three or more dimensions, whose coordinates numpy's iterator wraps around)."""
        array = self._array
        shape = array.shape
        if (
            not shape
            or 0 in shape
            or (self._index >= self._size and len(shape) > 2 and not array.flags.c_contiguous)
        ):
            return (0,) * len(shape)
        inner = 1
        for length in shape[1:]:
            inner *= length
        first, rest = divmod(self._index, inner)
        return (first, *(int(i) for i in np.unravel_index(rest, shape[1:])))

    def __iter__(self) -> FlatIterator:
        return self

    def __next__(self) -> Any:
        index = self._index
        if index >= self._size:
            raise StopIteration
        array = self._array
        alloc = array._alloc
        reading = self._reading
        if (
            reading is not None
            and reading.base is array._host_ro
            and alloc.state is not _DEVICE
            and alloc.state is not _MIXED
            and alloc._host_event is None
            and alloc._device_event is None
        ):  # fast path: the host copy is current and nothing is pending (see fastpath)
            self._index = index + 1
            return next(reading)
        with alloc.lock:  # made current (one download if it was stale), then read
            host = array._host_view(write=False)
            if reading is None or reading.base is not host:  # first read, or a new view
                reading = host.flat
                for _ in range(index):
                    next(reading)
                self._reading = reading
            self._index = index + 1
            return next(reading)

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, key: Any) -> Any:
        self._check_before_fetching(key)
        return protocols.call_on_host(_read_flat, (self._array, key), {})

    def __setitem__(self, key: Any, value: Any) -> None:
        self._array._check_writeable()
        self._check_before_fetching(key, value)
        protocols.call_on_host(_write_flat, (self._array, key, value), {}, writes_first=True)

    def _check_before_fetching(self, key: Any, *value: Any) -> None:
        """numpy's error for a bad key (or value) before a stale host copy is fetched for
        nothing: tried on a zero-strided stand-in of the array's shape and dtype."""
        array = self._array
        if array._alloc.is_valid("host") or any(isinstance(x, SmartArray) for x in (key, *value)):
            return
        probe = _layout_probe(array.shape, array.dtype)
        if value:
            probe.flat[key] = value[0]
        else:
            probe.flat[key]

    def copy(self) -> SmartArray:
        """A flattened copy of the array (``flatiter.copy``), made where the data is
        current (on the device for a C-contiguous array only there)."""
        array = self._array
        flat = array.ravel()
        return flat.copy() if flat._alloc is array._alloc else flat

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self._array
        if array.flags.c_contiguous:  # the host view np.asarray(a) gives, as numpy's
            return array.reshape(-1).__array__(dtype, copy)
        if copy is False:
            raise ValueError(
                "Unable to avoid copy while creating an array from the flat iterator of a "
                "non-contiguous SmartArray"
            )
        with array._alloc.lock:
            flat = array._host_view(write=False).flatten()
        if dtype is not None:
            flat = flat.astype(dtype, copy=False)
        if copy is None:
            flat.flags.writeable = False  # numpy's flatiter gives a read-only copy too
        return flat

    def _as_operand(self) -> Any:
        """What a numpy call reads for ``a.flat`` given as an operand (``np.copyto(b, a.flat)``,
        ``b[:] = a.flat``): for a C-contiguous ``a`` the SmartArray view ``a.reshape(-1)`` (the
        memory ``np.asarray(a.flat)`` shares; a result that is a view of it stays a view of
        ``a``), else the read-only copy ``np.asarray(a.flat)`` gives."""
        array = self._array
        if array.flags.c_contiguous:
            return array.reshape(-1)
        return self.__array__()

    def _compare(self, other: Any, operation: Callable[[Any, Any], Any]) -> Any:
        return operation(self._array.ravel(), other)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, operator.eq)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, operator.ne)

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, operator.lt)

    def __le__(self, other: Any) -> Any:
        return self._compare(other, operator.le)

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, operator.gt)

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, operator.ge)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Like numpy's flatiter, which pickle and copy refuse too.
        raise TypeError(f"cannot pickle {type(self).__name__!r} object")


def _read_flat(host: np.ndarray, key: Any) -> Any:
    return host.flat[key]


def _write_flat(host: np.ndarray, key: Any, value: Any) -> None:
    host.flat[key] = value


def _assign_flat(array: SmartArray, value: Any) -> None:
    """``a.flat = value``: every element, repeating ``value`` as numpy does."""
    FlatIterator(array)[...] = value


def iterate(array: SmartArray) -> Iterator[Any]:
    """``iter(array)`` for a 1-d SmartArray: numpy's items, each read through the coherence
    state (a device write made while the loop runs is downloaded before the next item, as
    with ``a.flat``). The length is fixed when the loop starts, as numpy's is. Without CUDA
    no device copy can ever exist: numpy's own iterator over the host copy."""
    if _backend.tier() == "host-only":
        with array._alloc.lock:
            return iter(array._host_view(write=False))
    return _checked_items(array)


def _checked_items(array: SmartArray) -> Iterator[Any]:
    alloc = array._alloc
    device = _DEVICE
    host: Any = iterate  # (no view yet: never the cached one)
    reading: Iterator[Any] = iter(())
    for index in range(array._shape[0]):
        if (
            array._host_ro is not host
            or alloc.state is device
            or alloc.state is _MIXED
            or alloc._host_event is not None
            or alloc._device_event is not None
        ):  # made current (one download if it was stale), then read from ``index`` on
            with alloc.lock:
                current = array._host_view(write=False)
            if current is not host:
                host = current
                reading = iter(current[index:])
        yield next(reading)


_hooks.flat = FlatIterator
_hooks.iterate = iterate
_hooks.assign_flat = _assign_flat
