"""Numba CPU glue: pass SmartArrays to ``@jit``/``@njit`` functions and get SmartArrays back.

* Typing: Numba's dispatchers read ``SmartArray._numba_type_`` (a cached
  :class:`~smartarray._numba.types.SmartArrayType`), the fastest typing hook Numba has.
* Unboxing: the host copy is made current and, unless the argument type is read-only
  (``smartarray.In(a)``, ``a.readonly()``, a read-only view), the device copy is marked stale
  *before* the call, since the function may write. Then Numba's own array unboxing runs on a
  cached host ndarray (the argument's *jit view*). Compiled code first checks, reading
  instance dicts only, whether that would change anything (host copy current, device copy
  already stale or the argument read-only); only then does it call :func:`host_for_jit`.
  Otherwise it copies the view's cached native struct (:func:`_jit_native`), whose meminfo
  is kept by the SmartArray: no NRT allocation per call. Code compiled without NRT
  (``_nrt=False``) takes the cached jit view instead, and holds a reference to it for the
  call (:func:`_unbox_without_nrt`).
* Boxing: a returned array derived from an argument's jit view comes back as that argument
  (same object) or as a SmartArray view sharing its coherence state; any other array comes
  back as a new SmartArray. Arrays that Numba types as plain arrays (results of some
  ``np.*`` functions) box as ndarrays. Functions with explicit plain-array signatures get
  SmartArray twins of them (:mod:`smartarray._numba.signatures`).

Registration happens on ``import smartarray``, which imports this module once (idempotent).
There is no ``numba_extensions`` entry point: it would import smartarray (and numba.cuda)
into every Numba program on its first compilation, and no Numba program can meet a
SmartArray, or a cached function compiled for one, without importing smartarray first.
"""

from __future__ import annotations

import struct
import sys
import weakref
from typing import Any, cast

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.runtime import _nrt_python, rtsys  # type: ignore[attr-defined]
from numba.core.runtime.nrt import MemInfo
from numba.core.typeconv import Conversion
from numba.extending import (
    NativeValue,
    box,
    lower_builtin,
    lower_cast,
    overload_classmethod,
    register_model,
    type_callable,
    typeof_impl,
    unbox,
)

from .._array import SmartArray
from .._core.coherence import State
from .._core.errors import SmartArrayKeptError
from .._intents import _Intent
from .jit_intents import UnboxedParameter, kept_by_container, may_be_written, unboxed_parameter
from .signatures import install_dispatcher_hooks
from .types import BOXING_VERSION, SmartArrayType


def _refuse_lasting_containers(found: UnboxedParameter | None) -> None:
    """Refuse to compile a function that may keep a SmartArray argument in a typed container
    (``numba.typed.List``/``Dict``, a jitclass) that outlives the call: compiled code using
    that container later would read and write the host memory behind smartarray's back."""
    kept = kept_by_container(found)
    if kept is None:
        return
    function, param, reasons = kept
    raise SmartArrayKeptError(
        f"{function} may keep its SmartArray argument {param!r} in a numba typed container "
        f"or jitclass ({'; '.join(reasons)}); code using that container after the call would "
        "read and write the array's host memory without smartarray knowing (stale data). "
        "Pass SmartArrays to each @njit call as arguments (a tuple of them works), or store "
        "a.get('host') and call a.mark_changed('host') after writing through the container."
    )


class _JitHost:
    """What a host ndarray handed to compiled code is made from: it remembers its SmartArray.

    ``np.asarray(_JitHost(...))`` is an ndarray whose ``base`` is the holder, so the boxing
    code can map an array returned by compiled code back to the SmartArray it came from.
    """

    __slots__ = ("__array_interface__", "host", "owner")

    def __init__(self, host: np.ndarray, owner: SmartArray) -> None:
        self.__array_interface__ = host.__array_interface__
        self.host = host  # keeps the memory alive
        self.owner = weakref.ref(owner)  # weak: the array caches the view (no cycle)


def _jit_view(array: SmartArray, write: bool) -> np.ndarray:
    """The (cached) host ndarray handed to compiled code for ``array``."""
    key = "_jit_rw" if write else "_jit_ro"
    view = array.__dict__.get(key)
    if view is None:
        shape = array._shape  # (the layout, read with no call between: see the shape setter)
        strides = array._strides
        host = array._host_view(write=write, sync=False)
        view = np.asarray(_JitHost(host, array))
        if view.dtype != host.dtype:  # structured dtypes: keep numpy's exact descriptor
            view = view.view(host.dtype)
        # (cached only for the layout it was made for; check and store call-free)
        if array._shape is shape and array._strides is strides and host.shape == shape:
            array.__dict__[key] = view
    return view


def _jit_native(array: SmartArray, view: np.ndarray, write: bool) -> None:
    """Cache the native (Numba) array struct of the jit view ``view`` in ``array``'s dict.

    Numba's own array unboxing makes a new NRT meminfo for every call (a ``malloc``, a
    reference to the ndarray, and at the end of the call the GIL and a ``free``). The compiled
    fast path instead copies this prebuilt struct, whose meminfo is one kept alive by the
    SmartArray (key ``_jit_rw_mi``/``_jit_ro_mi``), and only increments its reference count:
    the end of the call brings it back to one, and nothing is freed. The meminfo owns a
    reference to ``view`` (its ``parent``, as for Numba's), so arrays returned by compiled
    code box exactly as before. Both entries are layout caches, dropped with the jit view.
    """
    suffix = "_jit_rw" if write else "_jit_ro"
    if suffix + "_native" in array.__dict__:
        return
    rtsys._init_guard()  # (compiled code calls this: the runtime is up)
    data = view.__array_interface__["data"][0]
    pointer = _nrt_python.meminfo_new(data, view)
    meminfo = MemInfo(pointer)  # owns the one reference of the new meminfo
    # Numba's array data model: meminfo, parent, nitems, itemsize, data, shape, strides.
    native = struct.pack(
        f"@PPnnP{2 * view.ndim}n",
        pointer, id(view), view.size, view.itemsize, data, *view.shape, *view.strides,
    )  # fmt: skip
    # (cached only while the jit view is still the array's: see the shape setter; the
    # check and the stores are call-free)
    entries = array.__dict__
    if suffix in entries and entries[suffix] is view:  # (no method call: see above)
        entries[suffix + "_mi"] = meminfo
        entries[suffix + "_native"] = native


def _owner_of(host: Any) -> SmartArray | None:
    """The SmartArray whose jit host view is ``host``, or that ``host`` is or wraps (the
    ``parent`` of an argument unboxed without NRT is the argument itself), or None."""
    if isinstance(host, SmartArray):
        return host
    if isinstance(host, _Intent):
        return host.array
    base = getattr(host, "base", None)
    while type(base) is np.ndarray:
        base = base.base
    if type(base) is _JitHost:
        return base.owner()
    return None


def host_for_jit(obj: Any, write: bool = True) -> np.ndarray:
    """Unboxing helper (slow path): the host ndarray to hand to compiled code for ``obj``.

    Makes the host copy current and, if the compiled code may ``write`` (its argument type is
    mutable), marks the device copy stale. The compiled fast path skips this call when the
    allocation is already in the state this call would leave it in.
    """
    return _prepare_host(obj, write, native=True)


def host_for_jit_readonly(obj: Any) -> np.ndarray:
    """:func:`host_for_jit` for a read-only argument type: the device copy stays valid."""
    return host_for_jit(obj, write=False)


def host_for_jit_nonrt(obj: Any, write: bool = True) -> np.ndarray:
    """:func:`host_for_jit` for code compiled without Numba's runtime (``_nrt=False``): the
    same state changes, but no native struct with an NRT meminfo is cached (that code cannot
    count references on one)."""
    return _prepare_host(obj, write, native=False)


def host_for_jit_readonly_nonrt(obj: Any) -> np.ndarray:
    """:func:`host_for_jit_nonrt` for a read-only argument type."""
    return host_for_jit_nonrt(obj, write=False)


def _prepare_host(obj: Any, write: bool, native: bool) -> np.ndarray:
    """The body of the unboxing helpers; ``native``: also cache :func:`_jit_native`."""
    if isinstance(obj, SmartArray):
        array = obj
    elif isinstance(obj, _Intent):
        array = obj.array
        if write and obj.readonly:  # (the type of In(x) is read-only: not reached)
            raise TypeError(f"{obj!r} is read-only")
    elif isinstance(obj, np.ndarray):
        # An ndarray converted to a SmartArray type (a function compiled for an explicit
        # SmartArray signature): nothing to keep coherent.
        return obj
    else:
        raise TypeError(f"cannot pass {type(obj).__name__} as a SmartArray")
    if write:
        array._check_writeable()
    alloc = array._alloc
    with alloc.lock:
        span = array._span()
        alloc.ensure_host(None, span)
        if write:
            alloc.host_written(span)
        view = _jit_view(array, write)
        if native:
            _jit_native(array, view, write)
        return view


def smartarray_from_jit(result: np.ndarray, parent: Any) -> SmartArray:
    """Boxing helper: turn an ndarray returned by compiled code into a SmartArray.

    ``parent`` is the host ndarray the result was derived from (Numba's array ``parent``), if
    any: the argument's own jit host view gives back the argument itself (``result is
    parent``) or a SmartArray view sharing its coherence state. In code compiled without NRT
    the parent is the argument (SmartArray, intent or ndarray) and the result is the parent
    (the only arrays such code may return are its arguments). Views Numba makes without a
    parent (``np.broadcast_to``, ``as_strided``, ``sliding_window_view``) still point into
    the argument's memory: their NRT meminfo (the boxed ndarray's ``base``) holds the jit
    host view they came from, so they too come back as views of the argument, read-only
    where Numba typed them so (as numpy's are).
    """
    owner = None
    foreign = parent is not None
    if parent is not None:
        owner = _owner_of(parent)
        if owner is not None and result is parent:
            return owner
    if owner is None:
        meminfo: Any = result.base
        if type(meminfo) is MemInfo and meminfo.parent is not None:
            owner = _owner_of(meminfo.parent)
            foreign = True
    if owner is None and foreign:
        # Memory of a plain ndarray argument (``x if c else nd`` unified to a SmartArray
        # type): copied, as smartarray.asarray would, never adopted behind its owner's back.
        return SmartArray._adopt(result.copy(order="K"))
    return SmartArray._from_numpy_result(result, [] if owner is None else [owner])


# What compiled boxing code fetches from Python, once per compiled module, in this order: the
# objects named by _OBJECTS, then the (interned) attribute names _ATTRS. Compiled code indexes
# this table by position, so any change here must bump BOXING_VERSION (in _numba.types).
_OBJECTS = (
    "SmartArray",
    "State.HOST",
    "State.BOTH",
    "host_for_jit",
    "host_for_jit_readonly",
    "smartarray_from_jit",
    "host_for_jit_nonrt",
    "host_for_jit_readonly_nonrt",
)
_ATTRS = (
    "array",
    "_alloc",
    "state",
    "_host_event",
    "_device_event",
    "_jit_rw_native",
    "_jit_ro_native",
    "_jit_rw",
    "_jit_ro",
    "_host_token",
)
_LAYOUT = _OBJECTS + _ATTRS
(_CLS, _HOST, _BOTH, _HOST_FOR_JIT, _HOST_FOR_JIT_RO, _FROM_JIT, _HOST_FOR_JIT_NONRT,
 _HOST_FOR_JIT_RO_NONRT) = range(len(_OBJECTS))  # fmt: skip
(_ARRAY, _ALLOC, _STATE, _HOST_EVENT, _DEVICE_EVENT, _JIT_RW, _JIT_RO, _JIT_RW_VIEW,
 _JIT_RO_VIEW, _HOST_TOKEN) = range(len(_OBJECTS), len(_LAYOUT))  # fmt: skip


def _jit_constants(layout: tuple[str, ...]) -> tuple[Any, ...]:
    """The objects compiled boxing code uses; ``layout`` is the table it was compiled for."""
    if tuple(layout) != _LAYOUT:
        raise RuntimeError(
            "this compiled function expects another version of smartarray's Numba boxing "
            "(a stale cache=True entry?): delete its Numba cache files (__pycache__/*.nbi, "
            "*.nbc, or NUMBA_CACHE_DIR)"
        )
    objects = (
        SmartArray,
        State.HOST,
        State.BOTH,
        host_for_jit,
        host_for_jit_readonly,
        smartarray_from_jit,
        host_for_jit_nonrt,
        host_for_jit_readonly_nonrt,
    )
    return objects + tuple(sys.intern(name) for name in _ATTRS)


register_model(SmartArrayType)(models.ArrayModel)


def _teach_plain_array() -> None:
    """Teach plain ``types.Array`` two rules about SmartArrayType (once; idempotent).

    Numba has no extension hook for either, so ``Array.unify`` and ``Array.can_convert_to``
    are wrapped; nothing changes unless the other type is a SmartArrayType.

    * ``unify`` defers to ``SmartArrayType.unify``: Numba unifies the branches of
      ``x if c else y`` with ``first.unify(second)`` before ``second.unify(first)``, and plain
      ``Array.unify`` would return a plain array type for an ndarray first and a SmartArray
      second, which boxes the SmartArray's host buffer as a bare ndarray.
    * Converting a plain array to a SmartArray type ranks as ``unsafe`` (it is a no-op cast):
      a function with explicit signatures for both a plain and a SmartArray type then takes
      ndarrays through the plain one instead of failing as ambiguous.
    """
    unify_original = types.Array.unify
    convert_original = types.Array.can_convert_to
    if getattr(unify_original, "_smartarray_wrapped", False):
        return

    def unify(self: types.Array, typingctx: Any, other: Any) -> Any:
        if isinstance(other, SmartArrayType) and not isinstance(self, SmartArrayType):
            return other.unify(typingctx, self)
        return unify_original(self, typingctx, other)

    def can_convert_to(self: types.Array, typingctx: Any, other: Any) -> Any:
        conversion = convert_original(self, typingctx, other)
        if (
            conversion is not None
            and isinstance(other, SmartArrayType)
            and not isinstance(self, SmartArrayType)
        ):
            return max(conversion, Conversion.unsafe)
        return conversion

    for wrapper, original in ((unify, unify_original), (can_convert_to, convert_original)):
        wrapper._smartarray_wrapped = True  # type: ignore[attr-defined]
        wrapper.__doc__ = original.__doc__
    types.Array.unify = unify  # type: ignore[method-assign, assignment]
    types.Array.can_convert_to = can_convert_to  # type: ignore[method-assign, assignment]


def _quiet_no_op_container_casts() -> None:
    """No ``NumbaTypeSafetyWarning`` for a SmartArray stored in a typed ``List``/``Dict`` of
    plain arrays of its dtype and dimensions (once; idempotent).

    Numba's typed containers cast each item to their item type and warn "unsafe cast ...
    Precision may be lost" for any conversion it does not rank safe; a SmartArray to a plain
    array ranks ``unsafe`` (see :meth:`SmartArrayType.can_convert_to`) but is a no-op, the
    same data model, and nothing is lost. Where the container outlives the call, the
    unboxing refuses the function with :class:`~smartarray.SmartArrayKeptError` anyway:
    without this, the misleading warning printed first. ``_sentry_safe_cast`` is looked up
    as a module global by the containers' casts, so wrapping it covers them all.
    """
    from numba.typed import typedobjectutils

    original = typedobjectutils._sentry_safe_cast
    if getattr(original, "_smartarray_wrapped", False):
        return

    def _sentry_safe_cast(fromty: Any, toty: Any) -> Any:
        source, target = types.unliteral(fromty), types.unliteral(toty)
        if (
            isinstance(source, SmartArrayType)
            and type(target) is types.Array
            and (source.dtype, source.ndim) == (target.dtype, target.ndim)
        ):
            return None  # the no-op cast: nothing to warn about
        return original(fromty, toty)

    _sentry_safe_cast._smartarray_wrapped = True  # type: ignore[attr-defined]
    _sentry_safe_cast.__doc__ = original.__doc__
    typedobjectutils._sentry_safe_cast = _sentry_safe_cast


_teach_plain_array()
_quiet_no_op_container_casts()
install_dispatcher_hooks()  # explicit signatures: SmartArray twins (see _numba.signatures)


def _constants(c: Any) -> tuple[list[Any], Any]:
    """Load the objects of :func:`_jit_constants` (borrowed references) in compiled code.

    They live in a module-level LLVM global, filled on the first call (one ``unserialize``
    and one Python call, ever, per compiled module) instead of unpickling on every call.
    Returns the loaded values and a flag that is true when they could not be fetched (a
    Python exception is then set).
    """
    builder, pyapi = c.builder, c.pyapi
    module = builder.module
    name = f"_smartarray_jit_constants_v{BOXING_VERSION}"
    table_type = ir.ArrayType(pyapi.pyobj, len(_LAYOUT))
    table = module.globals.get(name)
    if table is None:
        table = ir.GlobalVariable(module, table_type, name)
        table.linkage = "internal"
        table.initializer = ir.Constant(table_type, None)
    zero = ir.Constant(ir.IntType(32), 0)

    def slot(i: int) -> Any:
        return builder.gep(table, [zero, ir.Constant(ir.IntType(32), i)], inbounds=True)

    failed = cgutils.alloca_once_value(builder, cgutils.false_bit)
    with builder.if_then(cgutils.is_null(builder, builder.load(slot(0))), likely=False):
        maker = pyapi.unserialize(pyapi.serialize_object(_jit_constants))
        with builder.if_else(cgutils.is_null(builder, maker)) as (no_maker, has_maker):
            with no_maker:
                builder.store(cgutils.true_bit, failed)
            with has_maker:
                layout = pyapi.unserialize(pyapi.serialize_object(_LAYOUT))
                values = pyapi.call_function_objargs(maker, [layout])
                pyapi.decref(maker)
                pyapi.decref(layout)
                with builder.if_else(cgutils.is_null(builder, values)) as (no_values, ok):
                    with no_values:
                        builder.store(cgutils.true_bit, failed)
                    with ok:
                        # Slot 0 last: it is the "filled" flag. Never released (immortal).
                        for i in [*range(1, len(_LAYOUT)), 0]:
                            item = pyapi.tuple_getitem(values, i)
                            pyapi.incref(item)
                            builder.store(item, slot(i))
                        pyapi.decref(values)
    return [builder.load(slot(i)) for i in range(len(_LAYOUT))], builder.load(failed)


def _instance_dict(c: Any, obj: Any) -> Any:
    """``obj.__dict__`` (new reference), or NULL with the error cleared."""
    fnty = ir.FunctionType(c.pyapi.pyobj, [c.pyapi.pyobj, c.pyapi.voidptr])
    fn = cgutils.get_or_insert_function(c.builder.module, fnty, "PyObject_GenericGetDict")
    value = c.builder.call(fn, [obj, ir.Constant(c.pyapi.voidptr, None)])
    with c.builder.if_then(cgutils.is_null(c.builder, value), likely=False):
        c.pyapi.err_clear()
    return value


def _dict_get(c: Any, mapping: Any, key: Any) -> Any:
    """``mapping.get(key)`` for an exact dict and a str key (borrowed reference, or NULL).

    ``PyDict_GetItemWithError``, not ``PyDict_GetItem``, which saves and restores the error
    state around every look-up (a third of its cost). A look-up that fails with an error (a
    key of the user's in an instance dict whose ``__eq__`` raises) clears it: a miss.
    """
    fnty = ir.FunctionType(c.pyapi.pyobj, [c.pyapi.pyobj, c.pyapi.pyobj])
    fn = cgutils.get_or_insert_function(c.builder.module, fnty, "PyDict_GetItemWithError")
    value = c.builder.call(fn, [mapping, key])
    with c.builder.if_then(cgutils.is_null(c.builder, value), likely=False):
        c.pyapi.err_clear()
    return value


def _fast_host_view(
    c: Any, typ: SmartArrayType, obj: Any, const: list[Any], out: Any, writes: bool
) -> None:
    """Store in ``out`` the cached native struct of ``obj``'s jit view (:func:`_jit_native`,
    a borrowed reference) if there is one and no state change is needed; in code compiled
    without NRT, the jit view itself (:func:`_jit_view`, borrowed too).

    That is when :func:`host_for_jit` would neither copy, wait nor change the state: the host
    copy is current with no pending copy into or out of it (``_host_event`` is None) and, for
    a writing argument, the device copy is already stale (state HOST); for a read-only one,
    state HOST, or BOTH with no device work to wait for (``_device_event`` is None; it matters
    for mapped memory). The allocation's host token, when set, says state HOST with nothing
    pending (docs/coherence.md, invariant 7): one look-up instead of these. Otherwise
    ``out`` is left NULL and the caller takes the slow path, which changes the state under
    the allocation's lock. Only borrowed references are read from the instance dicts of the
    SmartArray (or intent) and its Allocation: no attribute look-up machinery, no Python
    code.
    """
    builder, pyapi = c.builder, c.pyapi
    null = pyapi.get_null_object()
    array = cgutils.alloca_once_value(builder, null)
    is_smartarray = builder.icmp_unsigned("==", pyapi.get_type(obj), const[_CLS])
    with builder.if_else(is_smartarray, likely=True) as (direct, intent):
        with direct:
            builder.store(obj, array)
        with intent:  # In/Out/InOut: the SmartArray is their .array
            intent_dict = _instance_dict(c, obj)
            with builder.if_then(cgutils.is_not_null(builder, intent_dict)):
                inner = _dict_get(c, intent_dict, const[_ARRAY])
                pyapi.decref(intent_dict)  # the intent keeps ``inner`` alive
                with builder.if_then(cgutils.is_not_null(builder, inner)):
                    same = builder.icmp_unsigned("==", pyapi.get_type(inner), const[_CLS])
                    with builder.if_then(same):
                        builder.store(inner, array)
    arr = builder.load(array)
    with builder.if_then(cgutils.is_not_null(builder, arr), likely=True):
        arr_dict = _instance_dict(c, arr)
        with builder.if_then(cgutils.is_not_null(builder, arr_dict), likely=True):
            if c.context.enable_nrt:
                key = const[_JIT_RW] if writes else const[_JIT_RO]
            else:
                key = const[_JIT_RW_VIEW] if writes else const[_JIT_RO_VIEW]
            native = _dict_get(c, arr_dict, key)
            alloc = _dict_get(c, arr_dict, const[_ALLOC])
            found = builder.and_(
                cgutils.is_not_null(builder, native), cgutils.is_not_null(builder, alloc)
            )
            with builder.if_then(found, likely=True):
                alloc_dict = _instance_dict(c, alloc)
                with builder.if_then(cgutils.is_not_null(builder, alloc_dict), likely=True):
                    none = pyapi.borrow_none()
                    # The host token (Allocation._host_token) stands for state HOST with
                    # nothing pending, which both kinds of argument accept: one look-up.
                    token = _dict_get(c, alloc_dict, const[_HOST_TOKEN])
                    has_token = builder.and_(
                        cgutils.is_not_null(builder, token),
                        builder.icmp_unsigned("!=", token, none),
                    )
                    with builder.if_else(has_token, likely=True) as (held, other):
                        with held:
                            builder.store(native, out)  # borrowed: copied before Python runs
                        with other:  # (no token: none is made before a host read)
                            _check_state(c, alloc_dict, const, native, out, writes)
                    pyapi.decref(alloc_dict)
            pyapi.decref(arr_dict)


def _check_state(
    c: Any, alloc_dict: Any, const: list[Any], native: Any, out: Any, writes: bool
) -> None:
    """:func:`_fast_host_view` for an allocation with no host token: store ``native`` in
    ``out`` if the state, read from the allocation's dict ``alloc_dict``, needs no change."""
    builder = c.builder
    none = c.pyapi.borrow_none()
    state = _dict_get(c, alloc_dict, const[_STATE])
    host_event = _dict_get(c, alloc_dict, const[_HOST_EVENT])
    ok = builder.icmp_unsigned("==", state, const[_HOST])
    if not writes:
        # BOTH too, unless device work may still be writing mapped memory
        # (Allocation.wait_host waits for _device_event then).
        device_event = _dict_get(c, alloc_dict, const[_DEVICE_EVENT])
        both = builder.and_(
            builder.icmp_unsigned("==", state, const[_BOTH]),
            builder.icmp_unsigned("==", device_event, none),
        )
        ok = builder.or_(ok, both)
    ok = builder.and_(ok, builder.icmp_unsigned("==", host_event, none))
    with builder.if_then(ok, likely=True):
        builder.store(native, out)  # borrowed: copied before any Python runs


def _load_native(c: Any, typ: SmartArrayType, native: Any, result: Any, error: Any) -> None:
    """Unbox from the cached native struct ``native`` (bytes, see :func:`_jit_native`).

    The struct is copied and its meminfo's reference count incremented (Numba's call wrapper
    decrements it after the call). A struct of another size (never made) is an error, not a
    guess.
    """
    builder, pyapi = c.builder, c.pyapi
    struct_type = c.context.get_value_type(typ.plain_array)
    size = c.context.get_abi_sizeof(struct_type)
    fnty = ir.FunctionType(pyapi.py_ssize_t, [pyapi.pyobj])
    size_fn = cgutils.get_or_insert_function(builder.module, fnty, "PyBytes_Size")
    fnty = ir.FunctionType(pyapi.cstring, [pyapi.pyobj])
    data_fn = cgutils.get_or_insert_function(builder.module, fnty, "PyBytes_AsString")
    same = builder.icmp_unsigned(
        "==", builder.call(size_fn, [native]), ir.Constant(pyapi.py_ssize_t, size)
    )
    with builder.if_else(same, likely=True) as (fits, other):
        with fits:
            pointer = builder.bitcast(builder.call(data_fn, [native]), struct_type.as_pointer())
            value = builder.load(pointer)
            c.context.nrt.incref(builder, typ.plain_array, value)
            builder.store(value, result)
            builder.store(cgutils.false_bit, error)
        with other:
            pyapi.err_set_string("PyExc_TypeError", "smartarray: cached jit view of another layout")


@typeof_impl.register(SmartArray)
def _typeof_smartarray(val: SmartArray, c: Any) -> SmartArrayType:
    """``numba.typeof`` of a SmartArray: its cached ``_numba_type_``.

    Registered by class so that nothing else decides: Numba's generic typeof tries the
    buffer protocol before ``_numba_type_`` (on Python 3.12+ a class with ``__buffer__``
    would be typed as a ``buffer``). The C dispatcher reads ``_numba_type_`` directly.
    """
    return cast(SmartArrayType, val._numba_type_)


@unbox(SmartArrayType)
def _unbox_smartarray(typ: SmartArrayType, obj: Any, c: Any) -> NativeValue:
    builder, pyapi = c.builder, c.pyapi
    nrt = c.context.enable_nrt
    nativeary = c.context.make_array(typ)(c.context, c.builder)
    result = cgutils.alloca_once_value(builder, nativeary._getvalue())
    error = cgutils.alloca_once_value(builder, cgutils.true_bit)
    native = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    # Without NRT: the jit view handed to the call (a new reference, released after it).
    held = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    const, failed = _constants(c)
    # A writable argument the function provably never writes is unboxed like a read-only
    # one: its device copy stays valid (decided once, per compiled overload). An explicit
    # InOut/Out (same type) still counts as a write: only a bare SmartArray is inferred.
    found = unboxed_parameter()  # (the compilation's call stack, walked once)
    _refuse_lasting_containers(found)
    writes = typ.mutable and may_be_written(found)
    inferred = typ.mutable and not writes
    if nrt:
        write_helper, read_helper = const[_HOST_FOR_JIT], const[_HOST_FOR_JIT_RO]
    else:
        write_helper, read_helper = const[_HOST_FOR_JIT_NONRT], const[_HOST_FOR_JIT_RO_NONRT]
    with builder.if_then(builder.not_(failed), likely=True):
        bare = builder.icmp_unsigned("==", pyapi.get_type(obj), const[_CLS])
        if inferred:
            with builder.if_then(bare, likely=True):
                _fast_host_view(c, typ, obj, const, native, False)
        else:
            _fast_host_view(c, typ, obj, const, native, writes)
        cached = builder.load(native)
        with builder.if_else(cgutils.is_not_null(builder, cached), likely=True) as (fast, slow):
            with fast:
                if nrt:
                    _load_native(c, typ, cached, result, error)
                else:
                    pyapi.incref(cached)
                    builder.store(cached, held)
            with slow:
                if inferred:
                    helper = builder.select(bare, read_helper, write_helper)
                else:
                    helper = write_helper if writes else read_helper
                view = pyapi.call_function_objargs(helper, [obj])
                if nrt:
                    with builder.if_then(cgutils.is_not_null(builder, view), likely=True):
                        with builder.if_then(_same_ndim(c, typ, view), likely=True):
                            unboxed = c.unbox(typ.plain_array, view)
                            builder.store(unboxed.value, result)
                            builder.store(unboxed.is_error, error)
                        # The meminfo made by the array unboxing holds a reference to the view.
                        pyapi.decref(view)
                else:
                    builder.store(view, held)
    if nrt:
        return NativeValue(builder.load(result), is_error=builder.load(error))
    _unbox_without_nrt(c, typ, obj, held, result, error)

    def release() -> None:
        # After the call (Numba's call wrapper runs this only if the unboxing succeeded):
        # the compiled code no longer uses the jit view's memory.
        pyapi.decref(builder.load(held))

    return NativeValue(builder.load(result), is_error=builder.load(error), cleanup=release)


def _unbox_without_nrt(
    c: Any, typ: SmartArrayType, obj: Any, held: Any, result: Any, error: Any
) -> None:
    """Unbox the jit view in ``held`` (a new reference, or NULL after a failed helper call)
    the way Numba unboxes an ndarray without NRT: no meminfo, a borrowed ``parent``.

    Numba's convention is that ``parent`` is the argument object, which the caller keeps alive
    until the result is boxed, so the parent is set to ``obj`` (the SmartArray, intent or
    ndarray passed); the caller does not hold the jit view, which the unboxing therefore
    keeps (``held``) until the call's cleanup, as Numba keeps a ``Py_buffer`` it unboxed: a
    shape change or anything else that drops the view from the SmartArray during the call
    (a ``nogil`` function, a ctypes callback) cannot free it under the compiled code. Boxing
    runs after that cleanup and reads only the parent.
    """
    builder, pyapi = c.builder, c.pyapi
    view = builder.load(held)
    with builder.if_then(cgutils.is_not_null(builder, view), likely=True):
        same_ndim = _same_ndim(c, typ, view)
        with builder.if_else(same_ndim, likely=True) as (same, other):
            with same:
                unboxed = c.unbox(typ.plain_array, view)
                array = c.context.make_array(typ.plain_array)(
                    c.context, builder, value=unboxed.value
                )
                array.parent = obj
                builder.store(array._getvalue(), result)
                builder.store(unboxed.is_error, error)
                with builder.if_then(unboxed.is_error, likely=False):
                    pyapi.decref(view)
                    builder.store(pyapi.get_null_object(), held)
            with other:  # (``error`` is still set)
                pyapi.decref(view)
                builder.store(pyapi.get_null_object(), held)


def _same_ndim(c: Any, typ: SmartArrayType, view: Any) -> Any:
    """Whether the jit view ``view`` (an ndarray) has the ndim of ``typ``; if not, a Python
    error is set. Numba's array unboxing writes as many dimensions into the native struct as
    the ndarray has: a view of another ndim would overflow it (or leave it part-filled). That
    happens only if another thread sets the array's shape between the dispatcher's typing
    (``_numba_type_``) and this unboxing, which makes the view (a call: the thread may switch)."""
    builder, pyapi = c.builder, c.pyapi
    same = cgutils.alloca_once_value(builder, cgutils.false_bit)
    ndim = pyapi.object_getattr_string(view, "ndim")
    with builder.if_then(cgutils.is_not_null(builder, ndim), likely=True):
        value = pyapi.long_as_longlong(ndim)
        pyapi.decref(ndim)
        equal = builder.icmp_signed("==", value, ir.Constant(value.type, typ.ndim))
        with builder.if_else(equal, likely=True) as (yes, no):
            with yes:
                builder.store(cgutils.true_bit, same)
            with no:
                pyapi.err_set_string(
                    "PyExc_TypeError",
                    f"smartarray: the {typ.ndim}-d array argument became another shape while "
                    "it was passed (another thread set its .shape): call the function again",
                )
    return builder.load(same)


@box(SmartArrayType)
def _box_smartarray(typ: SmartArrayType, val: Any, c: Any) -> Any:
    builder, pyapi = c.builder, c.pyapi
    nativeary = c.context.make_array(typ)(c.context, builder, value=val)
    parent = nativeary.parent
    has_parent = cgutils.is_not_null(builder, parent)
    parent_obj = builder.select(has_parent, parent, pyapi.borrow_none())
    pyapi.incref(parent_obj)  # keep the parent alive while the array is boxed
    out = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    const, failed = _constants(c)
    with builder.if_else(failed, likely=False) as (no_constants, ok):
        with no_constants:
            if c.context.enable_nrt:
                c.context.nrt.decref(builder, typ, val)  # boxing steals the reference
        with ok:
            boxed = c.box(typ.plain_array, val)
            with builder.if_then(cgutils.is_not_null(builder, boxed), likely=True):
                wrapped = pyapi.call_function_objargs(const[_FROM_JIT], [boxed, parent_obj])
                builder.store(wrapped, out)
                pyapi.decref(boxed)
    pyapi.decref(parent_obj)
    return builder.load(out)


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
    # Numba calls this only from ``npyimpl._build_array``, with the array it has just
    # allocated for a ufunc or array-expression result (``args[1]``, never an alias of the
    # input ``args[0]``), and uses what it returns in place of that array, without touching
    # reference counts: the one reference of the fresh array is handed on as it is (no
    # incref, which would leak every result). The SmartArray type has the plain array's
    # data model, so the value itself needs no conversion.
    return args[1]


@overload_classmethod(SmartArrayType, "_allocate", target="CPU")
def _smartarray_allocate(cls, allocsize, align):  # type: ignore[no-untyped-def]
    # (no annotations: Numba compares this signature with impl's, annotations included)
    # New arrays typed SmartArrayType (ufunc results) are allocated like plain arrays.
    from numba.np.arrayobj import intrin_alloc

    def impl(cls, allocsize, align):  # type: ignore[no-untyped-def]
        return intrin_alloc(allocsize, align)

    return impl


def _init_extension() -> None:
    """Former ``numba_extensions`` entry point (smartarray 0.1.0 installs made before it was
    dropped still name it until reinstalled): importing this module registered everything."""
