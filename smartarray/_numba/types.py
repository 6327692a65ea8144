"""The Numba type of a SmartArray, shared by the CPU (``@jit``) and CUDA (``@cuda.jit``) targets.

``SmartArrayType`` subclasses ``numba.types.Array`` so that every array typing and lowering
template in Numba accepts it, and uses Numba's array data model. Its only differences are
its name, the boxing/unboxing in :mod:`smartarray._numba.cpu`, and a version number in its
key, so entries in Numba's on-disk cache (``cache=True``) made by an older boxing protocol
never match.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numba.core import types
from numba.core.typeconv import Conversion
from numba.np import numpy_support

from .. import _hooks

if TYPE_CHECKING:
    from .._array import SmartArray

#: Bump whenever the boxing/unboxing protocol of SmartArrayType changes (including the table
#: of Python objects compiled code fetches, ``smartarray._numba.cpu._LAYOUT``, and what the
#: unboxing refuses or infers: 4 refuses SmartArrays kept by lasting typed containers; 5 unboxes
#: without NRT through the jit views; 6 checks a jit view's ndim against the type's; 7 reads
#: the allocation's host token first).
BOXING_VERSION = 7


class SmartArrayType(types.Array):
    """Numba type of a SmartArray argument: an array that boxes back to a SmartArray."""

    # Above plain arrays, so that ufunc results computed from SmartArrays are SmartArrays
    # (Numba's __array_priority__/__array_wrap__ mechanism; see smartarray._numba.cpu).
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
        # taught the reverse order in smartarray._numba.cpu.)
        unified: Any = super().unify(typingctx, other)
        if unified is None or isinstance(unified, SmartArrayType):
            return unified
        return SmartArrayType(
            unified.dtype, unified.ndim, unified.layout, not unified.mutable, unified.aligned
        )

    def can_convert_to(self, typingctx: Any, other: Any) -> Any:
        conversion = super().can_convert_to(typingctx, other)
        if conversion is None or type(other) is not types.Array:
            return conversion
        if _plain_conversions.refused:
            # The CPU dispatcher choosing among explicit signatures for Python arguments
            # (smartarray._numba.signatures): a plain-array signature's unboxing cannot take
            # a SmartArray object. The conversion must never reach the C++ type manager, or
            # every dispatcher would resolve SmartArrays to its plain-array signatures.
            return None
        # Inside compiled code (jit-to-jit calls, CUDA launches, whose argument preparation
        # takes any array) a SmartArray is a plain array; ranked below a SmartArray
        # signature, so a callee's SmartArray twin of a plain signature is preferred.
        return max(conversion, Conversion.unsafe)

    def __repr__(self) -> str:
        return (
            f"SmartArrayType({self.dtype!r}, {self.ndim}, {self.layout!r}, "
            f"readonly={not self.mutable})"
        )


class _PlainConversions(threading.local):
    """Per-thread switch: is a SmartArray-to-plain-array conversion refused right now?"""

    refused = False


_plain_conversions = _PlainConversions()


@contextlib.contextmanager
def plain_array_conversions_refused() -> Iterator[None]:
    """Refuse SmartArray-to-plain-array conversions in this thread while the block runs."""
    previous = _plain_conversions.refused
    _plain_conversions.refused = True
    try:
        yield
    finally:
        _plain_conversions.refused = previous


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
    shape = array._shape  # (the layout, read with no call between: see the shape setter)
    strides = array._strides
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
    numba_type = SmartArrayType(dtype, len(shape), layout, readonly, aligned=flags.aligned)
    # (cached only for the layout it was made for; check and store call-free)
    entries = array.__dict__
    if array._shape is shape and array._strides is strides:
        entries[key] = numba_type
    return numba_type


_hooks.numba_type = smartarray_type_of
