"""Types of SmartArray's operators (mypy --strict): numpy's rules for ndarray.

A Python scalar keeps a number array's dtype (NEP 50) and shape type; operands of one scalar
type give that type; mixed types give an array of unknown dtype (``np.dtype[Any]``), as numpy's
stubs do. Comparisons give boolean arrays; in-place operators keep the type.
"""

from __future__ import annotations

import sys
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

import smartarray as sa
from smartarray import SmartArray

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type

AnyShape: TypeAlias = tuple[Any, ...]
F8: TypeAlias = SmartArray[AnyShape, np.dtype[np.float64]]
F4: TypeAlias = SmartArray[AnyShape, np.dtype[np.float32]]
I4: TypeAlias = SmartArray[AnyShape, np.dtype[np.int32]]
B: TypeAlias = SmartArray[AnyShape, np.dtype[np.bool]]
Unknown: TypeAlias = SmartArray[AnyShape, np.dtype[Any]]

x = sa.ones(4)
f4 = sa.ones(4, dtype=np.float32)
i4 = sa.full(4, 3, dtype=np.int32)
c16 = sa.ones(4, dtype=np.complex128)
flags = sa.full(4, True)
host: npt.NDArray[np.float64] = np.ones(4)

# Same scalar type on both sides, SmartArray or ndarray or numpy scalar.
assert_type(x + x, F8)
assert_type(x - x, F8)
assert_type(x * x, F8)
assert_type(x / x, F8)
assert_type(x // x, F8)
assert_type(x % x, F8)
assert_type(x**x, F8)
assert_type(x + host, F8)
assert_type(x * np.float64(2), F8)
assert_type(f4 * f4, F4)
assert_type(f4 * np.float32(2), F4)
assert_type(i4 + i4, I4)
assert_type(i4 & i4, I4)
assert_type(i4 << i4, I4)
assert_type(flags & flags, B)
assert_type(flags | True, B)
assert_type(c16 * c16, SmartArray[AnyShape, np.dtype[np.complex128]])

# Python scalars (weak, NEP 50): the array's dtype.
assert_type(x * 2.0, F8)
assert_type(2.0 * x, F8)
assert_type(x + 1, F8)
assert_type(1 - x, F8)
assert_type(f4 * 2, F4)
assert_type(f4 / 2, F4)
assert_type(i4 + 1, I4)
assert_type(i4 // 2, I4)
assert_type(i4 % 2, I4)
assert_type(i4**2, I4)
assert_type(i4 >> 1, I4)
assert_type(i4 ^ 1, I4)
assert_type(c16 * 1j, SmartArray[AnyShape, np.dtype[np.complex128]])

# Integer (and bool) true division is float64.
assert_type(i4 / i4, F8)
assert_type(i4 / 2, F8)
assert_type(flags / flags, F8)

# Mixed types: an array of unknown dtype, as numpy's stubs say for most of them.
assert_type(x + i4, Unknown)
assert_type(f4 * 2.0, Unknown)
values = [1.0, 2.0, 3.0, 4.0]
assert_type(x + values, Unknown)

# divmod and matmul.
assert_type(divmod(i4, 3), tuple[I4, I4])
assert_type(divmod(x, x), tuple[F8, F8])
matrix = sa.ones((2, 2)).reshape(2, 2)
assert_type(matrix, SmartArray[tuple[int, int], np.dtype[np.float64]])
assert_type(matrix @ matrix, F8)

# Comparisons: boolean arrays.
assert_type(x < 1, B)
assert_type(x <= x, B)
assert_type(x > i4, B)
assert_type(x >= host, B)
assert_type(x == x, B)
assert_type(x != 0, B)

# Unary operators keep the type (complex magnitudes are real, of the same precision).
assert_type(-x, F8)
assert_type(+i4, I4)
assert_type(abs(x), F8)
assert_type(abs(c16), SmartArray[AnyShape, np.dtype[np.float64]])
assert_type(abs(sa.ones(2, dtype=np.complex64)), F4)
assert_type(~i4, I4)
assert_type(~flags, B)

# In-place operators: the array itself.
y = sa.ones(4)
y += 1
y *= x
y /= 2.0
assert_type(y, F8)
assert_type(y.__iadd__(x), F8)
