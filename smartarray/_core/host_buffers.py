"""Host buffers of each kind: pageable (``numpy.empty``), pinned (from the pool) or mapped.

The one place that allocates the host side of an allocation (:mod:`smartarray._core.coherence`) or
of a new SmartArray. It sits above both :mod:`smartarray._core.backend` (the CUDA runtime) and
:mod:`smartarray._core.pinned_pool` (which reuses page-locked buffers and uses the runtime), so
the runtime never imports the pool.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import backend as _backend
from . import pinned_pool as _pinned_pool
from .errors import HostMemory


def host_empty(shape: tuple[int, ...], dtype: np.dtype, order: str, kind: HostMemory) -> Any:
    """Allocate an uninitialised contiguous host buffer of the given kind."""
    if kind == "pageable":
        return np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    if dtype.hasobject:
        raise TypeError(
            f"arrays of dtype {dtype} hold Python objects, which cannot live in {kind} host "
            "memory (numpy would never release them, and the device cannot use them); use "
            "host_memory='pageable'"
        )
    _backend.require_device()
    if 0 in shape:  # (the driver cannot page-lock 0 bytes)
        return np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    if kind == "pinned":  # reused from the pool (page-locking is slow; ordinary memory in
        # the simulator, where the pool works the same way)
        return _pinned_pool.POOL.empty(shape, dtype, order)
    if _backend.tier() == "simulator":
        return np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    mapped = _backend.cuda().mapped_array(shape, dtype=dtype, order=order)
    # A plain ndarray over the mapped buffer (its base, the MappedNDArray, keeps the buffer
    # alive and holds its device pointer): numba-cuda's MappedNDArray is a device array
    # first, whose ``view``/``flags`` are DeviceNDArray's, not ndarray's.
    return np.ndarray.view(mapped, np.ndarray)
