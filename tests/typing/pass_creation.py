"""Types of SmartArray's constructor, ``asarray`` and the creation functions (mypy --strict).

Each ``assert_type`` is checked by mypy (tests/test_typing.py) and, when the file runs, against
the value's real type, dtype and number of dimensions.
"""

from __future__ import annotations

import sys
from typing import Any, TypeAlias, cast

import numpy as np

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type

import smartarray as sa
from smartarray import SmartArray

# The shape types are smartarray's (or the annotations'), the same with every numpy 2.x: an
# unknown shape is numpy's tuple[Any, ...]. (numpy's own functions spell theirs differently
# by version: numpy 2.0's np.zeros(3) is ndarray[Any, ...], 2.4's ndarray[tuple[int], ...].)
AnyShape: TypeAlias = tuple[Any, ...]
F8: TypeAlias = SmartArray[AnyShape, np.dtype[np.float64]]
Fh: TypeAlias = SmartArray[tuple[int, ...], np.dtype[np.float64]]

# (cast, not an annotated assignment: pyright would narrow an annotation to numpy's type)
host = cast("np.ndarray[tuple[int, ...], np.dtype[np.float64]]", np.zeros(6))
host_2d = cast("np.ndarray[tuple[int, int], np.dtype[np.float32]]", np.zeros((2, 3), np.float32))

# The constructor: an array keeps its shape and dtype types; a dtype argument naming a scalar
# type gives that type; a new array of a shape and no dtype is float64.
assert_type(SmartArray(host), Fh)
assert_type(SmartArray(host_2d), SmartArray[tuple[int, int], np.dtype[np.float32]])
assert_type(SmartArray(SmartArray(host)), Fh)
assert_type(SmartArray(np.float32(1.5)), SmartArray[tuple[()], np.dtype[np.float32]])
assert_type(SmartArray(host, dtype=np.int16), SmartArray[AnyShape, np.dtype[np.int16]])
assert_type(SmartArray([1, 2], dtype=np.dtype(np.uint8)), SmartArray[AnyShape, np.dtype[np.uint8]])
assert_type(SmartArray(host, True, None, np.int8), SmartArray[AnyShape, np.dtype[np.int8]])
assert_type(SmartArray(shape=(2, 3)), F8)
assert_type(SmartArray(shape=4, dtype=np.complex64), SmartArray[AnyShape, np.dtype[np.complex64]])
assert_type(SmartArray([1.0, 2.0]), SmartArray[AnyShape, np.dtype[Any]])
assert_type(SmartArray(host, dtype="f4"), SmartArray[AnyShape, np.dtype[Any]])
# An ndarray or SmartArray whose type contains Any keeps its types, with mypy too: ``arange``
# has the type numpy 2.4 gives np.arange(3.0), an ndarray of float64 | Any (a cast: other numpy
# versions type np.arange differently). Any other object with ``__array__`` gives np.dtype[Any].
arange = cast("np.ndarray[tuple[int], np.dtype[np.float64 | Any]]", np.zeros(3))
assert_type(SmartArray(arange), SmartArray[tuple[int], np.dtype[np.float64 | Any]])
assert_type(SmartArray(arange, where="host"), SmartArray[tuple[int], np.dtype[np.float64 | Any]])
assert_type(SmartArray(arange, dtype=np.float32), SmartArray[AnyShape, np.dtype[np.float32]])
assert_type(SmartArray(arange, dtype="f4"), SmartArray[AnyShape, np.dtype[Any]])
assert_type(sa.asarray(arange), SmartArray[tuple[int], np.dtype[np.float64 | Any]])
assert_type(sa.asarray(arange, np.int8), SmartArray[AnyShape, np.dtype[np.int8]])
any_shape = cast("SmartArray[Any, np.dtype[np.float64]]", SmartArray(host))
assert_type(SmartArray(any_shape), SmartArray[Any, np.dtype[np.float64]])
assert_type(sa.asarray(any_shape), SmartArray[Any, np.dtype[np.float64]])

# asarray: a SmartArray or ndarray keeps its types.
x = sa.asarray(host)
assert_type(x, Fh)
assert_type(sa.asarray(x), Fh)
assert_type(sa.asarray(np.float64(2.0)), SmartArray[tuple[()], np.dtype[np.float64]])
assert_type(sa.asarray(host_2d), SmartArray[tuple[int, int], np.dtype[np.float32]])
assert_type(sa.asarray([1, 2, 3], dtype=np.int32), SmartArray[AnyShape, np.dtype[np.int32]])
assert_type(sa.asarray([1, 2, 3]), SmartArray[AnyShape, np.dtype[Any]])

# The creation functions, numpy's rules: float64 by default, the dtype named.
assert_type(sa.zeros(3), F8)
assert_type(sa.ones((2, 2)), F8)
assert_type(sa.empty(5), F8)
assert_type(sa.zeros(3, dtype=None), F8)
assert_type(sa.ones(3, dtype=None), F8)
assert_type(sa.zeros(3, np.int32), SmartArray[AnyShape, np.dtype[np.int32]])
assert_type(sa.ones(3, dtype=np.dtype(np.int16)), SmartArray[AnyShape, np.dtype[np.int16]])
assert_type(sa.empty((2, 2), np.complex128), SmartArray[AnyShape, np.dtype[np.complex128]])
assert_type(sa.zeros(3, dtype="i4"), SmartArray[AnyShape, np.dtype[Any]])
assert_type(sa.full(3, 2.5), F8)
assert_type(sa.full(3, 7), SmartArray[AnyShape, np.dtype[np.int_]])
assert_type(sa.full(3, True), SmartArray[AnyShape, np.dtype[np.bool]])
assert_type(sa.full(3, 1j), SmartArray[AnyShape, np.dtype[np.complex128]])
assert_type(sa.full(3, np.float32(1)), SmartArray[AnyShape, np.dtype[np.float32]])
assert_type(sa.full(3, 1, dtype=np.uint8), SmartArray[AnyShape, np.dtype[np.uint8]])

# The *_like functions keep the prototype's dtype (and its shape, unless given one).
assert_type(sa.zeros_like(x), Fh)
assert_type(sa.ones_like(host_2d), SmartArray[tuple[int, int], np.dtype[np.float32]])
assert_type(sa.empty_like(x, shape=(3, 3)), F8)
assert_type(sa.full_like(x, 7), Fh)
assert_type(sa.zeros_like(x, dtype=np.int64), SmartArray[AnyShape, np.dtype[np.int64]])
assert_type(sa.full_like(x, 1, np.float32), SmartArray[AnyShape, np.dtype[np.float32]])
assert_type(sa.ones_like(x, dtype="u1"), SmartArray[AnyShape, np.dtype[Any]])
