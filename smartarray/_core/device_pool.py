"""A stream-ordered device memory pool for SmartArrays' device buffers.

numba-cuda allocates device arrays with ``cuMemAlloc``, which is synchronous, and frees them
with ``cuMemFree``; it keeps no cache. On a GPU, smartarray allocates its device copies (and
the results of CUDA ufunc calls, and scratch copies) from the driver's stream-ordered pool
instead, through ``cuda.core`` (a dependency of numba-cuda): ``DeviceMemoryResource`` for the
current device, whose ``allocate(size, stream=...)`` is ``cuMemAllocFromPoolAsync`` and whose
buffers' ``close(stream)`` is ``cuMemFreeAsync``. A buffer freed goes back to the pool on the
stream it was allocated on (the stream of the operation that first needed the device copy; the
default stream when that one may not outlive it), ordered after the work enqueued there, and
the next allocation of that size is served from the pool without a driver allocation. Work on
other streams that used the buffer is waited for first (:attr:`Block.last_event`,
:attr:`Block.after_default_stream`: the owner records its device work in the block as it goes;
a buffer whose address was handed out waits for the whole device, as ``cuMemFree`` does).
:mod:`smartarray._core.backend` wraps each buffer so that Numba sees an ordinary device array;
:mod:`smartarray.numba_pool` offers the same pool to Numba's own allocations (an EMM plugin,
opt-in).

This module holds the pool's bookkeeping and imports nothing of smartarray's: the memory
resource, how a stream is handed to it, and how a free waits for other streams, are given to
it (:func:`use_memory_resource`, :func:`active`, :func:`set_free_ordering`). A *memory
resource* is any object with

- ``allocate(size, *, stream)`` returning a buffer whose ``int(buffer.handle)`` is its device
  address and whose ``close(stream)`` gives it back, ordered on ``stream`` (or, if the
  resource has one, ``close(buffer, stream)`` of the resource does);
- ``trim()``: give the memory the pool keeps but nothing uses back to the device (called
  when an allocation runs out of device memory, before any device copy is evicted);
- optionally ``reserved_bytes()``: the bytes the pool holds from the device.

``cuda.core`` is imported only when the default resource is made (on a GPU), so importing
smartarray without CUDA never imports it. The pool is on by default on a GPU; the environment
variable ``SMARTARRAY_DEVICE_POOL=0`` (read when the pool is first needed) turns it off, and
numba-cuda's ``cuda.device_array`` is used instead, as it is when Numba was given another
memory manager (RMM's, through ``NUMBA_CUDA_MEMORY_MANAGER``): SmartArrays then allocate from
that one. If ``cuda.core`` cannot make the pool (a driver without stream-ordered allocation),
or the pool fails with an error that says it is not supported, numba-cuda allocates too
(:func:`give_up`, with a warning). Each device has its own pool.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
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
        The stream the buffer was allocated on.
    free_stream
        The stream it is freed on: ``stream`` when that lasts as long as the buffer (the
        default stream, a Numba stream the block holds), else the default stream (a stream
        that may be destroyed while the buffer lives: another library's, or the
        non-owning ``cuda.core`` wrapper of a kernel launch); see :meth:`DevicePool.allocate`.
    last_event
        The event recorded after the last device work that used the buffer on a stream other
        than the default one (an event that covers all earlier work on it), or None; the
        free waits for it. Kept up to date by the array that owns the buffer, as it records
        its device work, so that it is right however that array dies.
    after_default_stream : bool
        True while the last device work on the buffer ran on the default stream: a free on a
        non-blocking stream waits for the default stream first.
    synchronize : bool
        True once the buffer's address was handed out (work on it may have been enqueued
        where smartarray cannot see): the free waits for the device, as ``cuMemFree`` does.
    """

    __slots__ = (
        "_pool",
        "address",
        "after_default_stream",
        "buffer",
        "free_stream",
        "freed",
        "last_event",
        "nbytes",
        "stream",
        "synchronize",
    )

    def __init__(
        self, pool: DevicePool, buffer: Any, nbytes: int, stream: Any, lasting: bool = True
    ) -> None:
        self._pool = pool
        self.buffer = buffer
        self.address = int(buffer.handle)
        self.nbytes = nbytes
        self.stream = stream
        # Freed on its allocation stream when that stream lasts as long as the block (see
        # DevicePool.allocate); else on the default stream, after the work recorded in
        # last_event / after_default_stream (all device work on the buffer is recorded
        # there, on its allocation stream too).
        self.free_stream: Any = stream if lasting else 0
        self.freed = False
        self.last_event: Any = None
        self.after_default_stream = False
        self.synchronize = False

    @property
    def fenced(self) -> bool:
        """True when the free must first wait for something (on the default stream, for
        nothing the default stream ran)."""
        if self.synchronize or self.last_event is not None:
            return True
        free_stream = self.free_stream
        return self.after_default_stream and not (type(free_stream) is int and free_stream == 0)

    def free(self) -> None:
        """Give the buffer back to the pool, on its stream (once; later calls do nothing)."""
        self._pool.free(self)


# Buffers whose free failed before they were given back (see DevicePool.free): kept alive.
_KEPT: list[Any] = []


class Unsupported(Exception):
    """The default pool's resource failed in a way that says the pool cannot work here (see
    :func:`give_up`); ``args[0]`` is the resource's error."""


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

    def __init__(
        self,
        resource: Any,
        to_stream: Callable[[Any], Any] | None = None,
        fallback: bool = False,
    ) -> None:
        self.resource = resource
        self._to_stream: Callable[[Any], Any] = to_stream or (lambda stream: stream)
        # True for the pool made by default (see give_up): an error of the resource other
        # than running out of memory turns it off, and numba-cuda allocates instead.
        self.fallback = fallback
        self._lock = threading.Lock()
        self.allocations = 0  # buffers allocated
        self.frees = 0  # buffers given back
        self.live_bytes = 0  # bytes of the buffers allocated and not given back
        self.peak_live_bytes = 0
        self.trims = 0

    def allocate(self, nbytes: int, stream: Any = 0, lasting: bool | None = None) -> Block:
        """A buffer of ``nbytes`` bytes, allocated on ``stream`` (usable by work ordered after
        the allocation on that stream; None is the default stream, 0). The resource's
        out-of-memory error propagates.

        ``lasting``: whether ``stream`` lives as long as the buffer (the default stream, or
        a stream the block keeps alive by holding it): then the buffer is freed on it, else
        on the default stream. None: true for ``0`` and for objects that say they own their
        stream (a Numba stream: ``external`` False); another library's stream, or the
        non-owning ``cuda.core`` wrapper numba-cuda hands kernel arguments, may be
        destroyed while the buffer lives.
        """
        if stream is None:
            stream = 0
        if lasting is None:
            lasting = (type(stream) is int and stream == 0) or getattr(
                stream, "external", True
            ) is False
        converted = self._to_stream(stream)  # (a stream it cannot take: the caller's error)
        try:
            buffer = self.resource.allocate(nbytes, stream=converted)
        except Exception as error:
            if self.fallback and _says_unsupported(error):
                raise Unsupported(error) from error
            raise
        block = Block(self, buffer, nbytes, stream, lasting)
        with self._lock:
            self.allocations += 1
            self.live_bytes += nbytes
            self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        return block

    def free(self, block: Block) -> None:
        """Give ``block`` back to the pool on the stream it was allocated on (asynchronously:
        the memory is reused only by work ordered after what was enqueued there, and after
        the work on other streams recorded in the block). Safe to call from a finalizer, in
        any thread; a block is freed once. It counts as freed once the resource took it
        back (if that fails, the buffer is lost to the pool, and counted as live still)."""
        with self._lock:
            if block.freed:
                return
            block.freed = True
        if sys.is_finalizing():  # (interpreter exit: the CUDA context may be gone already;
            return  # the buffer object frees itself, as far as there is anything left to free)
        scope = getattr(self.resource, "device_scope", None)  # (its device's context current)
        try:
            with scope() if scope is not None else contextlib.nullcontext():
                if block.fenced and _ORDER_FREE is not None:
                    _ORDER_FREE(block)  # (the buffer's stream waits for the work that used it)
                close = getattr(self.resource, "close", None)
                if close is not None:
                    close(block.buffer, self._to_stream(block.free_stream))
                else:
                    block.buffer.close(self._to_stream(block.free_stream))
        except BaseException:
            # Work may still use the memory: the buffer is never given back (a buffer object
            # that died would free itself, waiting for nothing). Counted as live.
            _KEPT.append(block.buffer)
            raise
        with self._lock:
            self.frees += 1
            self.live_bytes -= block.nbytes

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
    """A ``cuda.core`` ``DeviceMemoryResource`` with a pool of its own, with ``trim``.

    The pool is smartarray's own (``DeviceMemoryResourceOptions``): the device's default
    pool, which other libraries may share (CuPy's and PyTorch's stream-ordered allocators),
    is left as it is. Memory freed is reused without going back to the driver; across a
    synchronisation the pool keeps at most :attr:`release_threshold` bytes of it (an eighth
    of the device's memory), and :meth:`trim` gives all of it back.
    """

    def __init__(self) -> None:
        from cuda.bindings import driver
        from cuda.core import DeviceMemoryResource, DeviceMemoryResourceOptions
        from numba import cuda
        from numba.cuda.cudadrv import devices

        self._context = devices.get_context  # (makes Numba's context current in a thread)
        self._gpus = cuda.gpus
        self._synchronize = cuda.synchronize
        context = devices.get_context()
        # The device of Numba's current context, a new pool owned by this resource.
        self.device_id = int(context.device.id)
        self.resource = DeviceMemoryResource(self.device_id, DeviceMemoryResourceOptions())
        self.release_threshold = int(context.get_memory_info().total) // 8
        (error,) = driver.cuMemPoolSetAttribute(
            self.resource.handle,
            driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            driver.cuuint64_t(self.release_threshold),
        )
        if error != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuMemPoolSetAttribute(RELEASE_THRESHOLD) failed: {error}")

    def allocate(self, size: int, *, stream: Any) -> Any:
        """``cuMemAllocFromPoolAsync`` of ``size`` bytes on ``stream`` (a ``cuda.core``
        stream); raises ``cuda.core``'s error (``CUDA_ERROR_OUT_OF_MEMORY``) when full."""
        self._context()  # (a thread that has not used CUDA yet has no current context)
        return self.resource.allocate(size, stream=stream)

    def close(self, buffer: Any, stream: Any) -> None:
        """Give ``buffer`` back to the pool: ``cuMemFreeAsync`` on ``stream`` (a ``cuda.core``
        stream; called within :meth:`device_scope`)."""
        buffer.close(stream)

    @contextlib.contextmanager
    def device_scope(self) -> Iterator[None]:
        """Within the block, the context of this pool's device is current (a buffer is
        given back from a finalizer, in any thread, maybe while another device's context
        is current: its primary context is then pushed for the block)."""
        if int(self._context().device.id) == self.device_id:
            yield
            return
        # (pushed directly: numba.cuda.gpus[id] refuses while a Numba call of another
        # device is on the stack, which a finalizer may run inside)
        context = self._gpus[self.device_id].get_primary_context()
        context.push()
        try:
            yield
        finally:
            context.pop()

    def trim(self) -> None:
        """Wait for the device (frees still pending on some stream complete), then give every
        byte the pool holds and nothing uses back to the driver (``cuMemPoolTrimTo(0)``)."""
        from cuda.bindings import driver

        with self.device_scope():  # (Numba's context: cuda.core's Device.sync needs more)
            self._synchronize()
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


# Orders a fenced block's free after the work that used it (its stream waits for the block's
# events, or the default stream, or the host for the device): set by smartarray._core.backend,
# which knows the streams and events (see Block.last_event).
_ORDER_FREE: Callable[[Block], None] | None = None


def set_free_ordering(order: Callable[[Block], None] | None) -> None:
    """Let ``order(block)`` make a fenced block's stream wait before its buffer is freed."""
    global _ORDER_FREE
    _ORDER_FREE = order


_LOCK = threading.Lock()
# The pool given by use_memory_resource, as [pool] ([None]: none, numba-cuda allocates), or
# None when none was given: then each device has its default pool (made on first use).
_GIVEN: list[DevicePool | None] | None = None
_DEFAULTS: dict[int, DevicePool | None] = {}  # device id -> its default pool, or None
_WANTED: bool | None = None  # the environment and ``allowed()``, asked once
_UNSET = object()


def enabled_by_environment() -> bool:
    """False when ``SMARTARRAY_DEVICE_POOL`` is ``0``, ``false``, ``off`` or ``no``; True
    otherwise (unset included: the pool is on by default on a GPU)."""
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip().lower()
    return value not in ("0", "false", "off", "no")


def active(
    on_gpu: bool,
    allowed: Callable[[], bool] | None = None,
    device_id: Callable[[], int] | None = None,
) -> DevicePool | None:
    """The pool smartarray allocates device buffers from, or None (numba-cuda allocates).

    A resource given to :func:`use_memory_resource` is used in any tier (that is how the
    simulator tier tests the pool, with a stand-in resource). Otherwise, on a GPU
    (``on_gpu``), unless the environment turns it off or ``allowed()`` (asked once) is false,
    each device has a default pool (:class:`CudaCoreResource`), made on first use on that
    device (``device_id()``, the current device; 0 without it); if ``cuda.core`` cannot make
    it (no stream-ordered allocator on this driver), numba-cuda allocates there, with a
    warning.
    """
    global _WANTED
    given = _GIVEN
    if given is not None:
        return given[0]
    if not on_gpu:
        return None
    key = 0 if device_id is None else device_id()
    pool = _DEFAULTS.get(key, _UNSET)
    if pool is not _UNSET:
        return pool  # type: ignore[return-value]
    wanted = _WANTED
    if wanted is None:  # (not under _LOCK: ``allowed`` asks Numba)
        wanted = enabled_by_environment() and (allowed is None or allowed())
    with _LOCK:
        _WANTED = wanted
        if key not in _DEFAULTS:
            made = None
            if wanted:
                try:
                    made = DevicePool(CudaCoreResource(), _core_stream, fallback=True)
                except Exception as error:  # (an old driver or device: numba-cuda allocates)
                    warnings.warn(
                        f"smartarray: no device memory pool ({type(error).__name__}: "
                        f"{error}); numba-cuda allocates SmartArrays' device buffers "
                        f"({ENVIRONMENT_VARIABLE}=0 turns the pool off without this warning)",
                        RuntimeWarning,
                        stacklevel=2,
                    )
            _DEFAULTS[key] = made
        return _DEFAULTS[key]


def give_up(pool: DevicePool, error: BaseException) -> bool:
    """The default pool failed with ``error``: if that error says the pool cannot work here
    (an API or support error, not a running-out or an error of earlier work), turn it off,
    with a warning, so that numba-cuda allocates from now on; True if it was turned off.

    Only the pool made by default (``pool.fallback``) gives up; a resource given to
    :func:`use_memory_resource` keeps raising its errors. Buffers already allocated keep
    going back to the pool they came from, which :func:`given_up` keeps for trimming.
    """
    if not pool.fallback or not _says_unsupported(error):
        return False
    with _LOCK:
        if _GIVEN is not None and _GIVEN[0] is pool:
            _GIVEN[0] = None
        for key, default in list(_DEFAULTS.items()):
            if default is pool:
                _DEFAULTS[key] = None
        if all(p is not pool for p, _ in _GIVEN_UP):
            _GIVEN_UP.append((pool, f"{type(error).__name__}: {error}"))
    warnings.warn(
        f"smartarray: the device memory pool failed ({type(error).__name__}: {error}); "
        "SmartArrays' device buffers are allocated by numba-cuda from now on "
        f"({ENVIRONMENT_VARIABLE}=0 turns the pool off from the start)",
        RuntimeWarning,
        stacklevel=3,
    )
    return True


def _says_unsupported(error: BaseException) -> bool:
    """True for errors that mean the pool cannot be used here: a mismatch with ``cuda.core``'s
    API, or the driver's "not supported" / "not permitted"."""
    if isinstance(error, (TypeError, AttributeError, NotImplementedError, ImportError)):
        return True
    text = str(error)
    return "NOT_SUPPORTED" in text or "NOT_PERMITTED" in text


# Pools turned off by give_up, with the error: their freed memory is still trimmed.
_GIVEN_UP: list[tuple[DevicePool, str]] = []


def all_pools() -> list[DevicePool]:
    """Every pool in use: the one given (:func:`use_memory_resource`), else each device's
    default pool made so far; then those given up (whose freed memory is kept still)."""
    with _LOCK:
        if _GIVEN is not None:
            pools = [] if _GIVEN[0] is None else [_GIVEN[0]]
        else:
            pools = [pool for pool in _DEFAULTS.values() if pool is not None]
        return pools + [pool for pool, _ in _GIVEN_UP if pool not in pools]


def given_up() -> list[tuple[DevicePool, str]]:
    """The pools :func:`give_up` turned off, each with the error that made it."""
    with _LOCK:
        return list(_GIVEN_UP)


def use_memory_resource(
    resource: Any, to_stream: Callable[[Any], Any] | None = None, fallback: bool = False
) -> DevicePool | None:
    """Allocate smartarray's device buffers from ``resource`` from now on (None: no pool,
    numba-cuda allocates), and return the previous pool (None if there was none).

    Buffers allocated before keep going back to the pool they came from. ``to_stream``
    turns smartarray's streams into what the resource takes (identity by default). Meant
    for tests (a stand-in resource) and for a pool configured differently (an owned
    ``DeviceMemoryResource``, with ``to_stream`` converting to ``cuda.core`` streams).
    With ``fallback``, an error of the resource other than running out of memory turns the
    pool off (:func:`give_up`), as for the pool made by default.
    """
    global _GIVEN
    with _LOCK:
        previous = None if _GIVEN is None else _GIVEN[0]
        _GIVEN = [None if resource is None else DevicePool(resource, to_stream, fallback)]
    return previous


@contextlib.contextmanager
def memory_resource(
    resource: Any, to_stream: Callable[[Any], Any] | None = None, fallback: bool = False
) -> Iterator[DevicePool | None]:
    """Within the block, allocate from ``resource`` (see :func:`use_memory_resource`); then
    go back to the pool given before, or to the devices' default pools. Yields the new
    pool."""
    global _GIVEN
    with _LOCK:
        saved = _GIVEN
    use_memory_resource(resource, to_stream, fallback)
    try:
        yield None if _GIVEN is None else _GIVEN[0]
    finally:
        with _LOCK:
            _GIVEN = saved
