"""A pool of page-locked (pinned) host buffers, so that making SmartArrays stays cheap.

Page-locking memory (``cudaHostAlloc``, behind ``numba.cuda.pinned_array``) costs far more than
``malloc``: milliseconds for large buffers. On a GPU every SmartArray smartarray allocates
itself gets a pinned host buffer, so a program that makes arrays repeatedly would pay that
every time. This pool keeps the buffers of dead arrays, by *size class*, and hands them out
again:

- a request of ``n`` bytes is served by a buffer of ``size_class(n)`` bytes (at most 25% more);
- a buffer goes back to the pool only when the last ndarray over it is gone (every view and
  every array derived from it keeps its owner alive), so a live buffer is never shared;
- an asynchronous copy into or out of a buffer (on a non-blocking stream) is *fenced*
  (:func:`fence`): its event travels with the buffer, and the buffer is handed out again, or
  released, only once that copy is done. Otherwise an array that dies while its copy is in
  flight (``a.to_host(stream)``, or a temporary kernel argument uploaded on a stream) would give
  its buffer to a new array, which the late copy would then overwrite, or whose new contents
  the late upload would send to the device instead of the old ones;
- idle buffers are kept up to a cap (:func:`set_pinned_pool_limit`, default 256 MiB); beyond
  it a returned buffer is released; :func:`release_pinned_pool` releases all idle buffers.

Buffers handed out are uninitialised, like ``numpy.empty``: code that needs zeros
(``smartarray.zeros``) fills them. In the simulator pinned memory is ordinary memory, and the
pool works the same way (that is how its bookkeeping is tested without a GPU).
"""

from __future__ import annotations

import numbers
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import backend as _backend

DEFAULT_LIMIT = 256 << 20
_MIN_CLASS = 4096


def size_class(nbytes: int) -> int:
    """Bytes of the pooled buffer that serves a request of ``nbytes`` (at most 25% more).

    Classes are 4 KiB, then four steps per power of two: 4, 5, 6, 7, 8, 10, 12, 14, 16 ... KiB.
    """
    if nbytes <= _MIN_CLASS:
        return _MIN_CLASS
    quarter = 1 << (nbytes.bit_length() - 3)  # a quarter of the power of two below nbytes
    return -(-nbytes // quarter) * quarter


class _Owner:
    """The owner of one pooled buffer's memory, at the root of every ndarray over it.

    ``fence`` is a one-item list holding the event of the last asynchronous copy that uses
    the buffer (or None); shared with the finalizer that gives the buffer back.
    """

    __slots__ = ("__array_interface__", "__weakref__", "fence", "raw")

    def __init__(self, raw: np.ndarray) -> None:
        self.raw = raw
        self.fence: list[Any] = [None]
        self.__array_interface__ = {
            "data": (raw.ctypes.data, False),
            "shape": (raw.nbytes,),
            "typestr": "|u1",
            "version": 3,
        }


class PinnedPool:
    """Idle page-locked buffers by size class, with a cap on the bytes kept idle.

    Parameters
    ----------
    allocate
        ``allocate(nbytes)`` returns a new 1-d ``uint8`` buffer of ``nbytes`` bytes.
    limit
        Most bytes of idle buffers kept; ``0`` keeps none (every request allocates).
    """

    def __init__(self, allocate: Callable[[int], np.ndarray], limit: int = DEFAULT_LIMIT) -> None:
        self._allocate = allocate
        # Re-entrant: a buffer may come back (an array collected by the garbage collector)
        # while this thread is inside the pool.
        self._lock = threading.RLock()
        # size class -> idle buffers, each with the event of its last asynchronous copy
        self._idle: dict[int, list[tuple[np.ndarray, Any]]] = {}
        self.limit = limit
        self.idle_bytes = 0
        self.hits = 0
        self.misses = 0

    def empty(self, shape: tuple[int, ...], dtype: np.dtype, order: str) -> np.ndarray:
        """An uninitialised array from a pooled buffer (a new one if none is idle)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        size = size_class(nbytes)
        raw = None
        event = None
        with self._lock:
            idle = self._idle.get(size)
            if idle:
                raw, event = idle.pop()
                self.idle_bytes -= size
                self.hits += 1
            else:
                self.misses += 1
        if raw is None:
            raw = self._allocate(size)
        else:
            _wait(event)  # a copy its last array started may still use it
        owner = _Owner(raw)
        finalizer = weakref.finalize(owner, self._give_back, raw, owner.fence)
        finalizer.atexit = False  # nothing to give back when the process ends
        flat = np.asarray(owner)
        return np.ndarray(shape, dtype=dtype, buffer=flat, order=order)  # type: ignore[arg-type]

    def _give_back(self, raw: np.ndarray, fence: list[Any]) -> None:
        # Runs when the last array over ``raw`` is gone.
        with self._lock:
            if self.idle_bytes + raw.nbytes <= self.limit:
                self._idle.setdefault(raw.nbytes, []).append((raw, fence[0]))
                self.idle_bytes += raw.nbytes
                return
        _wait(fence[0])  # released: the driver must not free memory a copy still uses

    def release(self) -> int:
        """Release every idle buffer; return the bytes released."""
        with self._lock:
            released = self.idle_bytes
            idle, self._idle = self._idle, {}
            self.idle_bytes = 0
        for buffers in idle.values():
            for _, event in buffers:
                _wait(event)
        return released

    def set_limit(self, nbytes: int) -> None:
        """Keep at most ``nbytes`` of idle buffers from now on (releasing the excess now)."""
        with self._lock:
            self.limit = nbytes
            for size in sorted(self._idle, reverse=True):  # the largest go first
                buffers = self._idle[size]
                while buffers and self.idle_bytes > nbytes:
                    _wait(buffers.pop()[1])
                    self.idle_bytes -= size
            for size, buffers in list(self._idle.items()):
                if not buffers:
                    del self._idle[size]


def fence(host: np.ndarray, event: Any) -> None:
    """Record that asynchronous work before ``event`` copies into or out of ``host``.

    ``host`` is an array over a pooled buffer (anything else is ignored): the buffer is not
    handed out again, nor released, before ``event`` has completed.
    """
    if event is None:
        return
    base: Any = host
    while base is not None and not isinstance(base, _Owner):
        base = getattr(base, "base", None)
    if base is not None:
        base.fence[0] = event


def _wait(event: Any) -> None:
    if event is not None:
        _backend.wait_event(event)


def _allocate_pinned(nbytes: int) -> np.ndarray:
    if _backend.is_simulator():  # the simulator's pinned memory is ordinary memory
        return np.empty(nbytes, dtype=np.uint8)
    return _backend.cuda().pinned_array(nbytes, dtype=np.uint8)


POOL = PinnedPool(_allocate_pinned)


def release_pinned_pool() -> int:
    """Release the idle page-locked host buffers smartarray keeps for reuse.

    Buffers of live arrays are not affected; they return to the pool when their arrays die.

    Returns
    -------
    int
        Bytes of page-locked memory released.
    """
    return POOL.release()


def set_pinned_pool_limit(nbytes: int) -> None:
    """Keep at most ``nbytes`` of idle page-locked host buffers for reuse (default 256 MiB).

    ``0`` disables the pool: every pinned buffer is allocated anew and released when its array
    dies. Lowering the limit releases idle buffers beyond it at once.

    Raises
    ------
    TypeError, ValueError
        For anything but a non-negative integer.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral):
        raise TypeError(f"the pinned pool limit is a number of bytes (an int); got {nbytes!r}")
    if nbytes < 0:
        raise ValueError(f"the pinned pool limit cannot be negative; got {nbytes}")
    POOL.set_limit(int(nbytes))


def pinned_pool_info() -> dict[str, Any]:
    """The pool's state: ``idle_bytes``, ``idle_buffers``, ``limit``, ``hits``, ``misses``."""
    with POOL._lock:
        return {
            "idle_bytes": POOL.idle_bytes,
            "idle_buffers": sum(len(b) for b in POOL._idle.values()),
            "limit": POOL.limit,
            "hits": POOL.hits,
            "misses": POOL.misses,
        }
