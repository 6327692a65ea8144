"""Numba CPU glue: pass SmartArrays to ``@jit``/``@njit`` functions and get SmartArrays back.

* Typing: Numba's dispatchers read ``SmartArray._numba_type_`` (a cached
  :class:`~smartarray._numba_types.SmartArrayType`), the fastest typing hook Numba has.
* Unboxing: the host copy is made current and, unless the argument is read-only
  (``smartarray.In(a)`` or a read-only view), the device copy is marked stale *before* the
  call, since the function may write. Then Numba's own array unboxing runs on the host view.
* Boxing: a returned array whose parent is an argument's host view comes back as that
  argument (same object) or as a SmartArray view sharing its state; any other array comes back
  as a new SmartArray.

Registration happens on ``import smartarray`` and through the ``numba_extensions`` entry
point; both import this module once, so it is idempotent.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.imputils import impl_ret_borrowed
from numba.extending import (
    NativeValue,
    box,
    lower_builtin,
    lower_cast,
    overload_classmethod,
    register_model,
    type_callable,
    unbox,
)

from ._array import SmartArray
from ._coherence import State
from ._intents import _Intent
from ._numba_types import SmartArrayType

# id(host view handed to Numba) -> the SmartArray it belongs to (weakly held).
_OWNERS: weakref.WeakValueDictionary[int, SmartArray] = weakref.WeakValueDictionary()


def host_for_jit(obj: Any) -> np.ndarray:
    """Unboxing helper: the host ndarray to hand to compiled code for ``obj``."""
    if type(obj) is SmartArray:
        array = obj
        write = array._writeable
    else:
        if not isinstance(obj, _Intent):
            raise TypeError(f"cannot pass {type(obj).__name__} as a SmartArray")
        array = obj.array
        write = not obj.readonly and array._writeable
    alloc = array._alloc
    if alloc.state is not State.HOST or alloc._host_event is not None:
        with alloc.lock:
            alloc.ensure_host()
            if write:
                alloc.mark_changed("host")
    view = array.__dict__.get("_host_rw" if write else "_host_ro")
    if view is None:
        view = array._host_view(write=write, sync=False)
        _OWNERS[id(view)] = array
    return view


def smartarray_from_jit(result: np.ndarray, parent: Any) -> SmartArray:
    """Boxing helper: turn an ndarray returned by compiled code into a SmartArray."""
    if parent is not None:
        owner = _OWNERS.get(id(parent))
        if owner is not None and parent in (
            owner.__dict__.get("_host_rw"),
            owner.__dict__.get("_host_ro"),
        ):
            if result is parent:
                return owner
            return SmartArray._from_numpy_result(result, [owner])
    return SmartArray._from_numpy_result(result, [])


register_model(SmartArrayType)(models.ArrayModel)


@unbox(SmartArrayType)
def _unbox_smartarray(typ: SmartArrayType, obj: Any, c: Any) -> NativeValue:
    helper = c.pyapi.unserialize(c.pyapi.serialize_object(host_for_jit))
    host = c.pyapi.call_function_objargs(helper, [obj])
    c.pyapi.decref(helper)
    failed = cgutils.is_null(c.builder, host)
    nativeary = c.context.make_array(typ)(c.context, c.builder)
    result = cgutils.alloca_once_value(c.builder, nativeary._getvalue())
    error = cgutils.alloca_once_value(c.builder, cgutils.true_bit)
    with c.builder.if_then(c.builder.not_(failed), likely=True):
        native = c.unbox(typ.plain_array, host)
        # The meminfo made by the array unboxing holds a reference to the host view.
        c.pyapi.decref(host)
        c.builder.store(native.value, result)
        c.builder.store(native.is_error, error)
    return NativeValue(c.builder.load(result), is_error=c.builder.load(error))


@box(SmartArrayType)
def _box_smartarray(typ: SmartArrayType, val: Any, c: Any) -> Any:
    nativeary = c.context.make_array(typ)(c.context, c.builder, value=val)
    parent = nativeary.parent
    has_parent = cgutils.is_not_null(c.builder, parent)
    parent_obj = c.builder.select(has_parent, parent, c.pyapi.borrow_none())
    c.pyapi.incref(parent_obj)  # keep the parent alive while the array is boxed
    boxed = c.box(typ.plain_array, val)
    out = cgutils.alloca_once_value(c.builder, ir.Constant(c.pyapi.pyobj, None))
    with c.builder.if_then(cgutils.is_not_null(c.builder, boxed), likely=True):
        helper = c.pyapi.unserialize(c.pyapi.serialize_object(smartarray_from_jit))
        c.builder.store(c.pyapi.call_function_objargs(helper, [boxed, parent_obj]), out)
        c.pyapi.decref(helper)
        c.pyapi.decref(boxed)
    c.pyapi.decref(parent_obj)
    return c.builder.load(out)


@lower_cast(SmartArrayType, types.Array)
@lower_cast(types.Array, SmartArrayType)
@lower_cast(SmartArrayType, SmartArrayType)
def _cast_identity(context: Any, builder: Any, fromty: Any, toty: Any, val: Any) -> Any:
    # Same data model on both sides: a SmartArray is a plain array inside compiled code.
    return val


@type_callable("__array_wrap__")
def _type_array_wrap(context: Any) -> Any:
    def typer(input_type: Any, result: Any) -> Any:
        if isinstance(input_type, SmartArrayType):
            return input_type.copy(
                dtype=result.dtype, ndim=result.ndim, layout=result.layout, readonly=False
            )
        return None

    return typer


@lower_builtin("__array_wrap__", SmartArrayType, types.Array)
def _lower_array_wrap(context: Any, builder: Any, sig: Any, args: Any) -> Any:
    return impl_ret_borrowed(context, builder, sig.return_type, args[1])


@overload_classmethod(SmartArrayType, "_allocate", target="CPU")
def _smartarray_allocate(cls, allocsize, align):  # type: ignore[no-untyped-def]
    # (no annotations: Numba compares this signature with impl's, annotations included)
    # New arrays typed SmartArrayType (ufunc results) are allocated like plain arrays.
    from numba.np.arrayobj import intrin_alloc

    def impl(cls, allocsize, align):  # type: ignore[no-untyped-def]
        return intrin_alloc(allocsize, align)

    return impl


def _init_extension() -> None:
    """Entry point for ``numba_extensions``: importing this module registers everything."""
