"""The CUDA backend: the one module that allocates device and page-locked memory.

Everything smartarray does with ``numba.cuda`` memory goes through the small set of
functions below, so the rest of the package never needs to know whether it runs on a real
GPU, in Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) or on a machine without CUDA.

The three *tiers*:

``'gpu'``
    a CUDA driver and device are present; device arrays are ``DeviceNDArray``.
``'simulator'``
    ``NUMBA_ENABLE_CUDASIM=1`` was set before numba was first imported; device arrays are
    the simulator's ``FakeCUDAArray`` (ordinary host memory). Pinned and mapped host memory are
    emulated with ordinary memory but keep their hardware semantics (mapped: no copies).
``'host-only'``
    no CUDA at all; every device request raises :class:`DeviceUnavailableError`.

Note that ``numba.cuda.is_available()`` is True in the simulator, so it is never used alone.
Byte copies between host and device are *not* made here directly by callers: they go through
:mod:`smartarray._core.transfer`, which records them in the ledger and calls :func:`copy_h2d` /
:func:`copy_d2h`.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any

import numpy as np
from numpy_typing_compat import StringDType

from . import device_pool as _device_pool
from .errors import DeviceUnavailableError, HostMemory

DEVICE_FIX = (
    "Either run on a machine with an NVIDIA GPU and driver, or use Numba's CUDA simulator: set "
    "the environment variable NUMBA_ENABLE_CUDASIM=1 before numba is first imported (e.g. "
    "`NUMBA_ENABLE_CUDASIM=1 python script.py`)."
)
SIMULATOR_REQUESTED_TOO_LATE = (
    "NUMBA_ENABLE_CUDASIM is set in os.environ, but too late: numba reads it once, when numba "
    "is first imported, and this process imported numba before it was set (`import "
    "smartarray` imports numba too), so the simulator is off. Set it before the process "
    "starts (`NUMBA_ENABLE_CUDASIM=1 python script.py`), or at the very top of the script, "
    "before any import of numba or smartarray; or run on a machine with an NVIDIA GPU and driver."
)


def simulator_requested_too_late() -> bool:
    """True when ``os.environ`` asks for the simulator but this process runs without it.

    Numba reads ``NUMBA_ENABLE_CUDASIM`` (as an integer) once, when it is first imported; a
    value set afterwards (``os.environ[...] = '1'`` after ``import numba``) has no effect.
    """
    value = os.environ.get("NUMBA_ENABLE_CUDASIM")
    if value is None or is_simulator():
        return False
    try:
        return int(value) != 0
    except ValueError:
        return False


def device_fix() -> str:
    """How to get a device where one is needed and there is none: :data:`DEVICE_FIX`, or
    :data:`SIMULATOR_REQUESTED_TOO_LATE` when that is why the simulator is off."""
    return SIMULATOR_REQUESTED_TOO_LATE if simulator_requested_too_late() else DEVICE_FIX


@functools.cache
def cuda() -> Any:
    """Return the ``numba.cuda`` module (real or simulator), importing it once."""
    from numba import cuda as numba_cuda

    return numba_cuda


@functools.cache
def tier() -> str:
    """Return ``'gpu'``, ``'simulator'`` or ``'host-only'`` for this process."""
    try:
        from numba.cuda.core import config

        numba_cuda = cuda()
    except ImportError:  # pragma: no cover - numba-cuda is a hard dependency
        return "host-only"
    if config.ENABLE_CUDASIM:
        return "simulator"
    try:
        return "gpu" if numba_cuda.is_available() else "host-only"
    except Exception:  # pragma: no cover - a broken driver counts as no device
        return "host-only"


def is_simulator() -> bool:
    """True when running in Numba's CUDA simulator."""
    return tier() == "simulator"


def require_device() -> None:
    """Raise :class:`DeviceUnavailableError` unless a GPU or the simulator is available."""
    if tier() == "host-only":
        raise DeviceUnavailableError("smartarray needs a CUDA device for this. " + device_fix())


_DEVICE_DTYPES: set[np.dtype] = set()  # dtypes already accepted (checked on every launch)


def check_device_dtype(dtype: np.dtype) -> None:
    """Raise ``TypeError`` if the device cannot hold elements of ``dtype``."""
    if dtype in _DEVICE_DTYPES:
        return
    from numba.core.errors import NumbaNotImplementedError
    from numba.np import numpy_support

    problem = None
    if isinstance(dtype, StringDType):
        raise TypeError(
            f"dtype {dtype} cannot live on a CUDA device (variable-width strings are kept in "
            "memory numpy manages on the host); convert it to a fixed-width dtype first, e.g. "
            "with .astype('U16') or .astype('S16'), or keep the array on the host (where='host')"
        )
    if dtype.hasobject:
        problem = "it holds Python objects"
    else:
        try:
            numpy_support.from_dtype(dtype)
        except (NotImplementedError, NumbaNotImplementedError, TypeError, KeyError):
            # (Numba's error for non-native byte order and unstructured void dtypes is no
            # NotImplementedError)
            problem = "Numba has no device type for it"
    if problem is not None:
        raise TypeError(
            f"dtype {dtype} cannot live on a CUDA device ({problem}); convert it first, e.g. "
            f"with .astype(np.float64), or keep the array on the host (where='host')"
        )
    _DEVICE_DTYPES.add(dtype)


def default_host_memory(dtype: np.dtype | None = None) -> HostMemory:
    """The host buffer kind used for arrays smartarray allocates itself.

    Page-locked on a GPU, except for object arrays: they never go to the device, and numpy
    would not release the objects held in memory it does not own.
    """
    if dtype is not None and dtype.hasobject:
        return "pageable"
    return "pinned" if tier() == "gpu" else "pageable"


# --- allocation ---------------------------------------------------------------------------


def mapped_device_view(host: Any) -> Any:
    """A device array that aliases a mapped host buffer (no copy ever needed)."""
    if tier() == "simulator":
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(host)
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    if host.size == 0:  # a plain empty ndarray (see host_empty): nothing to map
        return DeviceNDArray(host.shape, host.strides, host.dtype)
    return DeviceNDArray(host.shape, host.strides, host.dtype, gpu_data=mapped_memory(host))


def mapped_memory(host: np.ndarray) -> Any:
    """The mapped allocation (numba-cuda's ``MappedOwnedPointer``, with its device pointer)
    behind a mapped host buffer, which is a plain ndarray view of it (see ``host_empty``).

    numpy collapses chains of views through arrays of the view's own type, so the buffer's
    ``base`` is not the ``MappedNDArray`` but the plain ndarray numba-cuda made it from, whose
    ``base`` is the allocation.
    """
    base: Any = host.base
    while isinstance(base, np.ndarray):
        gpu_data = getattr(base, "gpu_data", None)
        if gpu_data is not None:  # a MappedNDArray
            return gpu_data
        base = base.base
    if base is None or not hasattr(base, "device_ctypes_pointer"):
        raise ValueError("not a view of mapped host memory")
    return base


class DeviceOutOfMemory(MemoryError):
    """The device (or its memory manager) had no room for an allocation.

    Raised by :func:`device_empty`; :mod:`smartarray._core.memory` catches it, evicts device copies
    and retries before reporting a :class:`MemoryError` to the user.
    """


def device_empty(shape: tuple[int, ...], dtype: np.dtype, order: str, stream: Any = 0) -> Any:
    """Allocate an uninitialised contiguous device array.

    From the device memory pool (:mod:`smartarray._core.device_pool`, on a GPU unless
    ``SMARTARRAY_DEVICE_POOL=0``), allocated on ``stream`` and given back to the pool on it
    when the array and every view of it are gone (after the work that used it: see
    :func:`wait_before_free`); else from numba-cuda (``cuda.device_array``, or the external
    memory manager Numba was given). The array is never bound to ``stream``:
    a Numba device array bound to a stream makes its later copies asynchronous on that
    stream, which smartarray must choose per copy.

    Raises
    ------
    DeviceOutOfMemory
        When the device, the pool, or the external memory manager (RMM...), is out of memory.
    """
    require_device()
    try:
        pool = device_pool()
        size = int(np.prod(shape, dtype=np.int64))
        if pool is not None and size:
            if is_default_stream(stream):
                stream = 0  # (whatever object names it: a free there waits for nothing more)
            try:
                block = pool.allocate(size * dtype.itemsize, stream, _lasting(stream))
            except _device_pool.Unsupported as exc:  # (the default pool cannot work here)
                _device_pool.give_up(pool, exc.args[0])
            else:
                return _pooled_array(block, shape, dtype, order)
        return cuda().device_array(shape, dtype=dtype, order=order)
    except Exception as exc:
        if is_out_of_memory(exc):
            nbytes = int(np.prod(shape)) * dtype.itemsize
            raise DeviceOutOfMemory(
                f"out of device memory allocating {nbytes} bytes for a {dtype} array of shape "
                f"{shape}"
            ) from exc
        raise


def _lasting(stream: Any) -> bool | None:
    """Whether ``stream`` lives as long as a pooled buffer allocated on it (see
    ``device_pool.DevicePool.allocate``): the default stream does; in the simulator every
    stream does (nothing is destroyed under a buffer there); else the pool decides."""
    if is_default_stream(stream) or tier() == "simulator":
        return True
    return None


def _contiguous_strides(shape: tuple[int, ...], itemsize: int, order: str) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for extent in reversed(shape) if order == "C" else shape:
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides)) if order == "C" else tuple(strides)


# Pooled buffers' numba-cuda pointers (``AutoFreePointer``), by device address, while any view
# holds them: numba's views reference their base pointer weakly, as for numba-cuda's own
# allocations (kept in its memory manager's ``allocations``). Popped by the pointer's finalizer.
_POOLED_POINTERS: dict[int, Any] = {}


def pooled_pointer(block: _device_pool.Block) -> Any:
    """A numba-cuda memory pointer (an ``OwnedPointer``, what numba-cuda's own memory
    manager returns) over a pooled buffer: its views keep it alive, and when the last is
    gone the buffer goes back to the pool on its stream (:meth:`device_pool.Block.free`).

    Also what the Numba memory-manager plugin (:mod:`smartarray.numba_pool`) returns.
    """
    import weakref

    from numba.cuda.cudadrv import devices, driver

    address = block.address
    pointers = _POOLED_POINTERS
    context = devices.get_context() if tier() == "gpu" else None
    # (numba-cuda's queue for device memory, flushed before it retries an allocation that ran
    # out of memory, and held back by defer_cleanup(); see trim_device_pool)
    deallocations = getattr(getattr(context, "memory_manager", None), "deallocations", None)

    def release() -> None:  # (no reference to the pointer: it would never die)
        pointers.pop(address, None)
        if deallocations is not None and getattr(block, "synchronize", False):
            # Handed out: freed after the device is done, through numba-cuda's deallocation
            # queue (as cuMemFree is), which defer_cleanup() holds back.
            deallocations.add_item(_free_after_device, block, block.nbytes)
        else:
            block.free()

    pointer = driver.AutoFreePointer(
        weakref.proxy(context) if context is not None else None,
        driver.binding.CUdeviceptr(address),
        block.nbytes,
        finalizer=release,
    )
    pointers[address] = pointer
    return pointer.own()


def _pooled_array(block: _device_pool.Block, shape: Any, dtype: np.dtype, order: str) -> Any:
    """A device array of ``shape`` over the pooled buffer ``block`` (found again from the
    array by :func:`pooled_block`)."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    strides = _contiguous_strides(shape, dtype.itemsize, order)
    if tier() == "simulator":  # (a stand-in pool, in tests: ordinary memory)
        import weakref

        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        raw = np.empty(block.nbytes, dtype=np.uint8)
        weakref.finalize(raw, block.free)  # every view keeps ``raw`` alive (as its base)
        array: Any = FakeCUDAArray(np.ndarray(shape, dtype, buffer=raw, strides=strides))
    else:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        array = DeviceNDArray(shape, strides, dtype, gpu_data=pooled_pointer(block))
    array._smartarray_block = block
    return array


def pooled_block(device: Any) -> _device_pool.Block | None:
    """The pool's block under the device array ``device`` made by :func:`device_empty`, or
    None (numba-cuda's memory, an adopted or mapped array, or a view)."""
    return getattr(device, "_smartarray_block", None)


def used_on(device: Any, stream: Any) -> None:
    """Work enqueued so far on ``stream`` used ``device`` (a scratch array no allocation
    records work for): if it is a pooled buffer, its free waits for that work."""
    block = pooled_block(device)
    if block is not None:
        event = record_event(stream)
        block.last_event = event
        block.after_default_stream = event is None and is_gpu_default_stream(stream)


def address_handed_out(device: Any) -> None:
    """The address of ``device`` (or of a view of it) was handed out (``get('gpu')``, the
    CUDA array interface, DLPack): if it is a pooled buffer, its return to the pool waits for
    the device, since work on it may be enqueued where smartarray does not see it."""
    block = pooled_block(device)
    if block is not None:
        block.synchronize = True


def make_context_current() -> None:
    """Make Numba's CUDA context current in this thread (GPU tier)."""
    from numba.cuda.cudadrv import devices

    devices.get_context()


def _free_after_device(block: _device_pool.Block) -> None:
    """Give ``block``, whose address was handed out, back to the pool once its device is
    done (numba-cuda's deallocation queue runs this). An error is reported as a
    warning, not raised into whatever flushed the queue (another allocation, a finalizer)."""
    try:
        block.free()  # (the device synchronised first, in its own context: wait_before_free)
    except Exception as error:
        warnings.warn(
            f"smartarray: a device buffer could not be given back to the pool ({error})",
            RuntimeWarning,
            stacklevel=2,
        )


def synchronize_device() -> None:
    """Make the host wait for all the device's work (``cuCtxSynchronize``)."""
    cuda().synchronize()


def _order_pooled_free(block: _device_pool.Block) -> None:
    """On a GPU, :func:`wait_before_free` (the simulator runs everything at once: nothing
    is pending there), with Numba's context current (finalizers run in any thread)."""
    if tier() != "gpu":
        return
    make_context_current()
    try:
        wait_before_free(block)
    except Exception:  # (e.g. a stream destroyed since: the device's work covers it)
        synchronize_device()


def wait_before_free(block: _device_pool.Block) -> None:
    """Make a fenced block's stream wait for the work that used its buffer (see
    :attr:`device_pool.Block.last_event`), just before the buffer goes back to the pool:
    for its events, then for the default stream; or the host for the whole device."""
    stream = block.free_stream
    if block.synchronize:  # (as cuMemFree does: the host waits for the device)
        synchronize_device()
        return
    if block.last_event is not None:
        wait_event(block.last_event, stream)
    if block.after_default_stream:
        wait_for_default_stream(stream)


_device_pool.set_free_ordering(_order_pooled_free)


def device_pool() -> _device_pool.DevicePool | None:
    """The device memory pool smartarray allocates from, or None (numba-cuda allocates)."""
    return _device_pool.active(tier() == "gpu", _own_pool_allowed, _current_device_id)


def _current_device_id() -> int:
    """The id of the device of Numba's current context (each device has its own pool)."""
    from numba.cuda.cudadrv import devices

    return int(devices.get_context().device.id)


def _own_pool_allowed() -> bool:
    """False when Numba was given another memory manager than its own or smartarray's
    plugin (RMM's, through ``NUMBA_CUDA_MEMORY_MANAGER``): SmartArrays then allocate
    through Numba too, from that manager, as the user chose."""
    from numba.cuda.cudadrv import driver

    manager = type(cuda().current_context().memory_manager)
    return manager is driver.NumbaCUDAMemoryManager or manager.__module__ == "smartarray.numba_pool"


def trim_device_pool() -> bool:
    """Give the memory the device pool keeps and nothing uses back to the device; False if
    there is no pool (called before evicting device copies on an out-of-memory error)."""
    pools = _pools()
    if not pools:
        return False
    _flush_deferred_frees()
    for pool in pools:
        pool.trim()
    return True


def _pools() -> list[_device_pool.DevicePool]:
    """The pools in use (each device's) and those given up (whose freed memory is kept)."""
    device_pool()  # (the current device's, made if it is to be)
    return _device_pool.all_pools()


def _flush_deferred_frees() -> None:
    """Run numba-cuda's pending device deallocations (pooled buffers that were handed out go
    back to the pool through them), unless ``defer_cleanup()`` holds them back."""
    if tier() == "gpu":
        manager = cuda().current_context().memory_manager
        deallocations = getattr(manager, "deallocations", None)
        if deallocations is not None:
            deallocations.clear()


def release_device_pool() -> int:
    """Give the device memory the pools keep for reuse back to the devices.

    Returns
    -------
    int
        The bytes released, as far as the pools tell (0 without a pool).

    Notes
    -----
    On a GPU, SmartArrays' device buffers come from a stream-ordered memory pool of the
    driver (one per device), which keeps freed memory for the next allocations. Other
    allocators (Numba's own ``cuda.device_array``, CuPy, PyTorch) do not see that memory:
    call this when they need it, or let Numba allocate from the same pool
    (``NUMBA_CUDA_MEMORY_MANAGER=smartarray.numba_pool``). smartarray calls it itself
    before evicting device copies when the device is out of memory. The device is
    synchronised first.
    """
    pools = _pools()
    if not pools:
        return 0
    _flush_deferred_frees()
    return sum(pool.trim() for pool in pools)


def device_pool_info() -> dict[str, Any]:
    """What the device memory pool did so far.

    Returns
    -------
    dict
        Of the current device's pool: ``enabled`` (False: numba-cuda allocates, e.g. in the
        simulator or with ``SMARTARRAY_DEVICE_POOL=0``), and with a pool: ``resource`` (its
        type), ``allocations`` and ``frees`` (buffers), ``live_buffers``, ``live_bytes`` and
        ``peak_live_bytes`` (allocated and not given back), ``trims``, and
        ``reserved_bytes`` (what the pool holds from the device, None if the resource does
        not tell). After the pool failed and was turned off (with a warning), ``given_up``
        is that error and ``reserved_bytes`` what it still holds (:func:`release_device_pool`
        gives it back).
    """
    pool = device_pool()
    if pool is not None:
        return pool.info()
    info: dict[str, Any] = {"enabled": False}
    given_up = _device_pool.given_up()
    if given_up:
        info["given_up"] = given_up[-1][1]
        info["reserved_bytes"] = sum(p.reserved_bytes() or 0 for p, _ in given_up)
    return info


def device_memory_info() -> tuple[int, int] | None:
    """The current device's ``(free, total)`` bytes, or None where they are not known (no
    GPU, the simulator, which reports infinite memory, or any error asking). For error
    messages."""
    if tier() != "gpu":
        return None
    try:
        free, total = cuda().current_context().get_memory_info()
        return int(free), int(total)
    except Exception:  # (a message must not fail because the driver could not answer)
        return None


def is_out_of_memory(exc: BaseException) -> bool:
    """True for numba-cuda's ``CUDA_ERROR_OUT_OF_MEMORY`` and memory managers' ``MemoryError``."""
    if isinstance(exc, MemoryError):  # e.g. RMM's std::bad_alloc through Numba's EMM plugin
        return True
    if tier() == "gpu":
        from numba.cuda.cudadrv.driver import CudaAPIError, binding

        out_of_memory = binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY
        if isinstance(exc, CudaAPIError) and exc.code == out_of_memory:
            return True
    text = f"{type(exc).__name__} {exc}"  # other managers' errors, and tests' stand-ins
    return "OUT_OF_MEMORY" in text or "out of memory" in text.lower()


def device_fill(device: Any, value: Any, stream: Any = 0) -> None:
    """Fill a contiguous device array with ``value`` on the device (no host copy).

    Raises
    ------
    TypeError
        For a value other than all-zero bytes in an array whose dtype a kernel cannot fill
        (text, structured); make such arrays on the host (``where='host'``) instead.
    """
    pattern = np.asarray(value, dtype=device.dtype).tobytes()
    if tier() == "simulator":
        device._ary[...] = value
        return
    if device.size == 0:
        return
    if len(set(pattern)) == 1:  # zeros, and any value made of one repeated byte: a memset
        from numba.cuda.cudadrv import driver

        nbytes = device.size * device.dtype.itemsize
        driver.device_memset(device, pattern[0], nbytes, plain_stream(stream))
        return
    if device.dtype.kind not in "biufcmM":
        raise TypeError(
            f"cannot fill a {device.dtype} array on the device with {value!r}; create it on "
            "the host (where='host') and let the first kernel upload it"
        )
    flat = device.reshape(device.size)
    kernel = _fill_kernel()
    threads = 256
    blocks = (device.size + threads - 1) // threads
    with warnings.catch_warnings():  # small fills under-occupy the GPU, harmlessly
        warnings.simplefilter("ignore")
        kernel[blocks, threads, plain_stream(stream)](flat, flat.dtype.type(value))


@functools.cache
def _fill_kernel() -> Any:
    numba_cuda = cuda()

    @numba_cuda.jit
    def fill(out, value):  # pragma: no cover - runs on the GPU only
        i = numba_cuda.grid(1)
        if i < out.size:
            out[i] = value

    return fill


def device_view(
    base: Any,
    offset: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: np.dtype,
    new: bool = False,
) -> Any:
    """A device array viewing ``base``'s memory: element 0 at byte ``offset``, given strides
    (``base`` itself for all of it, as it is laid out, unless ``new`` asks for a new object).

    Raises
    ------
    ValueError
        For negative strides, which Numba device arrays cannot represent.
    """
    if (
        not new
        and offset == 0
        and tuple(shape) == tuple(base.shape)
        and tuple(strides) == tuple(base.strides)
        and dtype == base.dtype
    ):
        return base
    check_device_layout(strides)
    if tier() == "simulator":
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(strided_view(base._ary, offset, shape, strides, dtype))
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    size = int(np.prod(shape))
    if size == 0:
        return DeviceNDArray(shape, strides, dtype)
    extent = sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + dtype.itemsize
    return DeviceNDArray(
        shape, strides, dtype, gpu_data=base.gpu_data.view(offset, offset + extent)
    )


def strided_view(
    buffer: np.ndarray,
    offset: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: np.dtype,
    writeable: bool = True,
) -> np.ndarray:
    """An ndarray over ``buffer``'s memory starting ``offset`` bytes in (base kept alive)."""
    return array_at(
        buffer.ctypes.data + offset,
        shape,
        strides,
        dtype,
        readonly=not (writeable and buffer.flags.writeable),
        keep_alive=buffer,
    )


class _InterfaceHolder:
    """An object exposing an ``__array_interface__`` (and keeping its memory's owner alive)."""

    __slots__ = ("__array_interface__", "base")

    def __init__(self, interface: dict[str, Any], base: Any) -> None:
        self.__array_interface__ = interface
        self.base = base


def array_at(
    address: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: np.dtype,
    *,
    readonly: bool,
    keep_alive: Any,
) -> np.ndarray:
    """An ndarray over the memory at ``address`` (no copy, no bounds check, never read).

    Structured dtypes are described as raw bytes (``V<n>``) and viewed as ``dtype`` after:
    ``dtype.descr`` is not defined for some of them (e.g. ``a[['b', 'a']]``'s, whose fields
    are out of order).
    """
    structured = dtype.names is not None and not dtype.hasobject
    carrier = np.dtype((np.void, dtype.itemsize)) if structured else dtype
    interface = {
        "data": (address, readonly),
        "shape": tuple(shape),
        "strides": tuple(strides),
        "typestr": carrier.str,
        "descr": carrier.descr,
        "version": 3,
    }
    view = np.asarray(_InterfaceHolder(interface, keep_alive))
    if view.dtype != dtype:  # structured / subarray dtypes
        view = view.view(dtype)
    return view


def is_device_array(obj: Any) -> bool:
    """True for Numba device arrays (real or simulated) and CUDA-array-interface objects.

    Checked on the instance: CPU tensors of some libraries define the interface as a property
    that raises ``AttributeError``.
    """
    if isinstance(obj, np.ndarray):
        return False
    if getattr(obj, "__cuda_ndarray__", False):
        return True
    try:
        return obj.__cuda_array_interface__ is not None
    except AttributeError:
        return False


def as_device_array(obj: Any) -> Any:
    """View a CUDA-array-interface object as a Numba device array, without copying."""
    if getattr(obj, "__cuda_ndarray__", False):
        return obj
    require_device()
    return cuda().as_cuda_array(obj)


# --- copies (called only by smartarray._core.transfer) -----------------------------------------


def plain_stream(stream: Any) -> Any:
    """``0`` for any default stream, else ``stream``: what Numba's copy functions expect.

    Numba makes a copy asynchronous for any stream *object*, even one whose handle is the
    default stream (e.g. the ``cuda.core`` stream a kernel launch hands to arguments).
    """
    return 0 if is_default_stream(stream) else stream


def unbound(device: Any) -> Any:
    """``device`` with no stream bound (copies then use the stream they are given)."""
    if tier() == "gpu" and getattr(device, "stream", 0) != 0:
        return device.bind(0)
    return device


def copy_h2d(host: np.ndarray, device: Any, stream: Any = 0) -> None:
    """Copy a contiguous host buffer into a device buffer of the same layout."""
    unbound(device).copy_to_device(host, stream=plain_stream(stream))


def copy_d2h(device: Any, host: np.ndarray, stream: Any = 0) -> None:
    """Copy a contiguous device buffer into a host buffer of the same layout."""
    unbound(device).copy_to_host(host, stream=plain_stream(stream))


def copy_d2d(src: Any, dst: Any, stream: Any = 0) -> None:
    """Copy device to device (no bus traffic; not a ledger transfer)."""
    if tier() == "simulator":
        dst._ary[...] = src._ary
        return
    unbound(dst).copy_to_device(src, stream=plain_stream(stream))


# --- streams and events -----------------------------------------------------------------


def is_default_stream(stream: Any) -> bool:
    """True for ``None``/``0`` and for streams whose handle is the legacy default stream."""
    if stream is None or (isinstance(stream, int) and stream == 0):
        return True
    if tier() != "gpu":
        return False
    try:
        return int(getattr(stream, "handle", stream)) == 0
    except (TypeError, ValueError):
        return False


def is_gpu_default_stream(stream: Any) -> bool:
    """True for the default stream on a real GPU (where work is asynchronous to the host)."""
    return tier() == "gpu" and is_default_stream(stream)


def check_device_layout(strides: tuple[int, ...]) -> None:
    """Raise ``ValueError`` for layouts Numba device arrays cannot represent."""
    if any(s < 0 for s in strides):
        raise ValueError(
            "this view has negative strides (e.g. a[::-1]), which Numba device arrays cannot "
            "represent; pass a copy instead (view.copy())"
        )


def record_event(stream: Any, always: bool = False) -> Any:
    """Record an event on ``stream``; ``None`` in the simulator, and for the default stream
    unless ``always`` (work on the default stream is ordered with default-stream copies, but
    the host itself must still wait for kernels that write mapped memory)."""
    if tier() != "gpu" or (is_default_stream(stream) and not always):
        return None
    event = cuda().event(timing=False)
    event.record(plain_stream(stream))
    return event


def wait_for_default_stream(stream: Any) -> None:
    """Make ``stream`` wait for the work enqueued so far on the default stream.

    Needed only for streams that do not synchronise with the legacy default stream by
    themselves (non-blocking streams, e.g. ``cuda.core`` streams or other libraries'); work on
    the default stream records no event of its own, since everything else waits for it anyway.
    """
    if tier() != "gpu" or stream is None or is_default_stream(stream):
        return
    if not is_non_blocking_stream(stream):
        # A blocking stream (numba's ``cuda.stream()``) already waits for earlier default-
        # stream work; an event recorded on the legacy default stream would also wait for
        # every other blocking stream's work (serialising unrelated arrays' kernels).
        return
    numba_cuda = cuda()
    event = numba_cuda.event(timing=False)
    event.record(numba_cuda.default_stream())
    event.wait(stream)


def is_non_blocking_stream(stream: Any) -> bool:
    """True for a stream created with ``CU_STREAM_NON_BLOCKING`` (``cuda.core``'s, CuPy's or
    PyTorch's non-blocking streams): one that does not synchronise with the legacy default
    stream. True too when the flags cannot be read (the answer that keeps ordering safe)."""
    try:
        from numba.cuda.cudadrv.driver import binding, driver

        handle = getattr(stream, "handle", stream)
        flags = driver.cuStreamGetFlags(int(handle))
        return bool(int(flags) & int(binding.CUstream_flags.CU_STREAM_NON_BLOCKING))
    except Exception:
        return True


def event_pending(event: Any) -> bool:
    """True while the work before ``event`` (None: no work) has not finished."""
    if event is None:
        return False
    return not event.query()


def wait_event(event: Any, stream: Any = None) -> None:
    """Make the host (``stream=None``) or ``stream`` wait for ``event``."""
    if event is None:
        return
    if stream is None:
        event.synchronize()
    else:
        event.wait(plain_stream(stream))
