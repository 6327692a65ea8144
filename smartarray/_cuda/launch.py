"""Inferred intents for bare SmartArray kernel arguments.

A SmartArray passed bare to a ``@cuda.jit`` kernel is prepared by its ``to_device`` hook, which
numba-cuda calls without saying which kernel is launched. This module wraps the one method
each tier runs per launch with the kernel and its arguments in hand:

* real GPU: ``numba.cuda.dispatcher.CUDADispatcher.call(self, args, launch_config)``, run by
  every ``kernel[...](...)`` (and ``kernel.forall(n)(...)``) before it selects and launches the
  compiled ``_Kernel`` (``self.py_func`` is the kernel's Python function; a ``_Kernel``
  loaded from the ``cache=True`` cache has none, which is why the dispatcher is hooked);
* simulator: ``numba.cuda.simulator.kernel.FakeCUDAKernel.__call__(self, *args)`` (``self.fn``).

The wrapper looks up the kernel's parameter analysis (:mod:`smartarray._numba.access`, computed once
and cached on the kernel object: a launch pays one dictionary look-up), and, when a bare
SmartArray is among the arguments, records for the duration of the launch, in a thread-local,
the allocations that every argument leaves unwritten (and the launch's stream, if it is the
default one, with whether that is asynchronous default-stream work: what the arguments'
steady-state path in :mod:`smartarray._cuda.arguments` needs to know about the stream).
:func:`bare_intent` then gives ``'in'`` for those and ``'inout'`` for everything else. The
decision is per allocation: if an allocation is behind two arguments (``k(x, x[1:])``) and
either may be written, or behind an explicit ``InOut``/``Out``, it is prepared as written
everywhere.

Read-only arrays (``a.diagonal()``, ``np.broadcast_to(a, ...)``) are the exception: a bare
read-only SmartArray is prepared ``'in'``, whatever the other arguments do with its
allocation, and even where the analysis only cannot prove that the kernel never writes it
(``t = x[i]; t += 1``). Nothing can write through it: Numba types it read-only, so a store
fails to compile on a GPU, and the simulator gets a read-only array, so a store raises there.
A written argument that shares its memory keeps the flags right for the whole allocation
(the read-only view is only read, on the same device buffer). Only where the kernel's own
code stores into the parameter (an element or attribute store, ``del``, or the target of a
``cuda.atomic`` function, which numba-cuda compiles for read-only arrays too) is it prepared
as written, which refuses the launch, since it is read-only (:func:`store_mask`). Explicit
intents are never changed. Launches without SmartArrays, and device-function calls in the
simulator, go straight to numba-cuda.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from .._array import SmartArray
from .._core import backend as _backend
from .._core import memory as _memory
from .._core.backend import _DEVICE_DTYPES
from .._intents import _Intent
from .._numba import access as _access

_HOOK_MARK = "__smartarray_launch_hook__"
_CACHE_KEY = "_smartarray_write_mask"
_local = threading.local()


def bare_intent(array: SmartArray) -> str:
    """The intent of a bare SmartArray argument of the launch being prepared."""
    readonly = getattr(_local, "readonly", None)
    if readonly is not None:
        alloc = array._alloc
        if alloc in readonly:
            return "in"
        if not array._writeable and not (
            type(readonly) is _Plan and any(alloc is other for other in readonly.stored)
        ):
            return "in"  # a read-only array: nothing can write through it
    return "inout"


class _Plan(list[Any]):
    """The read-only allocations of a launch that also passes a read-only array to a
    parameter the kernel stores into: ``stored`` holds their allocations (prepared as
    written, which refuses them)."""

    stored: list[Any]


#: What :mod:`smartarray._numba.access` gives as the reason (``ParamAccess.reasons``) for a
#: store into the parameter, or one of its aliases, in the function's own code.
_STORE_REASONS = (
    "an element store",
    "an attribute store",
    "del of an element",
    "the target of cuda.atomic.",
)

Masks = tuple[tuple[bool, ...], bool, tuple[tuple[bool, ...], bool]]


def write_mask(kernel: Any, func: Any) -> Masks:
    """Per parameter "may write", the same for ``*args``, and the :func:`store_mask`;
    cached on ``kernel``."""
    cached = kernel.__dict__.get(_CACHE_KEY)
    if cached is None:
        access = _access.analyse(func)
        cached = (*access_mask(access), store_mask(access))
        kernel.__dict__[_CACHE_KEY] = cached
    return cached


def access_mask(access: _access.FunctionAccess) -> tuple[tuple[bool, ...], bool]:
    """Per named parameter "may write", and the same for the arguments ``*args`` takes."""
    vararg = access.vararg
    mask = access.write_mask if vararg is None else access.write_mask[:vararg]
    rest = True if vararg is None else access.may_write(vararg)
    return mask, rest


def store_mask(access: _access.FunctionAccess) -> tuple[tuple[bool, ...], bool]:
    """Per named parameter "the function's own code stores into it" (an element or attribute
    store, ``del``, a ``cuda.atomic`` target), and the same for ``*args``.

    Narrower than :func:`access_mask`: what only *may* write (``t = x[i]; t += 1``, a call to
    a device function) is left out, since through a read-only array it cannot (Numba types
    it read-only). A read-only array is prepared as written, and so refused, only here.
    """

    def stores(param: _access.ParamAccess) -> bool:
        return any(marker in reason for reason in param.reasons for marker in _STORE_REASONS)

    params = access.params
    vararg = access.vararg
    named = params if vararg is None else params[:vararg]
    rest = True if vararg is None else stores(params[vararg])
    return tuple(stores(param) for param in named), rest


def readonly_allocations(
    mask: tuple[bool, ...],
    rest: bool,
    args: tuple[Any, ...] | list[Any],
    stores: tuple[tuple[bool, ...], bool] | None = None,
) -> list[Any] | None:
    """Allocations of bare SmartArray arguments that no argument of the launch may write.

    A list, not a set: a launch has few arguments, and building a list is cheaper. A bare
    read-only array leaves its allocation unwritten (it is prepared ``In`` by itself, see
    :func:`bare_intent`) unless ``stores`` (the :func:`store_mask`; None: ``mask``) says that
    its parameter is stored into; then the list is a :class:`_Plan` naming its allocation.
    Raises the clear ``TypeError`` of ``_backend.check_device_dtype`` for an argument whose
    dtype the device cannot hold: on a GPU, Numba would otherwise fail first, typing the
    kernel ("non-precise type array(pyobject, ...)").
    """
    if stores is None:
        stores = (mask, rest)
    readonly: list[Any] = []
    written: list[Any] = []
    stored: list[Any] | None = None
    count = len(mask)
    position = -1
    for value in args:
        position += 1
        if type(value) is SmartArray:
            if value._dtype not in _DEVICE_DTYPES:
                _backend.check_device_dtype(value._dtype)
            if not (mask[position] if position < count else rest):
                readonly.append(value._alloc)
            elif value._writeable:
                written.append(value._alloc)
            elif stored_at(stores, position):
                written.append(value._alloc)
                stored = [value._alloc] if stored is None else [*stored, value._alloc]
            else:
                readonly.append(value._alloc)
        elif isinstance(value, (SmartArray, _Intent, tuple)):
            writes = mask[position] if position < count else rest
            for array, intent in _nested(value):
                _backend.check_device_dtype(array._dtype)
                if intent is not None and intent != "in":
                    written.append(array._alloc)
                elif not writes:
                    readonly.append(array._alloc)
                elif intent is not None or array._writeable:
                    written.append(array._alloc)
                elif stored_at(stores, position):
                    written.append(array._alloc)
                    stored = [array._alloc] if stored is None else [*stored, array._alloc]
                else:
                    readonly.append(array._alloc)
    if not readonly:
        return None
    for alloc in written:
        if alloc in readonly:  # rare: an allocation behind a read and a written argument
            readonly = [other for other in readonly if other is not alloc]
    if stored is not None:
        plan = _Plan(readonly)
        plan.stored = stored
        return plan
    return readonly


def stored_at(stores: tuple[tuple[bool, ...], bool], position: int) -> bool:
    """Whether the :func:`store_mask` ``stores`` says the kernel stores into the argument at
    ``position``."""
    named, others = stores
    return named[position] if position < len(named) else others


def _nested(value: Any) -> list[tuple[SmartArray, str | None]]:
    """SmartArrays in an argument, each with its explicit intent (None when it is bare)."""
    if isinstance(value, SmartArray):
        return [(value, None)]
    if isinstance(value, _Intent):
        return [(value.array, value.intent)]
    if isinstance(value, tuple):
        return [item for element in value for item in _nested(element)]
    return []


def _plan(kernel: Any, func: Any, args: Any) -> list[Any] | None:
    """The read-only allocations of the first launch of ``kernel`` with a SmartArray, whose
    parameters are analysed then (None: nothing to infer)."""
    if not any(isinstance(value, (SmartArray, _Intent, tuple)) for value in args):
        return None
    mask, rest, stores = write_mask(kernel, func)
    return readonly_allocations(mask, rest, args, stores)


def _hooked_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def call(self: Any, args: Any, launch_config: Any) -> Any:
        cached = self.__dict__.get(_CACHE_KEY)
        if cached is None:
            readonly = _plan(self, self.py_func, args)
        else:
            readonly = readonly_allocations(cached[0], cached[1], args, cached[2])
        # The launch runs with ``readonly`` as its read-only allocations, which the SmartArray
        # arguments' ``to_device`` reads (bare_intent).
        previous = (
            getattr(_local, "readonly", None),
            getattr(_local, "stream", None),
            getattr(_local, "work", None),
        )
        _local.readonly = readonly
        # The launch's stream if it is the default one: an argument handed that very object
        # needs no further check of its stream, and its launch is asynchronous default-stream
        # work (this hook runs on a GPU only). See bare_kernel_argument.
        stream = getattr(launch_config, "stream", None)
        try:
            default = stream is not None and int(stream.handle) == 0
        except (AttributeError, TypeError, ValueError):
            default = False
        _local.stream = stream if default else None
        _local.work = default
        try:
            return original(self, args, launch_config)
        except BaseException:
            _memory.fail_launches()  # (prepared arguments of a launch that never ended)
            raise
        finally:
            _local.readonly, _local.stream, _local.work = previous

    setattr(call, _HOOK_MARK, True)
    return call


def _hooked_fake_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, *args: Any) -> Any:
        if self._device:  # a device function, called from a kernel (in a simulator thread)
            return original(self, *args)
        cached = self.__dict__.get(_CACHE_KEY)
        if cached is not None:
            readonly = readonly_allocations(cached[0], cached[1], args, cached[2])
        else:
            readonly = _plan(self, self.fn, args)
        # As the GPU tier's hook does. The simulator hands every argument the stream 0:
        # whether that is asynchronous default-stream work (never, unless a test pretends
        # so) is asked once per launch. See bare_kernel_argument.
        previous = getattr(_local, "readonly", None), getattr(_local, "work", None)
        _local.readonly = readonly
        _local.work = _backend.is_gpu_default_stream(0)
        try:
            return original(self, *args)
        except BaseException:
            _memory.fail_launches()  # (prepared arguments of a launch that never ended)
            raise
        finally:
            _local.readonly, _local.work = previous

    setattr(__call__, _HOOK_MARK, True)
    return __call__


def install_launch_hooks() -> bool:
    """Wrap the launch method of this tier's kernels (idempotent); False if there is none."""
    from numba.cuda.core import config

    cls: type
    if config.ENABLE_CUDASIM:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        cls, name, hook = FakeCUDAKernel, "__call__", _hooked_fake_call
    else:
        try:
            from numba.cuda.dispatcher import CUDADispatcher
        except ImportError:  # pragma: no cover - numba-cuda is a hard dependency
            return False
        cls, name, hook = CUDADispatcher, "call", _hooked_call
    original = getattr(cls, name)
    if not getattr(original, _HOOK_MARK, False):
        setattr(cls, name, hook(original))
    return True
