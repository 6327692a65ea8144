# --8<-- [start:hints]
from typing import Any, TypeAlias

import numpy as np

import smartarray as sa
from smartarray import SmartArray

# The type arguments of np.ndarray: the shape (a tuple of ints) and the dtype.
Floats: TypeAlias = SmartArray[tuple[int, ...], np.dtype[np.float64]]  # any number of axes
Matrix: TypeAlias = SmartArray[tuple[int, int], np.dtype[np.float32]]


def scaled(a: Floats, by: float) -> Floats:
    return a * by  # a float64 array times a float: float64


def as_matrix(values: SmartArray[Any, np.dtype[np.float32]], columns: int) -> Matrix:
    return values.reshape(-1, columns)  # two sizes: a 2-d shape


x = sa.zeros(6)  # float64, numpy's default
counts = sa.zeros(6, dtype=np.int32)  # the dtype named
y = scaled(x + 1, 2.0)
m = as_matrix(sa.ones(6, dtype=np.float32), 3)
halves = counts / 2  # integer division: float64, as numpy's
mask = y > 1.0  # comparisons: boolean arrays
host: np.ndarray[Any, np.dtype[np.float64]] = y.get("host")  # an ndarray of that dtype
view: np.ndarray[Any, np.dtype[np.float32]] = np.asarray(m)  # np.asarray keeps it too
with sa.track_transfers() as stats:  # TransferStats; its records: TransferRecord
    device = y.get("gpu")  # numba's DeviceNDArray
print(y.dtype, m.shape, halves.dtype, mask.dtype, host.dtype, view.dtype, stats.h2d_count)
# --8<-- [end:hints]
assert halves.dtype == np.float64 and mask.dtype == np.bool_
assert m.shape == (2, 3) and stats.h2d_count == 1
