"""The SmartArray class: a numpy drop-in whose data lives on the host, the device, or both."""

from __future__ import annotations

import _thread
import copy as _copy
import numbers
import operator
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import _hooks
from ._core import adoption as _adoption
from ._core import backend as _backend
from ._core import host_buffers as _host_buffers
from ._core import host_exports as _host_exports
from ._core.coherence import Allocation, State
from ._core.errors import normalize_where
from ._core.layout import (
    _FAKE_BASE,
    _NUMERIC_KINDS,
    SCALAR_VALUES,
    _basic_view_layout,
    _contiguity,
    _convert_text_values,
    _Flags,
    _is_basic_index,
    _is_field_index,
    _layout_probe,
    _selects_scalar,
    _validate_assignment,
    _view_key,
)
from ._core.ranges import Extent, extent_of

if TYPE_CHECKING:
    import typing_extensions as _te
    from numpy.typing import DTypeLike
    from typing_extensions import Self

    from ._array_typing import _AnyShape, _DeviceArray, _ShapeLike, _SmartArrayTyping


# SmartArray's type parameters, those of ``np.ndarray``: the shape (a tuple of ints) and the
# dtype, both covariant. Type checkers also see numpy's defaults (``SmartArray`` alone is
# ``SmartArray[tuple[Any, ...], np.dtype[Any]]``); at run time they only make the class
# subscriptable (``SmartArray[Any, np.dtype[np.float64]]``, evaluated) and cost nothing else.
if TYPE_CHECKING:
    _ShapeT_co = _te.TypeVar(
        "_ShapeT_co", bound=tuple[int, ...], default=tuple[Any, ...], covariant=True
    )
    _DTypeT_co = _te.TypeVar(
        "_DTypeT_co", bound=np.dtype[Any], default=np.dtype[Any], covariant=True
    )
else:
    _ShapeT_co = TypeVar("_ShapeT_co", covariant=True)
    _DTypeT_co = TypeVar("_DTypeT_co", covariant=True)

_HOST = State.HOST
_new_object = object.__new__
_on_host = Allocation.on_host
_DEVICE = State.DEVICE
_BOTH = State.BOTH
_MIXED = State.MIXED

# SmartArray's indexing fast paths as C slots (smartarray/_speedups.c), where the package was
# built with a C compiler: x[1:5], x[3] and x[3] = 1.0 then cost no Python frame. The Python
# methods _getitem_py and _setitem_py are the reference (the C code makes the same checks
# and calls them, or what they call, for everything else) and SmartArray's __getitem__ and
# __setitem__ without the module, or with SMARTARRAY_PURE_PYTHON=1 in the environment.
try:
    from . import _speedups as _compiled
except ImportError:  # (installed without a C compiler: the Python methods)
    _compiled = None  # type: ignore[assignment]
_speedups = None if os.environ.get("SMARTARRAY_PURE_PYTHON") else _compiled

# The attributes the indexing fast paths read, and a view is made of, as slots of
# SmartArray's first base: _speedups.Indexing (C reads and writes them directly), else a
# Python class with the same __slots__ (CPython reads either as fast as an instance
# attribute). In the order SmartArray's Python code stores a view's.
FIELDS = (
    "_alloc_if_made",
    "_own_host",
    "_offset",
    "_shape",
    "_strides",
    "_dtype",
    "_writeable",
    "_base",
    "_host_ro",
    "_host_rw",
    "_host_scalar",
    "_host_1d",
)
if TYPE_CHECKING or _speedups is None:

    class _Indexing:
        __slots__ = FIELDS

else:
    if _speedups.FIELDS != FIELDS:  # pragma: no cover - a stale build of _speedups.c
        raise ImportError("smartarray._speedups is stale: reinstall smartarray")
    _Indexing = _speedups.Indexing

if _speedups is not None:
    _made: Callable[[Any], bool] = _speedups.made
else:

    def _made(array: Any) -> bool:
        """Whether ``array`` was made (its ``_shape`` set): see ``_speedups.made``."""
        return getattr(array, "_shape", None) is not None


try:  # The kernel-argument hook: numba.cuda calls to_device() on every ArgHint argument.
    from numba.cuda.args import ArgHint as _ArgHint
except ImportError:  # pragma: no cover - numba-cuda is a hard dependency

    class _ArgHint:  # type: ignore[no-redef]
        pass


# Held while an array made without an allocation makes it (_AllocationOnFirstRead): briefly,
# once per array.
_MAKING_ALLOCATION = _thread.allocate_lock()


class _AllocationOnFirstRead:
    """``SmartArray._alloc`` of an array made without an allocation (:func:`own_result`,
    ``SmartArray(ndarray)``): all it has is its host buffer, ``_own_host``, a new contiguous
    ndarray that only it holds, current on the host by definition. The first read of
    ``_alloc`` makes its (light) allocation over that buffer and stores it as the instance's
    own ``_alloc`` (this is a non-data descriptor: later reads find that attribute, with no
    call); two threads get the same allocation."""

    __slots__ = ()

    def __get__(self, array: SmartArray | None, owner: type | None = None) -> Any:
        if array is None:
            return self
        # (getattr: an object never initialised, a subclass that skips __init__, gets the
        # error below; this runs once per array)
        made = getattr(array, "_alloc_if_made", None)
        if made is None:
            with _MAKING_ALLOCATION:
                host = getattr(array, "_own_host", None)  # (set where no allocation is made)
                if host is not None:
                    layout = "C" if host.flags.c_contiguous else "F"
                    alloc = _on_host(host, layout, host_memory="pageable")
                    array._alloc = array._alloc_if_made = alloc
                    array._own_host = None
                    return alloc
            made = getattr(array, "_alloc_if_made", None)  # (made meanwhile by another thread)
            if made is None:
                raise AttributeError("SmartArray not initialised: it has no allocation")
        # (a view made by the slice fast path of __getitem__, which sets ``_alloc_if_made``
        # only, or an allocation made by another thread: the instance's own ``_alloc`` from
        # now on)
        array._alloc = made
        return made


# SmartArray's first base is numpy's NDArrayOperatorsMixin. Type checkers see it as
# smartarray._array_typing's _SmartArrayTyping, a subclass of it that declares the operators
# with SmartArray's types and the ndarray members smartarray._numpy installs on the class; at
# run time it is the mixin itself.
if TYPE_CHECKING:
    _OperatorsMixin: TypeAlias = _SmartArrayTyping
else:
    _OperatorsMixin = NDArrayOperatorsMixin


class _LayoutCached:
    """Like ``functools.cached_property``, for a value made from an array's layout: it is
    cached in the instance dict only if the array's layout did not change while it was made
    (see ``SmartArray.shape``'s setter: the check and the store are call-free)."""

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, array: Any, owner: type | None = None) -> Any:
        if array is None:
            return self
        shape = array._shape
        strides = array._strides
        value = self.func(array)
        entries = array.__dict__
        if array._shape is shape and array._strides is strides:
            entries[self.name] = value
        return value


class SmartArray(_Indexing, _OperatorsMixin, _ArgHint, Generic[_ShapeT_co, _DTypeT_co]):
    """An array with a host copy and a CUDA device copy that knows which one is current.

    ``SmartArray`` behaves like a :class:`numpy.ndarray` on the host and like a Numba device
    array in ``@cuda.jit`` kernels; it copies data between the two only when the other side
    asks for it, and counts every copy in the transfer ledger.

    Parameters
    ----------
    obj : array_like, SmartArray or device array, optional
        Initial data. A numpy-convertible object, another SmartArray, a Numba device array,
        any object exposing ``__cuda_array_interface__``, or a DLPack producer (``__dlpack__``:
        host memory is read through ``np.from_dlpack``, CUDA memory on a GPU like a device
        array). If omitted, ``shape`` is required and the array is uninitialised.
    copy : bool, default True
        ``False`` adopts ``obj`` without copying when it is a contiguous ndarray, a SmartArray
        (the result shares its state) or a contiguous device array; ``ValueError`` if that is
        impossible (non-contiguous data, a different dtype) or if the memory is already
        adopted by a live writable SmartArray. An adopted ndarray, and every ndarray it is a
        view of, is made read-only while the SmartArray lives: writes through it could not
        be seen by the coherence state (write through the SmartArray instead).
    shape : int or tuple of int, optional
        Shape of a new uninitialised array (when ``obj`` is None).
    dtype : data-type, optional
        Element type (default: inferred from ``obj``, else float64).
    order : {None, 'C', 'F', 'A', 'K'}, default None
        Memory layout of new buffers (None: C order for a new array, the data's own layout
        for a copy, like ``'K'``).
    where : {'host', 'gpu'}, default 'host'
        Where a new array is made (``'device'`` is an alias of ``'gpu'``). With no ``obj`` and
        ``where='gpu'`` memory is allocated on the device only; the host buffer comes later,
        when the host first needs it. With ``obj`` and ``where='gpu'`` the data is uploaded
        at once.
    host_memory : {None, 'pinned', 'pageable', 'mapped'}, default None
        Kind of host buffer. None: ``'pinned'`` on a real GPU, ``'pageable'`` in the simulator
        and without CUDA; adopted ndarrays are always ``'pageable'``. ``'mapped'`` memory is
        read and written by the device in place: no copy is ever made and both sides are
        always valid.
    stream : numba.cuda stream, optional
        Stream for the upload made by ``where='gpu'``.
    label : str, optional
        Name used for this array in the transfer ledger and error messages.

    Notes
    -----
    Writes through the SmartArray API (``a[i] = v``, ``a += b``, ``np.add(x, y, out=a)``,
    ``a.fill``, numba ``@jit`` calls, kernel launches) keep the validity flags right. The
    arrays handed out by :meth:`get` are raw buffers: after writing through them, call
    :meth:`mark_changed`, exactly as with the old ``numba.SmartArray``.

    ``SmartArray`` is generic like ``np.ndarray``: ``SmartArray[ShapeT, DTypeT]``, with the
    shape (a tuple of ints) and the dtype (``np.dtype[np.float64]``) as type arguments; type
    checkers follow the dtype through creation, views, copies and operators (see the API
    reference's "Type hints").
    """

    __array_priority__ = 50

    # An iterator like numpy's flatiter, and ``a.flat = value`` (see smartarray._numpy.flatiter).
    flat = property(
        lambda self: _hooks.flat(self),
        lambda self, value: _hooks.assign_flat(self, value),
        doc=np.ndarray.flat.__doc__,
    )

    # The allocation whose state this array (a view of it) shares. An array made by
    # own_result (a new numpy result) or by SmartArray(ndarray) has none yet: only its host
    # buffer, ``_own_host``, until something but a fast-path host read asks for ``_alloc``
    # (see _AllocationOnFirstRead).
    if TYPE_CHECKING:
        _alloc: Allocation
    else:
        _alloc = _AllocationOnFirstRead()
    # The attributes below are set on every array, by each constructor: _init_view, the
    # light constructors own_result and construct's _copy_of_ndarray, and the slice fast path
    # of __getitem__. They are the slots of SmartArray's first base (FIELDS, above the
    # class): no class-level default (unset, one is missing), read as fast as an instance
    # attribute, and read and written directly by the C slots of _speedups.Indexing.
    #
    # ``_alloc`` once made, else None, for the fast paths: a plain attribute, which CPython
    # reads faster than one a class-level descriptor stands for (about 25 ns a read on
    # Python 3.11). Where it is None a fast path may read the host buffer only if
    # ``_own_host`` is set (no allocation yet: current on the host, nothing pending);
    # otherwise it takes the general path, which reads ``_alloc``.
    _alloc_if_made: Allocation | None
    # The host buffer of an array made without an allocation (own_result, SmartArray(ndarray))
    # until the allocation is made, then None; not set on the others, which have
    # ``_alloc_if_made`` and never read it.
    _own_host: np.ndarray | None
    _offset: int
    _shape: tuple[int, ...]
    _strides: tuple[int, ...]
    _dtype: np.dtype
    _writeable: bool
    # The array whose memory this one views (``base``), None for one that owns its memory.
    _base: SmartArray | None
    # Cached host ndarrays of this view, made on first use (None until then): read-only, and
    # writable (only for a writable array); the fast paths (_numpy.fastpath) use them as
    # they are.
    _host_ro: np.ndarray | None
    _host_rw: np.ndarray | None
    # Set with _host_rw for a contiguous 1-d array of a numeric dtype (else None): scalar
    # writes without the lock go through it (__setitem__). Their bytes (an element, a slice
    # with no step) are then an exact extent, all overwritten: the write made again under the
    # lock when another thread came between never needs a copy, so it cannot be refused
    # half-way (no_transfers(), no memory). It is _host_rw itself, or for native float64 a
    # memoryview of it: a Python float or int stored into an element through a memoryview
    # is the double numpy would store, written in a third of numpy's time (those element
    # writes go through it; every other write through _host_rw).
    _host_scalar: np.ndarray | memoryview | None
    # _host_ro of a 1-d array, once made (the element fast path of __getitem__ reads it), and
    # None while numpy's shuffle runs on the array.
    _host_1d: np.ndarray | None
    # The ones below start as these class attributes, and an instance has its own once set
    # (nothing to make for a new array, a result or a view that never needs them; read off
    # the fast paths).
    # Set while numpy's generic in-place shuffle runs on this array (see _numpy.shuffle).
    _shuffle: Any = None  # a smartarray._numpy.shuffle.ShuffleCall, or None
    # This view's layout over a fake address (_template), and its extent (_span).
    _template_cache: np.ndarray | None = None
    _extent_cache: tuple[Extent | None, bool] | None = None

    # Eight methods return types that depend on their arguments: the constructor, get,
    # __getitem__, __array__, astype, reshape, getfield and view. Type checkers read their
    # overloads in smartarray._array_typing (in _SmartArrayTyping, this class's first base
    # for them); their definitions here are made for the run time only (``if not
    # TYPE_CHECKING``), so that type checkers do not take their plain signatures for the
    # class's. (``tools/check_runtime_bodies.py`` has mypy check their bodies.)
    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def __init__(
            self,
            obj: Any = None,
            copy: bool = True,
            shape: _ShapeLike | None = None,
            dtype: DTypeLike | None = None,
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None:
            if _made(self):  # (its _shape set: every array once made)
                raise TypeError(
                    "SmartArray.__init__ called on an array already made: its data and "
                    "layout stay as they are; make a new array with SmartArray(...) instead"
                )
            _hooks.construct(
                self, obj, copy, shape, dtype, order, where, host_memory, stream, label
            )  # (smartarray._numpy.construct)

    # --- construction ------------------------------------------------------------------------

    def _init_view(
        self,
        alloc: Allocation,
        offset: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: np.dtype,
        writeable: bool = True,
        base: SmartArray | None = None,
    ) -> None:
        self._alloc = self._alloc_if_made = alloc
        self._offset = offset
        self._shape = tuple(shape)
        self._strides = tuple(strides)
        self._dtype = dtype
        self._writeable = writeable
        self._host_ro = self._host_1d = None
        self._host_rw = self._host_scalar = None
        self._base = base

    @classmethod
    def _view(
        cls,
        alloc: Allocation,
        offset: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: np.dtype,
        writeable: bool,
        base: SmartArray | None,
    ) -> SmartArray[Any, Any]:
        view = _new_object(cls)
        view._init_view(alloc, offset, shape, strides, dtype, writeable, base)
        return view

    @classmethod
    def _from_numpy_result(
        cls, result: np.ndarray, arrays: list[SmartArray]
    ) -> SmartArray[Any, Any]:
        """Wrap an ndarray returned by numpy: a view of an argument's buffer, or new data."""
        if result.size:  # 0-d views (np.real of a 0-d array…) must not be adopted as new data
            for array in arrays:
                made = array._alloc_if_made  # (an argument with no allocation yet: its host)
                host = array._own_host if made is None else made.host
                if host is None or not np.may_share_memory(result, host):  # (bounds only)
                    continue
                lo, hi = np.lib.array_utils.byte_bounds(result)
                start = host.ctypes.data
                if start <= lo and hi <= start + host.nbytes:
                    return cls._view(
                        array._alloc,
                        result.ctypes.data - start,
                        result.shape,
                        result.strides,
                        result.dtype,
                        result.flags.writeable and array._writeable,
                        array if array._base is None else array._base,
                    )
        return cls._adopt(result)

    @classmethod
    def _adopt(cls, data: np.ndarray) -> SmartArray[Any, Any]:
        """A new SmartArray owning the new ndarray ``data``, with ``data``'s exact strides.

        Data laid out contiguously in some axis order (numpy's ``order='K'`` results, e.g. a
        copy of a transposed 3-d array) is adopted as a view of its buffer in memory order;
        any other layout is copied to C order.
        """
        if type(data) is not np.ndarray:
            data = data.view(np.ndarray)
        if _contiguity(data.shape, data.strides, data.itemsize) is not None:
            return cls._own(data)
        axes = sorted(range(data.ndim), key=lambda i: -data.strides[i])
        in_memory_order = data.transpose(axes)
        if not in_memory_order.flags.c_contiguous:
            return cls._own(np.ascontiguousarray(data))
        owner = cls._own(in_memory_order)
        offset = data.ctypes.data - in_memory_order.ctypes.data
        return cls._view(
            owner._alloc, offset, data.shape, data.strides, data.dtype, owner._writeable, None
        )

    @classmethod
    def _own(cls, host: np.ndarray) -> SmartArray[Any, Any]:
        """A new SmartArray whose host buffer is ``host``, a new ndarray that nobody else holds
        (a fresh result): see :func:`own_result`."""
        return own_result(host)

    # --- coherence API (the old numba.SmartArray API) ---------------------------------------

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def get(self, where: str = "host", stream: Any = None) -> Any:
            """Make the ``where`` copy current (copying if it is stale) and return it.

            Parameters
            ----------
            where : {'host', 'gpu'}
                ``'host'`` returns a writable :class:`numpy.ndarray`; ``'gpu'`` (alias ``'device'``)
                a Numba device array. Both share memory with this SmartArray.
            stream : numba.cuda stream, optional
                Stream for the copy. A host copy enqueued on a stream is complete once that
                stream is synchronised; SmartArray's own host accesses wait for it automatically.

            Notes
            -----
            The returned array is a raw buffer: if you write through it, call
            ``mark_changed(where)`` afterwards, or the other copy stays marked current. Unlike
            ``np.asarray(a)``, a host buffer kept from ``get('host')`` is not refreshed after
            later device writes: call ``get('host')`` again before reading it.
            """
            side = normalize_where(where)
            if side == "host":
                with self._alloc.lock:
                    self._alloc.ensure_host(stream, self._span())
                    # The old API hands out one side for writing at a time: writes through a
                    # device array taken before are the caller's to declare first.
                    self._alloc.end_hand_out()
                    self._hand_out_host()
                    # A new ndarray object each time: a caller setting its .shape or .flags must
                    # not change the view cached for internal use.
                    return self._host_view(write=True, sync=False).view()
            alloc = self._alloc
            with alloc.lock:
                device = self._device_view(stream)
                if not self._writeable:  # (read by the caller's work: a pooled free waits for it)
                    _backend.address_handed_out(alloc.device)
                    return device
                # It may be written now: never dropped as clean (see Allocation.hand_out_device).
                return alloc.hand_out_device(self._offset, self._shape, self._strides, self._dtype)

    def _hand_out_host(self) -> None:
        """The raw host buffer is being handed out: from now on it cannot be adopted by
        another SmartArray (``copy=False``; see :mod:`smartarray._core.adoption`). Call with the
        lock held and the host buffer allocated."""
        alloc = self._alloc
        if not alloc.host_handed_out:
            assert alloc.host is not None
            _adoption.register_handed_out(alloc.host, alloc, alloc.label)
            alloc.host_handed_out = True

    def mark_changed(self, where: str = "host") -> None:
        """Declare that the ``where`` copy was modified, making the other copy stale.

        ``mark_changed('gpu')`` while a host view handed out by ``np.asarray(a)`` is alive
        copies the device copy back at once (one download), so that
        the view shows the new data; both copies are then current.

        Raises
        ------
        ValueError
            If this array is read-only (an adopted read-only ndarray, a read-only view such
            as ``np.broadcast_to(a, shape)`` or ``a.diagonal()``): nothing can have been
            written through it, and a read-only host buffer could never receive the device
            copy back. Call ``mark_changed`` on the writable array you wrote through.
        RuntimeError
            If the ``where`` copy was itself stale (nothing valid was written over).
        TransferError
            Inside ``no_transfers()``, when a live host view needs that download (the device
            copy is then marked changed, and the host copy stale).
        """
        side = normalize_where(where)
        if not self._writeable:
            raise ValueError(
                f"{self._alloc.label}: mark_changed({side!r}) on a read-only SmartArray; "
                "nothing can be written through it. Call mark_changed on the writable "
                "SmartArray you wrote through (flags unchanged)"
            )
        alloc = self._alloc
        with alloc.lock:
            alloc.mark_changed(side, self._span())
            if side == "gpu":  # host views handed out by np.asarray are kept current
                _host_exports.refresh(alloc)

    def is_valid(self, where: str) -> bool:
        """True when the ``where`` copy (``'host'`` or ``'gpu'``) of this array's elements is
        current."""
        return self._alloc.is_valid(normalize_where(where), self._span())

    @property
    def location(self) -> str:
        """Which copy of this array's elements is current: ``'both'``, ``'host'`` (on the
        host; on the device not at all or only in part), ``'gpu'`` (the other way round),
        or ``'mixed'`` (some bytes only on the host, others only on the device; see
        docs/coherence.md and :func:`smartarray.coherence_ranges`)."""
        return self._alloc.location(self._span())

    def coherence_ranges(self) -> list[tuple[int, int, str]]:
        """Where each byte range of this array's buffer is current, for debugging.

        Returns
        -------
        list of (start, stop, where)
            Byte ranges ``[start, stop)`` of the base buffer (shared by every view of it),
            in order, covering it all; ``where`` is ``'host'``, ``'gpu'`` or ``'both'``.
            One range while the whole buffer is in one state.
        """
        return self._alloc.ranges()

    @property
    def host_memory(self) -> str:
        """Kind of host buffer: ``'pinned'``, ``'pageable'`` or ``'mapped'``."""
        return self._alloc.host_memory

    @property
    def label(self) -> str:
        """This array's name in the transfer ledger (shared by all views of one buffer)."""
        return self._alloc.label

    def free_device(self) -> None:
        """Release the device copy, first copying it to the host if only it was current.

        A device buffer whose address was exported through ``__cuda_array_interface__``
        (to CuPy, PyTorch, ...) is not released: it lives as long as this array, so the
        consumer's pointer stays valid (see the memory management page of the docs).
        """
        self._alloc.free_device()

    def to_host(self, stream: Any = None) -> Self:
        """Make the host copy current (e.g. asynchronously on ``stream``); returns self."""
        self._alloc.ensure_host(stream, self._span())
        return self

    def to_gpu(self, stream: Any = None) -> Self:
        """Make the device copy current (e.g. asynchronously on ``stream``); returns self."""
        self._alloc.ensure_device(stream, None, self._span())
        return self

    # Deprecated spellings from the old numba.SmartArray, kept so old code runs unchanged.
    def host(self) -> np.ndarray[_ShapeT_co, _DTypeT_co]:
        """Deprecated: use ``get('host')``."""
        warnings.warn("SmartArray.host() is deprecated; use get('host')", DeprecationWarning, 2)
        return self.get("host")

    def gpu(self) -> _DeviceArray:
        """Deprecated: use ``get('gpu')``."""
        warnings.warn("SmartArray.gpu() is deprecated; use get('gpu')", DeprecationWarning, 2)
        return self.get("gpu")

    def host_changed(self) -> None:
        """Deprecated: use ``mark_changed('host')``."""
        warnings.warn(
            "SmartArray.host_changed() is deprecated; use mark_changed('host')",
            DeprecationWarning,
            2,
        )
        self.mark_changed("host")

    def gpu_changed(self) -> None:
        """Deprecated: use ``mark_changed('gpu')``."""
        warnings.warn(
            "SmartArray.gpu_changed() is deprecated; use mark_changed('gpu')",
            DeprecationWarning,
            2,
        )
        self.mark_changed("gpu")

    def readonly(self) -> Any:
        """Pass this array with read-only intent (same as ``smartarray.In(self)``)."""
        return _hooks.read_only_intent(self)

    # --- buffers --------------------------------------------------------------------------

    def _check_writeable(self) -> None:
        if not self._writeable:
            raise ValueError("assignment destination is read-only")

    def _host_view(self, write: bool, sync: bool = True, overwrite_all: bool = False) -> np.ndarray:
        """This view's host ndarray, its host copy made current first (unless ``sync=False``)."""
        alloc = self._alloc
        if sync:
            if write:
                self._check_writeable()
                alloc.prepare_host_write(overwrite_all, self._span())
            else:
                alloc.ensure_host(None, self._span())
        elif alloc.host is None:
            alloc._host_buffer()
        writeable = write and self._writeable  # (a read-only array's views are all read-only)
        # (the layout, read with no call between: see the shape setter)
        shape = self._shape
        strides = self._strides
        view = self._host_rw if writeable else self._host_ro
        if view is None:
            host = alloc.host
            assert host is not None
            dtype = self._dtype
            if (
                self._offset == 0
                and shape == host.shape
                and strides == host.strides
                and dtype == host.dtype
            ):  # the whole buffer, as it is laid out
                view = host.view(np.ndarray)
                if not writeable:
                    view.flags.writeable = False
            else:
                view = _backend.strided_view(host, self._offset, shape, strides, dtype, writeable)
            one_d = len(shape) == 1
            if writeable:
                scalar: np.ndarray | memoryview | None = None
                if one_d and strides[0] == dtype.itemsize and dtype.kind in _NUMERIC_KINDS:
                    scalar = view
                    if dtype.char == "d":  # (no buffer for others, e.g. datetime64)
                        elements = view.data  # (a memoryview)
                        # (format "d": an aligned native double; numpy's buffer gives "=d",
                        # "<d" or ">d" otherwise, which a memoryview cannot write)
                        if elements.format == "d":
                            scalar = elements
                # (cached only for the layout it was made for; check and stores call-free)
                if self._shape is shape and self._strides is strides:
                    self._host_rw = view
                    self._host_scalar = scalar
            elif self._shape is shape and self._strides is strides:  # (as above)
                self._host_ro = view
                if one_d:
                    self._host_1d = view
        return view

    def _device_view(self, stream: Any = None, prepare: Callable[..., Any] | None = None) -> Any:
        alloc = self._alloc
        _backend.require_device()
        _backend.check_device_dtype(self._dtype)
        _backend.check_device_layout(self._strides)  # before anything is copied
        with alloc.lock:
            if prepare is None:
                alloc.ensure_device(stream, None, self._span())
            else:
                prepare(stream, self._span())
            return alloc.device_view(self._offset, self._shape, self._strides, self._dtype)

    def _span(self) -> Extent | None:
        """The bytes of the allocation this view covers (None: all of them); see
        :func:`smartarray._core.ranges.extent_of`."""
        extent = self._extent_cache
        if extent is None:
            extent = self._extent_cache = extent_of(
                self._offset, self._shape, self._strides, self._dtype.itemsize, self._alloc.nbytes
            )
        return extent[0]

    def _overwrites_span(self) -> bool:
        """True when writing every element of this view writes every byte of its span."""
        self._span()
        assert self._extent_cache is not None
        return self._extent_cache[1]

    def _template(self) -> np.ndarray:
        """An ndarray with this view's layout over a fake address (never read or written)."""
        template = self._template_cache
        if template is None:
            shape = self._shape  # (the layout, read with no call between: see shape)
            strides = self._strides
            template = _backend.array_at(
                _FAKE_BASE + self._offset,
                shape,
                strides,
                self._dtype,
                readonly=not self._writeable,
                keep_alive=None,
            )
            if self._shape is shape and self._strides is strides:  # (call-free: see shape)
                self._template_cache = template
        return template

    def _from_template(self, result: np.ndarray) -> SmartArray[Any, Any]:
        data = result.__array_interface__["data"][0]  # (read once: it builds a dict)
        shape = result.shape
        strides = result.strides
        lo = hi = _FAKE_BASE  # (an empty view spans no bytes, wherever it starts)
        if result.size:  # the bytes it spans, as numpy's byte_bounds computes them
            lo = hi = data
            for length, stride in zip(shape, strides, strict=True):
                if stride < 0:
                    lo += (length - 1) * stride
                else:
                    hi += (length - 1) * stride
            hi += result.itemsize
        if not (lo >= _FAKE_BASE and hi <= _FAKE_BASE + self._alloc.nbytes):
            raise AssertionError("a view operation produced memory outside its base")
        return SmartArray._view(
            self._alloc,
            data - _FAKE_BASE,
            shape,
            strides,
            result.dtype,
            result.flags.writeable and self._writeable,
            self if self._base is None else self._base,  # like numpy: the memory's owner
        )

    def _apply_view(self, operation: Callable[[np.ndarray], np.ndarray]) -> SmartArray[Any, Any]:
        """Apply a numpy view operation (one that never copies) to this array's layout."""
        return self._from_template(operation(self._template()))

    # --- ndarray attributes -----------------------------------------------------------------

    @property
    def shape(self) -> _ShapeT_co:
        """Tuple of array dimensions.

        Settable, like ``ndarray.shape``, only when the new shape needs no copy (numpy's
        ``AttributeError`` otherwise, nothing changed); other views of the data keep theirs.
        """
        return self._shape  # type: ignore[return-value]  # (the type parameter is the shape's)

    @shape.setter
    def shape(self, value: Any) -> None:
        # numpy's rule: a C-order reshape that gives a view. Bad shapes fail on a probe with
        # real memory; numpy's own setter would copy the (fake-address) template to find out
        # that a copy is needed, so that is asked through reshape(copy=False).
        _layout_probe(self._shape, np.dtype(np.bool_)).reshape(value)
        try:
            template = self._template().reshape(value, copy=False)
        except ValueError:
            raise AttributeError(
                "Incompatible shape for in-place modification. Use `.reshape()` to make a "
                "copy with the desired shape."
            ) from None
        if template.shape == self._shape and template.strides == self._strides:
            return
        shape = tuple(template.shape)
        strides = tuple(template.strides)
        with self._alloc.lock:
            # Everything cached for the old layout goes: host views and template
            # (attributes), Numba types and compiled code's host views (instance-dict
            # entries). Other threads read the layout and these caches without the lock, so
            # the new layout and the cleared attribute caches are stored by consecutive
            # statements with no call between them: CPython (with the GIL) switches threads
            # only at calls and backward jumps, so no thread sees one of them without the
            # others. A thread that made a cache from the old layout stores it only if the
            # layout it read is still the array's (the ``is`` checks before each cache
            # store, also call-free); the instance-dict entries are dropped before and after
            # (dropping them makes calls: until the second drop, another thread may see the
            # new layout with the old Numba type and jit views; compiled code refuses a jit
            # view whose ndim is not its type's, see _numba.cpu._same_ndim and _load_native).
            # This holds for CPython with the GIL and no Python-level tracer (sys.settrace
            # runs Python code, and may switch threads, at every line).
            self._drop_numba_layout_caches()
            self._shape = shape
            self._strides = strides
            self._host_rw = self._host_ro = self._host_1d = self._template_cache = None
            self._host_scalar = None
            self._drop_numba_layout_caches()

    def _drop_numba_layout_caches(self) -> None:
        for key in _NUMBA_LAYOUT_CACHES:
            self.__dict__.pop(key, None)

    @property
    def dtype(self) -> _DTypeT_co:
        """Data type of the elements."""
        return self._dtype  # type: ignore[return-value]  # (the type parameter is the dtype's)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def strides(self) -> tuple[int, ...]:
        """Bytes to step in each dimension."""
        return self._strides

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements of this (view of the) array."""
        return self.size * self.itemsize

    @property
    def flags(self) -> Any:
        """Memory-layout flags, as ``ndarray.flags`` (``writeable`` False for read-only views).

        The flags are read-only: setting one raises ``ValueError`` (use ``smartarray.In(a)``
        to pass an array read-only).
        """
        return _Flags(self._template().flags)

    @property
    def base(self) -> SmartArray | None:
        """The SmartArray this one is a view of, or None if it owns its buffers."""
        return self._base

    @property
    def T(self) -> SmartArray[_ShapeT_co, _DTypeT_co]:
        """Transposed view."""
        return self.transpose()  # type: ignore[return-value]  # (numpy's type: as many axes)

    @property
    def mT(self) -> SmartArray[_ShapeT_co, _DTypeT_co]:
        """View with the last two axes swapped."""
        return self._apply_view(lambda t: t.mT)

    @property
    def real(self) -> SmartArray[_ShapeT_co, np.dtype[Any]]:
        """Real part (a view for complex arrays)."""
        if self._dtype.kind == "c":
            return self._apply_view(lambda t: t.real)
        return self

    @real.setter
    def real(self, value: Any) -> None:
        self.real[...] = value

    @property
    def imag(self) -> SmartArray[_ShapeT_co, np.dtype[Any]]:
        """Imaginary part (a view for complex arrays, read-only zeros otherwise, as numpy)."""
        if self._dtype.kind == "c":
            return self._apply_view(lambda t: t.imag)
        zeros = np.zeros(self._shape, self._dtype)  # no need to read (or copy) any data
        zeros.flags.writeable = False
        return SmartArray._own(zeros)

    @imag.setter
    def imag(self, value: Any) -> None:
        if self._dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")
        self.imag[...] = value

    def __len__(self) -> int:
        shape = self._shape
        if not shape:
            raise TypeError("len() of unsized object")
        # numpy's shuffle asks len() first, then warns: see _numpy.shuffle.
        _hooks.note_length(self)
        return shape[0]

    def __iter__(self) -> Iterator[Any]:
        if not self._shape:
            raise TypeError("iteration over a 0-d array")
        if len(self._shape) == 1:
            # Each item read through the coherence state, as ``a.flat`` does: device writes
            # made during the loop are seen (a plain iterator over the host view would not).
            return _hooks.iterate(self)
        return (self[i] for i in range(self._shape[0]))

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def _getitem_py(self, key: Any) -> Any:
            """``self[key]`` in Python: ``__getitem__`` without smartarray._speedups, whose
            C slot makes the same checks for its fast paths (the slice and element paths
            below) and calls :meth:`_index` for the others."""
            # Only the fastest paths are here, and the locals they need: each local of this
            # function costs every call (CPython sets them up and clears them). Everything
            # else is _index.
            kind = type(key)
            if kind is slice:
                shape = self._shape
                strides = self._strides  # (read with the shape: no call between, see shape)
                if len(shape) != 1:
                    # (the general path below. The test is written this way round so that its
                    # jump is a short one: CPython 3.11 specialises a comparison only when a
                    # conditional jump with no EXTENDED_ARG follows it, and jumping over the
                    # block below needs one.)
                    pass
                else:
                    # Fast path: a 1-d basic slice of step 1 within bounds (the common case,
                    # in fewer steps than slice.indices), a view whose layout is computed
                    # here (inline: a method call costs a fifth of the time). Nothing else is
                    # made for it: it shares this array's allocation, and computes its extent
                    # when first asked (_span).
                    size = shape[0]
                    start = key.start
                    stop = key.stop
                    if start is None:
                        start = 0
                    if stop is None:
                        stop = size
                    if (
                        key.step is None
                        and type(start) is int
                        and type(stop) is int
                        and start >= 0
                        and start < stop
                        and stop <= size
                    ):
                        alloc = self._alloc_if_made
                        if alloc is None:
                            alloc = self._alloc  # (made now: it is shared with the view)
                        view = _new_object(SmartArray)  # (what _view does, without its calls)
                        # (``_alloc`` is stored on its first read: a store to a name the class
                        # has a descriptor for is one CPython 3.11 cannot specialise)
                        view._alloc_if_made = alloc
                        view._offset = self._offset + start * strides[0]
                        view._shape = (stop - start,)
                        view._strides = strides
                        view._dtype = self._dtype
                        view._writeable = self._writeable
                        base = self._base
                        view._base = self if base is None else base
                        view._host_ro = view._host_rw = view._host_scalar = view._host_1d = None
                        return view
            elif kind is int:  # fast path: an element of a 1-d array whose host copy is ready
                host = self._host_1d
                if host is not None:
                    alloc = self._alloc_if_made
                    if alloc is None:
                        if self._own_host is not None:  # (no allocation yet: see _own_host)
                            return host[key]
                    elif alloc._host_token is not None:  # (state HOST, nothing pending)
                        return host[key]
                    else:
                        state = alloc.state
                        if alloc._host_event is None and (
                            # (device work to wait for matters in state BOTH only: mapped memory)
                            state is _HOST or (state is _BOTH and alloc._device_event is None)
                        ):
                            return host[key]  # numpy's own IndexError for a bad index
            return self._index(key, kind)

    def _index(self, key: Any, kind: type) -> Any:
        """``self[key]`` (``kind``: ``type(key)``) where :meth:`__getitem__`'s fastest paths
        do not apply."""
        if kind is int or kind is tuple:  # an element of a ready host copy
            alloc = self._alloc
            # (the host view and the layout it was made for, read with no call between:
            # see the shape setter; only these locals are used below)
            shape = self._shape
            strides = self._strides
            host = self._host_ro
            state = alloc.state
            if (
                host is not None
                and (state is _HOST or state is _BOTH)
                and alloc._host_event is None
                and alloc._device_event is None
                and (
                    len(shape) == 1
                    if kind is int
                    else len(key) == len(shape) and all(type(i) is int for i in key)
                )
            ):
                return host[key]  # numpy's own IndexError for a bad index
            if (
                state is _MIXED
                and kind is int
                and host is not None
                and len(shape) == 1
                and self._shuffle is None
            ):
                # An element of an array current partly on each side: read it from the host
                # if its bytes are current there and nothing is pending (else the full path).
                length = shape[0]
                index = key + length if key < 0 else key
                if 0 <= index < length:
                    start = self._offset + index * strides[0]
                    if alloc.host_current((start, start + self._dtype.itemsize)):
                        return host[key]
            if self._shuffle is not None and kind is int:  # numpy's shuffle swapping items
                caller = sys._getframe(1)  # (the C slot calls this method directly)
                if caller.f_code is _GETITEM_PY_CODE:
                    caller = caller.f_back  # type: ignore[assignment]
                item = _hooks.shuffled_read(self, key, caller)
                if item is not _hooks.NOT_SHUFFLING:
                    return item
        if kind is int or kind is slice or kind is tuple:
            # A view for the common basic keys (a row, a block, a strided slice…), its
            # layout computed directly: no template, nothing else made.
            layout = _basic_view_layout(self._shape, self._strides, key)
            if layout is not None:
                view = _new_object(SmartArray)  # (what _view does, without its calls)
                view._alloc_if_made = self._alloc  # (made now if it was not: it is shared)
                view._offset = self._offset + layout[0]
                view._shape = layout[1]
                view._strides = layout[2]
                view._dtype = self._dtype
                view._writeable = self._writeable
                base = self._base
                view._base = self if base is None else base  # like numpy: the memory's owner
                view._host_ro = view._host_rw = view._host_scalar = view._host_1d = None
                return view
        if _is_basic_index(key):
            shape = self._shape  # (the layout, read with no call between: see shape)
            strides = self._strides
            if _selects_scalar(key, len(shape)):
                element = self._template()[_view_key(key)]  # bounds check on the layout only
                alloc = self._alloc
                with alloc.lock:
                    if self._shape is not shape or self._strides is not strides:
                        # (another thread set the shape meanwhile: again, holding the lock
                        # the setter needs, so that the bytes made current are those read)
                        return self._index(key, kind)
                    alloc.ensure_host(None, _span_of(element, alloc)[0])  # (its bytes only)
                    return self._host_view(write=False, sync=False)[key]
            # (not a lambda: a closure over ``key`` would make every call of __getitem__,
            # fast paths included, allocate a cell for it: about 35 ns on Python 3.11)
            return self._apply_view(operator.itemgetter(key))
        if _is_field_index(key, self._dtype):  # a['x'], a[['x', 'y']]: views, like numpy
            return self._apply_view(operator.itemgetter(key))
        if not self._alloc.is_valid("host", self._span()) and not isinstance(key, SmartArray):
            # A bad index must fail before the stale host copy is brought up to date.
            _layout_probe(self._shape, np.dtype(np.bool_))[key]
        return _hooks.call_on_host(_getitem, (self, key), {})

    def _setitem_py(self, key: Any, value: Any) -> None:
        """``self[key] = value`` in Python: ``__setitem__`` without smartarray._speedups,
        whose C slot makes the first lock-free path's checks and writes (an element and a
        Python float or int) and calls this method for the others."""
        host = self._host_scalar  # (a writable contiguous 1-d numeric array's: see there)
        if host is not None:
            # Lock-free paths: a Python or numpy scalar written while the allocation holds a
            # host token (state HOST, nothing pending, no launch in preparation: see
            # Allocation._host_token). The same token after the write means no copy read the
            # buffer and no label changed meanwhile; otherwise _assign writes again under the
            # lock (a scalar written twice is written once; its bytes are an exact extent,
            # which needs no copy) and labels the bytes. (Only scalars: the conversion of any
            # other value, which may run code of its own or read arrays, must happen once,
            # and the write made again must not need a copy either:
            # tests/test_review4_findings.py.) The two branches differ only in what they
            # check and write through; they are one function on purpose (a call of a shared
            # helper would cost more than the path saves).
            if type(key) is int and (type(value) is float or type(value) is int):
                # An element and a Python float or int, the commonest writes: through the
                # memoryview for float64, which stores the double numpy would (an int
                # rounded to nearest). Its errors are not numpy's (an index out of bounds, an
                # int past a double's range): nothing is written, and _assign raises numpy's.
                alloc = self._alloc_if_made  # (set wherever _host_rw is: _host_view)
                token = alloc._host_token  # type: ignore[union-attr]
                if token is not None:
                    try:
                        host[key] = value  # type: ignore[assignment]  # ("d": a float too)
                    except (IndexError, ValueError, OverflowError):
                        pass
                    else:
                        if alloc._host_token is token:  # type: ignore[union-attr]
                            return
            elif ((type(key) is slice and key.step is None) or type(key) is int) and (
                type(value) is float or type(value) in SCALAR_VALUES
            ):
                host = self._host_rw  # (read again: a layout change may clear it meanwhile)
                alloc = self._alloc_if_made
                token = alloc._host_token  # type: ignore[union-attr]
                if token is not None and host is not None:
                    host[key] = value
                    if alloc._host_token is token:  # type: ignore[union-attr]
                        return
        self._assign(key, value)

    if _speedups is None:  # (else the C slots of _Indexing, SmartArray's first base)
        if not TYPE_CHECKING:
            __getitem__ = _getitem_py
        __setitem__ = _setitem_py

        def __delitem__(self, key: Any) -> None:
            raise ValueError("cannot delete array elements")  # (numpy's error)

    def _assign(self, key: Any, value: Any) -> None:
        """``self[key] = value`` where :meth:`__setitem__`'s lock-free path does not apply.
        (A function of its own: each local of ``__setitem__`` costs every call.)"""
        host = self._host_rw  # cached only for writable arrays
        alloc = self._alloc_if_made
        if (
            host is not None
            and alloc is not None
            and (type(key) is int or type(key) is slice)
            and (
                type(value) in SCALAR_VALUES
                or (
                    type(value) is np.ndarray
                    and value.dtype.kind in _NUMERIC_KINDS
                    and self._dtype.kind in _NUMERIC_KINDS
                )
            )
        ):
            # Fast path: the device copy (if any) is already stale, so nothing changes state
            # and numpy either converts and writes, or raises before writing. The lock keeps
            # an upload from reading the buffer while it is written.
            lock = alloc.lock
            lock.acquire()  # (cheaper than ``with`` here)
            try:
                state = alloc.state
                if state is _HOST and alloc._host_event is None and alloc._launch is None:
                    host[key] = value
                    if alloc._host_token is None:  # (the next scalar writes go lock-free)
                        alloc._host_token = object()
                    return
                # (under the lock, which the shape setter holds: the layout and the host
                # view read again, together, with no call between)
                shape = self._shape
                strides = self._strides
                host = self._host_rw
                if (
                    state is _MIXED
                    and host is not None
                    and type(key) is int
                    and type(value) in SCALAR_VALUES
                    and len(shape) == 1
                    and self._dtype.kind in _NUMERIC_KINDS
                ):
                    # An element of an array current partly on each side: only its bytes
                    # change state. The value is converted first (numpy's error, and
                    # nothing changed, if it does not fit).
                    length = shape[0]
                    index = key + length if key < 0 else key
                    if 0 <= index < length:
                        item = np.asarray(value, dtype=self._dtype)
                        start = self._offset + index * strides[0]
                        extent = ((start, start + self._dtype.itemsize),)
                        alloc.overwrite_host(extent)
                        host[key] = item
                        return
            finally:
                lock.release()
        call = _hooks.host_call()
        call.check_writeable(self)  # (refused first if read-only; noted as the call's target)
        alloc = self._alloc
        # The layout the bytes written are worked out from, read with no call between (see the
        # shape setter, which holds the lock): checked again under the lock below.
        shape = self._shape
        strides = self._strides
        span, covers_all = self._written_span(key, alloc)  # IndexError before any copy
        if self._dtype.kind == "O" and _is_basic_index(key) and _selects_scalar(key, len(shape)):
            host_value = value  # (stored as it is, as numpy does: nothing read, no conversion)
        else:  # (wrappers of SmartArrays read through now, holding no lock: _Call.operands)
            host_value = _convert_text_values(call.unwrap(call.operands(value)), self._dtype)
        host_key = call.unwrap(call.operands(key))
        # Numeric targets: with text converted above, numpy's assignment either fails before
        # writing (bad index, shape or scalar) or succeeds. Other dtypes (structured…) may
        # fail half-way, e.g. on the second of two tuples.
        atomic = self._dtype.kind in _NUMERIC_KINDS
        with alloc.lock:
            if self._shape is not shape or self._strides is not strides:
                # Another thread set the shape meanwhile: the bytes written worked out again,
                # holding the lock (which the setter needs), so that the bytes labelled are
                # the bytes written (the key and the value, converted, do not depend on it).
                span, covers_all = self._written_span(key, alloc)
            if (
                alloc.is_valid("gpu", span)
                and alloc.host_memory != "mapped"
                and (not alloc.is_valid("host", span) or not atomic)
            ):
                # A device copy to keep right: make sure the assignment succeeds before the
                # stale host copy is fetched (a wasted copy otherwise), or before a write that
                # could fail half-way.
                _validate_assignment(self._shape, self._dtype, host_key, host_value)
            # A validated numeric assignment to every element never needs the stale host data
            # (values that are SmartArrays were made current on the host when unwrapped).
            alloc.prepare_host_write(covers_all and atomic, span)
            host = self._host_view(write=True, sync=False)
            try:
                host[host_key] = host_value
            except BaseException:
                if not atomic:  # part of the host copy may have been written
                    alloc.host_written(span)
                raise
            alloc.host_written(span)

    def _written_span(self, key: Any, alloc: Allocation) -> tuple[Extent | None, bool]:
        """The bytes ``self[key] = ...`` writes (all of this view's for a key that is not
        basic), and whether they are all of the allocation's; IndexError for a bad key."""
        if _is_basic_index(key):
            target = self._template()[_view_key(key)]
            return _span_of(target, alloc)  # (the bytes written: only those)
        return self._span(), False

    def __contains__(self, value: Any) -> bool:
        return value in self._host_view(write=False)

    # --- numpy protocols ----------------------------------------------------------------------

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> Any:
            """The host copy (made current) as an ndarray view, or a copy with ``copy=True``.

            The view is writable if this array is (``x = np.asarray(x); x -= x.mean()`` writes
            ``a``, as for an ndarray), read-only otherwise. It is tracked while it, or any view
            derived from it, is alive (see :mod:`smartarray._core.host_exports`): writes through it,
            by any means, are found before the device copy is next used (which is then
            re-uploaded), and device writes of this array (kernel launches, CUDA ufunc outputs,
            ``mark_changed('gpu')``) are copied back at once, so that it never shows stale data.
            """
            alloc = self._alloc
            with alloc.lock:
                # (no copy or wait needed: the cached view as it is, checked under the lock)
                host = _hooks.readable_host(self)
                if host is None:
                    host = self._host_view(write=False)
                if copy:
                    return np.array(host, dtype=dtype, copy=True)
                if dtype is None or np.dtype(dtype) == host.dtype:
                    if self._writeable:  # the writable view (the host copy is current: no flag
                        host = self._host_view(write=True, sync=False)  # changes)
                    # A new ndarray object (a caller setting its .shape must not change the cached
                    # view), counted as a live export: kept current after device writes.
                    return _host_exports.export(alloc, host)
            if copy is False:
                raise ValueError(
                    f"Unable to avoid copy while converting from {host.dtype} to {np.dtype(dtype)}"
                )
            return host.astype(dtype)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _hooks.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _hooks.array_function(func, types, args, kwargs)

    # The other public ndarray methods and attributes are forwarded to the host copy, made
    # current first, by members smartarray._numpy installs (_numpy.protocols.ndarray_members),
    # and the operators are the fast ones of _numpy.fastpath: explicit members, not
    # __getattr__, because a class with __getattr__ makes every attribute access of its
    # instances slower (CPython cannot specialise it). Their types, for type checkers only,
    # are declared in smartarray._array_typing (_SmartArrayTyping, the class's first base).
    # --- conversions ------------------------------------------------------------------------

    def __repr__(self) -> str:
        with self._alloc.lock:
            text = np.array_repr(self._host_view(write=False))
        body = text[len("array") :]
        return "SmartArray" + body.replace("\n      ", "\n" + " " * len("SmartArray "))

    def __str__(self) -> str:
        return str(self._host_view(write=False))

    def __format__(self, spec: str) -> str:
        return format(self._host_view(write=False), spec)

    def __bool__(self) -> bool:
        """Truth value, as numpy's, never copying data just to refuse it.

        A one-element array (0-d included) is as true as its element: that needs the value,
        read like ``a.item()`` (the host copy made current, one copy if it was stale). Any
        other array raises numpy's ``ValueError`` without reading data, except when asked
        by numba-cuda's own code, written for Numba device arrays, whose truth is
        ``len(a) > 0`` (``if not out:`` in ``numba.cuda.kernels.transpose``).
        """
        if self.size == 1:
            with self._alloc.lock:
                return bool(self._host_view(write=False))
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith(("numba.cuda.", "numba_cuda.")):
            return self._shape[0] > 0
        hint = (
            " (code written for Numba device arrays, such as `if not out:`, should test "
            "`out is None`)"
        )
        if self.size == 0:
            raise ValueError(
                "The truth value of an empty array is ambiguous. Use `array.size > 0` to "
                "check that an array is not empty." + hint
            )
        raise ValueError(
            "The truth value of an array with more than one element is ambiguous. Use "
            "a.any() or a.all()" + hint
        )

    def __int__(self) -> int:
        return int(self._host_view(write=False))  # type: ignore[call-overload]

    def __float__(self) -> float:
        return float(self._host_view(write=False))  # type: ignore[arg-type]

    def __complex__(self) -> complex:
        return complex(self._host_view(write=False))  # type: ignore[arg-type]

    def __index__(self) -> int:
        return self._host_view(write=False).__index__()

    __hash__ = None  # type: ignore[assignment]

    def tolist(self) -> Any:
        """The data as nested Python lists (``ndarray.tolist``)."""
        return self._host_view(write=False).tolist()

    def item(self, *args: Any) -> Any:
        """Copy an element to a Python scalar (``ndarray.item``); only that element's bytes
        are made current on the host."""
        shape = self._shape  # (the layout, read with no call between: see shape)
        strides = self._strides
        element = _element_of(self._template(), args)  # numpy's IndexError before any copy
        alloc = self._alloc
        with alloc.lock:
            if self._shape is not shape or self._strides is not strides:
                return self.item(*args)  # (another thread set the shape: as in _index)
            if element is not None:
                alloc.ensure_host(None, _span_of(element, alloc)[0])
                return self._host_view(write=False, sync=False).item(*args)
            return self._host_view(write=False).item(*args)

    # --- copies and layout ------------------------------------------------------------------

    def copy(self, order: str = "C") -> SmartArray[_ShapeT_co, _DTypeT_co]:
        """A new SmartArray with a copy of the data.

        The copy is made where the data is current: a device-only array, or one made with no
        data that only the device used yet (``zeros(n, where='gpu')``: no host buffer), is
        copied on the device (no host transfer). It has the same host memory kind (``'pinned'``,
        ``'pageable'`` or ``'mapped'``) as this array, except for layouts only numpy's
        ``order='K'`` makes (a non-contiguous view in a mixed axis order): a pageable copy.
        """
        alloc = self._alloc
        with alloc.lock:
            layout = _contiguity(self._shape, self._strides, self.itemsize)
            span = self._span()
            if (
                alloc.on_device_side(span)
                and layout is not None
                and order in ("K", "A", layout)
                and min(self._strides, default=0) >= 0
            ):
                source = self._device_view()
                strides: list[tuple[int, ...]] = []

                def write(target: Any) -> None:
                    _backend.copy_d2d(source, target)
                    strides.append(tuple(target.strides))

                # (this thread holds alloc's lock: the budget never evicts the source)
                new = Allocation.on_device(
                    self._shape,
                    self._dtype,
                    layout,
                    host_memory=alloc.host_memory
                    if alloc.host_memory != "mapped"
                    else _backend.default_host_memory(),
                    write=write,
                )
                # Device work on the default stream (recorded for ``new`` by on_device): later
                # work on other streams waits for it.
                alloc.device_read(None)
                return SmartArray._view(new, 0, self._shape, strides[0], self._dtype, True, None)
            source = self._host_view(write=False)
            kind = alloc.host_memory
            if kind != "pageable" and not self._dtype.hasobject:
                # The copy keeps the host memory kind (pinned or mapped), laid out as numpy's
                # copy with this order would be; copied once, straight into the new buffer.
                like = np.empty_like(source, order=order)  # type: ignore[call-overload]
                layout = _contiguity(like.shape, like.strides, like.itemsize)
                if layout is not None:
                    buffer = _host_buffers.host_empty(self._shape, self._dtype, layout, kind)
                    buffer[...] = source
                    new = Allocation.on_host(buffer, layout, host_memory=kind)
                    return SmartArray._view(
                        new, 0, buffer.shape, tuple(buffer.strides), buffer.dtype, True, None
                    )
            host = np.array(source, order=order, copy=True)  # type: ignore[call-overload]
        return SmartArray._adopt(host)

    def __copy__(self) -> SmartArray[_ShapeT_co, _DTypeT_co]:
        return self.copy("K")

    def __deepcopy__(self, memo: dict[int, Any]) -> SmartArray[_ShapeT_co, _DTypeT_co]:
        if self._dtype.hasobject:  # like numpy: the elements are deep-copied too
            host = np.array(self._host_view(write=False), order="K")
            return SmartArray._adopt(_copy.deepcopy(host, memo))
        return self.copy("K")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle a host copy of the data with the label, writability and host memory kind
        (see :mod:`smartarray._numpy.pickling`); only the device copy current: one download."""
        return _hooks.reduce(self)

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def astype(
            self, dtype: DTypeLike, order: str = "K", casting: str = "unsafe", copy: bool = True
        ) -> SmartArray[_ShapeT_co, np.dtype[Any]]:
            """Cast to ``dtype`` (``ndarray.astype``); self if ``copy=False`` and no copy is
            needed."""
            if not copy and np.dtype(dtype) == self._dtype:
                flags = self.flags
                if (
                    order == "K"
                    or (order == "C" and flags.c_contiguous)
                    or (order == "F" and flags.f_contiguous)
                    or (order == "A" and (flags.c_contiguous or flags.f_contiguous))
                ):
                    return self
            return _hooks.call_on_host(
                lambda a: a.astype(dtype, order=order, casting=casting), (self,), {}
            )

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def reshape(
            self, *shape: Any, order: str = "C", copy: bool | None = None
        ) -> SmartArray[_AnyShape, _DTypeT_co]:
            """A view with a new shape when possible (no data touched), else a copy."""
            if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
                shape = tuple(shape[0])
            # Bad shapes and orders fail here, on a probe with this layout's shape, before any data
            # is read or copied.
            probe = _layout_probe(self._shape, np.dtype(np.bool_))
            probe.reshape(shape, order=order, copy=None)  # type: ignore[call-overload]
            if copy is not True:
                try:
                    return self._apply_view(
                        lambda t: t.reshape(shape, order=order, copy=False)  # type: ignore[call-overload]
                    )
                except ValueError:
                    if copy is False:
                        raise
            return _hooks.call_on_host(
                lambda a: a.reshape(shape, order=order, copy=True), (self,), {}
            )

    def ravel(self, order: str = "C") -> SmartArray[tuple[int], _DTypeT_co]:
        """A flattened view when possible, else a copy (``ndarray.ravel``)."""
        # A view exactly when numpy's ravel gives one (contiguous data), else a copy; unlike
        # reshape(-1), which also gives views of some non-contiguous layouts.
        if order not in ("C", "F", "A", "K"):
            raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
        # (one layout throughout, the template's: another thread may set the shape)
        template = self._template()
        flags = template.flags
        if order == "K":
            # Memory order: axes by decreasing stride (stable, so ties keep C order).
            strides = template.strides
            axes = sorted(range(template.ndim), key=lambda i: -strides[i])
            if template.transpose(axes).flags.c_contiguous:
                return self._from_template(template.transpose(axes).reshape(-1))
        elif order == "A":
            order = "F" if flags.f_contiguous and not flags.c_contiguous else "C"
        if (order == "C" and flags.c_contiguous) or (order == "F" and flags.f_contiguous):
            return self._from_template(template.reshape(-1, order=order))  # type: ignore[call-overload]
        return _hooks.call_on_host(lambda a: a.ravel(order), (self,), {})

    def flatten(self, order: str = "C") -> SmartArray[tuple[int], _DTypeT_co]:
        """A flattened copy (``ndarray.flatten``)."""
        if order not in ("C", "F", "A", "K"):
            raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
        return _hooks.call_on_host(lambda a: a.flatten(order), (self,), {})

    def transpose(self, *axes: Any) -> SmartArray[_AnyShape, _DTypeT_co]:
        """View with axes permuted (``ndarray.transpose``)."""
        if not axes or (len(axes) == 1 and axes[0] is None):  # the axes reversed, directly
            base = self._base
            return SmartArray._view(
                self._alloc,
                self._offset,
                self._shape[::-1],
                self._strides[::-1],
                self._dtype,
                self._writeable,
                self if base is None else base,  # like numpy: the memory's owner
            )
        return self._apply_view(lambda t: t.transpose(*axes))

    def swapaxes(self, axis1: int, axis2: int) -> SmartArray[_AnyShape, _DTypeT_co]:
        """View with two axes interchanged."""
        return self._apply_view(lambda t: t.swapaxes(axis1, axis2))

    def squeeze(self, axis: Any = None) -> SmartArray[_AnyShape, _DTypeT_co]:
        """View with length-one axes removed."""
        return self._apply_view(lambda t: t.squeeze(axis))

    def diagonal(
        self, offset: int = 0, axis1: int = 0, axis2: int = 1
    ) -> SmartArray[_AnyShape, _DTypeT_co]:
        """Read-only view of the diagonal (``ndarray.diagonal``)."""
        return self._apply_view(lambda t: t.diagonal(offset, axis1, axis2))

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def getfield(
            self, dtype: DTypeLike, offset: int = 0
        ) -> SmartArray[_ShapeT_co, np.dtype[Any]]:
            """View of a field of each element, as ``dtype`` at byte ``offset``
            (``ndarray.getfield``): writable when this array is, like numpy's."""
            return self._apply_view(lambda t: t.getfield(dtype, offset))

    if not TYPE_CHECKING:  # (typed in _array_typing: see above)

        def view(self, dtype: DTypeLike | None = None) -> SmartArray[_ShapeT_co, np.dtype[Any]]:
            """View of the same memory with another dtype (``ndarray.view``)."""
            if dtype is None:
                return self._apply_view(lambda t: t.view())
            if isinstance(dtype, type) and issubclass(dtype, np.ndarray):
                raise TypeError(
                    "SmartArray.view() cannot return an ndarray subclass; use get('host')"
                )
            return self._apply_view(lambda t: t.view(dtype))

    def fill(self, value: Any) -> None:
        """Set every element to ``value``; never copies stale data it overwrites anyway."""
        self._check_writeable()
        np.asarray(value, dtype=self._dtype)  # conversion errors before any state change
        alloc = self._alloc
        with alloc.lock:
            self._host_view(write=True, overwrite_all=self._overwrites_span()).fill(value)
            alloc.host_written(self._span())

    # Reductions: explicit for discoverability; all run on the host copy through numpy.
    def sum(self, *args: Any, **kwargs: Any) -> Any:
        """Sum of elements (``numpy.sum``)."""
        if not args and not kwargs:
            host = self._host_ro
            alloc = self._alloc_if_made
            if host is not None and alloc is not None:
                state = alloc.state
                if alloc._host_event is None and (  # (_hooks.readable_host's test, inline:
                    state is _HOST or (state is _BOTH and alloc._device_event is None)
                ):  # the call costs a fifth of a small sum)
                    return host.sum()
            host = _hooks.readable_host(self)
            if host is not None:
                return host.sum()
        return np.sum(self, *args, **kwargs)

    def mean(self, *args: Any, **kwargs: Any) -> Any:
        """Mean of elements (``numpy.mean``)."""
        if not args and not kwargs:
            host = _hooks.readable_host(self)
            if host is not None:
                return host.mean()
        return np.mean(self, *args, **kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Any:
        """Minimum (``numpy.min``)."""
        if not args and not kwargs:
            host = _hooks.readable_host(self)
            if host is not None:
                return host.min()
        return np.min(self, *args, **kwargs)

    def max(self, *args: Any, **kwargs: Any) -> Any:
        """Maximum (``numpy.max``)."""
        if not args and not kwargs:
            host = _hooks.readable_host(self)
            if host is not None:
                return host.max()
        return np.max(self, *args, **kwargs)

    def any(self, *args: Any, **kwargs: Any) -> Any:
        """True if any element is true (``numpy.any``)."""
        if not args and not kwargs:
            host = _hooks.readable_host(self)
            if host is not None:
                return host.any()
        return _hooks.call_method(self, "any", args, kwargs)  # (ndarray.any's parameters)

    def all(self, *args: Any, **kwargs: Any) -> Any:
        """True if all elements are true (``numpy.all``)."""
        if not args and not kwargs:
            host = _hooks.readable_host(self)
            if host is not None:
                return host.all()
        return _hooks.call_method(self, "all", args, kwargs)  # (ndarray.all's parameters)

    # --- CUDA hooks -------------------------------------------------------------------------

    @_LayoutCached
    def _numba_type_(self) -> Any:  # type: ignore[override]
        """The Numba type of this array (read by Numba's dispatchers instead of typeof)."""
        return _hooks.numba_type(self, not self._writeable)

    def to_device(self, retr: list | None = None, stream: Any = 0) -> Any:
        """Make the device copy current and return it, as ``get('gpu', stream)`` does.

        Parameters
        ----------
        retr : None
            Leave it out: it is numba-cuda's, which calls ``to_device(retr, stream)`` on every
            kernel argument of a launch (the kernel-argument protocol of ``numba.cuda.In``
            and its kind), passing the launch's list of clean-up work.
        stream : numba.cuda stream or 0, optional
            Stream for the upload, if one is needed (0: the default stream).

        Returns
        -------
        numba.cuda device array
            Shares memory with this SmartArray, like ``get('gpu')`` (not a copy, unlike
            ``numba.cuda.to_device(ndarray)``): after writing through it, call
            ``mark_changed('gpu')``.

        Notes
        -----
        Called by numba-cuda at a launch (``retr`` a list), it prepares this array as a bare
        kernel argument instead: its intent is inferred from the kernel's code, ``In`` when no
        argument of the launch may write this array's memory, else ``InOut`` (see
        :mod:`smartarray._cuda.launch`). ``import smartarray`` replaces this method with the
        CUDA glue's own (``smartarray._cuda.arguments.bare_kernel_argument``, one Python frame
        less per argument per launch), which does both.
        """
        if retr is None:
            return self.get("gpu", stream=stream)
        return _hooks.bare_kernel_argument(self, retr, stream)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """DLPack export (``np.from_dlpack(a)``, ``torch.from_dlpack(a)``…) of one copy.

        The host copy, unless this process has a GPU and only the device copy is current (or
        ``dl_device`` names a device); it is made current first. Exporting a writable array
        marks the exported copy changed, as ``__cuda_array_interface__`` does; a read-only
        array exports read-only (DLPack 1.0 flag). ``copy=True`` exports a snapshot and
        changes nothing. See the DLPack section of the memory-management docs.
        """
        return _hooks.dlpack_export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)`` that ``__dlpack__()`` exports from: ``(1, 0)`` for the
        host copy (kDLCPU), ``(2, n)`` for the device copy on CUDA device ``n`` (kDLCUDA)."""
        return _hooks.dlpack_device(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface (v3) of the device copy, made current.

        Whoever reads this gets a raw device pointer and may write through it, so the device
        copy is conservatively marked changed (the host copy becomes stale).
        """
        return _hooks.cuda_array_interface(self)


_GETITEM_PY_CODE = SmartArray._getitem_py.__code__  # type: ignore[attr-defined]
if _speedups is not None:
    _speedups.configure(SmartArray, _HOST, _BOTH)


# What a SmartArray caches for its layout in its instance dict (dropped when its shape is
# set, with the host views and the layout template): its Numba types and the host views
# handed to compiled code.
_NUMBA_LAYOUT_CACHES = (
    "_numba_type_",
    "_numba_type_readonly",
    "_numba_type_writeable",
    "_jit_rw",
    "_jit_ro",
    "_jit_rw_native",
    "_jit_ro_native",
    "_jit_rw_mi",
    "_jit_ro_mi",
)


def own_result(host: np.ndarray) -> SmartArray[Any, Any]:
    """A new SmartArray whose host buffer is ``host``, a new ndarray that nobody else holds
    (a fresh result): no copy, and none of the locking explicit adoption (``copy=False``) of a
    caller's ndarray does; about the cost of one object creation (the fast paths wrap every
    new numpy result with it). It has no allocation until it needs one (see
    :class:`_AllocationOnFirstRead`), then a light one (:meth:`Allocation.on_host`).
    ``host`` neither C- nor F-contiguous (a ufunc's result in the memory order of a
    transposed 3-d operand) is adopted by :meth:`SmartArray._adopt`."""
    flags = host.flags
    if not (flags.c_contiguous or flags.f_contiguous):
        return SmartArray._adopt(host)
    array = _new_object(SmartArray)
    array._own_host = host  # (its allocation is made on first need: _AllocationOnFirstRead)
    array._offset = 0
    array._shape = host.shape
    array._strides = host.strides
    array._dtype = host.dtype
    array._writeable = flags.writeable
    array._base = None
    array._alloc_if_made = None
    array._host_ro = array._host_rw = array._host_scalar = array._host_1d = None
    return array


def _element_of(layout: np.ndarray, args: tuple[Any, ...]) -> np.ndarray | None:
    """The 0-d view of ``layout`` (a template: never read) that ``ndarray.item(*args)`` reads,
    or None for ``item()``. Bad arguments raise numpy's errors (TypeError, ValueError,
    IndexError) before anything is copied."""
    if not args:
        return None
    single = args[0] if len(args) == 1 else None
    if type(single) is tuple and len(single) == 1 and layout.ndim != 1:
        single = single[0]  # (numpy reads a 1-tuple as a flat index)
    if single is not None and type(single) is not tuple:
        flat = operator.index(single)
        if not -layout.size <= flat < layout.size:
            raise IndexError(f"index {flat} is out of bounds for size {layout.size}")
        index: tuple[Any, ...] = tuple(
            int(i) for i in np.unravel_index(flat % layout.size, layout.shape)
        )
    else:
        items = args[0] if len(args) == 1 else args
        index = tuple(operator.index(i) for i in items)
        if len(index) != layout.ndim:
            raise ValueError("incorrect number of indices for array")
    element: np.ndarray = layout[(*index, Ellipsis)]
    return element


def _span_of(layout: np.ndarray, alloc: Allocation) -> tuple[Extent | None, bool]:
    """The bytes of ``alloc`` that ``layout`` (a view of the template, see ``_template``)
    covers, and whether writing all its elements writes all of them."""
    return extent_of(
        layout.__array_interface__["data"][0] - _FAKE_BASE,
        layout.shape,
        layout.strides,
        layout.dtype.itemsize,
        alloc.nbytes,
    )


def _getitem(array: np.ndarray, key: Any) -> Any:
    return array[key]


def _unpickle(host: np.ndarray) -> SmartArray:
    # Pickles made before smartarray._numpy.pickling (data only) still load.
    return SmartArray._adopt(host)
