"""Explicit signatures: ``@njit("float64(float64[:])")`` functions accept SmartArrays.

A function compiled eagerly for explicit signatures is *frozen* (Numba calls
``disable_compile()``): it only runs the signatures it was given. A plain-array signature
cannot take a SmartArray as such, because its unboxing expects an ndarray and would bypass
the coherence bookkeeping. Instead, the first time such a function is called with a
SmartArray (from Python, or from another jitted function), smartarray compiles the
*SmartArray twin* of every explicit signature that accepts the argument: the same
signature with each plain array type that receives a SmartArray replaced by the
SmartArray type of the same dtype, dimension count, layout and writeability (array types
in the declared return type become SmartArray types too, so a returned argument or view
comes back as a SmartArray, not as a bare ndarray aliasing its host buffer; a return type
holding arrays in other containers, such as a list of arrays, is inferred). Twins are
compiled once, through ``dispatcher.compile(signature)`` (with ``cache=True`` they are
cached like any other signature); later calls find them in the dispatcher's overloads.
``compile`` refuses to run on a frozen dispatcher; the freeze is lifted for the compiling
thread alone (see :class:`_CanCompile`), so other threads calling the function meanwhile see
it frozen, as they would without smartarray.
A SmartArray is thus accepted exactly where an ndarray of the same type would be, and a
call that no explicit signature accepts fails as it would for an ndarray.

Numba has no extension hook for this, so two methods of ``numba.core.dispatcher.Dispatcher``
are wrapped (idempotently, on import); nothing changes for calls without SmartArrays:

* ``_search_new_conversions``, which the C dispatcher calls when a frozen function has no
  exact match for Python arguments;
* ``get_call_template``, which types a call to the function from compiled code;

and ``_explain_matching_error`` names the explicit signatures when none accepts a SmartArray;
``_can_compile``, as Python code reads it, is :class:`_CanCompile`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from numba import _dispatcher  # type: ignore[attr-defined]
from numba.core import errors, types
from numba.core.compiler_lock import global_compiler_lock
from numba.core.dispatcher import Dispatcher
from numba.core.typing import signature as make_signature
from numba.core.typing.templates import Signature

from .types import SmartArrayType, plain_array_conversions_refused


def _members(tuple_type: Any) -> tuple[Any, ...]:
    """The member types of a Numba tuple type."""
    return tuple(tuple_type.types)


def _has_smartarray(typ: Any) -> bool:
    if isinstance(typ, SmartArrayType):
        return True
    if isinstance(typ, types.BaseTuple):
        return any(_has_smartarray(t) for t in _members(typ))
    return False


def _smartarray_version(typ: Any) -> Any:
    """``typ`` with every plain array type (also inside tuples) made a SmartArray type."""
    if type(typ) is types.Array:
        return SmartArrayType(typ.dtype, typ.ndim, typ.layout, not typ.mutable, typ.aligned)
    if isinstance(typ, types.BaseTuple) and not isinstance(typ, types.BaseNamedTuple):
        return types.Tuple([_smartarray_version(t) for t in _members(typ)])
    return typ


def _twin_argument(typingctx: Any, actual: Any, formal: Any) -> tuple[Any, bool] | None:
    """The formal type a twin declares for ``actual`` and whether it differs from ``formal``;
    None if ``actual`` cannot be passed to ``formal`` even as the plain array it stands for."""
    if isinstance(actual, SmartArrayType) and type(formal) is types.Array:
        if typingctx.can_convert(actual.plain_array, formal) is None:
            return None
        return _smartarray_version(formal), True
    if (
        isinstance(actual, types.BaseTuple)
        and isinstance(formal, types.BaseTuple)
        and not isinstance(formal, types.BaseNamedTuple)
        and len(_members(actual)) == len(_members(formal))
        and _has_smartarray(actual)
    ):
        pairs = zip(_members(actual), _members(formal), strict=True)
        members = [_twin_argument(typingctx, a, f) for a, f in pairs]
        if any(m is None for m in members):
            return None
        changed = any(m[1] for m in members if m is not None)
        return types.Tuple([m[0] for m in members if m is not None]), changed
    if actual == formal or typingctx.can_convert(actual, formal) is not None:
        return formal, False
    return None


def twin_signature(typingctx: Any, actual_args: Sequence[Any], sig: Signature) -> Any:
    """The SmartArray twin of explicit signature ``sig`` for arguments of types
    ``actual_args``, or None if ``sig`` does not accept them or needs no twin."""
    if len(actual_args) != len(sig.args):
        return None
    twin_args = []
    changed = False
    for actual, formal in zip(actual_args, sig.args, strict=True):
        twin = _twin_argument(typingctx, actual, formal)
        if twin is None:
            return None
        twin_args.append(twin[0])
        changed = changed or twin[1]
    if not changed:
        return None
    return make_signature(_smartarray_version(sig.return_type), *twin_args)


class _CanCompile:
    """``Dispatcher._can_compile`` as Python code reads it: true also while the thread
    reading it compiles a twin for that dispatcher (:meth:`lifted`).

    The flag is a field of Numba's C dispatcher object, read directly by its call path (no
    match: compile if the flag is set, else look for conversions, else raise TypeError) and
    through this attribute by ``Dispatcher.compile`` (which refuses to run while it is
    false), ``get_call_template`` and the other Python methods. Setting the field to lift
    the freeze, as Numba's ``recompile`` does, would lift it for every thread: a plain call
    from another thread would then go to the compiler, wait for the compiler lock and fail
    with "compilation disabled" (or, were the lock free, compile a new signature). This
    descriptor lifts it for the compiling thread's Python reads only; writes go to the field.
    """

    _local = threading.local()

    def __init__(self, field: Any) -> None:
        self.field = field  # the C member descriptor

    def __get__(self, dispatcher: Any, owner: Any = None) -> Any:
        if dispatcher is None:
            return self
        if id(dispatcher) in getattr(self._local, "compiling", ()):
            return True
        return self.field.__get__(dispatcher, owner)

    def __set__(self, dispatcher: Any, value: bool) -> None:
        self.field.__set__(dispatcher, value)

    @classmethod
    @contextmanager
    def lifted(cls, dispatcher: Any) -> Iterator[None]:
        """Let this thread compile for the frozen ``dispatcher`` (nestable)."""
        compiling = getattr(cls._local, "compiling", None)
        if compiling is None:
            compiling = cls._local.compiling = set()
        key = id(dispatcher)
        if key in compiling:
            yield
            return
        compiling.add(key)
        try:
            yield
        finally:
            compiling.discard(key)


def compile_twins(dispatcher: Any, actual_args: Sequence[Any]) -> int:
    """Compile the SmartArray twins of ``dispatcher``'s explicit signatures that accept
    arguments of types ``actual_args`` (each once); return how many were compiled."""
    if dispatcher._can_compile or not any(_has_smartarray(t) for t in actual_args):
        return 0
    compiled = 0
    with global_compiler_lock:
        for sig in list(dispatcher.nopython_signatures):
            twin = twin_signature(dispatcher.typingctx, actual_args, sig)
            if twin is None or tuple(twin.args) in dispatcher.overloads:
                continue
            # A frozen dispatcher refuses to compile: lifted for this thread only.
            with _CanCompile.lifted(dispatcher):
                try:
                    dispatcher.compile(twin)
                except errors.TypingError:
                    # The return type holds arrays inside something a SmartArray type cannot
                    # convert to (a list of arrays, say): let Numba infer it for the twin.
                    dispatcher.compile(tuple(twin.args))
            compiled += 1
    return compiled


def _wrap_search_new_conversions(original: Callable[..., bool]) -> Callable[..., bool]:
    def _search_new_conversions(self: Any, *args: Any, **kws: Any) -> bool:
        arg_types = [self.typeof_pyval(a) for a in args]
        if not any(_has_smartarray(t) for t in arg_types):
            return original(self, *args, **kws)
        compile_twins(self, arg_types)
        # Conversions installed now live in Numba's C++ type manager for good: never one
        # from a SmartArray to a plain array (see SmartArrayType.can_convert_to).
        with plain_array_conversions_refused():
            return original(self, *args, **kws)

    return _search_new_conversions


def _wrap_get_call_template(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_call_template(self: Any, args: Any, kws: Any) -> Any:
        if not self._can_compile and any(_has_smartarray(t) for t in (*args, *dict(kws).values())):
            _, folded = self._compiler.fold_argument_types(args, kws)
            compile_twins(self, folded)
        return original(self, args, kws)

    return get_call_template


def _wrap_explain_matching_error(original: Callable[..., Any]) -> Callable[..., Any]:
    def _explain_matching_error(self: Any, *args: Any, **kws: Any) -> Any:
        arg_types = [self.typeof_pyval(a) for a in args]
        if not any(_has_smartarray(t) for t in arg_types):
            return original(self, *args, **kws)
        signatures = "; ".join(
            f"{sig.return_type}({', '.join(map(str, sig.args))})"
            for sig in self.nopython_signatures
        )
        raise TypeError(
            f"No matching definition for argument type(s) {', '.join(map(str, arg_types))}: "
            f"none of the explicit signatures of {self.py_func.__name__} ({signatures}) "
            f"accepts them. A SmartArray is accepted wherever an ndarray of the same dtype, "
            f"number of dimensions, layout and writeability is. Add a signature that takes "
            f"it (layout 'A', as in float64[:], takes any strides; a readonly array type "
            f"takes In(a) and read-only views), or drop the explicit signatures to compile "
            f"on demand."
        )

    return _explain_matching_error


def install_dispatcher_hooks() -> None:
    """Wrap the Dispatcher methods described in the module docstring (once), and install
    :class:`_CanCompile`."""
    if not isinstance(Dispatcher.__dict__.get("_can_compile"), _CanCompile):
        dispatcher_class: Any = Dispatcher  # (the attribute is not declared to mypy)
        dispatcher_class._can_compile = _CanCompile(_dispatcher.Dispatcher.__dict__["_can_compile"])
    wrappers: tuple[tuple[str, Callable[[Callable[..., Any]], Any]], ...] = (
        ("_search_new_conversions", _wrap_search_new_conversions),
        ("get_call_template", _wrap_get_call_template),
        ("_explain_matching_error", _wrap_explain_matching_error),
    )
    for name, wrap in wrappers:
        original = getattr(Dispatcher, name)
        if getattr(original, "_smartarray_wrapped", False):
            continue
        wrapper: Any = wrap(original)
        wrapper._smartarray_wrapped = True
        wrapper.__doc__ = original.__doc__
        wrapper.__wrapped__ = original
        setattr(Dispatcher, name, wrapper)
