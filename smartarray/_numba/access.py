"""Which array parameters a function may write or read: a conservative analysis of Numba IR.

The analysis runs on Numba IR, either untyped (``numba.core.compiler.run_frontend`` of the Python
function: kernels, device functions and gufunc bodies, in every tier, the simulator included)
or typed (the IR and type map of an ``@njit`` compilation). It is flow-insensitive: every
variable that may, on any path, refer to memory of parameter ``p`` is an *alias* of ``p``
(slices, ``.T``, ``reshape`` and other views, tuple packing and unpacking, assignment and
reassignment, loop variables, elements, results of calls that may return their arguments).
A parameter *may be written* when any alias of it is

* the target of a store (``a[i] = v``, ``a.field = v``, ``del a[i]``, ``a += v``), also
  through the ``operator`` module (``operator.setitem(a, i, v)``, ``operator.iadd(a, v)``),
* the first argument of a ``cuda.atomic.*`` function,
* passed to a device or ``@jit`` function that may write the matching parameter (analysed
  recursively), to a NumPy ufunc as an output, as the ``out`` (by keyword or position) of a
  NumPy function or array method that otherwise only reads, or to any function or method not
  known to only read its arguments,
* stored in a list, set, dict or object attribute, captured by an inner function, yielded, or
  returned by the analysed function,

or when a raw address of its memory (``a.ctypes``, ``a.ctypes.data``, ``a.data``, and integers
computed from them) escapes: passed to code the analysis does not know (a ``ctypes``
function), stored, or returned. In typed IR such an address is an integer: integers derived
from ``.ctypes`` (and integer parameters, which a caller may pass an address in) are aliases
too. Every parameter may be written when the function cannot be analysed at all (its IR
cannot be built, it uses ``numba.objmode``, it recurses, IR the analysis does not know).

A parameter *may be read* by every use except those that only store into it, take its
shape, or derive a view from it. Missing a write would serve stale data; missing a read-only
parameter only costs a copy, so every doubt counts as a write (and as a read).

Numba's own ``numba.core.ir_utils.find_potential_aliases`` was considered: it needs a type
map (kernels in the simulator have none), follows a fixed set of view-making operations (not
tuple packing and unpacking, nor views returned by called functions) and answers which
variables alias (for dead-code elimination), not which parameters are written; this module
keeps its own fixpoint over the same IR classes.
"""

from __future__ import annotations

import builtins
import cmath
import inspect
import math
import operator
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba.core import ir, types


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Attributes that describe an array without giving access to its elements.
_METADATA_ATTRS = frozenset(
    {"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes", "layout", "flags"}
)
#: Methods of arrays (and tuples) that never write their receiver or arguments.
_READONLY_METHODS = _names(
    """reshape ravel flatten transpose view copy astype sum prod mean std var min max argmin
    argmax any all dot cumsum cumprod nonzero item conj conjugate squeeze swapaxes take repeat
    argsort searchsorted tolist tobytes count index real imag round clip"""
)
#: Builtins that never write their arguments (results may alias them: ``iter``, ``zip`` ...).
_PURE_BUILTINS = frozenset(
    getattr(builtins, name)
    for name in _names(
        """len range min max abs int float bool complex round enumerate zip iter next print
        isinstance slice tuple sum divmod pow hash reversed sorted any all str"""
    )
)
#: ``numba.cuda`` names whose calls never write array arguments.
_CUDA_PURE = _names(
    """grid gridsize syncthreads syncthreads_count syncthreads_and syncthreads_or threadfence
    threadfence_block threadfence_system syncwarp laneid warpsize activemask lanemask_lt
    all_sync any_sync eq_sync ballot_sync shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync
    match_any_sync match_all_sync popc brev clz ffs fma cbrt selp nanosleep fp16 libdevice
    local shared const"""
)
#: ``numba.cuda`` calls that return new arrays.
_CUDA_FRESH = frozenset({("local", "array"), ("shared", "array"), ("const", "array_like")})
#: NumPy functions that never write their arguments (an ``out=`` keyword is still a write).
_NUMPY_PURE = _names(
    """sum prod mean std var min max amin amax argmin argmax any all dot vdot inner outer cross
    trace diag diagonal asarray array ascontiguousarray asfortranarray copy reshape ravel
    transpose swapaxes moveaxis squeeze expand_dims atleast_1d atleast_2d atleast_3d
    concatenate stack hstack vstack where nonzero flatnonzero argwhere count_nonzero sort
    argsort unique cumsum cumprod diff median percentile quantile nanmean nansum nanmin nanmax
    nanstd nanvar allclose isclose array_equal linspace arange empty zeros ones full
    empty_like zeros_like ones_like full_like identity eye histogram searchsorted interp clip
    shape size ndim round around real imag conj conjugate flip fliplr flipud roll
    broadcast_to isfinite isnan isinf sign abs absolute exp log sqrt sin cos tan"""
)
_NUMPY_LINALG_PURE = _names(
    "norm solve inv det eig eigh eigvals eigvalsh svd qr cholesky lstsq pinv matrix_power "
    "matrix_rank slogdet cond"
)
_NUMPY_FRESH = _names(
    "empty zeros ones full empty_like zeros_like ones_like full_like identity eye arange linspace"
)
#: Position of ``out`` among the positional parameters of the functions above that take one
#: (numpy's signatures: ``np.clip(a, a_min, a_max, out)``); tests/test_access.py checks every
#: function of the tables against the installed numpy.
_NUMPY_OUT_POSITION = {
    **dict.fromkeys(
        _names(
            """all any amax amin max min argmax argmin nanmax nanmin median around round
            concatenate stack dot outer"""
        ),
        2,
    ),
    **dict.fromkeys(
        _names(
            """clip sum prod mean std var nansum nanmean nanstd nanvar cumsum cumprod
            percentile quantile"""
        ),
        3,
    ),
    "trace": 5,
}
#: Position of ``overwrite_input`` (true: the function may reorder its input in place).
_NUMPY_OVERWRITE_POSITION = {"median": 3, "percentile": 4, "quantile": 4}
#: Position of ``out`` among the arguments of the read-only array methods (the receiver not
#: counted: ``a.clip(lo, hi, out)``).
_METHOD_OUT_POSITION = {
    **dict.fromkeys(_names("all any argmax argmin dot max min round"), 1),
    **dict.fromkeys(_names("clip cumprod cumsum mean prod std sum take var"), 2),
}
_PURE_MODULES = (math, cmath, operator)
#: ``operator`` functions that store into their first argument, as ``a[i] = v`` (the dunder
#: aliases, ``operator.__setitem__``, are the same objects).
_OPERATOR_STORES = (operator.setitem, operator.delitem)
#: ``operator`` functions that update their first argument in place, as ``a += v``.
_OPERATOR_INPLACE = tuple(
    getattr(operator, name)
    for name in _names(
        "iadd isub imul imatmul itruediv ifloordiv imod ipow ilshift irshift iand ior ixor iconcat"
    )
)
#: ``operator`` functions that call another function with the arguments (Python 3.11+).
_OPERATOR_CALLS = tuple(f for f in (getattr(operator, "call", None),) if f is not None)
#: Attributes that give a raw address of an array's memory (``a.ctypes.data``, ``a.data``).
_ADDRESS_ATTRS = _names("ctypes data _as_parameter_ __array_interface__ __array_struct__")
#: Those of them from which an integer address is computed (``a.ctypes.data``): a kernel's
#: ``a.data`` is a record field or, in the simulator, a memoryview (no arithmetic with it).
_INTEGER_ADDRESS_ATTRS = _names("ctypes __array_interface__")
#: Numba types of values that may be a raw address of parameter memory.
_ADDRESS_TYPES = (types.Integer, types.ArrayCTypes, types.RawPointer, types.CPointer)
#: Expressions that make an alias of their operand without touching its elements.
_DERIVING_OPS = _names(
    "getattr getiter iternext pair_first pair_second exhaust_iter build_tuple cast phi"
)


@dataclass(frozen=True)
class ParamAccess:
    """What a function may do with one parameter.

    Attributes
    ----------
    name
        The parameter's name.
    writes
        False only when the function provably never writes the parameter's memory.
    reads
        False only when the function provably never reads the parameter's elements.
    reasons
        Why it may write (source line and construct), empty when it never writes.
    kept
        Why a typed container that outlives the call (``numba.typed.List``/``Dict``, a
        jitclass) may keep a reference to the parameter's memory; empty when none can.
    """

    name: str
    writes: bool
    reads: bool
    reasons: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


@dataclass(frozen=True)
class FunctionAccess:
    """The result of the analysis of one function.

    Attributes
    ----------
    name
        The function's qualified name.
    params
        One :class:`ParamAccess` per parameter, in order (``*args`` is one parameter).
    vararg
        Index of the ``*args`` parameter, or None.
    returns
        Parameters whose memory the return value may alias.
    """

    name: str
    params: tuple[ParamAccess, ...]
    vararg: int | None = None
    returns: frozenset[int] = frozenset()

    def param_of(self, position: int) -> ParamAccess | None:
        """The parameter that receives positional argument ``position`` (None if none)."""
        if position < len(self.params) and (self.vararg is None or position < self.vararg):
            return self.params[position]
        if self.vararg is not None:
            return self.params[self.vararg]
        return None

    def index_of(self, position: int) -> int | None:
        """Index of the parameter that receives positional argument ``position``."""
        if position < len(self.params) and (self.vararg is None or position < self.vararg):
            return position
        return self.vararg

    def writes_at(self, position: int) -> bool:
        """True when the function may write the argument at ``position`` itself (as a callee:
        what it returns is the caller's to follow)."""
        param = self.param_of(position)
        return param is None or param.writes

    def may_write(self, position: int) -> bool:
        """True when a call may write the argument at ``position``, the call seen from
        outside: returning an alias of an argument counts as a write (the caller gets a
        writable view)."""
        index = self.index_of(position)
        return index is None or self.params[index].writes or index in self.returns

    def kept_at(self, position: int) -> tuple[str, ...]:
        """Why a lasting typed container may keep the argument at ``position`` (empty: none)."""
        param = self.param_of(position)
        return () if param is None else param.kept

    def reads_at(self, position: int) -> bool:
        """True when the argument at ``position`` may be read."""
        param = self.param_of(position)
        return param is None or param.reads

    @property
    def write_mask(self) -> tuple[bool, ...]:
        """:meth:`may_write` of every parameter, in order."""
        return tuple(self.may_write(index) for index in range(len(self.params)))


def _pessimistic(func: Any, reason: str) -> FunctionAccess:
    names = _param_names(func)
    params = tuple(ParamAccess(name, True, True, (reason,)) for name in names)
    return FunctionAccess(_name(func), params, _vararg_index(func), frozenset(range(len(names))))


def _name(func: Any) -> str:
    return getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))


def _param_names(func: Any) -> tuple[str, ...]:
    code = getattr(func, "__code__", None)
    if code is None:
        return ()
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS)
    return tuple(code.co_varnames[:count])


def _vararg_index(func: Any) -> int | None:
    code = getattr(func, "__code__", None)
    if code is None or not code.co_flags & inspect.CO_VARARGS:
        return None
    return code.co_argcount + code.co_kwonlyargcount


# --- entry points ---------------------------------------------------------------------------

# Weak keys: a cached function must not keep its globals (arrays included) alive.
_cache: weakref.WeakKeyDictionary[Any, FunctionAccess] = weakref.WeakKeyDictionary()
_cache_lock = threading.RLock()
_in_progress = threading.local()


def python_function(obj: Any) -> Any:
    """The Python function behind a Numba dispatcher, a simulator kernel, or a function."""
    for attr in ("py_func", "fn"):
        inner = getattr(obj, attr, None)
        if inspect.isfunction(inner):
            return inner
    return obj if inspect.isfunction(obj) else None


def analyse(func: Any) -> FunctionAccess:
    """Analyse the untyped IR of ``func`` (a function, dispatcher or simulator kernel); cached.

    Used for CUDA kernels, device functions and gufunc bodies: no container type that can
    hold an array is mutable in CUDA code, so element stores never let an array escape.
    """
    py_func = python_function(func)
    if py_func is None:
        return FunctionAccess(_name(func), ())
    with _cache_lock:
        cached = _cache.get(py_func)
        if cached is not None:
            return cached
        stack: set[Any] = _in_progress.__dict__.setdefault("stack", set())
        if py_func in stack:
            return _pessimistic(py_func, "recursive call")
        stack.add(py_func)
        try:
            result = _analyse_untyped(py_func)
        finally:
            stack.discard(py_func)
        _cache[py_func] = result
        return result


def _analyse_untyped(py_func: Any) -> FunctionAccess:
    from numba.core.compiler import run_frontend

    try:
        func_ir = run_frontend(py_func)
    except Exception as exc:  # any failure to build IR means: cannot prove anything
        return _pessimistic(py_func, f"its Numba IR cannot be built ({type(exc).__name__})")
    names = _param_names(py_func)
    return _Analysis(func_ir.blocks, names, None, None, containers="none").run(
        _name(py_func), _vararg_index(py_func)
    )


def analyse_typed(
    py_func: Any, blocks: dict[int, ir.Block], typemap: dict[str, Any], calltypes: Any
) -> FunctionAccess:
    """Analyse the typed IR of one ``@jit`` compilation (not cached: once per overload)."""
    names = _param_names(py_func)
    try:
        return _Analysis(blocks, names, typemap, calltypes, containers="typed").run(
            _name(py_func), _vararg_index(py_func)
        )
    except Exception as exc:  # pragma: no cover - IR the analysis does not expect
        return _pessimistic(py_func, f"analysis failed ({type(exc).__name__}: {exc})")


# --- the analysis ------------------------------------------------------------------------


_SCALAR_TYPES = (
    types.Number,
    types.Boolean,
    types.NoneType,
    types.UnicodeType,
    types.Dispatcher,
    types.Function,
    types.Module,
    types.NumberClass,
    types.DType,
    types.RangeType,
    types.SliceType,
    types.NPDatetime,
    types.NPTimedelta,
    types.Omitted,
    types.EnumMember,
)


#: Typed containers that are heap objects: a reference stored in one can outlive the call.
_LASTING_CONTAINERS = (types.ListType, types.DictType, types.ClassInstanceType, types.StructRef)


def _holds_container(typ: Any) -> bool:
    """Whether a value of Numba type ``typ`` is or holds a lasting typed container."""
    if isinstance(typ, types.BaseTuple):
        return any(_holds_container(t) for t in getattr(typ, "types", ()))
    return isinstance(typ, _LASTING_CONTAINERS)


def _type_can_alias(typ: Any) -> bool:
    """Whether a value of Numba type ``typ`` may refer to array memory (integers in a tuple
    count: one may be a raw address, ``(a.ctypes.data, n)``; a lone integer is handled by
    :meth:`_Analysis._address_derived`)."""
    if isinstance(typ, types.BaseTuple):
        members = getattr(typ, "types", None)
        return members is None or any(
            isinstance(t, types.Integer) or _type_can_alias(t) for t in members
        )
    return not isinstance(typ, _SCALAR_TYPES)


def _only_addresses(typ: Any) -> bool:
    """Whether every member of a tuple type may only refer to memory as a raw address (its
    aliases, if any, are addresses: ``(p, n)``, not ``(a, n)``)."""
    members = getattr(typ, "types", None)
    if members is None:
        return False
    return all(
        _only_addresses(t)
        if isinstance(t, types.BaseTuple)
        else isinstance(t, _ADDRESS_TYPES) or not _type_can_alias(t)
        for t in members
    )


# Operators whose result, for a left operand that is a number or a new array made from one,
# is again a number or a new array, whatever the right operand (an element, a view, a tuple:
# ``0.0 + view`` allocates, ``0.0 + (x,)`` does not compile). ``int * tuple`` repeats the
# tuple, so ``*`` counts only for float and complex roots (``1.0 * (x,)`` does not compile).
_NO_REPEAT_OPS = frozenset(
    {
        operator.add, operator.sub, operator.truediv, operator.floordiv, operator.mod,
        operator.pow, operator.and_, operator.or_, operator.xor, operator.lshift,
        operator.rshift, operator.neg, operator.pos, operator.invert, operator.not_,
    }
)  # fmt: skip
_ARITHMETIC_OPS = _NO_REPEAT_OPS | {operator.mul}


def _number_rooted(
    definitions: dict[str, list[Any]], roots: tuple[type, ...], ops: frozenset[Any]
) -> frozenset[str]:
    """Variables that can only hold a number, or a new array computed from one: every
    definition is a constant of a ``roots`` type, a copy of such a variable, or an operator in
    ``ops`` whose (left) operand is one (``s = 0.0``, ``s += x[i]``, ``s = s * x[i]``, ``-s``).

    Such a variable never refers to memory of a parameter, so an in-place operator on it
    (``s += x[i]``, the common reduction) writes no parameter. A greatest fixpoint: start
    from every candidate, drop those with another kind of definition, until none changes.
    """
    candidates = set(definitions)
    changed = True
    while changed:
        changed = False
        for name in list(candidates):
            if not all(_number_step(v, candidates, roots, ops) for v in definitions[name]):
                candidates.discard(name)
                changed = True
    return frozenset(candidates)


def _address_sourced(definitions: dict[str, list[Any]], attrs: frozenset[str]) -> frozenset[str]:
    """Variables of untyped IR that may hold a raw address: an attribute in ``attrs``
    (``a.ctypes``, ``a.data``) or anything computed from one (a least fixpoint: a copy, an
    item, arithmetic, a call with such an operand)."""
    sourced: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, values in definitions.items():
            if name not in sourced and any(_from_address(v, sourced, attrs) for v in values):
                sourced.add(name)
                changed = True
    return frozenset(sourced)


def _from_address(value: Any, sourced: set[str], attrs: frozenset[str]) -> bool:
    if isinstance(value, ir.Var):
        return value.name in sourced
    if not isinstance(value, ir.Expr):
        return False
    if value.op == "getattr" and value.attr in attrs:
        return True
    return any(var.name in sourced for var in value.list_vars())


def _number_step(value: Any, numbers: set[str], roots: tuple[type, ...], ops: Any) -> bool:
    if isinstance(value, ir.Const):
        return isinstance(value.value, roots) and not isinstance(value.value, bool)
    if isinstance(value, ir.Var):
        return value.name in numbers
    if not isinstance(value, ir.Expr):
        return False
    if value.op in ("binop", "inplace_binop"):
        fn = value.immutable_fn if value.op == "inplace_binop" else value.fn
        return fn in ops and isinstance(value.lhs, ir.Var) and value.lhs.name in numbers
    if value.op == "unary":
        return value.fn in ops and isinstance(value.value, ir.Var) and value.value.name in numbers
    return False


@dataclass
class _Callee:
    """What a call does: ``kind`` is one of 'metadata' (reads no element), 'pure' (reads,
    writes only an ``out``), 'fresh' (returns a new array), 'atomic', 'store' (stores into its
    first argument: ``operator.setitem``), 'inplace' (updates its first argument:
    ``operator.iadd``), 'ufunc', 'function' (analysed), 'method', 'unknown'."""

    kind: str
    description: str
    access: FunctionAccess | None = None
    nin: int = 0
    receiver: ir.Var | None = None
    access_of: Any = None  # the dispatcher a 'function' callee calls
    out: int | None = None  # position of a positional ``out`` parameter ('pure')
    overwrite: int | None = None  # position of ``overwrite_input`` ('pure')


@dataclass
class _Analysis:
    blocks: dict[int, ir.Block]
    names: tuple[str, ...]
    typemap: dict[str, Any] | None
    calltypes: Any
    #: Where a stored array may be kept by reference: "none" (CUDA code: no mutable container
    #: holds arrays), "typed" (any target not typed as an array), "any" (any target that is
    #: not a new array made in the function).
    containers: str
    alias: dict[str, frozenset[int]] = field(default_factory=dict)
    definitions: dict[str, list[Any]] = field(default_factory=dict)
    writes: dict[int, list[str]] = field(default_factory=dict)
    reads: set[int] = field(default_factory=set)
    returns: set[int] = field(default_factory=set)
    fresh: set[str] = field(default_factory=set)
    kept: dict[int, list[str]] = field(default_factory=dict)
    returns_container: bool = False
    numbers: frozenset[str] = frozenset()
    #: Untyped IR: variables that may hold a raw address (derived from ``a.ctypes``...).
    addresses: frozenset[str] = frozenset()

    def run(self, name: str, vararg: int | None) -> FunctionAccess:
        for block in self.blocks.values():
            for stmt in block.body:
                if isinstance(stmt, ir.Assign):
                    self.definitions.setdefault(stmt.target.name, []).append(stmt.value)
        numbers = _number_rooted(self.definitions, (int, float, complex), _NO_REPEAT_OPS)
        numbers |= _number_rooted(self.definitions, (float, complex), _ARITHMETIC_OPS)
        if self.typemap is None:
            self.addresses = _address_sourced(self.definitions, _ADDRESS_ATTRS)
            # A number plus an address is an address (s = 0; s += a.ctypes.data): not a number.
            numbers -= _address_sourced(self.definitions, _INTEGER_ADDRESS_ATTRS)
        self.numbers = numbers
        changed = True
        while changed:  # alias sets only grow: a fixpoint is reached
            changed = False
            for block in self.blocks.values():
                for stmt in block.body:
                    if isinstance(stmt, ir.Assign):
                        new = self._derived(stmt.target, stmt.value)
                        old = self.alias.get(stmt.target.name, frozenset())
                        if not new <= old:
                            self.alias[stmt.target.name] = old | new
                            changed = True
        self.returns_container = any(
            isinstance(stmt, ir.Return) and _holds_container(self._type_of(stmt.value))
            for block in self.blocks.values()
            for stmt in block.body
        )
        for block in self.blocks.values():
            for stmt in block.body:
                self._effects(stmt)
        params = tuple(
            ParamAccess(
                param,
                index in self.writes,
                index in self.reads,
                tuple(dict.fromkeys(self.writes.get(index, ()))),
                tuple(dict.fromkeys(self.kept.get(index, ()))),
            )
            for index, param in enumerate(self.names)
        )
        return FunctionAccess(name, params, vararg, frozenset(self.returns))

    # -- aliases ----------------------------------------------------------------------------

    def _of(self, var: Any) -> frozenset[int]:
        if isinstance(var, ir.Var):
            return self.alias.get(var.name, frozenset())
        return frozenset()

    def _union(self, values: Any) -> frozenset[int]:
        out: frozenset[int] = frozenset()
        for value in values:
            out |= self._of(value)
        return out

    def _new_array_from_operator(self, target: ir.Var, value: ir.Expr) -> bool:
        """Whether ``target = value`` is NumPy arithmetic making a new array (typed IR only).

        An array expression (Numba's rewrite of whole-array operators and ufuncs) and an
        operator (``x + 1``, ``-x``) whose operands are all arrays or numbers and whose result
        is an array allocate their result, as in NumPy: it is not a view of the operands.
        """
        if value.op not in ("arrayexpr", "binop", "unary"):
            return False
        if not isinstance(self._type_of(target), types.Array):
            return False
        if value.op == "arrayexpr":
            return True
        return all(
            isinstance(self._type_of(var), (types.Array, types.Number, types.Boolean))
            for var in value.list_vars()
        )

    def _type_of(self, var: ir.Var) -> Any:
        """The Numba type of ``var`` (None in untyped IR)."""
        return None if self.typemap is None else self.typemap.get(var.name)

    def _can_alias(self, var: ir.Var) -> bool:
        """False when the variable's type cannot refer to array memory (typed IR only)."""
        if self.typemap is None:
            return True
        typ = self.typemap.get(var.name)
        return typ is None or _type_can_alias(typ)

    def _derived(self, target: ir.Var, value: Any) -> frozenset[int]:
        if self.typemap is not None and isinstance(self._type_of(target), types.Integer):
            return self._address_derived(value)
        if not self._can_alias(target) or target.name in self.numbers:
            return frozenset()
        if isinstance(value, ir.Arg):
            return frozenset({value.index})
        if isinstance(value, ir.Var):
            return self._of(value)
        if not isinstance(value, ir.Expr):
            return frozenset()
        op = value.op
        if op == "static_getitem" and isinstance(value.index, int):
            item = self._tuple_item(value.value, value.index)
            if item is not None:
                return self._of(item)
        if op in ("getitem", "static_getitem", "typed_getitem"):
            return self._of(value.value)
        if op == "getattr":
            return frozenset() if value.attr in _METADATA_ATTRS else self._of(value.value)
        if self._new_array_from_operator(target, value):
            self.fresh.add(target.name)
            return frozenset()
        if op in ("binop", "unary", "inplace_binop", "arrayexpr"):
            # New arrays or scalars; tuples concatenated or repeated keep their items.
            return self._union(value.list_vars())
        if op == "call":
            callee = self._callee(value)
            if callee.kind == "metadata":
                return frozenset()
            if callee.kind == "fresh":
                self.fresh.add(target.name)
                return frozenset()
            if callee.kind == "function" and callee.access is not None:
                return self._returned_by(callee.access, value)
            return self._union(value.list_vars())
        return self._union(value.list_vars())

    def _address_derived(self, value: Any) -> frozenset[int]:
        """The parameters whose memory an integer (typed IR) may be a raw address of.

        Only an address can make an integer an alias: ``a.ctypes.data``, arithmetic on an
        address (``p + 8``), a conversion (``int(p)``), an item of a tuple built in the
        function or holding only integers and pointers, an analysed function's result that may
        be one of its integer arguments, and an integer parameter (a caller may pass an
        address). Elements and sizes of arrays are not; nor is an integer taken out of a tuple
        parameter that also holds arrays (a caller passing an address in such a tuple counts it
        as escaping: :meth:`_call_effects`).
        """
        if isinstance(value, ir.Arg):
            return frozenset({value.index})
        if isinstance(value, ir.Var):
            return self._of(value)
        if not isinstance(value, ir.Expr):
            return frozenset()
        if value.op == "static_getitem" and isinstance(value.index, int):
            item = self._tuple_item(value.value, value.index)
            if item is not None:
                return self._of(item)
        if value.op == "call":
            callee = self._callee(value)
            if callee.kind in ("metadata", "fresh"):
                return frozenset()
            if callee.kind == "function" and callee.access is not None:
                return self._returned_by(callee.access, value)
        out: frozenset[int] = frozenset()
        for var in value.list_vars():
            typ = self._type_of(var)
            if isinstance(typ, _ADDRESS_TYPES) or (
                isinstance(typ, types.BaseTuple) and _only_addresses(typ)
            ):
                out |= self._of(var)
        return out

    def _returned_by(self, access: FunctionAccess, expr: ir.Expr) -> frozenset[int]:
        """The parameters the result of a call of an analysed function may alias."""
        args = self._call_args(expr)
        star = self._star(expr)
        out: frozenset[int] = frozenset()
        for position, arg in enumerate(args):
            last = max(position + 1, len(access.params)) if position == star else position + 1
            for at in range(position, last):
                index = access.index_of(at)
                if index is None or index in access.returns:
                    out |= self._of(arg)
        return out

    def _tuple_item(self, var: Any, index: int, depth: int = 0) -> Any:
        """Item ``index`` of a tuple built in the function (``a, b = pair``), or None."""
        defs = self.definitions.get(var.name, []) if isinstance(var, ir.Var) else []
        if len(defs) != 1 or depth > 8:
            return None
        value = defs[0]
        if isinstance(value, ir.Var):
            return self._tuple_item(value, index, depth + 1)
        if isinstance(value, ir.Expr) and value.op == "exhaust_iter":
            return self._tuple_item(value.value, index, depth + 1)
        if isinstance(value, ir.Expr) and value.op == "build_tuple":
            return value.items[index] if -len(value.items) <= index < len(value.items) else None
        return None

    # -- callees ----------------------------------------------------------------------------

    def _call_args(self, expr: ir.Expr) -> list[Any]:
        """The positional arguments of a call; ``*args`` of a tuple built in the function
        gives its items, any other ``*args`` comes last (see :meth:`_star`)."""
        args = list(expr.args)
        if expr.vararg is not None:
            items = self._tuple_items(expr.vararg)
            args.extend([expr.vararg] if items is None else items)
        return args

    def _star(self, expr: ir.Expr) -> int | None:
        """The position, in :meth:`_call_args`, of a ``*args`` tuple whose items are not
        known: it may supply the arguments at that position and every later one."""
        if expr.vararg is None or self._tuple_items(expr.vararg) is not None:
            return None
        return len(expr.args)

    def _tuple_items(self, var: Any, depth: int = 0) -> list[Any] | None:
        """The items of a tuple built in the function, or None: ``build_tuple``, and the
        ``(y,) + tuple(rest)`` Python 3.11+ bytecode makes of ``f(y, *rest)``."""
        defs = self.definitions.get(var.name, []) if isinstance(var, ir.Var) else []
        if len(defs) != 1 or depth > 8:
            return None
        value = defs[0]
        if isinstance(value, ir.Var):
            return self._tuple_items(value, depth + 1)
        if not isinstance(value, ir.Expr):
            return None
        if value.op == "build_tuple":
            return list(value.items)
        if value.op == "binop" and value.fn is operator.add:
            left = self._tuple_items(value.lhs, depth + 1)
            right = self._tuple_items(value.rhs, depth + 1)
            return None if left is None or right is None else left + right
        if value.op != "call" or len(value.args) != 1 or value.kws or value.vararg is not None:
            return None
        resolved = self._resolve(value.func)
        if resolved is not None and resolved[0] is tuple and not resolved[1]:
            return self._tuple_items(value.args[0], depth + 1)
        return None

    def _at(self, args: list[Any], star: int | None, position: int) -> Any:
        """The argument that may be passed at ``position`` (None: none)."""
        if star is not None and position >= star:
            return args[star]
        return args[position] if position < len(args) else None

    def _constant(self, var: Any) -> Any:
        """The value of a variable defined once as a constant, else ``Ellipsis``."""
        defs = self.definitions.get(var.name, []) if isinstance(var, ir.Var) else []
        if len(defs) == 1 and isinstance(defs[0], (ir.Const, ir.Global, ir.FreeVar)):
            return defs[0].value
        return Ellipsis

    def _resolve(self, var: Any, depth: int = 0) -> tuple[Any, tuple[str, ...]] | None:
        """The global object a callee variable names, as (root object, attribute path)."""
        if not isinstance(var, ir.Var) or depth > 8:
            return None
        defs = self.definitions.get(var.name, [])
        if len(defs) != 1:
            return None
        value = defs[0]
        if isinstance(value, (ir.Global, ir.FreeVar)):
            return value.value, ()
        if isinstance(value, ir.Const):
            return value.value, ()
        if isinstance(value, ir.Var):
            return self._resolve(value, depth + 1)
        if isinstance(value, ir.Expr) and value.op == "getattr":
            inner = self._resolve(value.value, depth + 1)
            if inner is not None:
                return inner[0], (*inner[1], value.attr)
        return None

    def _callee(self, expr: ir.Expr) -> _Callee:
        if self.typemap is not None:
            typed = _typed_callee(self.typemap.get(expr.func.name), self.calltypes, expr)
            if typed is not None:
                return typed
        resolved = self._resolve(expr.func)
        if resolved is not None:
            callee = _classify(*resolved)
            if callee.kind == "function" and self.containers != "none":
                return _function_callee(callee.access_of, self.containers)
            return callee
        defs = self.definitions.get(expr.func.name, [])
        if len(defs) == 1 and isinstance(defs[0], ir.Expr) and defs[0].op == "getattr":
            receiver = defs[0].value
            if defs[0].attr in _READONLY_METHODS and self._of(receiver):
                out = _METHOD_OUT_POSITION.get(defs[0].attr)
                return _Callee("pure", f".{defs[0].attr}()", receiver=receiver, out=out)
            return _Callee("method", f".{defs[0].attr}()", receiver=receiver)
        return _Callee("unknown", "a call the analysis cannot resolve")

    # -- effects ------------------------------------------------------------------------------

    def _write(self, params: frozenset[int], why: str, loc: Any) -> None:
        line = getattr(loc, "line", None)
        where = f"line {line}: " if line is not None else ""
        for index in params:
            self.writes.setdefault(index, []).append(where + why)

    def _keep(self, params: frozenset[int], container: Any, why: str, loc: Any) -> None:
        """Record ``params`` as stored into ``container`` if it may outlive the call."""
        if not params or not isinstance(container, ir.Var):
            return
        if not isinstance(self._type_of(container), _LASTING_CONTAINERS):
            return
        if not (self._of(container) or self.returns_container):
            return  # a container made in the function and dropped when it returns
        line = getattr(loc, "line", None)
        self._record_kept(params, f"line {line}: {why}" if line is not None else why)

    def _record_kept(self, params: frozenset[int], why: str) -> None:
        for index in params:
            self.kept.setdefault(index, []).append(why)

    def _read(self, *values: Any) -> None:
        for value in values:
            self.reads |= self._of(value)

    def _effects(self, stmt: Any) -> None:
        loc = stmt.loc
        if isinstance(stmt, (ir.SetItem, ir.StaticSetItem)):
            self._write(self._of(stmt.target), "an element store", loc)
            index = stmt.index if isinstance(stmt, ir.SetItem) else stmt.index_var
            self._read(index, stmt.value)
            if self._escapes_into(stmt.target):
                self._write(self._of(stmt.value), "stored in a container", loc)
                self._keep(self._of(stmt.value), stmt.target, "stored in a container", loc)
            self._address_stored(stmt.value, loc)
        elif isinstance(stmt, ir.SetAttr):
            self._write(self._of(stmt.target), f"an attribute store (.{stmt.attr} = ...)", loc)
            if self._keeps_references(stmt.target, types.Record):
                self._write(self._of(stmt.value), "stored as an attribute", loc)
                self._keep(self._of(stmt.value), stmt.target, "stored as an attribute", loc)
            self._address_stored(stmt.value, loc)
            self._read(stmt.value)
        elif isinstance(stmt, ir.DelItem):
            self._write(self._of(stmt.target), "del of an element", loc)
        elif isinstance(stmt, ir.Return):
            returned = self._of(stmt.value)
            self.returns |= returned
            if self._is_address(stmt.value):
                self._write(returned, "a raw address of its memory returned", loc)
            self._read(stmt.value)
        elif isinstance(stmt, ir.Assign):
            self._assign_effects(stmt.target, stmt.value, loc)
        elif isinstance(stmt, (ir.Branch, ir.Print)):
            self._read(*stmt.list_vars())
        elif isinstance(stmt, (ir.Jump, ir.Del, ir.PopBlock, ir.StaticRaise)):
            pass
        elif isinstance(stmt, (ir.Raise, ir.DynamicRaise, ir.TryRaise, ir.DynamicTryRaise)):
            self._read(*stmt.list_vars())
        elif isinstance(stmt, ir.EnterWith):
            every = frozenset(range(len(self.names)))
            self._write(every, "a with-block (e.g. numba.objmode) is not analysed", loc)
            self.reads |= every
        else:  # IR the analysis does not know (parfors, ...): pessimistic
            every = frozenset(range(len(self.names)))
            self._write(every, f"{type(stmt).__name__} is not analysed", loc)
            self.reads |= every

    def _escapes_into(self, target: ir.Var) -> bool:
        """A store of an array into ``target`` keeps a reference (target is a container)."""
        if self.containers == "any":
            return target.name not in self.fresh
        return self._keeps_references(target, types.Array)

    def _keeps_references(self, target: Any, holds_values: type) -> bool:
        """Whether storing into (or calling a method of) ``target`` may keep a reference to
        the stored array: never in CUDA code; in typed code unless ``target`` has the
        type ``holds_values`` (arrays, records: they copy values); otherwise always."""
        if self.containers == "none":
            return False
        if self.containers == "typed" and self.typemap is not None:
            return not isinstance(self.typemap.get(target.name), holds_values)
        return True

    def _assign_effects(self, target: ir.Var, value: Any, loc: Any) -> None:
        if not isinstance(value, ir.Expr):
            return
        op = value.op
        if op in ("getitem", "static_getitem", "typed_getitem"):
            self._read(value.index if op != "static_getitem" else value.index_var)
        elif op in _DERIVING_OPS:
            pass  # only derives an alias: its uses decide
        elif op == "inplace_binop":
            self._write(self._of(value.lhs), "an in-place operator (a += ...)", loc)
            self._read(value.lhs, value.rhs)
        elif op in ("build_list", "build_set", "build_map"):
            self._write(self._union(value.list_vars()), "stored in a container", loc)
            self._read(*value.list_vars())
        elif op == "make_function":
            self._write(self._union(value.list_vars()), "captured by an inner function", loc)
        elif op == "yield":
            self._write(self._of(value.value), "yielded", loc)
        elif op == "call":
            self._call_effects(value, loc)
        else:
            self._read(*value.list_vars())

    def _call_effects(self, expr: ir.Expr, loc: Any) -> None:
        callee = self._callee(expr)
        args = self._call_args(expr)
        kws = dict(expr.kws)
        if expr.varkwarg is not None:
            kws["**"] = expr.varkwarg
        if callee.kind == "metadata":
            pass  # len(a), np.shape(a): no element is read
        elif callee.kind in ("pure", "fresh"):
            self._read(*args, *kws.values(), callee.receiver)
            self._out_effects(callee, args, self._star(expr), kws, loc)
        elif callee.kind == "atomic":
            if args:
                self._write(self._of(args[0]), f"the target of {callee.description}", loc)
            self._read(*args)
        elif callee.kind == "store" and args and self._star(expr) is None and not kws:
            # operator.setitem(a, i, v) is a[i] = v; operator.delitem(a, i) is del a[i]
            target = args[0]
            self._write(self._of(target), f"a store through {callee.description}", loc)
            self._read(*args[1:])
            value = args[2] if len(args) > 2 else None
            if value is not None and self._escapes_into(target):
                self._write(self._of(value), "stored in a container", loc)
                self._keep(self._of(value), target, "stored in a container", loc)
            self._address_stored(value, loc)
        elif callee.kind == "inplace" and args and self._star(expr) is None and not kws:
            # operator.iadd(a, v) is a += v
            self._write(self._of(args[0]), f"an in-place operator ({callee.description})", loc)
            self._read(*args)
        elif callee.kind == "ufunc":
            star = self._star(expr)
            for position, arg in enumerate(args):
                if position >= callee.nin or position == star:
                    self._write(self._of(arg), f"an output of {callee.description}", loc)
                else:
                    self._read(arg)
            for value in kws.values():
                self._write(self._of(value), f"out= of {callee.description}", loc)
        elif callee.kind == "function" and callee.access is not None:
            access = callee.access
            star = self._star(expr)
            for position, arg in enumerate(args):
                # An unknown *args tuple stands for this argument and every later one.
                last = max(position + 1, len(access.params)) if position == star else position + 1
                for at in range(position, last):
                    if access.writes_at(at):
                        param = access.param_of(at)
                        name = param.name if param is not None else f"argument {at}"
                        by = f"{callee.description} ({name})"
                        why = f"written by {by}"
                        if self._is_address(arg):
                            why = f"a raw address of its memory passed to {by}, which may write"
                        self._write(self._of(arg), why, loc)
                    if access.reads_at(at):
                        self._read(arg)
                    for why in access.kept_at(at):
                        self._write(self._of(arg), f"kept by {callee.description}: {why}", loc)
                        self._record_kept(self._of(arg), f"{callee.description}, {why}")
                # An address in a tuple that also holds arrays: the callee does not follow it.
                why = f"a raw address of its memory passed in a tuple to {callee.description}"
                self._write(self._addresses_in_tuple(arg), why, loc)
            if kws:
                every = self._union(kws.values())
                self._write(every, f"a keyword argument of {callee.description}", loc)
                self._read(*kws.values())
        else:
            everything = [*args, *kws.values()]
            receiver = callee.receiver
            if receiver is not None and self._of(receiver):
                # A method of an argument's alias: it writes its receiver. Arguments of array
                # methods are values (copied); other receivers may keep them (list.append).
                self._write(self._of(receiver), f"the receiver of {callee.description}", loc)
                self._read(receiver)
                if self._keeps_references(receiver, types.Array):
                    self._write(self._union(everything), f"kept by {callee.description}", loc)
                    kept_by = f"kept by {callee.description}"
                    self._keep(self._union(everything), receiver, kept_by, loc)
            else:
                if receiver is not None:
                    kept_by = f"kept by {callee.description}"
                    self._keep(self._union(everything), receiver, kept_by, loc)
                    everything.append(receiver)
                for value in everything:
                    how = "a raw address of its memory" if self._is_address(value) else ""
                    why = f"{how} passed to {callee.description}".lstrip()
                    self._write(self._of(value), why, loc)
            self._read(*everything)

    def _out_effects(
        self, callee: _Callee, args: list[Any], star: int | None, kws: dict[str, Any], loc: Any
    ) -> None:
        """Writes of a call that only reads its arguments but an ``out`` (by keyword, by
        position, or in ``**kwargs``) and, with ``overwrite_input``, its input."""
        name = callee.description
        if "out" in kws:
            self._write(self._of(kws["out"]), f"out= of {name}", loc)
        if callee.out is not None:
            out = self._at(args, star, callee.out)
            if out is not None:
                why = f"out of {name} (argument {callee.out + 1}, by position)"
                self._write(self._of(out), why, loc)
        if "**" in kws:
            self._write(self._of(kws["**"]), f"**kwargs of {name} (may hold out=)", loc)
        if callee.overwrite is None:
            return
        flag = kws.get("overwrite_input", self._at(args, star, callee.overwrite))
        if "**" in kws and flag is None:
            flag = kws["**"]
        constant = self._constant(flag)  # (False or None, by position or keyword: no write)
        if flag is not None and constant is not False and constant is not None:
            inputs = [args[0]] if args else [kws.get("a"), kws.get("**")]
            why = f"overwrite_input of {name} (it may reorder its input in place)"
            self._write(self._union(inputs), why, loc)

    def _address_stored(self, value: Any, loc: Any) -> None:
        """A raw address of parameter memory stored (into an array, a record): it escapes."""
        if value is not None and self._is_address(value):
            self._write(self._of(value), "a raw address of its memory stored", loc)

    def _addresses_in_tuple(self, var: Any, depth: int = 0) -> frozenset[int]:
        """The parameters whose raw address a tuple (typed IR, built in the function) holds
        next to arrays: an integer taken out of it is not known to be an address
        (:meth:`_address_derived`)."""
        typ = self._type_of(var)
        if not isinstance(typ, types.BaseTuple) or _only_addresses(typ) or depth > 8:
            return frozenset()
        out: frozenset[int] = frozenset()
        for item in self._tuple_items(var) or ():
            if self._is_address(item):
                out |= self._of(item)
            else:
                out |= self._addresses_in_tuple(item, depth + 1)
        return out

    def _is_address(self, var: Any) -> bool:
        """Whether ``var`` may hold a raw address of parameter memory (``a.ctypes.data``)."""
        if not isinstance(var, ir.Var) or not self._of(var):
            return False
        if self.typemap is None:
            return var.name in self.addresses
        return isinstance(self._type_of(var), _ADDRESS_TYPES)


_typed_cache: weakref.WeakKeyDictionary[Any, FunctionAccess] = weakref.WeakKeyDictionary()


def _typed_callee(typ: Any, calltypes: Any, expr: ir.Expr) -> _Callee | None:
    """A jit-to-jit call analysed on the callee's own typed IR (its compiled overload)."""
    if not isinstance(typ, types.Dispatcher):
        return None
    dispatcher = typ.dispatcher
    py_func = python_function(dispatcher)
    try:
        signature = calltypes[expr]
        annotation = dispatcher.overloads[tuple(signature.args)].type_annotation
    except (KeyError, TypeError, AttributeError):
        annotation = None
    name = f"{getattr(py_func, '__qualname__', repr(dispatcher))}()"
    if annotation is None or py_func is None:
        access = _untyped_cpu(dispatcher)
        return _Callee("function", name, access=access)
    with _cache_lock:
        cached = _typed_cache.get(annotation)
        if cached is None:
            stack: set[Any] = _in_progress.__dict__.setdefault("stack", set())
            if annotation in stack:
                return _Callee("function", name, access=_pessimistic(py_func, "recursive call"))
            stack.add(annotation)
            try:
                cached = analyse_typed(
                    py_func, annotation.blocks, annotation.typemap, annotation.calltypes
                )
            finally:
                stack.discard(annotation)
            _typed_cache[annotation] = cached
    return _Callee("function", name, access=cached)


_cpu_cache: weakref.WeakKeyDictionary[Any, FunctionAccess] = weakref.WeakKeyDictionary()


def _untyped_cpu(func: Any) -> FunctionAccess:
    """Untyped analysis of a CPU function (cached): any store may keep an array by reference.

    Used for ``@jit`` callees whose typed IR is not at hand (a recursive call, an overload
    not compiled for the call's types).
    """
    from numba.core.compiler import run_frontend

    py_func = python_function(func)
    if py_func is None:
        return FunctionAccess(_name(func), ())
    with _cache_lock:
        cached = _cpu_cache.get(py_func)
        if cached is not None:
            return cached
        stack: set[Any] = _in_progress.__dict__.setdefault("stack", set())
        key = ("cpu", py_func)
        if key in stack:
            return _pessimistic(py_func, "recursive call")
        stack.add(key)
        try:
            func_ir = run_frontend(py_func)
            names = _param_names(py_func)
            result = _Analysis(func_ir.blocks, names, None, None, containers="any").run(
                _name(py_func), _vararg_index(py_func)
            )
        except Exception as exc:
            result = _pessimistic(py_func, f"its Numba IR cannot be built ({type(exc).__name__})")
        finally:
            stack.discard(key)
        _cpu_cache[py_func] = result
        return result


def _function_callee(obj: Any, containers: str = "none") -> _Callee:
    """A call of a dispatcher: CUDA device functions analysed as kernels are, CPU functions
    (reached from CPU code) as CPU code."""
    py_func = python_function(obj)
    name = getattr(py_func, "__qualname__", repr(obj))
    access = analyse(obj) if containers == "none" else _untyped_cpu(obj)
    return _Callee("function", f"{name}()", access=access)


def _classify(root: Any, path: tuple[str, ...]) -> _Callee:
    """What calling the object ``root.<path>`` does."""
    name = ".".join((getattr(root, "__name__", type(root).__name__), *path))
    module_name = getattr(root, "__name__", None) if inspect.ismodule(root) else None
    if module_name == "numba.cuda" and path:
        if path[0] == "atomic" and len(path) == 2:
            return _Callee("atomic", f"cuda.atomic.{path[1]}()")
        if path in _CUDA_FRESH:
            return _Callee("fresh", f"cuda.{'.'.join(path)}()")
        if path[0] in _CUDA_PURE:
            return _Callee("pure", f"cuda.{'.'.join(path)}()")
    obj: Any = root
    for attr in path:
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            return _Callee("unknown", f"{name}()")
    stub_module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", "")
    stub = stub_module == "numba.cuda.stubs" and isinstance(qualname, str)
    if stub and qualname.startswith("atomic."):
        return _Callee("atomic", f"cuda.{qualname}()")
    if module_name == "numpy" and path:
        if isinstance(obj, np.ufunc):
            return _Callee("ufunc", f"np.{path[-1]}()", nin=obj.nin)
        if len(path) == 1 and path[0] in _NUMPY_FRESH:
            return _Callee("fresh", f"np.{path[0]}()")
        if len(path) == 1 and path[0] in _NUMPY_PURE:
            out = _NUMPY_OUT_POSITION.get(path[0])
            overwrite = _NUMPY_OVERWRITE_POSITION.get(path[0])
            return _Callee("pure", f"np.{path[0]}()", out=out, overwrite=overwrite)
        if len(path) == 2 and path[0] == "linalg" and path[1] in _NUMPY_LINALG_PURE:
            return _Callee("pure", f"np.linalg.{path[1]}()")
    if isinstance(obj, np.ufunc):
        return _Callee("ufunc", f"{obj.__name__}()", nin=obj.nin)
    if any(obj is function for function in _OPERATOR_STORES):
        return _Callee("store", f"operator.{obj.__name__}()")
    if any(obj is function for function in _OPERATOR_INPLACE):
        return _Callee("inplace", f"operator.{obj.__name__}()")
    if any(obj is function for function in _OPERATOR_CALLS):
        return _Callee("unknown", f"operator.{obj.__name__}()")
    if getattr(obj, "__module__", None) in ("math", "cmath", "_operator", "operator"):
        return _Callee("pure", f"{getattr(obj, '__name__', name)}()")
    if obj is len or (module_name == "numpy" and path in (("shape",), ("size",), ("ndim",))):
        return _Callee("metadata", f"{getattr(obj, '__name__', name)}()")
    if any(obj is value for value in _PURE_BUILTINS):
        return _Callee("pure", f"{getattr(obj, '__name__', name)}()")
    if module_name is not None and any(root is module for module in _PURE_MODULES):
        return _Callee("pure", f"{name}()")
    if python_function(obj) is not None and not inspect.isfunction(obj):
        callee = _function_callee(obj)  # a @jit or @cuda.jit(device=True) dispatcher
        callee.access_of = obj
        return callee
    return _Callee("unknown", f"{name}()")
