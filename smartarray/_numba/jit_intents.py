"""Inferred intents for SmartArray arguments of ``@jit`` functions, decided at compile time.

The unboxing code of a writable SmartArray argument marks its device copy stale, because the
function may write it. When the function provably never writes the parameter (the analysis
of :mod:`smartarray._numba.access`, run on the typed IR of the compilation), the unboxing code is
generated like that of a read-only argument instead: the device copy stays valid. The decision
is made once per compiled overload, while Numba builds the overload's CPython wrapper, so a
call pays nothing for it.

Numba's unboxing hook is not told which function or parameter it unboxes for, so
:func:`unboxed_parameter` finds them on the call stack of the compilation: the frame of
``PyCallWrapper.build_wrapper`` (the arguments unboxed so far give the parameter's position)
and, further out, the lowering pass (its ``state`` holds the Python function, the typed IR and
the type map). Anything else stays pessimistic (may write): a wrapper built some other way,
a lifted loop (``state.lifted_from``), a function whose typed IR cannot be matched to its
parameters, ``numba.objmode`` blocks, ``parallel=True`` loops (parfors are not analysed).
"""

from __future__ import annotations

import sys
from typing import Any

from . import access as _access

_METADATA_KEY = "smartarray_param_access"


def _code_objects() -> tuple[Any, Any]:
    from numba.core.callwrapper import PyCallWrapper
    from numba.core.typed_passes import BaseNativeLowering

    return PyCallWrapper.build_wrapper.__code__, BaseNativeLowering.run_pass.__code__


_BUILD_WRAPPER, _RUN_PASS = _code_objects()


#: The parameter being unboxed: the analysis of the function being compiled (None when it
#: cannot be analysed) and the parameter's position.
UnboxedParameter = tuple["_access.FunctionAccess | None", int]


def unboxed_parameter() -> UnboxedParameter | None:
    """Called by the unboxing code generator: the parameter it unboxes, found once on the
    compilation's call stack; None when that is not known (an unboxing in objmode...)."""
    return _compiled_parameter(sys._getframe(1))


def may_be_written(found: UnboxedParameter | None) -> bool:
    """May the function write the parameter ``found`` by :func:`unboxed_parameter`?"""
    if found is None:
        return True
    access, position = found
    return access is None or access.may_write(position)


def kept_by_container(found: UnboxedParameter | None) -> tuple[str, str, tuple[str, ...]] | None:
    """May a typed container that outlives the call keep the parameter ``found`` by
    :func:`unboxed_parameter`? Returns (function name, parameter name, reasons), or None."""
    if found is None:
        return None
    access, position = found
    if access is None:
        return None
    reasons = access.kept_at(position)
    param = access.param_of(position)
    if not reasons or param is None:
        return None
    return access.name, param.name, reasons


def _compiled_parameter(frame: Any) -> UnboxedParameter | None:
    """The analysis of the function whose wrapper is being built and the position of the
    parameter being unboxed; None when that is not known (an unboxing in objmode...)."""
    position = None
    while frame is not None:
        code = frame.f_code
        if code is _BUILD_WRAPPER and position is None:
            innerargs = frame.f_locals.get("innerargs")
            if not isinstance(innerargs, list):
                return None
            position = len(innerargs)
        elif code is _RUN_PASS:
            if position is None:
                return None  # unboxing inside the function body (objmode): not an argument
            return compilation_access(frame.f_locals.get("state")), position
        frame = frame.f_back
    return None


def compilation_access(state: Any) -> _access.FunctionAccess | None:
    """The analysis of the function a lowering ``state`` compiles (cached in its metadata)."""
    if state is None:
        return None
    metadata = getattr(state, "metadata", None)
    if isinstance(metadata, dict) and _METADATA_KEY in metadata:
        return metadata[_METADATA_KEY]
    access = _compute(state)
    if isinstance(metadata, dict):
        metadata[_METADATA_KEY] = access
    return access


def _compute(state: Any) -> _access.FunctionAccess | None:
    if getattr(state, "lifted_from", None) is not None:
        return None  # a loop lifted out of an object-mode function: other parameters
    func_id = getattr(state, "func_id", None)
    func_ir = getattr(state, "func_ir", None)
    py_func = getattr(func_id, "func", None)
    if py_func is None or func_ir is None or state.typemap is None:
        return None
    access = _access.analyse_typed(py_func, func_ir.blocks, state.typemap, state.calltypes)
    if tuple(p.name for p in access.params) != tuple(func_ir.arg_names):
        return None
    return access


def overload_access(dispatcher: Any, signature: tuple[Any, ...]) -> _access.FunctionAccess | None:
    """What the compiled overload of ``dispatcher`` for ``signature`` inferred (None: nothing)."""
    cres = dispatcher.overloads.get(tuple(signature))
    metadata = getattr(cres, "metadata", None) or {}
    access = metadata.get(_METADATA_KEY)
    return access if isinstance(access, _access.FunctionAccess) else None
