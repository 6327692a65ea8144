"""Numba's own device allocations from smartarray's device memory pool (opt-in).

On a GPU, smartarray allocates SmartArrays' device buffers from the driver's stream-ordered
memory pool (:mod:`smartarray._core.device_pool`; the plugin needs it, so not with
``SMARTARRAY_DEVICE_POOL=0``). Numba's own device arrays
(``cuda.device_array``, ``cuda.to_device``, the results of CUDA ufuncs called on plain
arrays) still come from ``cuMemAlloc``, which is synchronous and keeps no cache. This module
is a Numba External Memory Management (EMM) plugin over the same pool. Select it before
Numba creates its CUDA context::

    NUMBA_CUDA_MEMORY_MANAGER=smartarray.numba_pool python script.py

or, in code, ``numba.cuda.set_memory_manager(smartarray.numba_pool.PooledMemoryManager)``
before the first CUDA call. Device memory Numba frees then goes back to the pool, on the
default stream, ordered after the work enqueued before it (a buffer still used by work on a
non-blocking stream must be kept alive until that work is done, as with any stream-ordered
allocator); the pool keeps it for the next allocations, of Numba or of smartarray.

RMM's plugin (``NUMBA_CUDA_MEMORY_MANAGER=rmm.allocators.numba``) remains an alternative:
with it, Numba allocates from RMM, and so does smartarray (through Numba: it makes no pool of
its own then).
"""

from __future__ import annotations

from typing import Any

from ._core import backend as _backend
from ._core import device_pool as _device_pool

__all__ = ["PooledMemoryManager"]

_NO_POOL = (
    "smartarray.numba_pool: there is no device memory pool to allocate from "
    f"({_device_pool.ENVIRONMENT_VARIABLE}=0 turns it off, and cuda.core needs a driver with "
    "stream-ordered allocation); unset NUMBA_CUDA_MEMORY_MANAGER to let Numba allocate itself"
)

try:  # (the simulator's numba.cuda has no memory managers: Numba never asks it for one)
    from numba.cuda.cudadrv.driver import HostOnlyCUDAMemoryManager, MemoryInfo
except ImportError:  # pragma: no cover - in the CUDA simulator tier
    HostOnlyCUDAMemoryManager = None  # type: ignore[assignment,misc]


if HostOnlyCUDAMemoryManager is not None:

    class PooledMemoryManager(HostOnlyCUDAMemoryManager):  # type: ignore[misc]
        """Numba's EMM plugin (interface version 1) over smartarray's device memory pool.

        Device allocations come from the pool, host (pinned and mapped) allocations from
        Numba's :class:`HostOnlyCUDAMemoryManager`, as the EMM interface intends.
        """

        def initialize(self) -> None:
            """Nothing to prepare: the pool is made on the first allocation."""

        def memalloc(self, size: int) -> Any:
            """A pointer to ``size`` bytes from the pool, allocated on the default stream and
            given back to the pool, on it, when the last array over it is gone.

            Raises
            ------
            RuntimeError
                When smartarray has no pool (``SMARTARRAY_DEVICE_POOL=0``, or no
                stream-ordered allocator on this driver).
            """
            pool = _backend.device_pool()  # (the current device's)
            if pool is None:
                raise RuntimeError(_NO_POOL)
            try:
                block = pool.allocate(size, 0)
            except _device_pool.Unsupported as exc:  # (turned off: Numba cannot go on)
                _device_pool.give_up(pool, exc.args[0])
                raise RuntimeError(_NO_POOL) from exc.args[0]
            return _backend.pooled_pointer(block)

        def get_memory_info(self) -> MemoryInfo:
            """``(free, total)`` bytes of the device, as the driver reports them (memory the
            pool keeps for reuse counts as used)."""
            from numba.cuda.cudadrv.driver import driver

            free, total = driver.cuMemGetInfo()
            return MemoryInfo(free=free, total=total)

        def get_ipc_handle(self, memory: Any) -> Any:
            """Not available: memory from the default pool cannot be shared between
            processes through the legacy IPC calls.

            Raises
            ------
            NotImplementedError
                Always.
            """
            raise NotImplementedError(
                "smartarray.numba_pool allocates from a stream-ordered pool, whose memory "
                "cannot be exported with cuIpcGetMemHandle; unset NUMBA_CUDA_MEMORY_MANAGER "
                "for IPC"
            )

        @property
        def interface_version(self) -> int:
            """The EMM plugin interface this plugin implements: 1."""
            return 1

    #: What Numba reads from the module named by ``NUMBA_CUDA_MEMORY_MANAGER``.
    _numba_memory_manager = PooledMemoryManager
