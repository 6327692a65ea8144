"""``smartarray.explain_intents``: what intent each argument of a call gets, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._array import SmartArray
from .._intents import _Intent
from .._numba import access as _access

_NAMES = {"in": "In", "out": "Out", "inout": "InOut"}


@dataclass(frozen=True)
class ArgumentIntent:
    """The intent one argument of a call gets.

    Attributes
    ----------
    position
        The argument's position in the call.
    parameter
        The name of the parameter that receives it (None if unknown).
    intent
        ``'In'``, ``'Out'`` or ``'InOut'``; ``'-'`` for an argument that is not a SmartArray.
    source
        ``'inferred'``, ``'explicit'`` (an ``In``/``Out``/``InOut`` wrapper) or
        ``'not a SmartArray'``.
    reasons
        Why: the constructs that may write (or read, for outputs) the argument.
    """

    position: int
    parameter: str | None
    intent: str
    source: str
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class IntentReport:
    """What :func:`explain_intents` found: one :class:`ArgumentIntent` per argument."""

    function: str
    kind: str
    arguments: tuple[ArgumentIntent, ...]

    def intents(self) -> tuple[str, ...]:
        """The intents alone, in argument order."""
        return tuple(argument.intent for argument in self.arguments)

    def __str__(self) -> str:
        lines = [f"{self.kind} {self.function}:"]
        for arg in self.arguments:
            name = arg.parameter or "?"
            head = f"  {arg.position}: {name} -> {arg.intent} ({arg.source})"
            lines.append(head)
            lines.extend(f"       {reason}" for reason in arg.reasons)
        return "\n".join(lines)


def explain_intents(func: Any, *args: Any) -> IntentReport:
    """Explain the intent each argument of ``func(*args)`` would get, without running it.

    Parameters
    ----------
    func
        A ``@cuda.jit`` kernel, an ``@njit``/``@jit`` function (compiled for ``args`` if it is
        not yet), a CUDA ``@vectorize``/``@guvectorize`` ufunc (outputs passed positionally),
        or a plain Python function (analysed as a kernel would be).
    *args
        The arguments, as they would be passed.

    Returns
    -------
    IntentReport
        Per argument: ``In`` (the call provably never writes it: the other copy stays valid),
        ``InOut`` (it may be written, or, for a ufunc output, its old values may be read) or
        ``Out`` (an output written without being read: nothing is uploaded), the source of
        that decision and the reasons.

    Examples
    --------
    >>> print(smartarray.explain_intents(axpy, 2.0, x, y))          # doctest: +SKIP
    kernel axpy:
      0: a -> - (not a SmartArray)
      1: x -> In (inferred)
      2: y -> InOut (inferred)
           line 12: an element store
    """
    kind = _kind(func)
    if kind == "jit":
        return _explain_jit(func, args)
    if kind in ("gufunc", "ufunc"):
        return _explain_ufunc(func, kind, args)
    return _explain_kernel(func, kind, args)


def _kind(func: Any) -> str:
    cls = type(func).__name__
    if cls == "CUDAGeneralizedUFunc":
        return "gufunc"
    if cls == "CUDAUFuncDispatcher":
        return "ufunc"
    if cls in ("CUDADispatcher", "FakeCUDAKernel"):
        device = getattr(func, "_device", None) or getattr(func, "targetoptions", {}).get("device")
        return "device function" if device else "kernel"
    if hasattr(func, "overloads") and hasattr(func, "py_func"):
        return "jit"
    if _access.python_function(func) is not None:
        return "function"
    raise TypeError(
        f"explain_intents() takes a @cuda.jit kernel, an @njit function, a CUDA ufunc or a "
        f"Python function; got {type(func).__name__}"
    )


def _explicit(position: int, parameter: str | None, value: _Intent) -> ArgumentIntent:
    return ArgumentIntent(position, parameter, _NAMES[value.intent], "explicit")


def _not_smart(position: int, parameter: str | None) -> ArgumentIntent:
    return ArgumentIntent(position, parameter, "-", "not a SmartArray")


def _why(access: _access.FunctionAccess, position: int) -> tuple[str, ...]:
    param = access.param_of(position)
    reasons = param.reasons if param is not None else ("more arguments than parameters",)
    index = access.index_of(position)
    # (a returned raw address is a reason of its own: "a raw address of its memory returned")
    if index is not None and index in access.returns and not any("returned" in r for r in reasons):
        reasons = (*reasons, "returned to the caller (a writable view)")
    return reasons


def _explain_kernel(func: Any, kind: str, args: tuple[Any, ...]) -> IntentReport:
    from .launch import access_mask, readonly_allocations, store_mask, stored_at

    access = _access.analyse(func)
    stores = store_mask(access)
    readonly = readonly_allocations(*access_mask(access), args, stores) or []
    stored = getattr(readonly, "stored", ())
    out = []
    for position, value in enumerate(args):
        param = access.param_of(position)
        name = param.name if param is not None else None
        if isinstance(value, _Intent):
            out.append(_explicit(position, name, value))
        elif not isinstance(value, SmartArray):
            out.append(_not_smart(position, name))
        elif value._alloc in readonly:
            out.append(ArgumentIntent(position, name, "In", "inferred"))
        elif not value._writeable:
            if not (stored_at(stores, position) or any(value._alloc is a for a in stored)):
                out.append(ArgumentIntent(position, name, "In", "read-only array"))
                continue
            why = "the kernel stores into a read-only array of this memory: the launch is refused"
            reasons = (why, *(_why(access, position) if access.may_write(position) else ()))
            out.append(ArgumentIntent(position, name, "InOut", "inferred", reasons))
        else:
            reasons = _why(access, position) if access.may_write(position) else ()
            if not reasons:
                reasons = ("its memory is shared with an argument that may be written",)
            out.append(ArgumentIntent(position, name, "InOut", "inferred", reasons))
    return IntentReport(access.name, kind, tuple(out))


def _explain_jit(func: Any, args: tuple[Any, ...]) -> IntentReport:
    from .._numba.jit_intents import overload_access

    signature = tuple(func.typeof_pyval(value) for value in args)
    func.compile(signature)
    access = overload_access(func, signature)
    names = _access._param_names(func.py_func)
    out = []
    for position, value in enumerate(args):
        name = names[position] if position < len(names) else None
        if isinstance(value, _Intent):
            intent = "In" if value.intent == "in" else "InOut"  # @jit: Out acts as InOut
            out.append(ArgumentIntent(position, name, intent, "explicit"))
        elif not isinstance(value, SmartArray):
            out.append(_not_smart(position, name))
        elif access is None:
            why = "this compilation could not be analysed (e.g. a lifted loop, objmode)"
            out.append(ArgumentIntent(position, name, "InOut", "inferred", (why,)))
        elif not value._writeable:
            out.append(ArgumentIntent(position, name, "In", "read-only array"))
        elif access.may_write(position):
            out.append(ArgumentIntent(position, name, "InOut", "inferred", _why(access, position)))
        else:
            out.append(ArgumentIntent(position, name, "In", "inferred"))
    qualname = getattr(func.py_func, "__qualname__", repr(func))
    return IntentReport(qualname, "jit function", tuple(out))


def _explain_ufunc(func: Any, kind: str, args: tuple[Any, ...]) -> IntentReport:
    from .ufuncs import gufunc_output_reads

    engine = getattr(func, "engine", None)
    nin = engine.nin if engine is not None else len(args)
    outputs = args[nin:]
    reads = gufunc_output_reads(func, nin, len(outputs)) if kind == "gufunc" else ()
    out = []
    for position, value in enumerate(args):
        if isinstance(value, _Intent):
            out.append(_explicit(position, None, value))
        elif not isinstance(value, SmartArray):
            out.append(_not_smart(position, None))
        elif position < nin:
            out.append(ArgumentIntent(position, None, "In", "inferred", ("an input",)))
        elif reads[position - nin]:
            why = ("the gufunc's kernel may read its old values",)
            out.append(ArgumentIntent(position, None, "InOut", "inferred", why))
        else:
            why = ("the kernel provably never reads it",)
            out.append(ArgumentIntent(position, None, "Out", "inferred", why))
    return IntentReport(getattr(func, "__name__", repr(func)), kind, tuple(out))
