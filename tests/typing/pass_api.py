"""Types of the coherence API, the old numba.SmartArray API, the intents and the transfer
ledger, and annotations a user writes (mypy --strict)."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_origin

import numpy as np
import numpy.typing as npt

import smartarray as sa
from smartarray import In, InOut, Out, SmartArray, TransferRecord, TransferStats

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type

if TYPE_CHECKING:
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

AnyShape: TypeAlias = tuple[Any, ...]
F8: TypeAlias = SmartArray[AnyShape, np.dtype[np.float64]]

# Annotations with both type arguments (evaluated at run time too: subscriptable like ndarray).
Vector: TypeAlias = SmartArray[tuple[int], np.dtype[np.float32]]
assert get_origin(SmartArray[Any, np.dtype[np.float64]]) is SmartArray


def scale(
    v: SmartArray[Any, np.dtype[np.float64]], by: float
) -> SmartArray[Any, np.dtype[np.float64]]:
    return v * by


def total(v: SmartArray[tuple[int, ...], np.dtype[np.float64]]) -> float:
    return float(np.asarray(v).sum())


def first(v: Vector) -> Vector:
    return v[:1]


x = sa.zeros(4)
annotated: SmartArray[Any, np.dtype[np.float64]] = x
plain: SmartArray = x  # (no arguments: any shape, any dtype, as ndarray)
assert_type(plain, SmartArray[AnyShape, np.dtype[Any]])
assert_type(scale(x, 2.0), SmartArray[Any, np.dtype[np.float64]])
assert_type(total(x), float)
assert_type(first(sa.ones(3, dtype=np.float32).reshape(-1)), Vector)

# get(): the host copy is an ndarray of this shape and dtype; the device copy numba's device
# array (not run here: tier 1 has no device).
assert_type(x.get("host"), np.ndarray[AnyShape, np.dtype[np.float64]])
assert_type(x.get(), np.ndarray[AnyShape, np.dtype[np.float64]])


def on_the_device(x: F8, where: str) -> None:  # (checked, not run)
    assert_type(x.get("gpu"), DeviceNDArray)
    assert_type(x.get("device"), DeviceNDArray)
    assert_type(x.to_gpu(), F8)
    assert_type(x.get(where), np.ndarray[AnyShape, np.dtype[np.float64]] | DeviceNDArray)
    assert_type(x.gpu(), DeviceNDArray)  # (the old API's spelling)


x.mark_changed("host")
assert_type(x.is_valid("host"), bool)
assert_type(x.location, str)
assert_type(x.host_memory, str)
assert_type(x.label, str)

# The old numba.SmartArray API.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    assert_type(x.host(), np.ndarray[AnyShape, np.dtype[np.float64]])
    x.host_changed()

# Intents keep the array's types.
assert_type(In(x), In[AnyShape, np.dtype[np.float64]])
assert_type(Out(x).array, F8)
assert_type(InOut(x), InOut[AnyShape, np.dtype[np.float64]])
assert_type(np.asarray(In(x)), npt.NDArray[np.float64])

# The transfer ledger.
with sa.track_transfers() as stats:
    x.copy()
assert_type(stats, TransferStats)
assert_type(stats.h2d_count, int)
assert_type(stats.nbytes, int)
assert_type(stats.records, list[TransferRecord])
assert_type(sa.transfer_stats(), TransferStats)
for record in stats.records:
    assert_type(record.direction, Literal["h2d", "d2h"])
    assert_type(record.spill, bool)
with sa.no_transfers():
    assert_type(x + 1, F8)
