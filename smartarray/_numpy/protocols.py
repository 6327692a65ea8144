"""NumPy protocols for SmartArray: NEP-13 ``__array_ufunc__`` and NEP-18 ``__array_function__``.

Everything numpy does to a SmartArray runs on its host copy:

1. SmartArray arguments are *unwrapped* into host ndarrays (their host copy made current).
   Arguments that the operation may write (``out=``, the target of ``np.copyto``/``np.put``…,
   ``ufunc.at``) become writable views; every other argument becomes a **read-only** view, so
   a numpy function that writes where we did not expect it fails loudly instead of leaving a
   stale device copy.
2. The function runs.
3. Written SmartArrays are marked changed on the host, and results are *wrapped*: an ndarray
   that lies inside an argument's host buffer becomes a SmartArray view sharing that
   argument's coherence state; any other ndarray becomes a new SmartArray; ``out=`` results
   are returned as the SmartArrays that were passed.

The intents ``In(a)``, ``Out(a)`` and ``InOut(a)`` implement both protocols too
(:func:`intent_array_ufunc`, :func:`intent_array_function`): code that passes them to a
ufunc or a function for one target runs unchanged on the CPU, each intent acting as its
SmartArray (``SmartArray.__array_ufunc__`` declines a call with an intent in it, which numpy,
and Numba's ``DUFunc``, then hand to the intent).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import _hooks
from .._array import SmartArray
from .._intents import _Intent, check_roles
from . import fastpath as _fastpath

# numpy functions that write into their first argument.
_WRITES_FIRST_ARGUMENT: frozenset[Callable[..., Any]] = frozenset(
    {np.copyto, np.put, np.place, np.putmask, np.put_along_axis, np.fill_diagonal}
)

# ndarray methods that write into the array itself.
MUTATING_METHODS = frozenset({"sort", "partition", "fill", "put", "itemset", "setfield"})
# ndarray methods whose semantics cannot be kept on a SmartArray.
REFUSED_METHODS = {
    "resize": "a SmartArray cannot be resized in place; use smartarray.asarray(np.resize(a, n))",
    "setflags": "SmartArray flags are managed by smartarray; use smartarray.In(a) for read-only",
    "byteswap": "byteswap on a SmartArray: use a.astype(a.dtype.newbyteorder()) instead",
}


def register_functions(implementations: dict[Callable[..., Any], Callable[..., Any]]) -> None:
    """Answer these numpy functions, called with a SmartArray first argument, with these
    implementations (the ``*_like`` creation functions of :mod:`smartarray._numpy.creation`
    register themselves here)."""
    _SPECIAL.update(implementations)


class _Call:
    """The unwrapping / wrapping of one numpy call."""

    def __init__(self) -> None:
        self.SmartArray = SmartArray
        self.arrays: list[SmartArray] = []
        self.written: list[SmartArray] = []
        # id of each writable argument as numpy sees it -> the object to return for it: the
        # SmartArray whose host view was passed, or a caller's own ndarray, returned as is.
        self.out_views: dict[int, Any] = {}
        self._keep: list[Any] = []  # keeps the objects behind out_views' ids alive
        self._targets: dict[int, Any] = {}  # allocations this call may write
        self._inputs: dict[int, Any] = {}  # allocations of the SmartArrays read
        self._locked: list[Any] = []  # the targets' locks, held until finish()
        self._input_locks: list[Any] = []  # the other inputs', held until release_inputs()
        # The caller's own ndarrays among the arguments: a result sharing their memory (e.g.
        # np.atleast_1d(a, nd)[1], np.broadcast_arrays) is copied, never wrapped, since a
        # SmartArray cannot see writes made through them.
        self.foreign: list[np.ndarray] = []

    def check_writeable(self, obj: Any) -> None:
        """Refuse a read-only SmartArray target before any argument is unwrapped (or copied)."""
        _each(obj, self._check_target)

    def _check_target(self, obj: Any) -> Any:
        if isinstance(obj, self.SmartArray):
            obj._check_writeable()
            self._targets[id(obj._alloc)] = obj._alloc
        return obj

    def operands(self, value: Any) -> Any:
        """``value`` (an input, or a list or tuple of them, as passed) as this call reads it,
        with no lock held: SmartArrays as they are (noted, for :meth:`lock_targets`), and
        smartarray's own wrappers of a SmartArray replaced by what numpy would read from
        them: an intent by its SmartArray, ``a.flat`` by ``a.reshape(-1)`` for a C-contiguous
        ``a`` (the view numpy reads; a result that is a view of it stays a view of ``a``),
        else by its flattened copy. In a call that writes SmartArrays, sequences that are
        not exactly lists or tuples (subclasses, named tuples) are read as lists or tuples,
        as numpy reads them, so that the SmartArrays in them are found too.

        (Converted by numpy inside the call, a wrapper of a SmartArray would take that
        array's lock while this call holds its targets': out of order, and a deadlock
        against a call holding the two the other way round. A user's own ``__array__``
        object is left to numpy, which may ask it for a dtype: one that reads a SmartArray
        when converted is the user's to keep out of such races; see docs/coherence.md.)
        """
        return _each(value, self._operand)

    def _operand(self, obj: Any) -> Any:
        if isinstance(obj, self.SmartArray):
            self._inputs[id(obj._alloc)] = obj._alloc
            return obj
        look_through = getattr(type(obj), "_as_operand", None)
        if look_through is not None:  # (the intents, FlatIterator)
            return self._operand(look_through(obj))
        if self._targets and isinstance(obj, (list, tuple)):  # (a subclass: see above)
            return _each(list(obj) if isinstance(obj, list) else tuple(obj), self._operand)
        return obj

    def lock_targets(self) -> None:
        """Take the locks of every written allocation, held from the copy-in to the flag
        update (released by :meth:`finish`), and of the inputs (from :meth:`operands`), held
        while they are unwrapped (released by :meth:`release_inputs`).

        All are taken in one global order (by id): unwrapping an input takes its lock, so two
        calls writing each other's inputs (``np.add(a, 1, out=b)`` and ``np.add(b, 1,
        out=a)`` in two threads) would deadlock if a call took the locks of its targets
        first and then, one by one, its inputs'.
        """
        targets = self._targets
        if not targets:
            return
        allocations = {**self._inputs, **targets}
        for key in sorted(allocations):
            lock = allocations[key].lock
            lock.acquire()
            (self._locked if key in targets else self._input_locks).append(lock)

    def release_inputs(self) -> None:
        """Release the locks of the allocations only read, once the inputs are unwrapped
        (their host views made current), so that numpy runs holding only its targets' locks:
        other threads may read (or evict) its inputs meanwhile."""
        while self._input_locks:
            self._input_locks.pop().release()

    def unwrap(self, obj: Any, *, write: bool = False) -> Any:
        return _each(obj, self._unwrap_written if write else self._unwrap_read)

    def _unwrap_read(self, obj: Any) -> Any:
        if isinstance(obj, self.SmartArray):
            self.arrays.append(obj)
            return obj._host_view(write=False)
        if isinstance(obj, np.ndarray):
            self.foreign.append(obj)
        return obj

    def _unwrap_written(self, obj: Any) -> Any:
        if isinstance(obj, self.SmartArray):
            self.arrays.append(obj)
            obj._check_writeable()
            view = obj._host_view(write=True)  # may raise: then nothing was written
            self.written.append(obj)
            self.out_views[id(view)] = obj
            self._keep.append(view)
            return view
        if isinstance(obj, np.ndarray):
            self.out_views[id(obj)] = obj
            self._keep.append(obj)
        return obj

    def finish(self, error: BaseException | None = None) -> None:
        """Mark every written SmartArray as changed on the host (also after most errors).

        A call that failed may have written part of its output, so the host copy is marked
        changed even then; the exception is numpy's ``UFuncTypeError`` (no loop or casting
        refused), which is raised while resolving types, before anything is written.
        """
        try:
            if error is not None and _raised_before_writing(error):
                return
            for array in self.written:
                array._alloc.host_written(array._span())
        finally:
            self.release_inputs()
            while self._locked:
                self._locked.pop().release()

    def wrap(self, result: Any) -> Any:
        if isinstance(result, np.ndarray):
            if id(result) in self.out_views:
                return self.out_views[id(result)]
            if any(np.may_share_memory(result, other) for other in self.foreign):
                result = result.copy(order="K")
            return self.SmartArray._from_numpy_result(result, self.arrays)
        if type(result) in (list, tuple):
            return type(result)(self.wrap(item) for item in result)
        if isinstance(result, tuple) and hasattr(result, "_fields"):
            # numpy's named results (np.linalg.eigh, svd, qr, slogdet...)
            return type(result)(*(self.wrap(item) for item in result))
        return result


def _each(value: Any, visit: Callable[[Any], Any]) -> Any:
    """``value`` with ``visit`` applied to it, or to each item of a list or tuple (also
    nested), rebuilt with the results."""
    if type(value) in (list, tuple):
        return type(value)(_each(item, visit) for item in value)
    return visit(value)


def _raised_before_writing(error: BaseException) -> bool:
    # numpy's UFuncTypeError is not public API: recognise it (and its subclasses) by name.
    return any(kind.__name__ == "UFuncTypeError" for kind in type(error).__mro__)


def _foreign_override(values: Iterable[Any], attribute: str) -> bool:
    for value in values:
        kind = type(value)
        if kind is SmartArray or issubclass(kind, np.ndarray):
            continue
        method = getattr(kind, attribute, None)
        if method is not None and method is not getattr(np.ndarray, attribute):
            return True
    return False


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict) -> Any:
    """Implementation of ``SmartArray.__array_ufunc__``."""
    if not isinstance(ufunc, np.ufunc) and method == "__call__":
        inputs, kwargs = _normalize_foreign_ufunc_call(ufunc, inputs, kwargs)
    if "out" not in kwargs and "where" not in kwargs:
        if method == "__call__":  # results are new arrays
            result = _fastpath.call_ufunc(ufunc, inputs, kwargs)
        elif method != "at":  # reduce, accumulate, reduceat, outer
            result = _fastpath.call_function(getattr(ufunc, method), inputs, kwargs)
        else:
            result = _fastpath.FALLBACK
        if result is not _fastpath.FALLBACK:
            return result
    out = kwargs.get("out", ())
    if _foreign_override((*inputs, *out), "__array_ufunc__"):
        return NotImplemented
    call = _Call()
    call.check_writeable(out)
    if method == "at" and inputs:
        call.check_writeable(inputs[0])
    _check_before_fetching_outputs(ufunc, method, inputs, out, kwargs)
    first = 1 if method == "at" else 0  # (a target is not an operand: it stays as passed)
    inputs = (*inputs[:first], *call.operands(inputs[first:]))
    if "where" in kwargs:
        kwargs["where"] = call.operands(kwargs["where"])
    error: BaseException | None = None
    try:
        call.lock_targets()  # (in the try: finish releases what it took, on any error)
        if method == "at":
            host_inputs = (
                call.unwrap(inputs[0], write=True),
                *(call.unwrap(x) for x in inputs[1:]),
            )
        else:
            host_inputs = tuple(call.unwrap(x) for x in inputs)
        if out:
            host_out = tuple(call.unwrap(o, write=True) for o in out)
            kwargs = dict(kwargs, out=_foreign_out(ufunc, host_out))
        if "where" in kwargs:
            kwargs["where"] = call.unwrap(kwargs["where"])
        call.release_inputs()
        result = getattr(ufunc, method)(*host_inputs, **kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        call.finish(error)
    if method == "at":
        return None
    return call.wrap(result)


def intent_array_ufunc(
    ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``__array_ufunc__`` of the intents: :func:`array_ufunc` with each intent replaced by its
    SmartArray (a numpy ufunc, or a CPU ``@vectorize``/``@guvectorize``, given ``In(x)`` reads
    ``x``, given ``out=Out(y)`` or ``InOut(y)`` writes ``y``: the same flags, the same
    copies). ``In`` as an output (``out=``, the target of ``ufunc.at``) and ``Out`` as an
    input raise ``TypeError`` first (:func:`smartarray._intents.check_roles`)."""
    if not isinstance(ufunc, np.ufunc) and method == "__call__":
        inputs, kwargs = _normalize_foreign_ufunc_call(ufunc, inputs, kwargs)
    out = kwargs.get("out", ())
    where = kwargs.get("where")
    name = getattr(ufunc, "__name__", repr(ufunc))
    call = f"{name}()" if method == "__call__" else f"{name}.{method}()"
    targets = inputs[:1] if method == "at" else ()
    check_roles((*inputs[len(targets) :], where), (*targets, *out), call)
    inputs = tuple(_without_intents(value) for value in inputs)
    if out:
        kwargs = dict(kwargs, out=_without_intents(out))
    if isinstance(where, _Intent):
        kwargs = dict(kwargs, where=where.array)
    return array_ufunc(ufunc, method, inputs, kwargs)


def intent_array_function(
    func: Callable[..., Any], types: Iterable[type], args: tuple, kwargs: dict
) -> Any:
    """``__array_function__`` of the intents: ``func`` called again with each intent (also in
    lists and tuples) replaced by its SmartArray. ``In`` as ``out=`` or as the target of a
    function that writes its first argument (``np.copyto``...), and ``Out`` anywhere else,
    raise ``TypeError`` first."""
    if "out" not in kwargs:
        args, kwargs = _out_by_name(func, args, kwargs)
    targets = args[:1] if func in _WRITES_FIRST_ARGUMENT else ()
    out = kwargs.get("out")
    inputs = (*args[len(targets) :], *(v for k, v in kwargs.items() if k != "out"))
    check_roles(inputs, (*targets, out), f"np.{getattr(func, '__name__', func)}()")
    if not any(_has_intent(value) for value in (*args, *kwargs.values())):
        return NotImplemented  # intents where they are not replaced (in a dict...)
    bare_args = _without_intents(args)
    bare_kwargs = {key: _without_intents(value) for key, value in kwargs.items()}
    return func(*bare_args, **bare_kwargs)


def _without_intents(value: Any) -> Any:
    """``value`` with each intent, also in lists and tuples, replaced by its SmartArray."""
    if isinstance(value, _Intent):
        return value.array
    if type(value) in (list, tuple):
        return type(value)(_without_intents(item) for item in value)
    return value


def _has_intent(value: Any) -> bool:
    if isinstance(value, _Intent):
        return True
    return type(value) in (list, tuple) and any(_has_intent(item) for item in value)


def _normalize_foreign_ufunc_call(
    ufunc: Any, inputs: tuple[Any, ...], kwargs: dict
) -> tuple[tuple[Any, ...], dict]:
    """Put a ufunc-like object's call in the form numpy gives ``__array_ufunc__``.

    numpy moves positional outputs into ``out=`` and makes ``out`` a tuple before calling
    ``__array_ufunc__``; Numba's CPU ``@vectorize`` (``DUFunc``) passes its arguments as it got
    them (``f(a, a)``, ``f(a, out=a)``). Without this, an output would be unwrapped as a
    read-only input or tested for truth. numpy-style ``out`` is then passed on as a tuple,
    which ``DUFunc`` accepts only with one element: a single output is passed bare again by
    :func:`_foreign_out`.
    """
    nin = getattr(ufunc, "nin", None)
    if isinstance(nin, int) and len(inputs) > nin:
        if "out" in kwargs:
            raise TypeError(f"{ufunc.__name__}() got outputs both positionally and as out=")
        kwargs = dict(kwargs, out=inputs[nin:])
        inputs = inputs[:nin]
    out = kwargs.get("out")
    if out is not None and not isinstance(out, tuple):
        kwargs = dict(kwargs, out=(out,))
    elif out is None and "out" in kwargs:
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    return inputs, kwargs


def _foreign_out(ufunc: Any, out: tuple[Any, ...]) -> Any:
    """``out`` as ``ufunc`` takes it: numpy ufuncs a tuple, other ufunc-likes a single output."""
    return out if isinstance(ufunc, np.ufunc) or len(out) != 1 else out[0]


# Returned by a special implementation that cannot handle its arguments: use numpy itself.
_FALLBACK = object()


def _check_before_fetching_outputs(
    ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], out: tuple[Any, ...], kwargs: dict
) -> None:
    """Raise numpy's type or shape error for a bad ``ufunc(..., out=a)`` before touching ``a``.

    An ``out=`` SmartArray whose host copy is stale is brought up to date before the call (the
    ufunc may not write all of it), and its device copy is marked stale after a call that
    failed half-way. If the call is bound to fail, e.g. ``a += 1.5`` for an integer ``a``,
    the copy would be wasted and the flags changed for nothing; so the dtypes are tried on
    0-d stand-ins and the shapes checked first (cheap: no data is read). Only done for outputs
    that have a device copy to keep right.
    """
    if (
        method != "__call__"
        or ufunc.signature is not None
        or not any(
            isinstance(o, SmartArray)
            and o._alloc.is_valid("gpu")
            and o._alloc.host_memory != "mapped"
            for o in out
        )
    ):
        return

    def stand_in(value: Any) -> Any:
        if type(value) in (bool, int, float, complex) or isinstance(value, np.generic):
            return value  # Python scalars keep their weak promotion
        dtype = value.dtype if isinstance(value, (SmartArray, np.ndarray)) else None
        return np.zeros((), dtype if dtype is not None else np.asarray(value).dtype)

    # Each array's shape read once (another thread may set it meanwhile: ``np.add(a, a,
    # out=a)`` is checked with one layout of ``a``, as numpy's own call would see).
    layouts: dict[int, tuple[int, ...]] = {}

    def shape_of(value: Any) -> tuple[int, ...]:
        shape = layouts.get(id(value))
        if shape is None:
            shape = layouts[id(value)] = np.shape(value)
        return shape

    try:
        stand_ins = [stand_in(x) for x in inputs]
        outputs = tuple(None if o is None else np.zeros((), o.dtype) for o in out)
        shapes = [shape_of(x) for x in inputs]
    except Exception:  # not something we can model: let numpy itself decide
        return
    if any(
        np.asarray(x).dtype.hasobject for x in (*stand_ins, *(o for o in outputs if o is not None))
    ):
        return  # object loops may do anything
    options = {k: v for k, v in kwargs.items() if k not in ("out", "where")}
    with np.errstate(all="ignore"):
        ufunc(*stand_ins, out=outputs, **options)  # numpy's UFuncTypeError, if any
    if "where" in kwargs and kwargs["where"] is not True:
        shapes.append(shape_of(kwargs["where"]))
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            "operands could not be broadcast together with shapes "
            + " ".join(str(s).replace(" ", "") for s in shapes)
        ) from None
    for o in out:
        if o is None:
            continue
        out_shape = tuple(shape_of(o))
        if np.broadcast_shapes(shape, out_shape) != out_shape:
            raise ValueError(
                f"non-broadcastable output operand with shape {out_shape} doesn't match "
                f"the broadcast shape {shape}"
            )


def _view_function(name: str) -> Callable[..., Any]:
    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        return array._apply_view(lambda template: getattr(np, name)(template, *args, **kwargs))

    return apply


def _single_view_function(name: str) -> Callable[..., Any]:
    """``np.atleast_1d`` and friends: views for one array argument, numpy for several."""

    def apply(*arrays: Any, **kwargs: Any) -> Any:
        if len(arrays) != 1 or kwargs:
            return _FALLBACK
        return arrays[0]._apply_view(lambda template: getattr(np, name)(template))

    return apply


def _split_function(name: str) -> Callable[..., Any]:
    """``np.split`` and friends: a list of views, made on the layout only."""

    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        if any(not isinstance(a, (int, np.integer, list, tuple)) for a in args[:1]):
            return _FALLBACK  # array-valued indices: let numpy handle them on the host
        pieces = getattr(np, name)(array._template(), *args, **kwargs)
        return [array._from_template(piece) for piece in pieces]

    return apply


def _unstack(array: SmartArray, *, axis: int = 0) -> tuple[SmartArray, ...]:
    """``np.unstack``: a tuple of views (writable like numpy's), made on the layout only."""
    return tuple(array._from_template(piece) for piece in np.unstack(array._template(), axis=axis))


def _shape_function(attribute: str) -> Callable[..., Any]:
    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:  # np.size(a, axis)
            return getattr(np, attribute)(array._template(), *args, **kwargs)
        return getattr(array, attribute)

    return apply


def _dtype_function(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (which reads only dtypes, such as ``np.result_type``) on layout stand-ins."""

    def apply(*args: Any, **kwargs: Any) -> Any:
        return func(
            *(a._template() if isinstance(a, SmartArray) else a for a in args),
            **{k: v._template() if isinstance(v, SmartArray) else v for k, v in kwargs.items()},
        )

    return apply


def _memory_overlap_function(func: Callable[..., Any]) -> Callable[..., Any]:
    """``np.may_share_memory``/``np.shares_memory`` of two views of one allocation, answered
    from their layouts (no copy, even when the host copy is stale); anything else: numpy."""

    def apply(a: Any, b: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(b, SmartArray) and b._alloc is a._alloc:
            return func(a._template(), b._template(), *args, **kwargs)
        return _FALLBACK

    return apply


def _nan_to_num(array: SmartArray, copy: bool = True, *args: Any, **kwargs: Any) -> Any:
    """``np.nan_to_num``: with ``copy=False`` it writes its argument in place."""
    return call_on_host(np.nan_to_num, (array, copy, *args), kwargs, writes_first=not copy)


def _reshape(
    array: SmartArray,
    shape: Any = None,
    order: str = "C",
    *,
    newshape: Any = None,
    copy: bool | None = None,
) -> Any:
    if shape is None:
        if newshape is None:
            raise TypeError("reshape() missing required argument 'shape' (pos 2)")
        shape = newshape
    elif newshape is not None:
        raise TypeError("You cannot specify 'newshape' and 'shape' arguments at the same time.")
    return array.reshape(shape, order=order, copy=copy)


# Functions answered without touching data: views are made on the array's layout only, so
# they need no copy even when the host copy is stale, and they are writable like numpy's.
_SPECIAL: dict[Callable[..., Any], Callable[..., Any]] = {
    np.transpose: _view_function("transpose"),
    np.permute_dims: _view_function("permute_dims"),
    np.matrix_transpose: _view_function("matrix_transpose"),
    np.swapaxes: _view_function("swapaxes"),
    np.moveaxis: _view_function("moveaxis"),
    np.rollaxis: _view_function("rollaxis"),
    np.squeeze: _view_function("squeeze"),
    np.expand_dims: _view_function("expand_dims"),
    np.diagonal: _view_function("diagonal"),
    np.flip: _view_function("flip"),
    np.fliplr: _view_function("fliplr"),
    np.flipud: _view_function("flipud"),
    np.broadcast_to: _view_function("broadcast_to"),
    np.atleast_1d: _single_view_function("atleast_1d"),
    np.atleast_2d: _single_view_function("atleast_2d"),
    np.atleast_3d: _single_view_function("atleast_3d"),
    np.split: _split_function("split"),
    np.array_split: _split_function("array_split"),
    np.hsplit: _split_function("hsplit"),
    np.vsplit: _split_function("vsplit"),
    np.dsplit: _split_function("dsplit"),
    np.real: lambda a: a.real,
    np.imag: lambda a: a.imag,
    np.reshape: _reshape,
    np.ravel: lambda a, order="C": a.ravel(order),
    np.shape: _shape_function("shape"),
    np.ndim: _shape_function("ndim"),
    np.size: _shape_function("size"),
    np.copy: lambda a, order="K", subok=False: a.copy(order),
    np.nan_to_num: _nan_to_num,
    np.result_type: _dtype_function(np.result_type),
    np.iscomplexobj: _dtype_function(np.iscomplexobj),
    np.isrealobj: _dtype_function(np.isrealobj),
    np.may_share_memory: _memory_overlap_function(np.may_share_memory),
    np.shares_memory: _memory_overlap_function(np.shares_memory),
}


if hasattr(np, "unstack"):  # numpy 2.1+
    _SPECIAL[np.unstack] = _unstack


def array_function(
    func: Callable[..., Any], types: Iterable[type], args: tuple, kwargs: dict
) -> Any:
    """Implementation of ``SmartArray.__array_function__``."""
    for kind in types:
        if kind is not SmartArray and not issubclass(kind, np.ndarray):
            return NotImplemented
    if "out" not in kwargs:
        args, kwargs = _out_by_name(func, args, kwargs)
    special = _SPECIAL.get(func)
    if special is not None and args and (isinstance(args[0], SmartArray) or func is np.einsum):
        result = special(*args, **kwargs)
        if result is not _FALLBACK:
            return result
    if "out" not in kwargs and func not in _WRITES_FIRST_ARGUMENT:
        result = _fastpath.call_function(func, args, kwargs)
        if result is not _fastpath.FALLBACK:
            return result
    return call_on_host(func, args, kwargs, writes_first=func in _WRITES_FIRST_ARGUMENT)


_UNKNOWN: Any = object()
# Per numpy function: (position of a positional ``out`` parameter, the names of the positional
# parameters), or None if it takes no positional ``out``; found from its signature once.
_OUT_POSITIONS: dict[Any, tuple[int, tuple[str, ...]] | None] = {}


def _out_by_name(func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``np.clip(a, lo, hi, out)``: the arguments from a positional ``out`` on passed by
    name instead, so that the output is seen as one (a positional one would be unwrapped as a
    read-only input, or an intent checked as an input)."""
    position = _OUT_POSITIONS.get(func, _UNKNOWN)
    if position is _UNKNOWN:
        position = _OUT_POSITIONS[func] = _out_position(func)
    if position is None:
        return args, kwargs
    index, names = position
    return _from_out_by_name(index, names, args, kwargs)


def _from_out_by_name(
    index: int, names: tuple[str, ...], args: tuple, kwargs: dict
) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with the positional arguments from ``index`` (where ``out``
    is) on passed by their parameters' ``names``. Calls numpy refuses (more positional
    arguments than there are names, one given by position and by name) are left as they
    are: numpy raises its own error."""
    if len(args) <= index or len(args) > len(names) or "out" in kwargs:
        return args, kwargs
    named = dict(zip(names[index:], args[index:], strict=False))
    if any(key in kwargs for key in named):
        return args, kwargs
    return args[:index], {**named, **kwargs}


def _out_position(func: Any) -> tuple[int, tuple[str, ...]] | None:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # (no signature: nothing to find)
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = tuple(p.name for p in parameters if p.kind in positional)
    if "out" not in names:
        return None
    kinds = {p.name: p.kind for p in parameters}
    if kinds["out"] is inspect.Parameter.POSITIONAL_ONLY:
        return None  # (cannot be passed by name: left to numpy as it is)
    index = names.index("out")
    if any(kinds[name] is inspect.Parameter.POSITIONAL_ONLY for name in names[index:]):
        return None
    return index, names


def call_on_host(
    func: Callable[..., Any], args: tuple, kwargs: dict, *, writes_first: bool = False
) -> Any:
    """Run ``func`` on host copies of any SmartArray arguments and wrap the results."""
    call = _Call()
    if writes_first and args:
        call.check_writeable(args[0])
    call.check_writeable(kwargs.get("out"))
    first = 1 if writes_first else 0  # (a target is not an operand: it stays as passed)
    args = (*args[:first], *(call.operands(a) for a in args[first:]))
    kwargs = {k: v if k == "out" else call.operands(v) for k, v in kwargs.items()}
    error: BaseException | None = None
    try:
        call.lock_targets()
        host_args = [call.unwrap(a, write=writes_first and i == 0) for i, a in enumerate(args)]
        host_kwargs = {k: call.unwrap(v, write=(k == "out")) for k, v in kwargs.items()}
        call.release_inputs()
        result = func(*host_args, **host_kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        call.finish(error)
    return call.wrap(result)


def ndarray_members(cls: type) -> dict[str, Any]:
    """Members forwarding the public ndarray methods and attributes that ``cls`` lacks.

    Methods run on the host copy (made current first; mutating ones mark it changed),
    the attributes over the data (``ctypes``, ``data``) are read from the host export that
    ``np.asarray(a)`` gives (writable for a writable array, watched for writes), ``device``
    is numpy's ``'cpu'`` (as for any ndarray; no data is read, so nothing is copied), and
    :data:`REFUSED_METHODS` are properties raising ``AttributeError`` with the reason (so
    ``hasattr`` is false for them, as for any missing attribute).
    """
    members: dict[str, Any] = {}
    for name in dir(np.ndarray):
        if name.startswith("_") or hasattr(cls, name):
            continue
        if name in REFUSED_METHODS:
            members[name] = _refused(REFUSED_METHODS[name])
        elif name == "device":  # (where numpy's array API says an ndarray lives: no data)
            members[name] = property(_host_device, doc=np.ndarray.device.__doc__)
        elif callable(getattr(np.ndarray, name)):
            members[name] = _forwarded_method(name)
        else:
            members[name] = _forwarded_attribute(name)
    return members


def _refused(reason: str) -> property:
    def refuse(self: Any) -> Any:
        raise AttributeError(reason)

    return property(refuse, doc=reason)


def _host_device(self: Any) -> str:
    return "cpu"


def _forwarded_method(name: str) -> Callable[..., Any]:
    mutating = name in MUTATING_METHODS

    def method(self: SmartArray, *args: Any, **kwargs: Any) -> Any:
        return _call_bound(self, name, mutating, args, kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(np.ndarray, name).__doc__
    return method


def _forwarded_attribute(name: str) -> property:
    def get(self: SmartArray) -> Any:
        # Read from what np.asarray(self) gives: a tracked host export (writable for a
        # writable array), so that writes through ``a.ctypes`` or ``a.data`` are found too.
        return getattr(self.__array__(), name)

    return property(get, doc=getattr(np.ndarray, name).__doc__)


def _call_bound(array: SmartArray, name: str, mutating: bool, args: tuple, kwargs: dict) -> Any:
    def run(host: np.ndarray, *rest: Any, **kw: Any) -> Any:
        return getattr(host, name)(*rest, **kw)

    if (
        name in ("conj", "conjugate")
        and len(args) == 1
        and not kwargs
        and isinstance(args[0], (SmartArray, np.ndarray))
    ):  # ``a.conj(out)``: an output numpy's method takes by position only
        return call_on_host(_conj_into, (array,), {"out": args[0]})
    args, kwargs = _method_out_by_name(name, args, kwargs)
    return call_on_host(run, (array, *args), kwargs, writes_first=mutating)


def _conj_into(host: np.ndarray, *, out: np.ndarray) -> Any:
    return host.conj(out)  # type: ignore[call-arg]  # (numpy's stubs omit the argument)


def call_method(array: SmartArray, name: str, args: tuple, kwargs: dict) -> Any:
    """``array.<name>(*args, **kwargs)`` run as ndarray's method on the host copy, as the
    forwarded methods are (for SmartArray's own methods that only have a fast case)."""
    return _call_bound(array, name, name in MUTATING_METHODS, args, kwargs)


# ndarray methods with an ``out`` parameter: their positional parameters (the array itself not
# counted), as numpy's own methods take them (numpy/_core/_methods.py, the C methods' docs).
# (``choose`` is not here: every positional argument of ``a.choose`` is a choice.)
_METHOD_PARAMETERS: dict[str, tuple[str, ...]] = {
    "all": ("axis", "dtype", "out", "keepdims"),
    "any": ("axis", "dtype", "out", "keepdims"),
    "argmax": ("axis", "out"),
    "argmin": ("axis", "out"),
    "clip": ("min", "max", "out"),
    "compress": ("condition", "axis", "out"),
    "cumprod": ("axis", "dtype", "out"),
    "cumsum": ("axis", "dtype", "out"),
    "dot": ("other", "out"),
    "max": ("axis", "out", "keepdims", "initial", "where"),
    "mean": ("axis", "dtype", "out", "keepdims"),
    "min": ("axis", "out", "keepdims", "initial", "where"),
    "prod": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "round": ("decimals", "out"),
    "std": ("axis", "dtype", "out", "ddof", "keepdims"),
    "sum": ("axis", "dtype", "out", "keepdims", "initial", "where"),
    "take": ("indices", "axis", "out", "mode"),
    "trace": ("offset", "axis1", "axis2", "dtype", "out"),
    "var": ("axis", "dtype", "out", "ddof", "keepdims"),
}


def _method_out_by_name(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments of ``a.<name>(*args, **kwargs)`` with a positional ``out`` (``a.take(i,
    None, out)``, ``a.clip(lo, hi, out)``), and those after it, passed by name, so that the
    output is written, not read as an input (:func:`_from_out_by_name`)."""
    parameters = _METHOD_PARAMETERS.get(name)
    if parameters is None:
        return args, kwargs
    return _from_out_by_name(parameters.index("out"), parameters, args, kwargs)


_hooks.array_ufunc = array_ufunc
_hooks.array_function = array_function
_hooks.intent_array_ufunc = intent_array_ufunc
_hooks.intent_array_function = intent_array_function
_hooks.call_on_host = call_on_host
_hooks.call_method = call_method
_hooks.host_call = _Call
