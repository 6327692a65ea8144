"""Types of SmartArray's attributes, views and copies, and of ``np.asarray`` (mypy --strict)."""

from __future__ import annotations

import sys
from typing import Any, Literal, TypeAlias, cast

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

# (cast, not an annotated assignment: pyright would narrow an annotation to numpy's type)
host = cast("np.ndarray[tuple[int, ...], np.dtype[np.float64]]", np.arange(6, dtype=np.float64))
x = sa.asarray(host)
assert_type(x, SmartArray[tuple[int, ...], np.dtype[np.float64]])
m = x.reshape(2, 3)

# Attributes.
assert_type(x.dtype, np.dtype[np.float64])
assert_type(x.shape, tuple[int, ...])
assert_type(m.shape, tuple[int, int])
assert_type(x.ndim, int)
assert_type(x.size, int)
assert_type(x.itemsize, int)
assert_type(x.nbytes, int)
assert_type(x.strides, tuple[int, ...])
assert_type(x.device, Literal["cpu"])
assert_type(x.data, memoryview)

# Indexing: an element is a scalar (Any, as numpy's), anything else a view or a copy.
assert_type(x[1], Any)
assert_type(m[1, 2], Any)
assert_type(x[1:], F8)
assert_type(x[::2], F8)
assert_type(m[0], Any)
assert_type(m[:, 1], F8)
assert_type(x[...], F8)
assert_type(x[None], F8)
assert_type(x[x > 2], F8)
assert_type(x[[0, 2]], F8)
assert_type(x[np.array([0, 1])], F8)

# Views keep the dtype; numpy's shape types where numpy gives one.
assert_type(x.T, SmartArray[tuple[int, ...], np.dtype[np.float64]])
assert_type(m.T, SmartArray[tuple[int, int], np.dtype[np.float64]])
assert_type(m.mT, SmartArray[tuple[int, int], np.dtype[np.float64]])
assert_type(m.transpose(), F8)
assert_type(m.swapaxes(0, 1), F8)
assert_type(m.diagonal(), F8)
assert_type(m[None].squeeze(), F8)
assert_type(x.reshape(2, 3), SmartArray[tuple[int, int], np.dtype[np.float64]])
assert_type(x.reshape((3, 2)), SmartArray[tuple[int, int], np.dtype[np.float64]])
assert_type(x.reshape(1, 2, 3), SmartArray[tuple[int, int, int], np.dtype[np.float64]])
assert_type(x.reshape(-1), SmartArray[tuple[int], np.dtype[np.float64]])
assert_type(x.reshape([6]), F8)
assert_type(m.ravel(), SmartArray[tuple[int], np.dtype[np.float64]])
assert_type(m.flatten(), SmartArray[tuple[int], np.dtype[np.float64]])
assert_type(x.view(), SmartArray[tuple[int, ...], np.dtype[np.float64]])
assert_type(x.view(np.int64), SmartArray[tuple[int, ...], np.dtype[np.int64]])
assert_type(x.view(np.dtype(np.uint8)), SmartArray[tuple[int, ...], np.dtype[np.uint8]])
assert_type(x.view("i8"), SmartArray[tuple[int, ...], np.dtype[Any]])
assert_type(x.real, SmartArray[tuple[int, ...], np.dtype[Any]])

# Copies.
assert_type(x.copy(), SmartArray[tuple[int, ...], np.dtype[np.float64]])
assert_type(m.copy(), SmartArray[tuple[int, int], np.dtype[np.float64]])
assert_type(x.astype(np.int32), SmartArray[tuple[int, ...], np.dtype[np.int32]])
assert_type(m.astype(np.float32), SmartArray[tuple[int, int], np.dtype[np.float32]])
assert_type(x.astype(np.dtype(np.int16)), SmartArray[tuple[int, ...], np.dtype[np.int16]])
assert_type(x.astype("f4"), SmartArray[tuple[int, ...], np.dtype[Any]])
assert_type(x.to_host(), SmartArray[tuple[int, ...], np.dtype[np.float64]])

# The ndarray members forwarded to the host copy.
assert_type(x.cumsum(), SmartArray[AnyShape, np.dtype[Any]])
assert_type(x.argsort(), SmartArray[AnyShape, np.dtype[np.intp]])
assert_type(x.nonzero(), tuple[SmartArray[tuple[int], np.dtype[np.intp]], ...])
assert_type(x.round(), SmartArray[tuple[int, ...], np.dtype[np.float64]])
assert_type(x.repeat(2), F8)
assert_type(x.conj(), SmartArray[tuple[int, ...], np.dtype[np.float64]])
assert_type(x.tobytes(), bytes)
assert_type(x.sum(), Any)

# np.asarray (numpy's stubs, through SmartArray.__array__) keeps the dtype.
assert_type(np.asarray(x), npt.NDArray[np.float64])
assert_type(np.asarray(m), npt.NDArray[np.float64])
assert_type(x.__array__(), np.ndarray[tuple[int, ...], np.dtype[np.float64]])
assert_type(x.__array__(np.dtype(np.float32)), np.ndarray[tuple[int, ...], np.dtype[np.float32]])
assert_type(np.asarray(x, dtype=np.int8), npt.NDArray[np.int8])
