"""Access intents for passing a SmartArray to a kernel or a jitted function.

``In(x)``, ``Out(x)`` and ``InOut(x)`` mirror ``numba.cuda.In/Out/InOut`` and say what the
callee does with ``x``:

``In``
    reads only. The device copy is made current for a kernel; the host copy stays valid. The
    callee gets a read-only array (writes fail to compile on both targets). For ``@jit``
    functions the device copy stays valid too.
``Out``
    overwrites every element without reading. A kernel gets the device buffer with no
    host-to-device copy at all; afterwards the device copy is current. (For ``@jit`` functions
    ``Out`` behaves like ``InOut``.)
``InOut``
    reads and writes: the default for a bare SmartArray argument.

Host code takes them too: a numpy ufunc or function, or a CPU ``@vectorize``/``@guvectorize``
ufunc, given an intent runs as if given the SmartArray itself (``Out`` then behaves like
``InOut``, as for ``@jit`` functions), and ``np.asarray(In(x))`` is ``np.asarray(x)``,
read-only (NEP 13 and NEP 18: :func:`smartarray._numpy.protocols.intent_array_ufunc`). An
``In`` given as an output, or an ``Out`` as an input, is refused (:func:`check_roles`), as
CUDA ufuncs refuse it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Generic, overload

import numpy as np

from . import _hooks
from ._array import SmartArray, _ArgHint, _DTypeT_co, _ShapeT_co

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from ._array_typing import _DTypeT


class _Intent(_ArgHint, Generic[_ShapeT_co, _DTypeT_co]):
    """An intent (``In``, ``Out`` or ``InOut``) of a SmartArray: generic like the array, so
    that ``In(x).array`` and ``np.asarray(In(x))`` keep ``x``'s shape and dtype types."""

    intent = "inout"
    readonly = False
    array: SmartArray[_ShapeT_co, _DTypeT_co]

    def __init__(
        self, array: SmartArray[_ShapeT_co, _DTypeT_co] | _Intent[_ShapeT_co, _DTypeT_co]
    ) -> None:
        if isinstance(array, _Intent):
            array = array.array
        if not isinstance(array, SmartArray):
            raise TypeError(
                f"smartarray.{type(self).__name__}() takes a SmartArray, got "
                f"{type(array).__name__}; for plain arrays use numba.cuda.{type(self).__name__}()"
            )
        if self.intent != "in" and not array._writeable:
            raise read_only_target_error(array, f"smartarray.{type(self).__name__}()")
        self.array = array
        self.value = array

    def _as_operand(self) -> SmartArray[_ShapeT_co, _DTypeT_co]:
        """What a numpy call reads for this intent given as an operand where no intent
        protocol applies (nested in a list, a value assigned): its SmartArray."""
        return self.array

    @property
    def _numba_type_(self) -> Any:
        # (not cached here: the array caches its types per layout, and drops them when its
        # shape is set, which an intent kept across calls would not see)
        return _hooks.numba_type(self.array, self.readonly or not self.array._writeable)

    def to_device(self, retr: list, stream: Any = 0) -> Any:
        """Kernel-argument hook called by numba.cuda at launch."""
        return _hooks.kernel_argument(self.array, self.intent, retr, stream)

    @overload
    def __array__(
        self, dtype: None = None, copy: bool | None = None
    ) -> np.ndarray[_ShapeT_co, _DTypeT_co]: ...
    @overload
    def __array__(
        self, dtype: _DTypeT, copy: bool | None = None
    ) -> np.ndarray[_ShapeT_co, _DTypeT]: ...
    @overload
    def __array__(
        self, dtype: DTypeLike | None, copy: bool | None = None
    ) -> np.ndarray[_ShapeT_co, np.dtype[Any]]: ...
    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> Any:
        """``np.asarray(intent)``: what ``np.asarray(array)`` gives (the host copy, made
        current, as a tracked view); a read-only view for ``In``."""
        result = self.array.__array__(dtype, copy)
        if (
            self.readonly
            and result.flags.writeable
            and not copy
            and (dtype is None or np.dtype(dtype) == self.array.dtype)
        ):  # the array's own (writable) view: read-only through In
            result = result.view()
            result.flags.writeable = False
        return result

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NEP 13: a numpy ufunc (or CPU ``@vectorize``/``@guvectorize``) given an intent
        runs as given the SmartArray itself."""
        return _hooks.intent_array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        """NEP 18: a numpy function given an intent runs as given the SmartArray itself."""
        return _hooks.intent_array_function(func, types, args, kwargs)

    def __repr__(self) -> str:
        return f"smartarray.{type(self).__name__}({self.array.label})"


def check_roles(inputs: Iterable[Any], outputs: Iterable[Any], call: str) -> None:
    """Refuse an ``Out`` among the ``inputs`` and an ``In`` among the ``outputs`` of ``call``
    (host code: before anything is copied). Lists and tuples are looked into."""
    for value in _flat(inputs):
        if isinstance(value, Out):
            raise TypeError(
                f"{value!r} marks an output that is never read, but it is an input of "
                f"{call}: pass the array itself or smartarray.In(...) to read it, "
                "smartarray.InOut(...) to read and write it"
            )
    for value in _flat(outputs):
        if isinstance(value, In):
            raise TypeError(
                f"{value!r} marks a read-only input, but it is an output of {call}: pass "
                "smartarray.Out(...) or smartarray.InOut(...), or the array itself, as the output"
            )


def _flat(values: Iterable[Any]) -> Iterable[Any]:
    for value in values:
        if type(value) in (list, tuple):
            yield from _flat(value)
        else:
            yield value


def read_only_target_error(array: SmartArray, intent: str) -> ValueError:
    """The error for a writing intent (``intent``, e.g. ``'smartarray.InOut()'``) of the
    read-only ``array``: what it is and the fixes."""
    if array._base is not None:
        what = (
            f"a read-only view of {array.label} (as in numpy, views such as a.diagonal() "
            "and np.broadcast_to(a, shape) are read-only)"
        )
        write = "the array it is a view of, or a copy (view.copy())"
    else:
        what = f"the read-only {array.label}"
        write = "a copy (a.copy())"
    return ValueError(
        f"{intent} of {what}: nothing may write it. To only read it, pass it bare or as "
        f"smartarray.In(...); to write, pass a writable array: {write}"
    )


class In(_Intent[_ShapeT_co, _DTypeT_co]):
    """Read-only intent: the callee reads ``array`` and never writes it."""

    intent = "in"
    readonly = True


class Out(_Intent[_ShapeT_co, _DTypeT_co]):
    """Write-only intent: the callee overwrites all of ``array`` without reading it."""

    intent = "out"


class InOut(_Intent[_ShapeT_co, _DTypeT_co]):
    """Read-write intent (the default for a bare SmartArray)."""

    intent = "inout"


_hooks.read_only_intent = In
