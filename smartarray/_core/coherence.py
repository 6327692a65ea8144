"""The coherence state machine: the only code that flips validity flags.

One :class:`Allocation` exists per base buffer pair (a contiguous host buffer and its device
twin). Every SmartArray, and every view of it, points at one Allocation and shares its state.
The state is one of three::

                 host write                      device write
       +-------------------------+    +---------------------------+
       v                         |    |                           v
    +------+  device read (H2D)  +------+  host read (D2H)    +--------+
    | HOST | ------------------> | BOTH | <------------------ | DEVICE |
    +------+                     +------+                     +--------+
       ^ |                                                        | ^
       | +---------------------- device write ---------------------+ |
       +------------------------ host write ------------------------+

``HOST``: only the host copy is current. ``DEVICE``: only the device copy is current.
``BOTH``: both copies hold the same bytes. Reads move to ``BOTH`` (copying once if needed);
writes move to the side that was written. Mapped host memory is always ``BOTH``: the device
reads and writes it directly. A new array starts in ``HOST`` (made on the host) or ``DEVICE``
(made with ``where='gpu'``); an array that has no device buffer yet is in ``HOST``.

All transitions, and the copies they imply, run under the allocation's re-entrant lock.
Copies go through :mod:`smartarray._core.transfer` (the ledger); memory comes from
:mod:`smartarray._core.backend`, device memory within the budget kept by
:mod:`smartarray._core.memory`, which evicts device copies through
:meth:`Allocation.evict_device` (a spill is a download: ``DEVICE`` -> ``BOTH``, then the device
copy is dropped: ``HOST``).
"""

from __future__ import annotations

import _thread
import enum
import itertools
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import backend as _backend
from . import host_buffers as _host_buffers
from . import memory as _memory
from . import pinned_pool as _pinned_pool
from . import transfer as _transfer
from .errors import HostMemory, Where

_labels = itertools.count(1)
_keys = itertools.count(1)
# Host snapshots (see Allocation.check_host_exports) of at most this many bytes are bytes.
_SMALL_SNAPSHOT = 1 << 16


class State(enum.Enum):
    """Which copies of an allocation are current."""

    HOST = "host"
    DEVICE = "gpu"
    BOTH = "both"


class Allocation:
    """A host buffer and a device buffer that hold the same logical array.

    Parameters
    ----------
    shape, dtype, order
        Shape, dtype and memory order (``'C'`` or ``'F'``) of the base buffers.
    host
        An existing contiguous host buffer to adopt, or ``None`` (allocated lazily).
    device
        An existing contiguous device buffer to adopt, or ``None`` (allocated lazily).
    state
        Which of the adopted buffers is current.
    host_memory
        Kind of host buffer (``'pinned'``, ``'pageable'`` or ``'mapped'``).
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        order: str,
        *,
        host: np.ndarray | None,
        device: Any,
        state: State,
        host_memory: HostMemory,
        label: str | None = None,
    ) -> None:
        self.shape = shape
        self.dtype = dtype
        self.order = order
        self.nbytes = host.nbytes if host is not None else int(math.prod(shape)) * dtype.itemsize
        self.host = host
        self.device = device
        self.state = state
        self.host_memory: HostMemory = host_memory
        # The default label is formatted when first read (most arrays are never named).
        self._label = label
        self._number = next(_labels)
        self.key = next(_keys)  # identifies this allocation in smartarray._core.memory
        self.lock = _thread.RLock()  # (threading.RLock is a Python-level wrapper of this)
        # Events of asynchronous work on non-default streams that touches this allocation:
        # the last device work (kernel or copy), and the last copy that writes (D2H) or reads
        # (H2D) the host buffer. Host access waits for these, and only these. (The compiled
        # @njit unboxing in _numba.cpu and the host fast paths in _numpy.fastpath read state,
        # _host_event, _device_event and _launch directly: a new condition under which host
        # access must wait or take the lock needs a matching check there.)
        self._device_event: Any = None
        self._host_event: Any = None
        # True while the last device work was on the default stream (which records no event):
        # work on a non-blocking stream must then first wait for the default stream.
        self._default_stream_work = False
        # The launch being prepared whose earlier argument left the device copy equal to the
        # host copy (see begin_device_write), and cached device views of this allocation.
        self._launch: object = None
        self._device_views: dict[tuple[Any, ...], Any] = {}
        # The device buffer whose address was handed out (__cuda_array_interface__): kept as
        # long as this allocation, which the consumer keeps alive, even after free_device.
        self._exported_device: Any = None
        # True while the device buffer (current or exported) was allocated by smartarray and
        # is charged to the device memory budget (adopted device arrays are the caller's).
        self._device_owned = False
        # One item per live host export (np.asarray, memoryview: smartarray._core.host_exports),
        # a counter whose updates are atomic: appended under the lock, popped by the export's
        # finalizer, which may run in any thread at any time. While it is not empty, device
        # writes are downloaded at once (refresh_host_exports).
        self.host_exports: list[None] = []
        # A copy of the host bytes taken when they last equalled the device copy (state BOTH)
        # while host exports were alive, or None. Exports are writable ndarrays, written in
        # ways smartarray never sees (numpy, @njit, ctypes): before the device copy is used
        # as current, the host buffer is compared with this copy (check_host_exports).
        self._host_snapshot: np.ndarray | bytes | None = None
        # True once the host buffer was handed out raw (get('host'), a DLPack host export)
        # and registered with smartarray._core.adoption, which then refuses to adopt it.
        self.host_handed_out = False
        # From a raw hand-out of the device copy (get('gpu')) until the next state change,
        # the caller may be writing it and has not said so yet (mark_changed('gpu')): the
        # device arrays handed out (weakly: pinned while the caller holds one), and whether
        # the copy counts as possibly written (only meaningful in state BOTH). Eviction never
        # drops such a copy as clean: it is kept while the caller holds a handed-out array
        # (dropping it would free nothing), else spilled (see evict_device), after which
        # mark_changed('gpu') finds the writes on the host (_spilled_hand_out).
        self._handed_out: list[weakref.ref[Any]] = []
        self._possibly_written = False
        self._spilled_hand_out = False
        if host_memory == "mapped":
            if self.host is None:
                self.host = _host_buffers.host_empty(shape, dtype, order, "mapped")
            if self.device is None:
                self.device = _backend.mapped_device_view(self.host)
            self.state = State.BOTH

    @classmethod
    def on_host(
        cls, host: np.ndarray, order: str, *, host_memory: HostMemory, label: str | None = None
    ) -> Allocation:
        """A new allocation over the contiguous host buffer ``host``, current on the host
        (for mapped memory, on both sides: the two are one buffer)."""
        return cls(
            host.shape, host.dtype, order, host=host, device=None, state=State.HOST,
            host_memory=host_memory, label=label,
        )  # fmt: skip

    @classmethod
    def on_device(
        cls,
        shape: tuple[int, ...],
        dtype: np.dtype,
        order: str,
        *,
        host_memory: HostMemory,
        label: str | None = None,
        stream: Any = None,
        write: Callable[[Any], None] | None = None,
    ) -> Allocation:
        """A new allocation whose device copy is the current one.

        The device buffer is allocated within the device memory budget, and ``write(device)``
        (if given) fills it on ``stream`` while the allocation's lock is held, and is recorded
        as device work on ``stream`` before the lock is released: no other thread can evict
        the new copy before it holds its data, nor spill it before the write is done. The
        host buffer is allocated when the host first needs it.
        """
        if host_memory == "mapped":
            raise ValueError("mapped memory has no separate device buffer")
        alloc = cls(
            shape, dtype, order, host=None, device=None, state=State.HOST,
            host_memory=host_memory, label=label,
        )  # fmt: skip
        with alloc.lock:
            device = alloc._device_buffer(stream)
            alloc.state = State.DEVICE
            if write is not None:
                write(device)
                alloc.device_written(stream)
        return alloc

    # --- queries -------------------------------------------------------------------------

    @property
    def label(self) -> str:
        """Name of this allocation in the transfer ledger and in error messages."""
        return self._label or f"SmartArray#{self._number}"

    def is_valid(self, where: Where) -> bool:
        """True when the ``where`` copy is current."""
        state = self.current_state()
        if state is State.BOTH:
            return True
        return state.value == where

    def current_state(self) -> State:
        """The state, after writes through host exports were looked for (see
        :meth:`check_host_exports`)."""
        if self._host_snapshot is not None:
            with self.lock:
                self.check_host_exports()
        return self.state

    def check_host_exports(self) -> None:
        """Look for writes made through host exports (``np.asarray(a)``) since the host copy
        last equalled the device copy: if the host bytes differ from the snapshot taken then,
        the host copy was written and the device copy is stale (``BOTH`` -> ``HOST``).

        Called with the lock held before the device copy is used as current, and before a
        launch records the state it would go back to. Costs one comparison of the host
        buffer with its snapshot, and only while a snapshot is held (an export was taken, or
        is alive, while both copies were current). The snapshot is kept while exports live
        (they may be written again) and dropped otherwise.
        """
        snapshot = self._host_snapshot
        if snapshot is None:
            return
        if self.state is State.BOTH:
            assert self.host is not None
            self.wait_host()
            if not _same_bytes(self.host, snapshot):
                self.state = State.HOST  # written through an export: the device copy is stale
                self._end_hand_out()
            elif self.host_exports:
                return  # still equal, and exports that may write are alive: keep watching
        elif self._launch is not None:
            # HOST only until the launch being prepared is enqueued (begin_device_write): the
            # device copy still equals the snapshot, and a launch that fails goes back to
            # BOTH (cancel_launch), where writes through exports must still be found.
            return
        self._host_snapshot = None

    def watch_host_exports(self) -> None:
        """Host exports are alive (or one was just taken): if both copies are current, take
        the snapshot that :meth:`check_host_exports` compares with (call with the lock held
        and the host copy complete: no copy into it pending). Without host memory for it,
        the device copy is treated as stale instead (``BOTH`` -> ``HOST``): never stale data,
        one upload at the next device use."""
        if (
            self._host_snapshot is None
            and self.state is State.BOTH
            and self.host_memory != "mapped"
            and self.host is not None
        ):
            try:
                self._host_snapshot = _snapshot(self.host)
            except MemoryError:
                # No room for the copy: writes through the exports could not be found, so
                # the device copy counts as stale (one upload at its next use).
                self.state = State.HOST

    # --- reads: make a side valid ----------------------------------------------------------

    def ensure_host(self, stream: Any = None) -> np.ndarray:
        """Make the host copy current (one D2H copy if it is stale) and return it."""
        with self.lock:
            if self.state is State.DEVICE:
                self._download(stream)
            if stream is None or _backend.is_default_stream(stream):
                self.wait_host()
            return self._host_buffer()

    def ensure_device(self, stream: Any = None, launch: object = None) -> Any:
        """Make the device copy current (one H2D copy if it is stale) and return it.

        Device work on ``stream`` is ordered after earlier device work on this allocation
        (on any stream). ``launch`` identifies the kernel launch being prepared, if any.
        """
        with self.lock:
            self.check_host_exports()
            self._order_after_device_work(stream)
            device = self._device_buffer(stream)
            same_launch = launch is not None and self._launch is launch
            if self.state is State.HOST and not same_launch:
                assert self.host is not None
                _transfer.host_to_device(self.host, device, label=self.label, stream=stream)
                self.state = State.BOTH
                self._end_hand_out()  # (a copy of the host data: nothing written through it)
                # The upload may still be reading the host buffer: host writes wait for it
                # (and a pooled buffer is not reused before it is done, if this array dies).
                self._host_event = self._note_device_work(stream)
                _pinned_pool.fence(self.host, self._host_event)
                self._host_snapshot = None  # (one kept through a launch that never ended)
                if self.host_exports:  # exports may be written from now on: snapshot
                    self.watch_host_exports()
            return device

    def resident_view(
        self,
        writes: bool,
        offset: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: np.dtype,
    ) -> Any:
        """The device view for device work on the default stream that can use the device copy
        as it is, with no copy, no ordering and no flag to change; None when it cannot (call
        with the lock held; the caller pins the allocation for its launch or call).

        That is: the device copy is current, and is the only one a write could make stale
        (state DEVICE; BOTH too when the work only reads), no event is pending, no launch is
        in preparation, no host export is alive (to refresh or to check for writes; a dead
        one's writes are looked for first), and the memory is not mapped.
        """
        if self._host_snapshot is not None:  # (an export died: were there writes through it?)
            self.check_host_exports()
        state = self.state
        if not (
            (state is State.DEVICE or (state is State.BOTH and not writes))
            and self.device is not None
            and self._device_event is None
            and self._launch is None
            and not self.host_exports
            and self.host_memory != "mapped"
        ):
            return None
        if dtype is not self.dtype:  # (a view of another dtype, e.g. a.view(np.int32))
            _backend.check_device_dtype(dtype)
        if self._device_owned:
            _memory.touch(self)  # (the least recently used copies are evicted first)
        return self.device_view(offset, shape, strides, dtype)

    def wait_host(self) -> None:
        """Block until pending work that touches this allocation's host memory is done."""
        if self._host_event is not None:
            _backend.wait_event(self._host_event)
            self._host_event = None
        if self.host_memory == "mapped" and self._device_event is not None:
            _backend.wait_event(self._device_event)
            self._device_event = None

    # --- writes ------------------------------------------------------------------------

    def mark_changed(self, where: Where) -> None:
        """Declare the ``where`` copy modified: the other copy becomes stale."""
        with self.lock:
            self._launch = None
            self._host_snapshot = None  # (the declared side is the current one)
            spilled = self._spilled_hand_out and where == "gpu"
            self._end_hand_out()  # (what the caller wrote is declared now)
            if spilled and self.state is State.HOST:
                return  # spilled once nothing held it: the host copy holds what was written
            if where == "host":
                if self.state is State.DEVICE:
                    # Writes to a stale host copy would be lost (or mixed with stale bytes).
                    raise RuntimeError(
                        f"{self.label}: mark_changed('host') on an array whose host copy is "
                        "stale; call get('host') before writing to the host copy"
                    )
                if self.host_memory != "mapped":
                    self.state = State.HOST
            else:
                if self.state is State.HOST:
                    raise RuntimeError(
                        f"{self.label}: mark_changed('gpu') on an array whose device copy is "
                        "stale; call get('gpu') before writing to the device copy"
                    )
                if self.host_memory != "mapped":
                    self.state = State.DEVICE

    def prepare_host_write(self, overwrite_all: bool) -> np.ndarray:
        """Return the host buffer, current unless the caller overwrites all of it."""
        with self.lock:
            self._launch = None
            self._end_hand_out()
            if overwrite_all and self.state is State.DEVICE:
                host = self._host_buffer()
                self.wait_host()
                self.state = State.HOST
                return host
            return self.ensure_host()

    def prepare_device_write(
        self, overwrite_all: bool, stream: Any = None, launch: object = None
    ) -> Any:
        """Return the device buffer, current unless the caller overwrites all of it.

        With ``overwrite_all`` nothing is copied and the state is left alone: the writer calls
        :meth:`device_written` once its write has been enqueued.
        """
        with self.lock:
            self.check_host_exports()
            if overwrite_all and self.state is State.HOST:
                self._order_after_device_work(stream)
                return self._device_buffer(stream)
            return self.ensure_device(stream, launch)

    def begin_device_write(self, launch: object = None) -> None:
        """A kernel is about to write the device copy.

        Until the launch is enqueued (:meth:`device_written`), the host copy, if current,
        stays the authoritative one: a launch that fails half-way leaves no stale copy valid.
        For the rest of ``launch``'s arguments the device copy still equals the host copy, so
        the same allocation passed twice (``k(x, x)``, ``k(y[:4], y[4:])``) is not re-uploaded.
        """
        with self.lock:
            self.check_host_exports()
            if self.state is State.BOTH and self.host_memory != "mapped":
                self.state = State.HOST
                self._launch = launch

    def device_written(self, stream: Any = None) -> None:
        """Record that device work (a kernel) wrote the device copy on ``stream``."""
        with self.lock:
            if self.host_memory != "mapped":
                self.state = State.DEVICE
            self._launch = None
            self._end_hand_out()
            self._note_device_work(stream)

    def device_read(self, stream: Any = None) -> None:
        """Record that device work read the device copy on ``stream`` (no state change)."""
        with self.lock:
            self._note_device_work(stream)

    def cancel_launch(self, state: State) -> None:
        """A launch being prepared failed before it was enqueued: go back to ``state``.

        ``state`` is this allocation's state when the launch first touched it. Nothing ran on
        the device since, so it is exact (an upload made for the launch is just forgotten).
        """
        with self.lock:
            self._launch = None
            if self.host_memory != "mapped":
                self.state = state
            if self.host_exports:  # (BOTH again: keep watching exports for writes)
                self.watch_host_exports()

    def end_failed_launch(self, launch: object) -> None:
        """``launch`` raised after this allocation was prepared for it: it is no longer the
        launch being prepared. The state stays as it is: a written argument's device copy
        may be half written, and its host copy stays the current one (``HOST``)."""
        with self.lock:
            if self._launch is launch:
                self._launch = None

    def own_device(self) -> None:
        """The adopted device buffer was allocated for smartarray (a CUDA ufunc's result):
        charge it to the device memory budget, which may evict other arrays' device copies."""
        with self.lock:
            if self.device is None or self._device_owned or self.host_memory == "mapped":
                return
            self._device_owned = True
        _memory.charge(self)

    def hand_out_device(
        self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: np.dtype
    ) -> Any:
        """A new device array over part of the (current) device copy, handed out raw
        (``get('gpu')``): until the next state change the caller may write it, and declares
        it with ``mark_changed('gpu')`` afterwards. Eviction never drops it as clean: it keeps
        it while the caller holds the array (dropping it would free nothing), and spills it
        otherwise."""
        with self.lock:
            if not self._device_owned:  # (the caller's own device memory: never evicted)
                return self.device_view(offset, shape, strides, dtype)
            # A new object, cached nowhere: the caller's alone, so the weak reference tells
            # whether the caller still holds it.
            handle = _backend.device_view(self.device, offset, shape, strides, dtype, new=True)
            self._handed_out = [ref for ref in self._handed_out if ref() is not None]
            self._handed_out.append(weakref.ref(handle))  # (every one since the last change)
            self._possibly_written = True
            self._spilled_hand_out = False
            return handle

    @property
    def device_handed_out(self) -> bool:
        """True while a device copy handed out by ``get('gpu')`` (state ``BOTH``) may still
        be written through a device array the caller holds (so eviction keeps it)."""
        return (
            self._possibly_written
            and self.state is State.BOTH
            and any(ref() is not None for ref in self._handed_out)
        )

    def end_hand_out(self) -> None:
        """What was written through device arrays handed out by ``get('gpu')`` is declared,
        or the caller took the host side (``get('host')``): the device copy is an ordinary
        one again."""
        with self.lock:
            self._end_hand_out()

    def _end_hand_out(self) -> None:
        self._handed_out = []
        self._possibly_written = False
        self._spilled_hand_out = False

    def device_exported(self) -> None:
        """The device buffer's address was handed to another library: never free it first."""
        with self.lock:
            if self.device is not None:
                self._exported_device = self.device

    def refresh_host_exports(self, stream: Any = None) -> None:
        """Device work wrote this allocation: if host exports are alive, bring them up to date.

        With a live export (``np.asarray(a)`` kept by the caller, see
        :mod:`smartarray._core.host_exports`) and the device copy the only current one, the device
        copy is downloaded on ``stream`` (after the device work on it) and the host waits for
        the copy: both copies are current when this returns. Without live exports, nothing
        happens. Raises :class:`TransferError` (state unchanged) inside ``no_transfers()``.
        """
        if not self.host_exports:
            return
        with self.lock:
            if not self.host_exports:
                return
            if self.state is State.DEVICE:
                self._download(stream)
            self.wait_host()  # (mapped memory: waits for the device work that wrote it)

    # --- releasing ------------------------------------------------------------------------

    def free_device(self) -> None:
        """Drop the device copy, first copying it to the host if it is the only current one.

        The memory is released, unless its address was exported through
        ``__cuda_array_interface__``: then it lives as long as this allocation (consumers such
        as CuPy and PyTorch keep the exporting SmartArray alive), so their pointer never
        dangles, and the next device copy reuses it.
        """
        with self.lock:
            if self.host_memory == "mapped" or self.device is None:
                return
            if self._possibly_written:  # (a host write through an export is not overwritten)
                self.check_host_exports()
            if self._dirty():  # (also a copy handed out by get('gpu'), possibly written)
                self._download(None)
                self.wait_host()
            self._drop_device()

    # --- eviction (decided by smartarray._core.memory) ----------------------------------------

    def eviction_cost(self) -> int | None:
        """Bytes a spill of the device copy would download (0 for a clean copy), or None if
        the device copy cannot be evicted (none, exported, adopted, mapped, in a launch, or
        handed out by ``get('gpu')`` and possibly written since).

        Read without the lock: a hint for choosing what to evict, checked again by
        :meth:`evict_device`.
        """
        if (
            self.device is None
            or not self._device_owned
            or self._exported_device is not None
            or self.host_memory == "mapped"
            or self._launch is not None
            or self.device_handed_out
        ):
            return None
        return self.nbytes if self._dirty() else 0

    def _dirty(self) -> bool:
        """True when only the device copy may hold the data: state ``DEVICE``, or a copy
        handed out by ``get('gpu')`` and possibly written since (state ``BOTH``)."""
        return self.state is State.DEVICE or (self._possibly_written and self.state is State.BOTH)

    def device_busy(self) -> bool:
        """True while asynchronous device work recorded for this allocation is unfinished."""
        return _backend.event_pending(self._device_event)

    def evict_device(self, spill: bool) -> int:
        """Drop the device copy to make room; return the bytes released (0: not evictable).

        A clean copy (the host copy is current) goes at no cost. A dirty one goes only with
        ``spill``: one download into the host buffer, recorded as a spill in the ledger
        (``DEVICE`` -> ``BOTH`` -> ``HOST``). Raises :class:`TransferError` (and changes nothing)
        for a spill inside ``no_transfers()``.
        """
        with self.lock:
            if self.eviction_cost() is None:
                return 0
            if self._possibly_written:
                # A spill must not overwrite a host write made through an export meanwhile:
                # one found makes the host copy the current one (and ends the hand-out).
                self.check_host_exports()
            spilled_hand_out = self._possibly_written and self._dirty()  # (really spilled)
            if self._dirty():
                if not spill:
                    return 0
                self._download(None, spill=True)
                self.wait_host()
            self._drop_device()
            self._spilled_hand_out = spilled_hand_out
            return self.nbytes

    # --- internals ------------------------------------------------------------------------

    def _download(self, stream: Any, spill: bool = False) -> None:
        host = self._host_buffer()
        self._order_after_device_work(stream)
        _transfer.device_to_host(self.device, host, label=self.label, stream=stream, spill=spill)
        self.state = State.BOTH
        self._host_event = self._note_device_work(stream)
        _pinned_pool.fence(host, self._host_event)
        self._host_snapshot = None  # (the host copy was overwritten)
        if self.host_exports and not spill:  # exports may be written from now on: snapshot
            # the new bytes (not for a spill: the device copy is dropped next, state HOST)
            self.wait_host()
            self.watch_host_exports()

    def _drop_device(self) -> None:
        """Let go of the (stale or duplicate) device copy; the host copy is current."""
        self._order_after_device_work(None)
        self.device = None
        self._device_views.clear()  # views hold references to the device memory
        self._device_event = None
        self._default_stream_work = False
        self._launch = None
        self.state = State.HOST
        self._end_hand_out()  # (evict_device sets _spilled_hand_out after this, if it spilled)
        self._host_snapshot = None
        if self._device_owned and self._exported_device is None:
            self._device_owned = False
            _memory.release(self)

    def _host_buffer(self) -> np.ndarray:
        if self.host is None:
            self.host = _host_buffers.host_empty(
                self.shape, self.dtype, self.order, self.host_memory
            )
        return self.host

    def _device_buffer(self, stream: Any) -> Any:
        if self.device is None:
            if self._exported_device is not None:  # kept for a consumer anyway: reuse it,
                self.device = self._exported_device  # so that the consumer sees current data
                return self.device
            _backend.check_device_dtype(self.dtype)
            # Within the device memory budget (may evict other arrays' device copies).
            self.device = _memory.allocate(
                self, lambda: _backend.device_empty(self.shape, self.dtype, self.order, stream)
            )
            self._device_owned = True
        elif self._device_owned:
            _memory.touch(self)
        return self.device

    def _note_device_work(self, stream: Any) -> Any:
        """Record that device work (kernel or copy) on ``stream`` touches this allocation.

        Returns the event recorded for it: None for work on the default stream (except for
        mapped memory, whose host readers must wait for device writers), which every later
        copy and every blocking stream is ordered after anyway; a non-blocking stream is made
        to wait for the default stream then (see :meth:`_order_after_device_work`).
        """
        mapped = self.host_memory == "mapped"
        event = _backend.record_event(stream, always=mapped)
        self._device_event = event
        self._default_stream_work = event is None and _backend.is_gpu_default_stream(stream)
        return event

    def _order_after_device_work(self, stream: Any) -> None:
        """Order work on ``stream`` (the host for None) after earlier device work."""
        if self._default_stream_work and stream is not None:
            _backend.wait_for_default_stream(stream)
        if self._device_event is not None:
            _backend.wait_event(self._device_event, stream)
            if stream is None:  # the host waited: that work is done
                self._device_event = None

    def device_view(
        self, offset: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: np.dtype
    ) -> Any:
        """A (cached) device array over part of the device buffer; see ``_backend.device_view``.

        Cached here, not on the SmartArray views, so that :meth:`free_device` really releases
        the device memory: a device view keeps its base allocation alive.
        """
        key = (offset, shape, strides, dtype)
        view = self._device_views.get(key)
        if view is None:
            if len(self._device_views) >= 32:
                self._device_views.clear()
            view = _backend.device_view(self.device, offset, shape, strides, dtype)
            self._device_views[key] = view
        return view

    def launch_value(
        self,
        key: tuple[Any, ...],
        writes: bool,
        pins: Any,
        default_stream_work: bool,
        make: Callable[[Any], Any] | None = None,
    ) -> Any:
        """What a launch on the default stream hands numba-cuda for a view of the device copy
        as it is, pinned for that launch; None when the launch must take the general path.

        The steady state of a kernel chain, in one call: the device copy is fully current
        and is the only copy a write could make stale (state ``DEVICE``; ``BOTH`` too when
        ``writes`` is false), with nothing to order (no event pending), no launch in
        preparation and no host export to refresh or check, so the launch changes no flag.
        The value is cached with the device views (``_device_views``, dropped with the
        device buffer), under ``key``: ``(offset, shape, strides, dtype, writes)`` of the
        view. Without ``make`` only a cached value is returned (attribute reads and one
        dictionary look-up); with ``make`` the conditions are checked in full
        (:meth:`resident_view`, which also looks for writes through dead host exports and
        checks the view's dtype) and a value not cached yet is made as ``make(device_view)``
        and cached.

        When a value is returned, the allocation is pinned for the launch through
        ``pins.hold(key, (allocation, state))`` (:class:`smartarray._core.memory.LaunchPins`;
        its release marks the copy used for the budget's least-recently-used order) and
        ``default_stream_work`` is recorded as what the launch does on the default stream
        (true on a GPU, which makes a later non-blocking stream wait for it).
        """
        with self.lock:
            state = self.state
            if make is None:
                if not (
                    (state is State.DEVICE or (state is State.BOTH and not writes))
                    and self._device_event is None
                    and self._launch is None
                    and self._host_snapshot is None
                    and not self.host_exports
                ):
                    return None
                value = self._device_views.get(key)
                if value is None:
                    return None
            else:
                device = self.resident_view(writes, key[0], key[1], key[2], key[3])
                if device is None:
                    return None
                state = self.state
                value = self._device_views.get(key)
                if value is None:
                    value = make(device)
                    if len(self._device_views) >= 32:
                        self._device_views.clear()
                    self._device_views[key] = value
            pins.hold(self.key, (self, state))
            self._default_stream_work = default_stream_work
            return value


def _snapshot(host: np.ndarray) -> np.ndarray | bytes:
    """A copy of the contiguous array ``host`` to compare with later (see
    :func:`_same_bytes`); small arrays as bytes, the quickest to take and to compare."""
    return host.tobytes("A") if host.nbytes <= _SMALL_SNAPSHOT else host.copy(order="A")


def _same_bytes(host: np.ndarray, snapshot: np.ndarray | bytes) -> bool:
    """True when the contiguous array ``host`` holds the bytes of ``snapshot`` (its bytes, or
    an array of its shape and layout; compared in 16 MiB pieces, as 8-byte words where the
    size allows)."""
    if isinstance(snapshot, bytes):
        return host.tobytes("A") == snapshot
    a = host.reshape(-1, order="A").view(np.uint8)
    b = snapshot.reshape(-1, order="A").view(np.uint8)
    if a.size % 8 == 0:
        a, b = a.view(np.uint64), b.view(np.uint64)
    step = (16 << 20) // a.itemsize
    for start in range(0, a.size, step):
        if not np.equal(a[start : start + step], b[start : start + step]).all():
            return False
    return True
