"""Fast paths for host code: numpy operations on SmartArrays whose host copy is ready.

Most host code runs on arrays in one steady state: the host copy is current, no
asynchronous copy into or out of it is pending, and the device copy is absent or already
stale. Then the full protocol machinery of :mod:`smartarray._numpy.protocols` (unwrapping,
locks, flag updates) would change nothing, and costs dozens of microseconds per call. The
functions here recognise that state with a few attribute reads and run numpy directly on
the cached host views; anything else falls back to the full path.

The state is read from the :class:`~smartarray._core.coherence.Allocation` without changing it
(only :mod:`smartarray._core.coherence` changes it):

* **reads** need ``state`` other than ``DEVICE`` and no pending event (``_host_event`` and
  ``_device_event`` both None): exactly when ``Allocation.ensure_host()`` would neither copy
  nor wait. Reads take no lock, like the full path's reads, which also read the host copy
  outside the lock once it is current.
* **writes** need ``state`` ``HOST`` (the device copy, if any, is already stale, so no flag
  changes), no pending event and no launch being prepared (``_launch`` None), checked and
  written under the allocation's lock, so that no upload can read the buffer half-written
  and then mark the device copy current.

Element reads and writes (``a[i]``, ``a[i] = v``) make these checks inline, in
``SmartArray.__getitem__``/``__setitem__``; the compiled ``@njit`` unboxing
(:mod:`smartarray._numba.cpu`) makes the same kind of check on the same attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from .. import _hooks
from .._array import SmartArray, own_result
from .._core.coherence import State

_DEVICE = State.DEVICE
_HOST = State.HOST
_MIXED = State.MIXED

# Operands numpy handles itself, with no override of their own: passed to numpy as they are.
PLAIN_OPERANDS: frozenset[type] = frozenset(
    {int, float, complex, bool, np.ndarray, *np.sctypeDict.values()}
)

# Returned when the fast path does not apply: the caller takes the full path.
FALLBACK: Any = object()


def readable_host(array: SmartArray) -> np.ndarray | None:
    """``array``'s read-only host view (made and cached on first use) if reading it needs no
    copy, wait or lock; None otherwise."""
    alloc = array._alloc_if_made
    if alloc is None:
        shape = array._shape  # (read before the buffer: see SmartArray.shape's setter)
        host = array._own_host
        if host is not None:  # no allocation yet: current on the host, nothing pending
            view = array._host_ro
            if view is None:
                view = host.view()
                view.flags.writeable = False
                one_d = len(shape) == 1
                # (cached only if the layout is still the one read: check and stores
                # call-free, see SmartArray.shape's setter)
                if array._shape is shape:
                    array._host_ro = view
                    if one_d:
                        array._host_1d = view
            return view
        alloc = array._alloc
    state = alloc.state
    if (
        state is _DEVICE
        or state is _MIXED
        or alloc._host_event is not None
        or alloc._device_event is not None
    ):
        return None
    host = array._host_ro
    if host is None:  # e.g. a new result used as an operand: (x + y) * z
        host = array._host_view(write=False, sync=False)
    return host


def host_operand(value: Any) -> Any:
    """What numpy gets for ``value`` on the fast path, or :data:`FALLBACK` (use the full path).

    SmartArrays become their read-only host views if those are readable now; plain numpy
    operands are passed as they are; anything else (lists, foreign arrays, intents…) is
    left to the full path.
    """
    kind = type(value)
    if kind is SmartArray:
        host = readable_host(value)
        return FALLBACK if host is None else host
    if kind in PLAIN_OPERANDS:
        return value
    return FALLBACK


def adopt_fresh(result: Any) -> Any:
    """Wrap what a ufunc returned without ``out=``: its new ndarrays as new SmartArrays."""
    kind = type(result)
    if kind is np.ndarray:
        return own_result(result)
    if kind is tuple:  # several outputs (np.divmod, np.modf, np.frexp)
        return tuple(adopt_fresh(item) for item in result)
    return result  # a numpy scalar (0-d operands)


class _Arguments:
    """What the arguments of one fast call held: the SmartArrays read (results inside their
    memory become views of them) and the caller's own ndarrays (results sharing their memory
    are copied, as on the full path: a SmartArray cannot see writes made through them)."""

    __slots__ = ("arrays", "foreign")

    def __init__(self) -> None:
        self.arrays: list[Any] = []
        self.foreign: list[np.ndarray] = []


def host_arguments(values: Any, seen: _Arguments) -> Any:
    """``values`` (a tuple or list of arguments) with SmartArrays replaced by their host
    views, or ``FALLBACK`` if one of them is not readable now or is a wrapper the full path
    reads through (:meth:`~smartarray._numpy.protocols._Call.operands`). Lists and tuples
    inside are converted too (``np.concatenate([x, y])``); what was seen is recorded in
    ``seen``."""
    converted = []
    for value in values:
        kind = type(value)
        if kind is SmartArray:
            host = readable_host(value)
            if host is None:
                return FALLBACK
            seen.arrays.append(value)
            value = host
        elif kind is list or kind is tuple:
            value = host_arguments(value, seen)
            if value is FALLBACK:
                return FALLBACK
        elif isinstance(value, np.ndarray):
            seen.foreign.append(value)
        elif hasattr(kind, "_as_operand"):
            return FALLBACK  # (a.flat, an intent: see _Call.operands)
        converted.append(value)  # anything else goes to numpy as is, as on the full path
    return type(values)(converted) if type(values) is not list else converted


def wrap_result(result: Any, seen: _Arguments) -> Any:
    """Wrap a numpy function's result as the full path does: ndarrays become SmartArrays
    (views of an argument's memory where they are, copies where they share a caller's
    ndarray's memory); lists, tuples and named tuples are wrapped item by item."""
    if isinstance(result, np.ndarray):
        if seen.foreign and any(np.may_share_memory(result, nd) for nd in seen.foreign):
            result = result.copy(order="K")
        return SmartArray._from_numpy_result(result, seen.arrays)
    kind = type(result)
    if kind is list or kind is tuple:
        return kind(wrap_result(item, seen) for item in result)
    if isinstance(result, tuple) and hasattr(result, "_fields"):
        # numpy's named results (np.linalg.eigh, svd, qr, slogdet...)
        return kind(*(wrap_result(item, seen) for item in result))
    return result


def call_function(func: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Run a numpy function that writes none of its arguments on ready host views.

    Returns ``FALLBACK`` if an argument is not ready (the caller takes the full path).
    """
    seen = _Arguments()
    host_args = host_arguments(args, seen)
    if host_args is FALLBACK:
        return FALLBACK
    if kwargs:
        values = host_arguments(tuple(kwargs.values()), seen)
        if values is FALLBACK:
            return FALLBACK
        kwargs = dict(zip(kwargs, values, strict=True))
    return wrap_result(func(*host_args, **kwargs), seen)


def call_ufunc(ufunc: np.ufunc, inputs: tuple[Any, ...], kwargs: dict) -> Any:
    """``ufunc(*inputs, **kwargs)`` (no ``out=``/``where=``) on ready host views, or
    ``FALLBACK``."""
    hosts = []
    for value in inputs:
        host = host_operand(value)
        if host is FALLBACK:
            return FALLBACK
        hosts.append(host)
    return adopt_fresh(ufunc(*hosts, **kwargs))


# --- operators ------------------------------------------------------------------------------


def _forward(ufunc: np.ufunc, fallback: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: SmartArray, other: Any) -> Any:
        host = readable_host(self)
        if host is not None:
            operand = host_operand(other)
            if operand is not FALLBACK:
                result = ufunc(host, operand)
                # (adopt_fresh, one call fewer for the usual result)
                return own_result(result) if type(result) is np.ndarray else adopt_fresh(result)
        return fallback(self, other)

    return method


def _reflected(ufunc: np.ufunc, fallback: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: SmartArray, other: Any) -> Any:
        host = readable_host(self)
        if host is not None:
            operand = host_operand(other)
            if operand is not FALLBACK:
                result = ufunc(operand, host)
                return own_result(result) if type(result) is np.ndarray else adopt_fresh(result)
        return fallback(self, other)

    return method


def _inplace(ufunc: np.ufunc, fallback: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: SmartArray, other: Any) -> Any:
        if self._writeable:
            operand = host_operand(other)  # (before the lock: it may take other's)
            if operand is not FALLBACK:
                alloc = self._alloc  # (an array with none yet makes it: it is written)
                lock = alloc.lock
                lock.acquire()
                try:
                    if alloc.state is _HOST and alloc._host_event is None and alloc._launch is None:
                        if other is self:  # ``a += a``: read again under the lock, which the
                            operand = host_operand(other)  # shape setter takes: one layout
                        if operand is not FALLBACK:
                            host = self._host_rw
                            if host is None:
                                host = self._host_view(write=True, sync=False)
                            ufunc(host, operand, out=host)
                            return self
                finally:
                    lock.release()
        return fallback(self, other)

    return method


def _unary(ufunc: np.ufunc, fallback: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: SmartArray) -> Any:
        host = readable_host(self)
        if host is not None:
            return adopt_fresh(ufunc(host))
        return fallback(self)

    return method


def operator_methods() -> dict[str, Callable[..., Any]]:
    """Fast versions of every operator of :class:`numpy.lib.mixins.NDArrayOperatorsMixin`.

    Each runs the mixin's ufunc on the host views when both operands are ready and plain,
    and otherwise calls the mixin's own method (``__array_ufunc__``, the full path).
    """
    methods: dict[str, Callable[..., Any]] = {}
    for name, fallback in vars(NDArrayOperatorsMixin).items():
        if not (name.startswith("__") and callable(fallback)):
            continue
        ufunc = _ufunc_of(fallback)
        if ufunc is None:
            continue
        kind = fallback.__qualname__.split(".")[0]  # the mixin's factory of this method
        maker = {
            "_binary_method": _forward,
            "_reflected_binary_method": _reflected,
            "_inplace_binary_method": _inplace,
            "_unary_method": _unary,
        }.get(kind)
        if maker is None:
            continue
        method = maker(ufunc, fallback)
        method.__name__ = method.__qualname__ = name
        method.__doc__ = f"``{name}`` with :data:`numpy.{ufunc.__name__}` (fast path)."
        methods[name] = method
    return methods


def _ufunc_of(method: Callable[..., Any]) -> np.ufunc | None:
    """The ufunc a mixin method closes over (None for anything else)."""
    for cell in getattr(method, "__closure__", None) or ():
        if isinstance(cell.cell_contents, np.ufunc):
            return cell.cell_contents
    return None


def install(cls: type[SmartArray]) -> None:
    """Give ``cls`` (SmartArray) the fast operator methods."""
    for name, method in operator_methods().items():
        setattr(cls, name, method)


_hooks.readable_host = readable_host
