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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ._array import SmartArray

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


def _smartarray_type() -> type[SmartArray]:
    from ._array import SmartArray

    return SmartArray


class _Call:
    """The unwrapping / wrapping of one numpy call."""

    def __init__(self) -> None:
        self.SmartArray = _smartarray_type()
        self.arrays: list[SmartArray] = []
        self.written: list[SmartArray] = []
        self.out_views: dict[int, SmartArray] = {}

    def unwrap(self, obj: Any, *, write: bool = False) -> Any:
        if isinstance(obj, self.SmartArray):
            self.arrays.append(obj)
            if write:
                obj._check_writeable()
                self.written.append(obj)
                view = obj._host_view(write=True)
                self.out_views[id(view)] = obj
                return view
            return obj._host_view(write=False)
        if type(obj) in (list, tuple):
            return type(obj)(self.unwrap(item, write=write) for item in obj)
        return obj

    def finish(self) -> None:
        """Mark every written SmartArray as changed on the host (also after an error)."""
        for array in self.written:
            array._alloc.mark_changed("host")

    def wrap(self, result: Any) -> Any:
        if isinstance(result, np.ndarray):
            if id(result) in self.out_views:
                return self.out_views[id(result)]
            return self.SmartArray._from_numpy_result(result, self.arrays)
        if type(result) in (list, tuple):
            return type(result)(self.wrap(item) for item in result)
        return result


def _foreign_override(values: Iterable[Any], attribute: str) -> bool:
    SmartArray = _smartarray_type()
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
    out = kwargs.get("out", ())
    if _foreign_override((*inputs, *out), "__array_ufunc__"):
        return NotImplemented
    call = _Call()
    try:
        if method == "at":
            host_inputs = (
                call.unwrap(inputs[0], write=True),
                *(call.unwrap(x) for x in inputs[1:]),
            )
        else:
            host_inputs = tuple(call.unwrap(x) for x in inputs)
        if out:
            kwargs = dict(kwargs, out=tuple(call.unwrap(o, write=True) for o in out))
        if "where" in kwargs:
            kwargs["where"] = call.unwrap(kwargs["where"])
        result = getattr(ufunc, method)(*host_inputs, **kwargs)
    finally:
        call.finish()
    if method == "at":
        return None
    return call.wrap(result)


def _view_function(name: str) -> Callable[..., Any]:
    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        return array._apply_view(lambda template: getattr(np, name)(template, *args, **kwargs))

    return apply


def _shape_function(attribute: str) -> Callable[..., Any]:
    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:  # np.size(a, axis)
            return getattr(np, attribute)(array._template(), *args, **kwargs)
        return getattr(array, attribute)

    return apply


def _like(fill: Callable[[SmartArray], Any] | None) -> Callable[..., Any]:
    def create(prototype: SmartArray, *args: Any, **kwargs: Any) -> Any:
        from . import _creation

        if fill is None:
            return _creation.empty_like(prototype, *args, **kwargs)
        return _creation.full_like(prototype, fill(prototype), *args, **kwargs)

    return create


# Functions answered without touching data: views are made on the array's layout only, so
# they need no copy even when the host copy is stale.
_SPECIAL: dict[Callable[..., Any], Callable[..., Any]] = {
    np.transpose: _view_function("transpose"),
    np.swapaxes: _view_function("swapaxes"),
    np.moveaxis: _view_function("moveaxis"),
    np.squeeze: _view_function("squeeze"),
    np.expand_dims: _view_function("expand_dims"),
    np.diagonal: _view_function("diagonal"),
    np.reshape: lambda a, *args, **kw: a.reshape(*args, **kw),
    np.ravel: lambda a, order="C": a.ravel(order),
    np.shape: _shape_function("shape"),
    np.ndim: _shape_function("ndim"),
    np.size: _shape_function("size"),
    np.copy: lambda a, order="K", subok=False: a.copy(order),
    np.empty_like: _like(None),
    np.zeros_like: _like(lambda a: 0),
    np.ones_like: _like(lambda a: 1),
    np.full_like: lambda a, fill_value, *args, **kw: _like(lambda _: fill_value)(a, *args, **kw),
}


def array_function(
    func: Callable[..., Any], types: Iterable[type], args: tuple, kwargs: dict
) -> Any:
    """Implementation of ``SmartArray.__array_function__``."""
    SmartArray = _smartarray_type()
    for kind in types:
        if kind is not SmartArray and not issubclass(kind, np.ndarray):
            return NotImplemented
    special = _SPECIAL.get(func)
    if special is not None and args and isinstance(args[0], SmartArray):
        return special(*args, **kwargs)
    return call_on_host(func, args, kwargs, writes_first=func in _WRITES_FIRST_ARGUMENT)


def call_on_host(
    func: Callable[..., Any], args: tuple, kwargs: dict, *, writes_first: bool = False
) -> Any:
    """Run ``func`` on host copies of any SmartArray arguments and wrap the results."""
    call = _Call()
    try:
        host_args = [call.unwrap(a, write=writes_first and i == 0) for i, a in enumerate(args)]
        host_kwargs = {k: call.unwrap(v, write=(k == "out")) for k, v in kwargs.items()}
        result = func(*host_args, **host_kwargs)
    finally:
        call.finish()
    return call.wrap(result)


def call_method(array: SmartArray, name: str) -> Callable[..., Any]:
    """A bound ndarray method ``name`` that runs on ``array``'s host copy."""
    if name in REFUSED_METHODS:
        raise AttributeError(REFUSED_METHODS[name])
    mutating = name in MUTATING_METHODS

    def method(*args: Any, **kwargs: Any) -> Any:
        return _call_bound(array, name, mutating, args, kwargs)

    method.__name__ = name
    method.__doc__ = getattr(np.ndarray, name).__doc__
    return method


def _call_bound(array: SmartArray, name: str, mutating: bool, args: tuple, kwargs: dict) -> Any:
    def run(host: np.ndarray, *rest: Any, **kw: Any) -> Any:
        return getattr(host, name)(*rest, **kw)

    return call_on_host(run, (array, *args), kwargs, writes_first=mutating)
