"""What type checkers see of SmartArray beyond its run-time code in smartarray/_array.py.

Three kinds of declarations, all for type checkers only:

- The overloads of the eight methods SmartArray implements whose result types depend on
  their arguments (``__init__``, ``get``, ``__getitem__``, ``__array__``, ``astype``,
  ``reshape``, ``getfield``, ``view``). _array.py defines them for the run time only
  (``if not TYPE_CHECKING:``), so that type checkers do not take their plain signatures for
  these; ``tools/check_runtime_bodies.py`` has mypy check their bodies.
- The operators and the ndarray members smartarray._numpy installs on the class at run time:
  the operators are the fast ones of _numpy.fastpath, the other public ndarray methods and
  attributes are forwarded to the host copy, made current first
  (_numpy.protocols.ndarray_members). Set with ``setattr``, they are invisible to type
  checkers, which read their types here: numpy's own rules for ndarray (numpy/__init__.pyi),
  trimmed to the dtype cases that numpy's stubs give exactly (tests/typing checks them).
  In-place operators keep the type.
- The type aliases of SmartArray's annotations (here, in _array.py and in
  _numpy/creation.py).

``_SmartArrayTyping`` is numpy's NDArrayOperatorsMixin as type checkers see it in
SmartArray's bases (smartarray/_array.py); at run time that base is the mixin itself, nothing
imports this module, and importing it defines nothing, so no declaration here can shadow a
member of the class. This module and _array.py import each other for type checkers only
(tests/test_architecture.py counts them as one module of the import graph).

The ``self`` types here name SmartArray, a subclass of the class they are declared in, which
mypy reports at each declaration ("invalid type for self", code ``misc``, turned off for this
file below) and accepts at the call sites. It is what makes mypy check the bounds of the type
variables in them: an operator's overloads are chosen by the dtype (``x & 1`` needs integers
or bools), and mypy looks at the bounds of type variables nested in a ``self`` type only when
that type's class is the class of the object the operator is called on.
"""

# mypy: disable-error-code="misc"

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import EllipsisType
    from typing import Any, Literal, SupportsIndex, TypeAlias, TypeVar, overload

    import numpy as np
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numpy.lib.mixins import NDArrayOperatorsMixin
    from numpy.typing import DTypeLike, NBitBase
    from numpy_typing_compat import CanArray
    from typing_extensions import Self

    from ._array import SmartArray

    # --- the names of SmartArray's annotations (here, in smartarray._array and in
    # smartarray._numpy.creation)
    _ShapeT = TypeVar("_ShapeT", bound=tuple[int, ...])
    _DTypeT = TypeVar("_DTypeT", bound=np.dtype[Any])
    # A shape given as a tuple, seen with its length (numpy's ``_AnyShapeT``, up to 4-d).
    _AnyShapeT = TypeVar(
        "_AnyShapeT",
        tuple[()],
        tuple[int],
        tuple[int, int],
        tuple[int, int, int],
        tuple[int, int, int, int],
        tuple[int, ...],
    )
    # A numpy scalar type (the operators' other scalar types: smartarray._array_typing).
    _ScalarT = TypeVar("_ScalarT", bound=np.generic)
    # Any object, given to the constructor (see SmartArray.__init__).
    _ObjT = TypeVar("_ObjT")

    # numpy's own spelling of an unknown shape (``numpy.typing.NDArray``'s).
    _AnyShape: TypeAlias = tuple[Any, ...]
    # A dtype argument that names its scalar type: ``np.float32`` or ``np.dtype(np.float32)``.
    _DTypeLike: TypeAlias = type[_ScalarT] | np.dtype[_ScalarT]
    _ShapeLike: TypeAlias = SupportsIndex | Sequence[SupportsIndex]
    # An array of this shape and dtype: a SmartArray, or anything whose ``__array__`` says
    # them (numpy-typing-compat's CanArray: an ndarray, a numpy scalar, ...). For numpy 2.0
    # its CanArray is ``np.ndarray`` itself, not a protocol: SmartArrays are named here, and
    # numpy scalars in ``_ArrayOf``, so that they count as arrays with every numpy 2.x.
    _HasArray: TypeAlias = "SmartArray[_ShapeT, _DTypeT] | CanArray[_ShapeT, _DTypeT]"
    # An array or numpy scalar of scalar type ``_ScalarT``.
    _ArrayOf: TypeAlias = "_HasArray[Any, np.dtype[_ScalarT]] | _ScalarT"
    # Indices. An element is selected by integers (Python's or numpy's) and nothing else:
    # not ``SupportsIndex``, which arrays are too (``__index__``), so that an index array's
    # type never matches two overloads of ``__getitem__`` (mypy's rule for ``Any`` in it).
    _Integer: TypeAlias = int | np.integer[Any]
    _Index: TypeAlias = _Integer | slice | EllipsisType | _HasArray[Any, Any] | list[Any] | None
    # What ``get('gpu')`` hands out: numba-cuda's device array (in the simulator, numba's
    # stand-in FakeCUDAArray, which has its interface). numba ships type information
    # (py.typed), so type checkers see the class.
    _DeviceArray: TypeAlias = DeviceNDArray

    # --- the operators' own

    # Scalar types, by what the operators accept (numpy's rules).
    _NumberT = TypeVar("_NumberT", bound=np.number[Any])
    _InexactT = TypeVar("_InexactT", bound=np.inexact[Any])
    _RealT = TypeVar("_RealT", bound=np.integer[Any] | np.floating[Any])
    _IntegerT = TypeVar("_IntegerT", bound=np.integer[Any])
    _IntegralT = TypeVar("_IntegralT", bound=np.integer[Any] | np.bool)
    _NumericT = TypeVar("_NumericT", bound=np.number[Any] | np.timedelta64 | np.object_)
    _AddableT = TypeVar(
        "_AddableT",
        bound=np.number[Any] | np.bool | np.timedelta64 | np.str_ | np.bytes_ | np.object_,
    )
    _MatmulT = TypeVar("_MatmulT", bound=np.number[Any] | np.bool | np.object_)
    _AbsT = TypeVar(
        "_AbsT", bound=np.integer[Any] | np.floating[Any] | np.bool | np.timedelta64 | np.object_
    )
    _NBit = TypeVar("_NBit", bound=NBitBase)
    # Self types of the unary operators.
    _NumericArrayT = TypeVar(
        "_NumericArrayT",
        bound="SmartArray[Any, np.dtype[np.number[Any] | np.timedelta64 | np.object_]]",
    )
    _IntegralArrayT = TypeVar(
        "_IntegralArrayT", bound="SmartArray[Any, np.dtype[np.integer[Any] | np.bool | np.object_]]"
    )

    # The other operands numpy takes: Python scalars and (nested) sequences. (An operator's
    # overloads for arrays of any dtype and for these are separate: one taking ``object``
    # would make mypy give up on ``x + x`` whenever ``x``'s type contains an explicit
    # ``Any``, e.g. ``SmartArray[Any, np.dtype[np.float64]]``: mypy's rule for overloads
    # that an argument containing ``Any`` matches with different parameter types.)
    _NotArray: TypeAlias = complex | str | bytes | Sequence[Any]

    class _SmartArrayTyping(NDArrayOperatorsMixin):
        """numpy's NDArrayOperatorsMixin as type checkers see it in SmartArray: the overloads
        of the methods SmartArray defines for the run time only, the operators with
        SmartArray's types, and the ndarray members SmartArray forwards."""

        # --- the methods SmartArray implements itself (smartarray/_array.py, where they are
        # defined for the run time only: ``if not TYPE_CHECKING``), by their overloads here.
        #
        # The constructor: an ndarray or a SmartArray keeps its shape and dtype, a numpy
        # scalar is 0-d of its type, a dtype argument naming a scalar type gives that type, a
        # new array with a shape and no dtype is float64. Any other object (a sequence, a
        # device array, anything with ``__array__``) is ``_ObjT``, a type variable, not
        # ``Any``: for an argument whose type contains ``Any`` (numpy's ``np.arange(3.0)`` is
        # an ndarray of ``float64 | Any``) mypy then sees one parameter type, the argument's
        # own, in every overload it matches, and keeps the first one's result instead of
        # giving up on it (``SmartArray[Any, Any]``: mypy's rule for overloads that an
        # argument containing ``Any`` matches with different parameter types).
        @overload
        def __init__(
            self: SmartArray[tuple[()], np.dtype[_ScalarT]],
            obj: _ScalarT,
            copy: bool = True,
            shape: None = None,
            dtype: None = None,
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_ShapeT, _DTypeT],
            obj: np.ndarray[_ShapeT, _DTypeT],
            copy: bool = True,
            shape: None = None,
            dtype: None = None,
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_ShapeT, _DTypeT],
            obj: SmartArray[_ShapeT, _DTypeT],
            copy: bool = True,
            shape: None = None,
            dtype: None = None,
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_AnyShape, np.dtype[_ScalarT]],
            obj: _ObjT,
            copy: bool,
            shape: _ShapeLike | None,
            dtype: _DTypeLike[_ScalarT],
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_AnyShape, np.dtype[_ScalarT]],
            obj: _ObjT,
            copy: bool = True,
            shape: _ShapeLike | None = None,
            *,
            dtype: _DTypeLike[_ScalarT],
            order: str | None = None,
            where: str = "host",
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_AnyShape, np.dtype[_ScalarT]],
            obj: None = None,
            copy: bool = True,
            shape: _ShapeLike | None = None,
            *,
            dtype: _DTypeLike[_ScalarT],
            order: str | None = None,
            where: str = "host",
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_AnyShape, np.dtype[np.float64]],
            obj: None = None,
            copy: bool = True,
            *,
            shape: _ShapeLike,
            dtype: None = None,
            order: str | None = None,
            where: str = "host",
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_AnyShape, np.dtype[Any]],
            obj: _ObjT,
            copy: bool = True,
            shape: _ShapeLike | None = None,
            dtype: DTypeLike | None = None,
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        @overload
        def __init__(
            self: SmartArray[_AnyShape, np.dtype[Any]],
            obj: None = None,
            copy: bool = True,
            shape: _ShapeLike | None = None,
            dtype: DTypeLike | None = None,
            order: str | None = None,
            where: str = "host",
            *,
            host_memory: str | None = None,
            stream: Any = None,
            label: str | None = None,
        ) -> None: ...
        def __init__(self, *args: Any, **kwargs: Any) -> None: ...  # (_array.py's, at run time)

        @overload
        def get(
            self: SmartArray[_ShapeT, _DTypeT], where: Literal["host"] = "host", stream: Any = None
        ) -> np.ndarray[_ShapeT, _DTypeT]: ...
        @overload
        def get(self, where: Literal["gpu", "device"], stream: Any = None) -> _DeviceArray: ...
        @overload
        def get(
            self: SmartArray[_ShapeT, _DTypeT], where: str, stream: Any = None
        ) -> np.ndarray[_ShapeT, _DTypeT] | _DeviceArray: ...
        def get(self, where: str = "host", stream: Any = None) -> Any: ...

        @overload
        def __getitem__(self, key: _Integer | tuple[_Integer, ...], /) -> Any: ...
        @overload
        def __getitem__(
            self: SmartArray[Any, np.dtype[np.void]], key: str | list[str], /
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __getitem__(
            self: SmartArray[Any, _DTypeT], key: _Index | tuple[_Index, ...], /
        ) -> SmartArray[_AnyShape, _DTypeT]: ...
        def __getitem__(self, key: Any, /) -> Any: ...

        @overload
        def __array__(
            self: SmartArray[_ShapeT, _DTypeT], dtype: None = None, copy: bool | None = None
        ) -> np.ndarray[_ShapeT, _DTypeT]: ...
        @overload
        def __array__(
            self: SmartArray[_ShapeT, Any], dtype: _DTypeT, copy: bool | None = None
        ) -> np.ndarray[_ShapeT, _DTypeT]: ...
        @overload
        def __array__(
            self: SmartArray[_ShapeT, Any], dtype: DTypeLike | None, copy: bool | None = None
        ) -> np.ndarray[_ShapeT, np.dtype[Any]]: ...
        def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> Any: ...

        @overload
        def astype(
            self: SmartArray[_ShapeT, Any],
            dtype: _DTypeT,
            order: str = "K",
            casting: str = "unsafe",
            copy: bool = True,
        ) -> SmartArray[_ShapeT, _DTypeT]: ...
        @overload
        def astype(
            self: SmartArray[_ShapeT, Any],
            dtype: type[_ScalarT],
            order: str = "K",
            casting: str = "unsafe",
            copy: bool = True,
        ) -> SmartArray[_ShapeT, np.dtype[_ScalarT]]: ...
        @overload
        def astype(
            self: SmartArray[_ShapeT, Any],
            dtype: DTypeLike,
            order: str = "K",
            casting: str = "unsafe",
            copy: bool = True,
        ) -> SmartArray[_ShapeT, np.dtype[Any]]: ...
        def astype(
            self, dtype: DTypeLike, order: str = "K", casting: str = "unsafe", copy: bool = True
        ) -> Any: ...

        @overload  # a tuple: its length (numpy's overloads, up to 4-d here)
        def reshape(
            self: SmartArray[Any, _DTypeT],
            shape: _AnyShapeT,
            /,
            *,
            order: str = "C",
            copy: bool | None = None,
        ) -> SmartArray[_AnyShapeT, _DTypeT]: ...
        @overload
        def reshape(
            self: SmartArray[Any, _DTypeT],
            size1: SupportsIndex,
            /,
            *,
            order: str = "C",
            copy: bool | None = None,
        ) -> SmartArray[tuple[int], _DTypeT]: ...
        @overload
        def reshape(
            self: SmartArray[Any, _DTypeT],
            size1: SupportsIndex,
            size2: SupportsIndex,
            /,
            *,
            order: str = "C",
            copy: bool | None = None,
        ) -> SmartArray[tuple[int, int], _DTypeT]: ...
        @overload
        def reshape(
            self: SmartArray[Any, _DTypeT],
            size1: SupportsIndex,
            size2: SupportsIndex,
            size3: SupportsIndex,
            /,
            *,
            order: str = "C",
            copy: bool | None = None,
        ) -> SmartArray[tuple[int, int, int], _DTypeT]: ...
        @overload
        def reshape(
            self: SmartArray[Any, _DTypeT],
            *shape: SupportsIndex | Sequence[SupportsIndex],
            order: str = "C",
            copy: bool | None = None,
        ) -> SmartArray[_AnyShape, _DTypeT]: ...
        def reshape(self, *shape: Any, order: str = "C", copy: bool | None = None) -> Any: ...

        @overload
        def getfield(
            self: SmartArray[_ShapeT, Any], dtype: _DTypeLike[_ScalarT], offset: int = 0
        ) -> SmartArray[_ShapeT, np.dtype[_ScalarT]]: ...
        @overload
        def getfield(
            self: SmartArray[_ShapeT, Any], dtype: DTypeLike, offset: int = 0
        ) -> SmartArray[_ShapeT, np.dtype[Any]]: ...
        def getfield(self, dtype: DTypeLike, offset: int = 0) -> Any: ...

        @overload
        def view(
            self: SmartArray[_ShapeT, _DTypeT], dtype: None = None
        ) -> SmartArray[_ShapeT, _DTypeT]: ...
        @overload
        def view(
            self: SmartArray[_ShapeT, Any], dtype: _DTypeLike[_ScalarT]
        ) -> SmartArray[_ShapeT, np.dtype[_ScalarT]]: ...
        @overload
        def view(
            self: SmartArray[_ShapeT, Any], dtype: DTypeLike
        ) -> SmartArray[_ShapeT, np.dtype[Any]]: ...
        def view(self, dtype: DTypeLike | None = None) -> Any: ...

        # --- binary operators. Overloads: a Python scalar keeps the array's dtype (NEP 50)
        # and shape; operands of one scalar type give that type; anything else gives an
        # array of unknown dtype, as numpy's stubs do for mixed types. Each operator is
        # written out (pyright does not bind ``__radd__ = __add__`` as a method). A reflected
        # one (``2.0 * x``) is only used for Python scalars and sequences on the left: an
        # ndarray or a numpy scalar there has its own operator, typed by numpy (and mypy
        # cannot check a reflected operator against numpy < 2.4's np.bool ones, protocols).
        @overload
        def __add__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __add__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __add__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __add__(
            self: SmartArray[Any, np.dtype[_AddableT]], other: _ArrayOf[_AddableT], /
        ) -> SmartArray[_AnyShape, np.dtype[_AddableT]]: ...
        @overload
        def __add__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __add__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __add__(self, other: object, /) -> Any: ...

        @overload
        def __radd__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __radd__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __radd__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __radd__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __radd__(self, other: object, /) -> Any: ...

        @overload
        def __mul__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __mul__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __mul__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __mul__(
            self: SmartArray[Any, np.dtype[_AddableT]], other: _ArrayOf[_AddableT], /
        ) -> SmartArray[_AnyShape, np.dtype[_AddableT]]: ...
        @overload
        def __mul__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __mul__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __mul__(self, other: object, /) -> Any: ...

        @overload
        def __rmul__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __rmul__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rmul__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __rmul__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rmul__(self, other: object, /) -> Any: ...

        @overload
        def __sub__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __sub__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __sub__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __sub__(
            self: SmartArray[Any, np.dtype[_NumericT]], other: _ArrayOf[_NumericT], /
        ) -> SmartArray[_AnyShape, np.dtype[_NumericT]]: ...
        @overload
        def __sub__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __sub__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __sub__(self, other: object, /) -> Any: ...

        @overload
        def __rsub__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __rsub__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rsub__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __rsub__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rsub__(self, other: object, /) -> Any: ...

        @overload
        def __pow__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __pow__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __pow__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __pow__(
            self: SmartArray[Any, np.dtype[_NumberT]], other: _ArrayOf[_NumberT], /
        ) -> SmartArray[_AnyShape, np.dtype[_NumberT]]: ...
        @overload
        def __pow__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __pow__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __pow__(self, other: object, /) -> Any: ...

        @overload
        def __rpow__(
            self: SmartArray[_ShapeT, np.dtype[_NumberT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_NumberT]]: ...
        @overload
        def __rpow__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rpow__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __rpow__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rpow__(self, other: object, /) -> Any: ...

        @overload  # (no complex: numpy has no floor division or remainder of them)
        def __floordiv__(
            self: SmartArray[_ShapeT, np.dtype[_RealT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_RealT]]: ...
        @overload
        def __floordiv__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __floordiv__(
            self: SmartArray[Any, np.dtype[_RealT]], other: _ArrayOf[_RealT], /
        ) -> SmartArray[_AnyShape, np.dtype[_RealT]]: ...
        @overload
        def __floordiv__(
            self, other: _ArrayOf[_ScalarT], /
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __floordiv__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __floordiv__(self, other: object, /) -> Any: ...

        @overload
        def __rfloordiv__(
            self: SmartArray[_ShapeT, np.dtype[_RealT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_RealT]]: ...
        @overload
        def __rfloordiv__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rfloordiv__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rfloordiv__(self, other: object, /) -> Any: ...

        @overload
        def __mod__(
            self: SmartArray[_ShapeT, np.dtype[_RealT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_RealT]]: ...
        @overload
        def __mod__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __mod__(
            self: SmartArray[Any, np.dtype[_RealT]], other: _ArrayOf[_RealT], /
        ) -> SmartArray[_AnyShape, np.dtype[_RealT]]: ...
        @overload
        def __mod__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __mod__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __mod__(self, other: object, /) -> Any: ...

        @overload
        def __rmod__(
            self: SmartArray[_ShapeT, np.dtype[_RealT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_RealT]]: ...
        @overload
        def __rmod__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rmod__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rmod__(self, other: object, /) -> Any: ...

        @overload  # floating and complex arrays keep their dtype
        def __truediv__(
            self: SmartArray[_ShapeT, np.dtype[_InexactT]], other: int | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[_InexactT]]: ...
        @overload
        def __truediv__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __truediv__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __truediv__(
            self: SmartArray[Any, np.dtype[_InexactT]], other: _ArrayOf[_InexactT], /
        ) -> SmartArray[_AnyShape, np.dtype[_InexactT]]: ...
        @overload  # integers and bools divide to float64
        def __truediv__(
            self: SmartArray[_ShapeT, np.dtype[_IntegralT]], other: float | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __truediv__(
            self: SmartArray[Any, np.dtype[_IntegralT]],
            other: _ArrayOf[np.integer[Any] | np.bool],
            /,
        ) -> SmartArray[_AnyShape, np.dtype[np.float64]]: ...
        @overload
        def __truediv__(
            self, other: _ArrayOf[_ScalarT], /
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __truediv__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __truediv__(self, other: object, /) -> Any: ...

        @overload
        def __rtruediv__(
            self: SmartArray[_ShapeT, np.dtype[_InexactT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_InexactT]]: ...
        @overload
        def __rtruediv__(
            self: SmartArray[_ShapeT, np.dtype[np.float64]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rtruediv__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], other: complex, /
        ) -> SmartArray[_ShapeT, np.dtype[np.complex128]]: ...
        @overload
        def __rtruediv__(
            self: SmartArray[_ShapeT, np.dtype[_IntegralT]], other: float, /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __rtruediv__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rtruediv__(self, other: object, /) -> Any: ...

        @overload
        def __divmod__(
            self: SmartArray[_ShapeT, np.dtype[_RealT]], other: int | np.bool, /
        ) -> tuple[
            SmartArray[_ShapeT, np.dtype[_RealT]], SmartArray[_ShapeT, np.dtype[_RealT]]
        ]: ...
        @overload
        def __divmod__(
            self: SmartArray[Any, np.dtype[_RealT]], other: _ArrayOf[_RealT], /
        ) -> tuple[
            SmartArray[_AnyShape, np.dtype[_RealT]], SmartArray[_AnyShape, np.dtype[_RealT]]
        ]: ...
        @overload
        def __divmod__(
            self, other: _ArrayOf[_ScalarT], /
        ) -> tuple[SmartArray[_AnyShape, np.dtype[Any]], SmartArray[_AnyShape, np.dtype[Any]]]: ...
        @overload
        def __divmod__(
            self, other: _NotArray, /
        ) -> tuple[SmartArray[_AnyShape, np.dtype[Any]], SmartArray[_AnyShape, np.dtype[Any]]]: ...
        def __divmod__(self, other: object, /) -> Any: ...

        @overload
        def __rdivmod__(
            self: SmartArray[_ShapeT, np.dtype[_RealT]], other: int, /
        ) -> tuple[
            SmartArray[_ShapeT, np.dtype[_RealT]], SmartArray[_ShapeT, np.dtype[_RealT]]
        ]: ...
        @overload  # (a SmartArray on the left: what pyright's ``divmod(x, y)`` looks for)
        def __rdivmod__(
            self: SmartArray[Any, np.dtype[_RealT]],
            other: SmartArray[Any, np.dtype[_RealT]],
            /,
        ) -> tuple[
            SmartArray[_AnyShape, np.dtype[_RealT]], SmartArray[_AnyShape, np.dtype[_RealT]]
        ]: ...
        @overload
        def __rdivmod__(
            self, other: SmartArray[Any, Any] | _NotArray, /
        ) -> tuple[SmartArray[_AnyShape, np.dtype[Any]], SmartArray[_AnyShape, np.dtype[Any]]]: ...
        def __rdivmod__(self, other: object, /) -> Any: ...

        @overload  # (1-d @ 1-d is a scalar, as numpy's)
        def __matmul__(
            self: SmartArray[tuple[int], Any], other: SmartArray[tuple[int], Any], /
        ) -> Any: ...
        @overload
        def __matmul__(
            self: SmartArray[Any, np.dtype[_MatmulT]], other: _ArrayOf[_MatmulT], /
        ) -> SmartArray[_AnyShape, np.dtype[_MatmulT]]: ...
        @overload
        def __matmul__(
            self, other: _ArrayOf[_ScalarT], /
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __matmul__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __matmul__(self, other: object, /) -> Any: ...

        def __rmatmul__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...

        @overload  # bitwise operators: integers and bools
        def __and__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __and__(
            self: SmartArray[_ShapeT, np.dtype[np.bool]], other: bool | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.bool]]: ...
        @overload
        def __and__(
            self: SmartArray[Any, np.dtype[_IntegralT]], other: _ArrayOf[_IntegralT], /
        ) -> SmartArray[_AnyShape, np.dtype[_IntegralT]]: ...
        @overload
        def __and__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __and__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __and__(self, other: object, /) -> Any: ...

        @overload
        def __rand__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __rand__(
            self: SmartArray[_ShapeT, np.dtype[np.bool]], other: bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.bool]]: ...
        @overload
        def __rand__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rand__(self, other: object, /) -> Any: ...

        @overload
        def __or__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __or__(
            self: SmartArray[_ShapeT, np.dtype[np.bool]], other: bool | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.bool]]: ...
        @overload
        def __or__(
            self: SmartArray[Any, np.dtype[_IntegralT]], other: _ArrayOf[_IntegralT], /
        ) -> SmartArray[_AnyShape, np.dtype[_IntegralT]]: ...
        @overload
        def __or__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __or__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __or__(self, other: object, /) -> Any: ...

        @overload
        def __ror__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __ror__(
            self: SmartArray[_ShapeT, np.dtype[np.bool]], other: bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.bool]]: ...
        @overload
        def __ror__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __ror__(self, other: object, /) -> Any: ...

        @overload
        def __xor__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __xor__(
            self: SmartArray[_ShapeT, np.dtype[np.bool]], other: bool | np.bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.bool]]: ...
        @overload
        def __xor__(
            self: SmartArray[Any, np.dtype[_IntegralT]], other: _ArrayOf[_IntegralT], /
        ) -> SmartArray[_AnyShape, np.dtype[_IntegralT]]: ...
        @overload
        def __xor__(self, other: _ArrayOf[_ScalarT], /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __xor__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __xor__(self, other: object, /) -> Any: ...

        @overload
        def __rxor__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __rxor__(
            self: SmartArray[_ShapeT, np.dtype[np.bool]], other: bool, /
        ) -> SmartArray[_ShapeT, np.dtype[np.bool]]: ...
        @overload
        def __rxor__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rxor__(self, other: object, /) -> Any: ...

        @overload
        def __lshift__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __lshift__(
            self: SmartArray[Any, np.dtype[_IntegerT]], other: _ArrayOf[_IntegerT], /
        ) -> SmartArray[_AnyShape, np.dtype[_IntegerT]]: ...
        @overload
        def __lshift__(
            self, other: _ArrayOf[_ScalarT], /
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __lshift__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __lshift__(self, other: object, /) -> Any: ...

        @overload
        def __rlshift__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __rlshift__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rlshift__(self, other: object, /) -> Any: ...

        @overload
        def __rshift__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __rshift__(
            self: SmartArray[Any, np.dtype[_IntegerT]], other: _ArrayOf[_IntegerT], /
        ) -> SmartArray[_AnyShape, np.dtype[_IntegerT]]: ...
        @overload
        def __rshift__(
            self, other: _ArrayOf[_ScalarT], /
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        @overload
        def __rshift__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rshift__(self, other: object, /) -> Any: ...

        @overload
        def __rrshift__(
            self: SmartArray[_ShapeT, np.dtype[_IntegerT]], other: int, /
        ) -> SmartArray[_ShapeT, np.dtype[_IntegerT]]: ...
        @overload
        def __rrshift__(self, other: _NotArray, /) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def __rrshift__(self, other: object, /) -> Any: ...

        # --- comparisons: boolean arrays, whatever the operands (``==`` too, unlike object's)
        def __lt__(self, other: object, /) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...
        def __le__(self, other: object, /) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...
        def __gt__(self, other: object, /) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...
        def __ge__(self, other: object, /) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...
        def __eq__(  # type: ignore[override]
            self, other: object, /
        ) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...
        def __ne__(  # type: ignore[override]
            self, other: object, /
        ) -> SmartArray[_AnyShape, np.dtype[np.bool]]: ...

        # --- unary operators (the self types are bounded type variables, as numpy's: mypy
        # checks a bound on ``self`` itself, not one nested in its type arguments)
        def __neg__(self: _NumericArrayT, /) -> _NumericArrayT: ...
        def __pos__(self: _NumericArrayT, /) -> _NumericArrayT: ...
        def __invert__(self: _IntegralArrayT, /) -> _IntegralArrayT: ...
        @overload
        def __abs__(
            self: SmartArray[_ShapeT, np.dtype[_AbsT]], /
        ) -> SmartArray[_ShapeT, np.dtype[_AbsT]]: ...
        @overload  # the magnitude of a complex number is a real one of its precision
        def __abs__(
            self: SmartArray[_ShapeT, np.dtype[np.complex128]], /
        ) -> SmartArray[_ShapeT, np.dtype[np.float64]]: ...
        @overload
        def __abs__(
            self: SmartArray[_ShapeT, np.dtype[np.complexfloating[_NBit, _NBit]]], /
        ) -> SmartArray[_ShapeT, np.dtype[np.floating[_NBit]]]: ...
        def __abs__(self, /) -> Any: ...

        # --- in-place operators: the array itself, its type unchanged. (mypy wants an
        # in-place operator's overloads to match the operator's, a ``misc`` error, off in this
        # file; one signature is right here.)
        def __iadd__(self, other: object, /) -> Self: ...
        def __isub__(self, other: object, /) -> Self: ...
        def __imul__(self, other: object, /) -> Self: ...
        def __itruediv__(self, other: object, /) -> Self: ...
        def __ifloordiv__(self, other: object, /) -> Self: ...
        def __imod__(self, other: object, /) -> Self: ...
        def __ipow__(self, other: object, /) -> Self: ...
        def __imatmul__(self, other: object, /) -> Self: ...
        def __iand__(self, other: object, /) -> Self: ...
        def __ior__(self, other: object, /) -> Self: ...
        def __ixor__(self, other: object, /) -> Self: ...
        def __ilshift__(self, other: object, /) -> Self: ...
        def __irshift__(self, other: object, /) -> Self: ...

        # --- the ndarray members forwarded to the host copy (_numpy.protocols): array
        # results are SmartArrays; reductions are Any (a scalar or an array, by axis), as
        # in numpy's stubs. ``resize``, ``setflags`` and ``byteswap`` are refused at run
        # time and absent here.
        def argmax(
            self, axis: SupportsIndex | None = None, out: Any = None, *, keepdims: bool = False
        ) -> Any: ...
        def argmin(
            self, axis: SupportsIndex | None = None, out: Any = None, *, keepdims: bool = False
        ) -> Any: ...
        def argpartition(
            self,
            kth: Any,
            axis: SupportsIndex | None = -1,
            kind: str = "introselect",
            order: str | Sequence[str] | None = None,
        ) -> SmartArray[_AnyShape, np.dtype[np.intp]]: ...
        def argsort(
            self,
            axis: SupportsIndex | None = -1,
            kind: str | None = None,
            order: str | Sequence[str] | None = None,
            *,
            stable: bool | None = None,
        ) -> SmartArray[_AnyShape, np.dtype[np.intp]]: ...
        def choose(
            self, choices: Any, out: Any = None, mode: str = "raise"
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def clip(
            self: SmartArray[_ShapeT, Any],
            min: Any = None,
            max: Any = None,
            out: Any = None,
            **kwargs: Any,
        ) -> SmartArray[_ShapeT, np.dtype[Any]]: ...
        def compress(
            self: SmartArray[Any, _DTypeT],
            condition: Any,
            axis: SupportsIndex | None = None,
            out: Any = None,
        ) -> SmartArray[_AnyShape, _DTypeT]: ...
        def conj(self: SmartArray[_ShapeT, _DTypeT]) -> SmartArray[_ShapeT, _DTypeT]: ...
        def conjugate(self: SmartArray[_ShapeT, _DTypeT]) -> SmartArray[_ShapeT, _DTypeT]: ...
        def cumprod(
            self, axis: SupportsIndex | None = None, dtype: DTypeLike | None = None, out: Any = None
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def cumsum(
            self, axis: SupportsIndex | None = None, dtype: DTypeLike | None = None, out: Any = None
        ) -> SmartArray[_AnyShape, np.dtype[Any]]: ...
        def dot(self, b: Any, out: Any = None) -> Any: ...
        def dump(self, file: Any) -> None: ...
        def dumps(self) -> bytes: ...
        def nonzero(self) -> tuple[SmartArray[tuple[int], np.dtype[np.intp]], ...]: ...
        def partition(
            self,
            kth: Any,
            axis: SupportsIndex = -1,
            kind: str = "introselect",
            order: str | Sequence[str] | None = None,
        ) -> None: ...
        def prod(self, *args: Any, **kwargs: Any) -> Any: ...
        def put(self, indices: Any, values: Any, mode: str = "raise") -> None: ...
        def repeat(
            self: SmartArray[Any, _DTypeT], repeats: Any, axis: SupportsIndex | None = None
        ) -> SmartArray[_AnyShape, _DTypeT]: ...
        def round(
            self: SmartArray[_ShapeT, _DTypeT], decimals: SupportsIndex = 0, out: Any = None
        ) -> SmartArray[_ShapeT, _DTypeT]: ...
        def searchsorted(
            self, v: Any, side: Literal["left", "right"] = "left", sorter: Any = None
        ) -> Any: ...
        def setfield(self, val: Any, dtype: DTypeLike, offset: SupportsIndex = 0) -> None: ...
        def sort(
            self,
            axis: SupportsIndex = -1,
            kind: str | None = None,
            order: str | Sequence[str] | None = None,
            *,
            stable: bool | None = None,
        ) -> None: ...
        def std(self, *args: Any, **kwargs: Any) -> Any: ...
        def take(
            self,
            indices: Any,
            axis: SupportsIndex | None = None,
            out: Any = None,
            mode: str = "raise",
        ) -> Any: ...
        def tobytes(self, order: str = "C") -> bytes: ...
        def tofile(self, fid: Any, sep: str = "", format: str = "%s") -> None: ...
        def trace(
            self,
            offset: SupportsIndex = 0,
            axis1: SupportsIndex = 0,
            axis2: SupportsIndex = 1,
            dtype: DTypeLike | None = None,
            out: Any = None,
        ) -> Any: ...
        def var(self, *args: Any, **kwargs: Any) -> Any: ...
        @property
        def ctypes(self) -> Any: ...
        @property
        def data(self) -> memoryview: ...
        @property
        def device(self) -> Literal["cpu"]: ...
