"""The Numba type of a SmartArray, shared by the CPU (``@jit``) and CUDA (``@cuda.jit``) targets.

``SmartArrayType`` subclasses ``numba.types.Array`` so that every array typing and lowering
template in Numba accepts it, and uses Numba's array data model. Its only differences are
its name, the boxing/unboxing in :mod:`smartarray._numba_cpu`, and a version number in its
key, so entries in Numba's on-disk cache (``cache=True``) made by an older boxing protocol
never match.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import numpy as np
from numba.core import types
from numba.np import numpy_support

if TYPE_CHECKING:
    from ._array import SmartArray

#: Bump whenever the boxing/unboxing protocol of SmartArrayType changes.
BOXING_VERSION = 1


class SmartArrayType(types.Array):
    """Numba type of a SmartArray argument: an array that boxes back to a SmartArray."""

    # Above plain arrays, so that ufunc results computed from SmartArrays are SmartArrays
    # (Numba's __array_priority__/__array_wrap__ mechanism; see smartarray._numba_cpu).
    array_priority = 1.0

    def __init__(
        self, dtype: Any, ndim: int, layout: str, readonly: bool = False, aligned: bool = True
    ) -> None:
        flags = ", readonly" if readonly else ""
        name = f"SmartArray({dtype}, {ndim}d, {layout}{flags})"
        super().__init__(dtype, ndim, layout, readonly=readonly, name=name, aligned=aligned)

    @property
    def key(self) -> tuple[Any, ...]:
        return (*super().key, "smartarray", BOXING_VERSION)

    def copy(
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

    def can_convert_to(self, typingctx: Any, other: Any) -> Any:
        if type(other) is types.Array and _called_at_python_boundary():
            raise TypeError(
                f"this function was compiled only for explicit signatures with plain array "
                f"types ({other}), which cannot receive a SmartArray ({self}). Declare the "
                f"argument as a SmartArray type, e.g. "
                f"smartarray.numba_type(np.{self.dtype}, {self.ndim}, 'A'), or drop the "
                f"explicit signature; or pass a.get('host') (and call a.mark_changed('host') "
                f"if the function writes it)."
            )
        return super().can_convert_to(typingctx, other)

    def __repr__(self) -> str:
        return (
            f"SmartArrayType({self.dtype!r}, {self.ndim}, {self.layout!r}, "
            f"readonly={not self.mutable})"
        )


def _called_at_python_boundary() -> bool:
    # The C dispatcher asks Dispatcher._search_new_conversions (Python) for conversions from
    # Python argument types; jit-to-jit calls resolve overloads elsewhere and stay allowed.
    frame = inspect.currentframe()
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_code.co_name == "_search_new_conversions":
            return True
        frame = frame.f_back
    return False


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
    """The Numba type of a SmartArray (layout from its strides)."""
    flags = array._template().flags
    layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
    try:
        dtype = numpy_support.from_dtype(array.dtype)
    except NotImplementedError:
        raise TypeError(
            f"Numba cannot compile for arrays of dtype {array.dtype}; convert with .astype()"
        ) from None
    return SmartArrayType(dtype, array.ndim, layout, readonly)
