"""The Numba type of a SmartArray, shared by the CPU (``@jit``) and CUDA (``@cuda.jit``) targets.

``SmartArrayType`` subclasses ``numba.types.Array`` so that every array typing and lowering
template in Numba accepts it, and uses Numba's array data model. Its only differences are
its name, the boxing/unboxing in :mod:`smartarray._numba_cpu`, and a version number in its
key, so entries in Numba's on-disk cache (``cache=True``) made by an older boxing protocol
never match.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numba.core import types
from numba.np import numpy_support

if TYPE_CHECKING:
    from ._array import SmartArray

#: Bump whenever the boxing/unboxing protocol of SmartArrayType changes (including the table
#: of Python objects compiled code fetches, ``smartarray._numba_cpu._LAYOUT``).
BOXING_VERSION = 2


class SmartArrayType(types.Array):
    """Numba type of a SmartArray argument: an array that boxes back to a SmartArray."""

    # Above plain arrays, so that ufunc results computed from SmartArrays are SmartArrays
    # (Numba's __array_priority__/__array_wrap__ mechanism; see smartarray._numba_cpu).
    array_priority = 1.0

    # Numba's C dispatcher reads ``arg._numba_type_._code`` on every call with a non-ndarray
    # argument, by a freshly made name that misses CPython's attribute cache: an instance
    # attribute is looked for along the whole MRO first, a slot is found in the first class.
    __slots__ = ("_code",)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled (Numba's cache index) without the process-local type code; Numba's
        # unpickling re-interns the type and gives it a code then.
        return dict(self.__dict__)

    def __init__(
        self, dtype: Any, ndim: int, layout: str, readonly: bool = False, aligned: bool = True
    ) -> None:
        # Numba's own wording for arrays ("readonly array(float64, 1d, C)"), marked: typing
        # errors then read as Numba users expect, and still say which arguments are
        # SmartArrays (an explicit plain-array signature does not take them).
        prefix = ("readonly " if readonly else "") + ("" if aligned else "unaligned ")
        name = f"{prefix}array({dtype}, {ndim}d, {layout}) (SmartArray)"
        # An instance attribute, not the module constant read at comparison time: it is
        # pickled with the type into Numba's cache index, so entries written by an older
        # boxing protocol compare unequal to today's types and are never loaded.
        self.boxing_version = BOXING_VERSION
        super().__init__(
            dtype, ndim, cast(Any, layout), readonly=readonly, name=name, aligned=aligned
        )

    @property
    def key(self) -> tuple[Any, ...]:
        return (*super().key, "smartarray", self.boxing_version)

    def copy(  # type: ignore[override]
        self,
        dtype: Any = None,
        ndim: int | None = None,
        layout: str | None = None,
        readonly: bool | None = None,
    ) -> SmartArrayType:
        # Arrays derived from a SmartArray (slices, views, ufunc results) keep the type, so
        # that returning them from a jitted function gives SmartArrays, never plain ndarrays
        # that would alias the host buffer behind the coherence tracking's back.
        return SmartArrayType(
            self.dtype if dtype is None else dtype,
            self.ndim if ndim is None else ndim,
            self.layout if layout is None else layout,
            (not self.mutable) if readonly is None else readonly,
            self.aligned,
        )

    @property
    def plain_array(self) -> types.Array:
        """The plain Numba array type with the same dtype, ndim, layout and flags."""
        return types.Array(
            self.dtype, self.ndim, self.layout, readonly=not self.mutable, aligned=self.aligned
        )

    def unify(self, typingctx: Any, other: Any) -> Any:
        # ``x if c else y`` with a SmartArray on either side (or two SmartArrays of different
        # layouts) stays a SmartArray: a plain array type would box the argument's host
        # buffer as a bare ndarray, outside coherence tracking. (Plain ``Array.unify`` is
        # taught the reverse order in smartarray._numba_cpu.)
        unified: Any = super().unify(typingctx, other)
        if unified is None or isinstance(unified, SmartArrayType):
            return unified
        return SmartArrayType(
            unified.dtype, unified.ndim, unified.layout, not unified.mutable, unified.aligned
        )

    def can_convert_to(self, typingctx: Any, other: Any) -> Any:
        if type(other) is types.Array:
            dispatcher = _dispatcher_at_python_boundary()
            if dispatcher is not None:
                # A Python-level call choosing among explicit signatures: a plain-array
                # signature's unboxing cannot take a SmartArray object. Refuse the conversion
                # (another signature may declare a SmartArray type), and explain if none does.
                if not _has_smartarray_signature(dispatcher):
                    raise TypeError(
                        f"this function was compiled only for explicit signatures with plain "
                        f"array types ({other}), which cannot receive a SmartArray ({self}). "
                        f"Declare the argument as a SmartArray type, e.g. "
                        f"smartarray.numba_type(np.{self.dtype}, {self.ndim}, 'A'), or drop "
                        f"the explicit signature; or pass a.get('host') (and call "
                        f"a.mark_changed('host') if the function writes it)."
                    )
                return None
        return super().can_convert_to(typingctx, other)

    def __repr__(self) -> str:
        return (
            f"SmartArrayType({self.dtype!r}, {self.ndim}, {self.layout!r}, "
            f"readonly={not self.mutable})"
        )


def _dispatcher_at_python_boundary() -> Any:
    """The dispatcher converting Python arguments to its explicit signatures, if that is who
    asks (``Dispatcher._search_new_conversions``, called by the C dispatcher); None for
    conversions asked for by typing (jit-to-jit calls), which stay allowed."""
    frame = inspect.currentframe()
    for _ in range(6):
        if frame is None:
            return None
        if frame.f_code.co_name == "_search_new_conversions":
            return frame.f_locals.get("self")
        frame = frame.f_back
    return None


def _has_smartarray_signature(dispatcher: Any) -> bool:
    signatures = getattr(dispatcher, "nopython_signatures", ())
    return any(isinstance(t, SmartArrayType) for sig in signatures for t in sig.args)


def numba_type(dtype: Any, ndim: int, layout: str = "A", readonly: bool = False) -> SmartArrayType:
    """The Numba type for SmartArray arguments, for explicit ``@jit``/``@cuda.jit`` signatures.

    Examples
    --------
    >>> sig = numba.float64(smartarray.numba_type(np.float64, 1))   # doctest: +SKIP
    >>> @numba.njit(sig)                                            # doctest: +SKIP
    ... def total(a): return a.sum()
    """
    return SmartArrayType(numpy_support.from_dtype(np.dtype(dtype)), ndim, layout, readonly)


def smartarray_type_of(array: SmartArray, readonly: bool) -> SmartArrayType:
    """The Numba type of a SmartArray (layout from its strides), cached on the array.

    A SmartArray's dtype, strides and writeability never change (setting its ``shape`` drops
    this cache), so each array computes its type once per intent (``In(a)`` made for every
    call costs a dict look-up, not a type construction).
    """
    key = "_numba_type_readonly" if readonly else "_numba_type_writeable"
    cached = array.__dict__.get(key)
    if cached is not None:
        return cached
    flags = array._template().flags
    layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
    try:
        dtype = numpy_support.from_dtype(array.dtype)
    except NotImplementedError:
        raise TypeError(
            f"Numba cannot compile for arrays of dtype {array.dtype}; convert with .astype()"
        ) from None
    # Unaligned views (a field of a packed structured array) must be typed so: compiled code
    # for an aligned type uses wide loads, which fault on a GPU at a misaligned address.
    numba_type = SmartArrayType(dtype, array.ndim, layout, readonly, aligned=flags.aligned)
    array.__dict__[key] = numba_type
    return numba_type
