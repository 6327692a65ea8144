"""A stream-ordered device memory pool for SmartArrays' device buffers.

numba-cuda allocates device arrays with ``cuMemAlloc``, which is synchronous, and frees them
with ``cuMemFree``; it keeps no cache. On a GPU, smartarray allocates its device copies (and
the results of CUDA ufunc calls, and scratch copies) from the driver's stream-ordered pool
instead, through ``cuda.core`` (a dependency of numba-cuda): ``DeviceMemoryResource`` for the
current device, whose ``allocate(size, stream=...)`` is ``cuMemAllocFromPoolAsync`` and whose
buffers' ``close(stream)`` is ``cuMemFreeAsync``. A buffer freed goes back to the pool on the
stream it was allocated on (the stream of the operation that first needed the device copy),
ordered after the work enqueued there, and the next allocation of that size is served from the
pool without a driver allocation. :mod:`smartarray._core.backend` wraps each buffer so that
Numba sees an ordinary device array; :mod:`smartarray.numba_pool` offers the same pool to
Numba's own allocations (an EMM plugin, opt-in).

This module holds the pool's bookkeeping and imports nothing of smartarray's: the memory
resource, and how a stream is handed to it, are given to it (:func:`use_memory_resource`,
:func:`active`). A *memory resource* is any object with

- ``allocate(size, *, stream)`` returning a buffer whose ``int(buffer.handle)`` is its device
  address and whose ``close(stream)`` gives it back, ordered on ``stream``;
- ``trim()``: give the memory the pool keeps but nothing uses back to the device (called
  when an allocation runs out of device memory, before any device copy is evicted);
- optionally ``reserved_bytes()``: the bytes the pool holds from the device.

``cuda.core`` is imported only when the default resource is made (on a GPU), so importing
smartarray without CUDA never imports it. The pool is opt-in until it has been measured on a
GPU: the environment variable ``SMARTARRAY_DEVICE_POOL=1`` (read when the pool is first needed)
turns it on; without it numba-cuda's ``cuda.device_array`` is used, as it is when Numba was
given another memory manager (RMM's, through ``NUMBA_CUDA_MEMORY_MANAGER``): SmartArrays then
allocate from that one.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

ENVIRONMENT_VARIABLE = "SMARTARRAY_DEVICE_POOL"


class Block:
    """One buffer allocated from a :class:`DevicePool`.

    Attributes
    ----------
    address : int
        The device address of the buffer.
    nbytes : int
        Its size in bytes.
    buffer
        The memory resource's buffer object.
    stream
        The stream the buffer was allocated on, and is freed on.
    """

    __slots__ = ("_pool", "address", "buffer", "freed", "nbytes", "stream")

    def __init__(self, pool: DevicePool, buffer: Any, nbytes: int, stream: Any) -> None:
        self._pool = pool
        self.buffer = buffer
        self.address = int(buffer.handle)
        self.nbytes = nbytes
        self.stream = stream
        self.freed = False

    def free(self) -> None:
        """Give the buffer back to the pool, on its stream (once; later calls do nothing)."""
        self._pool.free(self)


class DevicePool:
    """Device buffers from a stream-ordered memory resource, with counts of its use.

    Parameters
    ----------
    resource
        The memory resource (see the module docstring).
    to_stream
        Turns the stream smartarray was given (``0``, a Numba stream) into what the resource
        takes; the identity by default.
    """

    def __init__(self, resource: Any, to_stream: Callable[[Any], Any] | None = None) -> None:
        self.resource = resource
        self._to_stream: Callable[[Any], Any] = to_stream or (lambda stream: stream)
        self._lock = threading.Lock()
        self.allocations = 0  # buffers allocated
        self.frees = 0  # buffers given back
        self.live_bytes = 0  # bytes of the buffers allocated and not given back
        self.peak_live_bytes = 0
        self.trims = 0

    def allocate(self, nbytes: int, stream: Any = 0) -> Block:
        """A buffer of ``nbytes`` bytes, allocated on ``stream`` (usable by work ordered after
        the allocation on that stream; None is the default stream, 0). The resource's
        out-of-memory error propagates."""
        if stream is None:
            stream = 0
        buffer = self.resource.allocate(nbytes, stream=self._to_stream(stream))
        block = Block(self, buffer, nbytes, stream)
        with self._lock:
            self.allocations += 1
            self.live_bytes += nbytes
            self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        return block

    def free(self, block: Block) -> None:
        """Give ``block`` back to the pool on the stream it was allocated on (asynchronously:
        the memory is reused only by work ordered after what was enqueued there). Safe to
        call from a finalizer, in any thread; a block is freed once."""
        with self._lock:
            if block.freed:
                return
            block.freed = True
            self.frees += 1
            self.live_bytes -= block.nbytes
        if sys.is_finalizing():  # (interpreter exit: the CUDA context may be gone already;
            return  # the buffer object frees itself, as far as there is anything left to free)
        block.buffer.close(self._to_stream(block.stream))

    def trim(self) -> int:
        """Give the memory the pool holds and nothing uses back to the device; return the
        bytes released, as far as the resource tells (else 0)."""
        before = self.reserved_bytes()
        self.resource.trim()
        with self._lock:
            self.trims += 1
        after = self.reserved_bytes()
        return max(0, before - after) if before is not None and after is not None else 0

    def reserved_bytes(self) -> int | None:
        """Bytes the pool holds from the device, if the resource tells."""
        reserved = getattr(self.resource, "reserved_bytes", None)
        return None if reserved is None else int(reserved())

    def info(self) -> dict[str, Any]:
        """Counts of the pool's use (see :func:`smartarray.device_pool_info`)."""
        with self._lock:
            info: dict[str, Any] = {
                "enabled": True,
                "resource": type(self.resource).__name__,
                "allocations": self.allocations,
                "frees": self.frees,
                "live_buffers": self.allocations - self.frees,
                "live_bytes": self.live_bytes,
                "peak_live_bytes": self.peak_live_bytes,
                "trims": self.trims,
            }
        info["reserved_bytes"] = self.reserved_bytes()
        return info


class CudaCoreResource:
    """``cuda.core``'s ``DeviceMemoryResource`` of the current device, with ``trim``.

    It uses the device's current (by default, the driver's default) stream-ordered pool,
    which ``cuda.core`` configures to keep freed memory (release threshold at its maximum):
    memory freed is reused without going back to the driver, until :meth:`trim`.
    """

    def __init__(self) -> None:
        from cuda.core import Device, DeviceMemoryResource
        from numba import cuda

        device = Device(cuda.get_current_device().id)  # (the device of Numba's context)
        self.device = device
        self.resource = DeviceMemoryResource(device.device_id)

    def allocate(self, size: int, *, stream: Any) -> Any:
        """``cuMemAllocFromPoolAsync`` of ``size`` bytes on ``stream`` (a ``cuda.core``
        stream); raises ``cuda.core``'s error (``CUDA_ERROR_OUT_OF_MEMORY``) when full."""
        return self.resource.allocate(size, stream=stream)

    def trim(self) -> None:
        """Wait for the device (frees still pending on some stream complete), then give every
        byte the pool holds and nothing uses back to the driver (``cuMemPoolTrimTo(0)``)."""
        from cuda.bindings import driver

        self.device.sync()
        (error,) = driver.cuMemPoolTrimTo(self.resource.handle, 0)
        if error != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemPoolTrimTo failed: {error}")

    def reserved_bytes(self) -> int:
        """The pool's ``reserved_mem_current`` attribute."""
        return int(self.resource.attributes.reserved_mem_current)


def _core_stream(stream: Any) -> Any:
    """A ``cuda.core`` stream for ``stream`` (``0``/None: the default stream; a Numba stream,
    a ``cuda.core`` stream; what numba-cuda itself does for a launch's stream)."""
    from numba.cuda.cudadrv.driver import _to_core_stream  # type: ignore[attr-defined]

    return _to_core_stream(stream or 0)


_LOCK = threading.Lock()
_POOL: DevicePool | None = None
_CHOSEN = False  # True once _POOL was set (by use_memory_resource, or made by active)


def enabled_by_environment() -> bool:
    """True when ``SMARTARRAY_DEVICE_POOL`` is ``1``, ``true``, ``on`` or ``yes``.

    The pool is opt-in until it has been measured on a GPU: a buffer goes back to the pool on
    the stream it was allocated on, so an array dropped while a kernel on another
    (non-blocking) stream still reads it could have its memory reused under that kernel,
    where ``cuMemFree`` waits for the device.
    """
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
    return value in ("1", "true", "on", "yes")


def active(on_gpu: bool, allowed: Callable[[], bool] | None = None) -> DevicePool | None:
    """The pool smartarray allocates device buffers from, or None (numba-cuda allocates).

    A resource given to :func:`use_memory_resource` is used in any tier (that is how the
    simulator tier tests the pool, with a stand-in resource). Otherwise, on a GPU
    (``on_gpu``), unless the environment turns it off or ``allowed()`` (asked once) is false,
    the default pool (:class:`CudaCoreResource`) is made on first use; if ``cuda.core``
    cannot make it (no stream-ordered allocator on this driver), numba-cuda allocates, as
    without the pool.
    """
    global _POOL, _CHOSEN
    if _CHOSEN:
        return _POOL
    if not on_gpu:
        return None
    wanted = enabled_by_environment() and (allowed is None or allowed())  # (not under _LOCK)
    with _LOCK:
        if not _CHOSEN:
            pool = None
            if wanted:
                try:
                    pool = DevicePool(CudaCoreResource(), _core_stream)
                except Exception:  # (an old driver or device: numba-cuda allocates)
                    pool = None
            _POOL, _CHOSEN = pool, True
    return _POOL


def use_memory_resource(
    resource: Any, to_stream: Callable[[Any], Any] | None = None
) -> DevicePool | None:
    """Allocate smartarray's device buffers from ``resource`` from now on (None: no pool,
    numba-cuda allocates), and return the previous pool (None if there was none).

    Buffers allocated before keep going back to the pool they came from. ``to_stream``
    turns smartarray's streams into what the resource takes (identity by default). Meant
    for tests (a stand-in resource) and for a pool configured differently (an owned
    ``DeviceMemoryResource``, with ``to_stream`` converting to ``cuda.core`` streams).
    """
    global _POOL, _CHOSEN
    with _LOCK:
        previous = _POOL
        _POOL = None if resource is None else DevicePool(resource, to_stream)
        _CHOSEN = True
    return previous


@contextlib.contextmanager
def memory_resource(
    resource: Any, to_stream: Callable[[Any], Any] | None = None
) -> Iterator[DevicePool | None]:
    """Within the block, allocate from ``resource`` (see :func:`use_memory_resource`); then
    go back to the pool (or the choice still to make) found before. Yields the new pool."""
    global _POOL, _CHOSEN
    with _LOCK:
        saved = _POOL, _CHOSEN
    use_memory_resource(resource, to_stream)
    try:
        yield _POOL
    finally:
        with _LOCK:
            _POOL, _CHOSEN = saved
