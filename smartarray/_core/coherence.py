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
reads and writes it directly. A new array made from data starts in ``HOST`` (made on the
host) or ``BOTH`` (uploaded: ``where='gpu'``); an array that has no device buffer yet is in
``HOST``, unless it was made with no data (below).

**Byte ranges.** The diagram holds for every byte. Reads and writes of a view name the bytes
they touch (its *extent*, :func:`smartarray._core.ranges.extent_of`): a write makes exactly
those bytes stale on the other side, a read copies exactly the stale ones among them. While
the bytes are not all in one state, the allocation is in state ``MIXED`` and keeps a
:class:`~smartarray._core.ranges.Segments`: each byte range labelled ``HOST``, ``DEVICE`` or
``BOTH``. Code that reads ``state`` for a fast path treats ``MIXED`` as "take the general path".

**Filled where first used.** An array made by ``empty``/``zeros``/``ones``/``full`` starts in
``BOTH`` with neither buffer (``_fill``): each side's buffer is made, and filled there (numpy
on the host, a memset or a fill kernel on the device), when that side first needs it; nothing
is copied for it. With ``where='gpu'`` the device buffer is made (and filled) at once
(:meth:`Allocation.fill_device`), the host's still when first used. ``empty``'s bytes are
undefined: the two buffers hold different bytes, both "current", until a copy or a write
makes them one; the bytes still so when an ``np.asarray`` export is taken (which may write
them unseen: :meth:`check_host_exports` sees only changed bytes) are the host's from then on
(``_undefined``).

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
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from . import backend as _backend
from . import host_buffers as _host_buffers
from . import memory as _memory
from . import pinned_pool as _pinned_pool
from . import transfer as _transfer
from .errors import HostMemory, TransferError, Where
from .ranges import MAX_SEGMENTS, Extent, Segments, coalesce, coalesce_bytes, extent_of

_labels = itertools.count(1)
_keys = itertools.count(1)


# A launch's write in flight (see Allocation._writers): the launch, its thread, the bytes it
# writes (None: all), the host writes other threads made into them meanwhile, the bytes
# whose host copy stands for the device's until the launch is enqueued, and those of them
# that were ``empty``'s undefined bytes (see ``_undefined``), undefined again if the launch
# is cancelled.
_Writer = tuple[
    object, int, "Extent | None", list[Any], list[tuple[int, int]], list[tuple[int, int]]
]


class State(enum.Enum):
    """Which copies of an allocation are current."""

    HOST = "host"
    DEVICE = "gpu"
    BOTH = "both"
    MIXED = "mixed"  # byte ranges in different states: see Allocation._segments


# ``Allocation._fill`` of an array made by ``empty``: no bytes to write on either side.
UNDEFINED: Any = object()

_HOST = State.HOST
_new_object = object.__new__


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

    # What :meth:`on_host` leaves out of a light allocation (see there), as these class
    # attributes until an operation sets them (each is described in __init__).
    _segments: Segments | None = None
    _fill: tuple[Any] | None = None
    _default_stream_work = False
    _ordered: tuple[Any, bool, Any] | None = None
    _block: Any = None
    _exported_device: Any = None
    _device_owned = False
    _host_snapshot: np.ndarray | None = None
    host_handed_out = False
    _possibly_written = False
    _spilled_hand_out = False
    _label: str | None = None
    _number: int | None = None  # (made when the label is first read)
    # A token that lets a host write of a scalar go without the lock (see
    # SmartArray.__setitem__), and an element read check one attribute: a new object, set
    # under the lock by a host write or read (ensure_host) in state HOST with no event
    # pending and no launch in preparation; None again as soon as that may stop holding:
    # before anything reads the host buffer to copy it (_upload_runs), and at any label
    # change (_set_state, begin_device_write). A writer reads it before and after its write:
    # the same object both times means no copy read the buffer and no label changed
    # meanwhile; otherwise it writes again under the lock (docs/coherence.md, invariant 7).
    # (Set by each constructor, not a class attribute: CPython 3.12 specialises no read of
    # an instance attribute that a class attribute shadows.)
    _host_token: object | None
    # (rebound, never changed in place: safe to share as a class default)
    _undefined: list[tuple[int, int]] = []

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
        # While ``state`` is MIXED: which side is current for each byte range (else None).
        self._segments: Segments | None = None
        # Until both buffers exist, for an array made filled (zeros, full…: ``(value,)``) or
        # uninitialised (``(UNDEFINED,)``, empty): what a buffer holds when it is made.
        self._fill: tuple[Any] | None = None
        # For ``empty``, once its host buffer was made after its device buffer: the byte
        # ranges (sorted, disjoint) labelled BOTH since then with no copy or write, whose two
        # buffers hold different (undefined) bytes. Any relabelling takes bytes out
        # (_set_state); a host export makes the rest host-current (watch_host_exports).
        self._undefined: list[tuple[int, int]] = []
        # Byte ranges that begin_device_write made HOST for the launch being prepared: the
        # device copy still equals the host copy there, for the rest of that launch.
        self._launch_ranges: list[tuple[int, int]] = []
        # Launches in flight that write this allocation, from begin_device_write until
        # device_written (or their cancellation): (launch, thread, extent, host writes made
        # by other threads into the extent meanwhile) each. While there is one, the state is
        # MIXED (host writes take the paths that record them: _note_host_write), no coalesced
        # upload crosses its extent, and device_written labels device-written only the bytes
        # of its extent that no other thread wrote on the host meanwhile.
        self._writers: list[_Writer] = []
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
        self._host_token: object | None = None  # (see the class attributes)
        # True while the last device work was on the default stream (which records no event):
        # work on a non-blocking stream must then first wait for the default stream.
        self._default_stream_work = False
        # What the stream of the last ordering or device work was ordered after then:
        # (_device_event, _default_stream_work, stream), or None (see _note_device_work).
        self._ordered: tuple[Any, bool, Any] | None = None
        # The device memory pool's block under the device buffer, or None (not pooled): it
        # keeps the last device work on the buffer, which its free waits for.
        self._block: Any = _backend.pooled_block(device) if device is not None else None
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
        self._host_snapshot: np.ndarray | None = None
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
        (for mapped memory, on both sides: the two are one buffer).

        Except for mapped memory, a light allocation: the attributes that stay what they
        start as until a device operation, a hand-out or an export sets them (the class
        attributes above) are not made, nor is its ledger number until its label is first
        read; it has what host code reads and writes (its buffer, state, events and lock,
        read directly by the host fast paths and the compiled ``@njit`` unboxing) and the
        containers the rest of this class updates in place.
        """
        if host_memory == "mapped":
            return cls(
                host.shape, host.dtype, order, host=host, device=None, state=State.HOST,
                host_memory=host_memory, label=label,
            )  # fmt: skip
        alloc = _new_object(cls)
        alloc.shape = host.shape
        alloc.dtype = host.dtype
        alloc.order = order
        alloc.nbytes = host.nbytes
        alloc.host = host
        alloc.device = None
        alloc.state = _HOST
        alloc._launch_ranges = []
        alloc._writers = []
        alloc.host_memory = host_memory
        if label is not None:
            alloc._label = label
        alloc.key = next(_keys)
        alloc.lock = _thread.RLock()
        alloc._device_event = None
        alloc._host_event = None
        alloc._host_token = None
        alloc._launch = None
        alloc._device_views = {}
        alloc.host_exports = []
        alloc._handed_out = []
        return alloc

    @classmethod
    def filled(
        cls,
        shape: tuple[int, ...],
        dtype: np.dtype,
        order: str,
        fill: Any,
        *,
        host_memory: HostMemory,
        label: str | None = None,
    ) -> Allocation:
        """A new allocation with no buffer yet, every byte ``fill`` (``UNDEFINED``: never
        written, as numpy's ``empty``): each side's buffer is made, and filled, where it is
        first used, with no copy (state ``BOTH``)."""
        if host_memory == "mapped":
            raise ValueError("mapped memory has one buffer: make it filled on the host")
        alloc = cls(
            shape, dtype, order, host=None, device=None, state=State.BOTH,
            host_memory=host_memory, label=label,
        )  # fmt: skip
        alloc._fill = (fill,)
        return alloc

    def set_fill(self, value: Any) -> bool:
        """Make a new allocation from :meth:`filled` (no buffer made yet) filled with
        ``value`` instead; False (nothing changed) for any other allocation."""
        with self.lock:
            if self._fill is None or self.host is not None or self.device is not None:
                return False
            self._fill = (value,)
            return True

    def fill_device(self, value: Any, stream: Any = None) -> bool:
        """Make a new allocation from :meth:`filled` whose host buffer is not made yet
        filled with ``value`` instead: its device buffer is made now if there is none
        (within the device memory budget) and filled on the device on ``stream`` (a memset
        or a fill kernel), its host buffer filled on the host when made; no copy, both
        copies current (``BOTH``). False (nothing changed) for any other allocation."""
        with self.lock:
            if self._fill is None or self.host is not None:
                return False
            self._fill = (value,)
            if self.device is None:
                self._device_buffer(stream)  # (made filled with it)
                return True
            self._order_after_device_work(stream)
            _backend.device_fill(self.device, value, stream)
            self._note_device_work(stream)
            return True

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
        label = self._label
        if label:
            return label
        number = self._number
        if number is None:  # (a light allocation's: numbered when first named)
            with self.lock:
                number = self._number
                if number is None:
                    number = self._number = next(_labels)
        return f"SmartArray#{number}"

    def is_valid(self, where: Where, extent: Extent | None = None) -> bool:
        """True when the ``where`` copy is current (of the bytes of ``extent``; None: all)."""
        state = self.current_state()
        if state is State.BOTH or extent == ():  # (no bytes: none of them is stale)
            return True
        if state is not State.MIXED:
            return state.value == where
        return not self._runs(extent, State.DEVICE if where == "host" else State.HOST)

    def on_device_side(self, extent: Extent | None = None) -> bool:
        """True when the bytes of ``extent`` (None: all) are where device work would use
        them as they are: current on the device, and stale on the host or with no host
        buffer made yet (an array made with no data that only the device used yet, e.g.
        ``zeros(n, where='gpu')``: current on both sides). Copies and ``*_like`` arrays of
        such data are made on the device, and DLPack exports it from there."""
        return self.is_valid("gpu", extent) and (
            not self.is_valid("host", extent) or (self.host is None and self.device is not None)
        )

    def location(self, extent: Extent | None = None) -> str:
        """Where the bytes of ``extent`` (None: all) are current: ``'both'``, ``'host'`` or
        ``'gpu'`` when every byte is current there (``'host'``: on the host, and on the
        device only in part or not at all), ``'mixed'`` when some are current only on the
        host and others only on the device."""
        state = self.current_state()
        if extent == ():  # (no bytes: none of them is stale)
            return State.BOTH.value
        if state is not State.MIXED:
            return state.value
        assert self._segments is not None
        labels = self._segments.labels_in(extent)
        if State.HOST in labels and State.DEVICE in labels:
            return "mixed"
        for state in (State.HOST, State.DEVICE):
            if state in labels:
                return state.value
        return "both"

    def ranges(self) -> list[tuple[int, int, str]]:
        """``(start, stop, where)`` for every byte range, where its bytes are current."""
        if self._segments is None:
            return [(0, self.nbytes, self.state.value)]
        return [(a, b, label.value) for a, b, label in self._segments.items()]

    def state_snapshot(self) -> tuple[State, Segments | None]:
        """The state to go back to with :meth:`cancel_launch`."""
        return self.state, None if self._segments is None else self._segments.copy()

    def _runs(self, extent: Extent | None, label: State) -> list[tuple[int, int]]:
        """The byte ranges of ``extent`` (None: all) in state ``label``, in order."""
        segments = self._segments
        if segments is None:
            if self.state is not label:
                return []
            # (an empty buffer's one run is (0, 0): its copy moves nothing, its state changes)
            return [(0, self.nbytes)] if extent is None else list(extent)
        return segments.runs(extent, label)

    def _set_state(
        self, extent: Extent | None, label: State, side: State | None = None, stream: Any = None
    ) -> None:
        """Put the bytes of ``extent`` (None: all) in state ``label``: the only place a
        state changes (a whole allocation's, or part of it).

        ``side`` is the side the operation in progress needs current (HOST for host reads and
        writes, DEVICE for device ones): past :data:`MAX_SEGMENTS` segments the labels are
        coarsened toward it (:meth:`_cap`), so that no byte of that operation is relabelled
        stale on its side. None leaves the count as it is (for a launch being prepared, whose
        ``device_written`` coarsens). ``stream``: the operation's stream, on which the
        coarsening's uploads are ordered (None: the host waits for earlier device work).
        """
        self._host_token = None  # (no lock-free host write across a label change)
        if self._undefined:  # (relabelled: copied or written, or stale on one side)
            self._undefined = (
                [] if extent is None else _minus(self._undefined, coalesce(sorted(extent), 0))
            )
        if extent is None:
            if self._writers:  # (MIXED while a launch's write is in flight: no fast path)
                self.state = State.MIXED
                self._segments = Segments(self.nbytes, label, State.BOTH)
            else:
                self.state = label
                self._segments = None
            return
        segments = self._segments
        if segments is None:
            if self.state is label or not extent:
                return
            segments = Segments(self.nbytes, self.state, State.BOTH)
        for lo, hi in extent:
            segments.assign(lo, hi, label)
        self.state = State.MIXED
        self._segments = segments
        if side is not None:
            self._cap_if_over(side, stream)
        self._normalise()

    def _cap_if_over(self, side: State, stream: Any = None) -> None:
        """:meth:`_cap` toward ``side`` if there are more than :data:`MAX_SEGMENTS` segments."""
        segments = self._segments
        if segments is not None and len(segments.labels) > MAX_SEGMENTS:
            self._cap(side, stream)

    def _normalise(self) -> None:
        """One state for the whole allocation when its segments agree (and no launch's write
        is in flight: see ``_writers``)."""
        segments = self._segments
        if segments is not None and not self._writers:
            uniform = segments.uniform()
            if uniform is not None:
                self.state = uniform
                self._segments = None

    def _cap(self, side: State, stream: Any = None) -> None:
        """Bring the segments back to at most :data:`MAX_SEGMENTS`, losing no byte.

        Two moves, cheapest first, each labelling bytes only with a side that holds them:

        1. a segment current on both sides next to one current on ``side`` only becomes
           ``side`` only (no copy; the other side is just no longer trusted there);
        2. otherwise the window of consecutive segments with the smallest span is made
           current on ``side`` by one bounded copy (a download staged through a scratch
           buffer, which writes only the device-only bytes; or uploads of the host-only
           bytes, never over bytes a launch in flight writes), then labelled ``side`` only.
           The window holds enough segments to bring the count down to half the cap: a loop
           of element writes pays one such copy every ``MAX_SEGMENTS // 2`` writes.

        Bytes current on both sides may be newer on the host (live or dead ``np.asarray``
        exports, not looked at yet) or on the device (a ``get('gpu')`` hand-out possibly
        written): they are never relabelled toward the other side, and the side is never
        changed (the operation needs it): the count then stays over the cap until an
        operation on the other side (nothing is lost); inside ``no_transfers()`` too.
        Uploads are made on ``stream`` (the operation's), ordered after earlier device work
        on the allocation (a kernel on another stream may still read the bytes they replace).
        """
        segments = self._segments
        assert segments is not None
        if side is State.DEVICE and (self.host_exports or self._host_snapshot is not None):
            return  # (exports may have written bytes current on both sides: a host operation caps)
        if side is State.HOST and self._possibly_written:
            return  # (a hand-out may have: the declaration, or a device operation, caps)
        other = State.DEVICE if side is State.HOST else State.HOST
        blocked = self._in_flight(None, own=True) if side is State.DEVICE else []
        while len(segments.labels) > MAX_SEGMENTS:
            if segments.absorb_both(side):
                continue
            window = segments.cheapest_window(
                len(segments.labels) - MAX_SEGMENTS // 2 + 1, blocked
            )
            if window is None:
                return
            runs = segments.runs((window,), other)
            try:
                if side is State.HOST:
                    self._download_staged(runs)
                else:
                    self._order_after_device_work(stream)
                    self._upload_runs(stream, runs)
            except (TransferError, MemoryError):
                # (no_transfers(), or no room for the copy: over the cap until the next
                # operation; the labels are still true, nothing was relabelled yet)
                return
            segments.assign(window[0], window[1], side)

    def _drop_stale_writers(self, keep: object) -> None:
        """Forget this thread's writes in flight of launches other than ``keep``: a thread's
        launch is in flight only until that thread goes on (a launch that raised with no
        clean-up, whose callbacks never ran, leaves its entries behind)."""
        me = threading.get_ident()
        kept = [w for w in self._writers if w[1] != me or w[0] is keep]
        if len(kept) != len(self._writers):
            self._writers = kept
            self._normalise()

    def _in_flight(self, launch: object, own: bool = False) -> list[tuple[int, int]]:
        """The bytes written by launches in flight other than ``launch``, sorted, merged;
        with ``own``, this thread's other launches too (else they count as over: see
        :meth:`_drop_stale_writers`)."""
        me = threading.get_ident()
        spans: list[tuple[int, int]] = []
        for owner, thread, extent, _, _, _ in self._writers:
            if owner is not launch and (own or thread != me):
                spans.extend(((0, self.nbytes),) if extent is None else extent)
        return coalesce(sorted(spans), 0) if spans else spans

    def _note_host_write(self, extent: Extent | None, before: bool = False) -> None:
        """The host bytes of ``extent`` are about to be written (``before``), or were: a
        launch of another thread in flight over them must not label them device-written
        when it ends (see :meth:`device_written`).

        Before the write, the host bytes of the overlap are copied: when the launch ends,
        only the bytes that differ from that copy count as written on the host, so that two
        over-approximated extents (strided views of more than 64 rows, e.g. the even and the
        odd elements) do not hide each other's bytes. After the write (a declaration), the
        whole overlap counts, unless this thread copied it before its write.
        """
        if not self._writers:
            return
        self._drop_stale_writers(None)
        me = threading.get_ident()
        intervals = [(0, self.nbytes)] if extent is None else list(extent)
        host = self.host
        for _, thread, written, records, _, _ in self._writers:
            if thread == me or not _overlap(written, extent):
                continue
            for lo, hi in _intersect(intervals, written, self.nbytes):
                if before and host is not None:
                    # Where the host copy is stale, the write changes the array even where
                    # it leaves the host bytes as they were: those bytes count whole.
                    stale = self._runs(((lo, hi),), State.DEVICE)
                    for a, b in stale:
                        records.append((me, a, b, None))
                    for a, b in _minus([(lo, hi)], stale) if stale else ((lo, hi),):
                        records.append((me, a, b, _bytes_of(host)[a:b].copy()))
                elif not any(
                    t == me and c is not None and a <= lo and hi <= b for t, a, b, c in records
                ):
                    records.append((me, lo, hi, None))

    def _host_written_during(self, records: list[Any]) -> list[tuple[int, int]]:
        """The bytes that :meth:`_note_host_write` records say were written on the host."""
        found: list[tuple[int, int]] = []
        host = _bytes_of(self.host) if self.host is not None else None
        for _, lo, hi, copy in records:
            if copy is None or host is None:
                found.append((lo, hi))
            else:
                found.extend(_differing(host[lo:hi], copy, lo))
        return coalesce(sorted(found), 0) if found else found

    def _unwritten(self, runs: list[tuple[int, int]], records: list[Any]) -> list[tuple[int, int]]:
        """``runs`` (sorted, disjoint) less the bytes a launch's ``records`` say another
        thread wrote on the host while it was in flight (:meth:`_host_written_during`)."""
        written = self._host_written_during(records) if records else []
        return _minus(runs, written) if written else runs

    def _end_write(self, launch: object, extent: Extent | None) -> list[tuple[int, int]]:
        """``launch``'s write of ``extent`` is no longer in flight; returns the host writes
        other threads made into it meanwhile: recorded ones, and writes through kept host
        exports into bytes current on both sides when the launch began (those it labelled
        host-current, see begin_device_write) or since (downloaded meanwhile)."""
        for k, entry in enumerate(self._writers):
            if entry[0] is launch and entry[2] == extent:
                del self._writers[k]
                written = self._host_written_during(entry[3])
                if self._host_snapshot is not None and self.host_memory != "mapped":
                    watched = coalesce(sorted(entry[4] + self._runs(extent, State.BOTH)), 0)
                    exported = self._export_writes(watched)
                    if exported:
                        written = coalesce(sorted(written + exported), 0)
                self._normalise()
                return written
        return []

    def _held_in_flight(
        self, runs: list[tuple[int, int]], launch: object
    ) -> list[tuple[int, int]]:
        """``runs`` (host-current bytes to upload) less the bytes another thread's launch in
        flight may be writing on the device, unless a host write changed them since the
        launch began. Those bytes are host-current only because the launch holds them: its
        host copy stands for the device's old bytes (:meth:`begin_device_write`), or the
        kernel overwrites them whole (an ``Out`` never uploaded); uploading them would copy
        old values over the kernel's results. They stay host-current until the launch is
        enqueued (then device-written)."""
        me = threading.get_ident()
        held: list[tuple[int, int]] = []
        for owner, thread, extent, records, _, _ in self._writers:
            if owner is launch or thread == me:
                continue
            span = [(0, self.nbytes)] if extent is None else list(extent)
            held.extend(self._unwritten(span, records))
        if not held:
            return runs
        return _minus(runs, coalesce(sorted(held), 0))

    def _export_writes(self, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The bytes of ``runs`` (bytes current on both sides when the snapshot took them)
        written through host exports since, exactly (a launch ending keeps them out of its
        device-written labels: :meth:`check_host_exports` does not look while a launch is
        prepared)."""
        snapshot = self._host_snapshot
        if snapshot is None or self.host is None:
            return []
        return _changed_ranges(self.host, snapshot, runs, exact=True)

    def _forget_writes(self, launch: object) -> None:
        """None of ``launch``'s writes is in flight any more (it failed)."""
        kept = [entry for entry in self._writers if entry[0] is not launch]
        if len(kept) != len(self._writers):
            self._writers = kept
            self._normalise()

    def _mergeable(
        self, runs: list[tuple[int, int]], forbidden: State, launch: object = None
    ) -> list[tuple[int, int]]:
        """``runs`` with neighbours closer than the coalescing gap merged, where the gap
        holds no byte in state ``forbidden`` (whose copy the merged copy would overwrite).

        For an upload (``forbidden`` DEVICE) while a device copy handed out by ``get('gpu')``
        may have been written, bytes current on both sides may be newer on the device too:
        nothing is merged then. Only the bytes of ``runs`` change state after the copy (the
        gaps keep theirs: bytes a launch being prepared will write stay HOST until it is
        enqueued)."""
        gap = coalesce_bytes()
        if forbidden is State.DEVICE and self._possibly_written:
            gap = 0
        # A coalesced upload never crosses bytes another launch in flight writes (their
        # labels are not in place yet: a gap copied over them would overwrite that kernel's
        # results; the bytes ``launch``, being prepared, writes hold the host's values).
        flying = self._in_flight(launch) if forbidden is State.DEVICE and self._writers else ()
        merged: list[tuple[int, int]] = []
        for lo, hi in runs:
            if merged and lo - merged[-1][1] < gap:
                between = ((merged[-1][1], lo),)
                if not self._runs(between, forbidden) and not _overlap(tuple(flying), between):
                    merged[-1] = (merged[-1][0], hi)
                    continue
            merged.append((lo, hi))
        return merged

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
        if self.state is State.BOTH or (self.state is State.MIXED and self._launch is None):
            assert self.host is not None
            self.wait_host()
            changed = _changed_ranges(self.host, snapshot, self._runs(None, State.BOTH))
            if changed:
                # Written through an export: those bytes of the device copy are stale.
                self._end_hand_out()
                self._note_host_write(tuple(changed))
                self._set_state(tuple(changed), State.HOST, State.HOST)
            if self.host_exports:
                # exports that may write are alive: keep watching (the changed bytes, now
                # HOST, are taken into the snapshot when they are current on both sides again)
                return
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
        if self._undefined:
            # ``empty``'s undefined bytes: the exports may write them unseen (a write equal to
            # the host byte it replaces), and the device's differ: the host's are the array's.
            undefined = self._runs(tuple(self._undefined), State.BOTH)  # (_cap may relabel)
            self._undefined = []
            if undefined:
                self._set_state(tuple(undefined), State.HOST, State.HOST)
        if (
            self._host_snapshot is None
            and (self.state is State.BOTH or self.state is State.MIXED)
            and self.host_memory != "mapped"
            and self.host is not None
        ):
            try:
                self._host_snapshot = _snapshot(self.host)
            except MemoryError:
                # No room for the copy: writes through the exports could not be found, so
                # the device copy counts as stale where it was current (one upload at its
                # next use).
                self._set_state(tuple(self._runs(None, State.BOTH)), State.HOST, State.HOST)

    def _took_into_snapshot(self, runs: list[tuple[int, int]]) -> None:
        """The host bytes of ``runs`` were just made equal to the device copy's: the
        snapshot compared by :meth:`check_host_exports` takes them (one is taken if host
        exports are alive and there is none)."""
        snapshot = self._host_snapshot
        if snapshot is None:
            if self.host_exports:  # exports may be written from now on: snapshot
                self.wait_host()
                self.watch_host_exports()
            return
        self.wait_host()
        assert self.host is not None  # (a snapshot is of a host buffer)
        host = _bytes_of(self.host)
        for lo, hi in runs:
            snapshot[lo:hi] = host[lo:hi]

    # --- reads: make a side valid ----------------------------------------------------------

    def ensure_host(self, stream: Any = None, extent: Extent | None = None) -> np.ndarray:
        """Make the host copy current (of the bytes of ``extent``; None: all), copying the
        stale bytes among them, and return the host buffer."""
        with self.lock:
            if self.state is State.DEVICE or self.state is State.MIXED:
                runs = self._runs(extent, State.DEVICE)
                if runs:
                    self._download(stream, runs)
            if stream is None or _backend.is_default_stream(stream):
                self.wait_host()
            host = self._host_buffer()
            if (
                self._host_token is None
                and self.state is State.HOST
                and self._host_event is None
                and self._launch is None
            ):  # (the next host reads and scalar writes take their fastest path)
                self._host_token = object()
            return host

    def ensure_device(
        self, stream: Any = None, launch: object = None, extent: Extent | None = None
    ) -> Any:
        """Make the device copy current (of the bytes of ``extent``; None: all), copying the
        stale bytes among them, and return the device buffer.

        Device work on ``stream`` is ordered after earlier device work on this allocation
        (on any stream). ``launch`` identifies the kernel launch being prepared, if any.
        """
        with self.lock:
            self.check_host_exports()
            self._order_after_device_work(stream)
            device = self._device_buffer(stream)
            if self.state is State.HOST or self.state is State.MIXED:
                runs = self._runs(extent, State.HOST)
                if launch is not None and self._launch is launch and runs:
                    runs = _minus(runs, self._launch_ranges)  # (equal for this launch)
                if runs and self._writers:
                    runs = self._held_in_flight(runs, launch)
                if runs:
                    self._upload(stream, runs, launch)
            return device

    def _upload(self, stream: Any, runs: list[tuple[int, int]], launch: object = None) -> None:
        """Copy the host bytes of ``runs`` (state HOST) to the device copy: BOTH (for
        ``launch``, the launch being prepared, if any)."""
        self._upload_runs(stream, runs, launch)
        whole = runs == [(0, self.nbytes)]
        self._set_state(None if whole else tuple(runs), State.BOTH, State.DEVICE, stream)
        if whole:  # (a copy of the host data: nothing written through a hand-out is left)
            self._end_hand_out()
        self._took_into_snapshot(runs)

    def _upload_runs(
        self, stream: Any, runs: list[tuple[int, int]], launch: object = None
    ) -> None:
        """Copy the host bytes of ``runs`` to the device copy (no state change; the caller
        takes them into the host-export snapshot once they are labelled)."""
        host = self._host_buffer()  # (made filled if it was never needed: its bytes)
        self._host_token = None  # (a lock-free host write meanwhile is made again)
        copies = self._mergeable(runs, State.DEVICE, launch)
        _transfer.host_to_device(host, self.device, label=self.label, stream=stream, ranges=copies)
        # The upload may still be reading the host buffer: host writes wait for it
        # (and a pooled buffer is not reused before it is done, if this array dies).
        self._host_event = self._note_device_work(stream)
        _pinned_pool.fence(host, self._host_event)

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

    def mark_changed(self, where: Where, extent: Extent | None = None) -> None:
        """Declare the ``where`` copy modified (the bytes of ``extent``; None: all): the other
        copy of those bytes becomes stale."""
        with self.lock:
            spilled = self._spilled_hand_out and where == "gpu"
            if spilled and self.state is State.HOST:
                self._launch = None
                self._end_hand_out()
                return  # spilled once nothing held it: the host copy holds what was written
            stale = State.DEVICE if where == "host" else State.HOST
            stale_runs = self._runs(extent, stale)
            if stale_runs and where == "gpu" and self._writers:
                # (bytes another thread's launch in flight holds are equal on both sides)
                stale_runs = self._held_in_flight(stale_runs, None)
            if stale_runs:
                # Writes to a stale copy would be lost (or mixed with stale bytes).
                raise RuntimeError(
                    f"{self.label}: mark_changed({where!r}) on an array whose "
                    f"{'host' if where == 'host' else 'device'} copy is stale; call "
                    f"get({where!r}) before writing to the "
                    f"{'host' if where == 'host' else 'device'} copy"
                )
            if where == "host":
                self._note_host_write(extent)
            self._launch = None
            self._launch_ranges = []
            self._end_hand_out()  # (what the caller wrote is declared now)
            if self.host_memory != "mapped":
                # An array made with no data has a buffer on the declared side first (made,
                # and filled, now): the bytes it declares current are there.
                if where == "host":
                    self._host_buffer()
                elif self.device is None:
                    self._device_buffer(None)
                if extent is None:
                    self._host_snapshot = None  # (the declared side is the current one)
                side = State.HOST if where == "host" else State.DEVICE
                self._set_state(extent, side, side)

    def host_current(self, interval: tuple[int, int]) -> bool:
        """True when the host bytes of ``interval`` are current and can be read now, with no
        copy or wait (the host fast path for an array current partly on each side)."""
        with self.lock:
            segments = self._segments
            return (
                segments is not None
                and self._host_event is None
                and self._device_event is None
                and self._host_snapshot is None
                and not segments.runs((interval,), State.DEVICE)
            )

    def overwrite_host(self, extent: Extent) -> None:
        """The caller, holding the lock, is about to overwrite every host byte of ``extent``
        with a write that cannot fail (an element of a converted value): those bytes are
        current on the host only from now on. The one state change of the host fast path
        for arrays current partly on each side."""
        if self._writers:
            self._note_host_write(extent, before=True)
        self._launch = None
        self._launch_ranges = []
        if self._handed_out or self._possibly_written:
            self._end_hand_out()
        if self._host_event is not None:
            self.wait_host()
        if self.host_memory != "mapped":
            self._set_state(extent, State.HOST, State.HOST)

    def host_written(self, extent: Extent | None = None) -> None:
        """Record that the host bytes of ``extent`` (None: all) were written (after
        :meth:`prepare_host_write`): the device copy of them is stale."""
        self.mark_changed("host", extent)

    def prepare_host_write(self, overwrite_all: bool, extent: Extent | None = None) -> np.ndarray:
        """Return the host buffer, current (in ``extent``; None: all) unless the caller
        overwrites every byte of ``extent``. The caller writes, then calls
        :meth:`host_written` with the same extent."""
        with self.lock:
            self._launch = None
            self._launch_ranges = []
            self._end_hand_out()
            if overwrite_all and self._runs(extent, State.DEVICE):
                host = self._host_buffer()
                self.wait_host()
                if self._writers:
                    self._note_host_write(extent, before=True)
                if self.host_memory != "mapped":
                    # (its old bytes are never needed)
                    self._set_state(extent, State.HOST, State.HOST)
                return host
            host = self.ensure_host(None, extent)
            if self._writers:  # (after the download: only the caller's write differs)
                self._note_host_write(extent, before=True)
            return host

    def prepare_device_write(
        self,
        overwrite_all: bool,
        stream: Any = None,
        launch: object = None,
        extent: Extent | None = None,
    ) -> Any:
        """Return the device buffer, current (in ``extent``; None: all) unless the caller
        overwrites every byte of ``extent``.

        With ``overwrite_all`` nothing is copied and the state is left alone: the writer calls
        :meth:`device_written` once its write has been enqueued.
        """
        with self.lock:
            self.check_host_exports()
            if overwrite_all:  # (the host bytes of the extent are never needed there)
                self._order_after_device_work(stream)
                return self._device_buffer(stream)
            return self.ensure_device(stream, launch, extent)

    def begin_device_write(self, launch: object = None, extent: Extent | None = None) -> None:
        """A kernel is about to write the device copy (the bytes of ``extent``; None: all).

        Until the launch is enqueued (:meth:`device_written`), the host copy, if current,
        stays the authoritative one: a launch that fails half-way leaves no stale copy valid.
        For the rest of ``launch``'s arguments the device copy still equals the host copy, so
        the same allocation passed twice (``k(x, x)``, ``k(y[:4], y[4:])``) is not re-uploaded.
        """
        with self.lock:
            self.check_host_exports()
            if self.host_memory == "mapped":
                return
            # In flight until device_written: MIXED meanwhile (no host fast path), and host
            # writes of other threads into ``extent`` are recorded (see _writers).
            if self._writers:
                self._drop_stale_writers(launch)
            both = self._runs(extent, State.BOTH)
            # (``both``: the bytes whose host copy stands for the device's until the launch
            # is enqueued; cancel_launch gives them their label back)
            undefined = _intersect(self._undefined, tuple(both), self.nbytes) if both else []
            self._writers.append((launch, threading.get_ident(), extent, [], both, undefined))
            if self._segments is None:
                self._segments = Segments(self.nbytes, self.state, State.BOTH)
                self.state = State.MIXED
                self._host_token = None
            if both:
                whole = extent is None and self._segments.uniform() is State.BOTH
                # (not coarsened now: device_written does, with the launch's labels)
                self._set_state(None if whole else tuple(both), State.HOST)
                if self._launch is not launch:
                    self._launch_ranges = []
                self._launch = launch
                self._launch_ranges = coalesce(sorted(self._launch_ranges + both), 0)

    def device_written(
        self, stream: Any = None, extent: Extent | None = None, launch: object = None
    ) -> None:
        """Record that device work (a kernel) wrote the device copy (the bytes of
        ``extent``; None: all) on ``stream``; for ``launch``, whose write of ``extent``
        (:meth:`begin_device_write`) is no longer in flight then."""
        with self.lock:
            host_writes = self._end_write(launch, extent) if self._writers else []
            if self.host_memory != "mapped":
                if host_writes:
                    # Bytes of the extent that another thread wrote on the host while the
                    # launch was in flight keep that write (the launch's extent may be a
                    # covering range; where it is not, the two wrote the same bytes at once).
                    whole = [(0, self.nbytes)] if extent is None else list(extent)
                    self._set_state(tuple(_minus(whole, host_writes)), State.DEVICE)
                else:
                    self._set_state(extent, State.DEVICE)
            self._launch = None
            self._launch_ranges = []
            self._end_hand_out()
            self._note_device_work(stream)
            self._cap_if_over(State.DEVICE, stream)
            self._normalise()

    def end_resident_write(self, launch: object) -> bool:
        """``launch``, which took the launch fast path (:meth:`launch_value`) with a writing
        argument over this allocation, is enqueued: that write is no longer in flight.
        Returns True when live host exports need refreshing (as after any launch's write).

        The allocation was device-only when the launch began. What other threads did
        meanwhile is undone where it could hide the kernel's write: bytes of the argument's
        extent they downloaded (current on both sides now, with the values from before the
        kernel) or labelled host-current by a write covering more than they wrote (a strided
        view's covering range) are device-only again, except the bytes their host writes
        really changed and the bytes other launches in flight write (their own ends label
        those).
        """
        with self.lock:
            for entry in self._writers:
                if entry[0] is launch:
                    extent = entry[2]
                    break
            else:
                return False
            host_writes = self._end_write(launch, extent)
            if self.state is State.DEVICE or self.host_memory == "mapped":
                return False
            keep = coalesce(sorted(host_writes + self._in_flight(launch, own=True)), 0)
            whole = [(0, self.nbytes)] if extent is None else list(extent)
            self._set_state(tuple(_minus(whole, keep)), State.DEVICE)
            self._cap_if_over(State.DEVICE)
            self._normalise()
            return bool(self.host_exports)

    def device_read(self, stream: Any = None) -> None:
        """Record that device work read the device copy on ``stream`` (no state change)."""
        with self.lock:
            self._note_device_work(stream)

    def cancel_launch(self, state: tuple[State, Segments | None], launch: object = None) -> None:
        """A launch being prepared failed before it was enqueued: its labels go back to
        ``state`` (flags unchanged by a refused launch).

        ``state`` is this allocation's :meth:`state_snapshot` when the launch first touched
        it. Only the labels the launch set are undone: the bytes :meth:`begin_device_write`
        labelled host-current for it are current on both sides again (but those another
        thread wrote on the host meanwhile, recorded by :meth:`_note_host_write`, or
        labelled otherwise since, e.g. by another thread's kernel), and bytes current on the
        host only in ``state`` that an upload for the launch made current on both sides are
        host-only again (the upload is forgotten).
        Every other byte keeps its label: other threads may have changed it meanwhile.
        """
        with self.lock:
            if self._launch is launch or launch is None:
                self._launch = None
                self._launch_ranges = []
            if self.host_memory != "mapped":
                old_state, old_segments = state
                for owner, _, _, records, standing, undefined in self._writers:
                    if owner is not launch or not standing:
                        continue
                    # The labels the launch set: the bytes begin_device_write labelled
                    # host-current for it are current on both sides again, but those another
                    # thread wrote on the host meanwhile, or labelled otherwise since (its
                    # kernel's device writes), which keep their labels.
                    standing = self._unwritten(standing, records)
                    back = self._runs(tuple(standing), State.HOST) if standing else []
                    if back:
                        self._set_state(tuple(back), State.BOTH)
                        again = _intersect(undefined, tuple(back), self.nbytes)
                        if again:  # (``empty``'s bytes the launch never wrote)
                            self._undefined = coalesce(sorted(self._undefined + again), 0)
                self._forget_writes(launch)
                if old_segments is None:
                    forget = [(0, self.nbytes)] if old_state is State.HOST else []
                else:
                    forget = [(a, b) for a, b, label in old_segments.items() if label is State.HOST]
                for lo, hi in forget:
                    uploaded = self._runs(((lo, hi),), State.BOTH)
                    if uploaded:
                        self._set_state(tuple(uploaded), State.HOST)
                self._cap_if_over(State.HOST)
                self._normalise()
            if self.host_exports:  # (BOTH again: keep watching exports for writes)
                self.watch_host_exports()

    def end_failed_launch(self, launch: object) -> None:
        """``launch`` raised after this allocation was prepared for it: it is no longer the
        launch being prepared. The state stays as it is: a written argument's device copy
        may be half written, and its host copy stays the current one (``HOST``)."""
        with self.lock:
            if self._launch is launch:
                self._launch = None
                self._launch_ranges = []
            if self._writers:
                if self.host_memory != "mapped":
                    # Bytes of its extents that another thread downloaded meanwhile hold the
                    # values from before the kernel, which may have written part of them:
                    # the device's count (no two values labelled current), except where
                    # another thread wrote on the host.
                    for owner, _, extent, records, _, _ in list(self._writers):
                        if owner is not launch:
                            continue
                        both = self._unwritten(self._runs(extent, State.BOTH), records)
                        if both:
                            self._set_state(tuple(both), State.DEVICE)
                self._forget_writes(launch)

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
            _backend.address_handed_out(self.device)
            self._handed_out = [ref for ref in self._handed_out if ref() is not None]
            self._handed_out.append(weakref.ref(handle))  # (every one since the last change)
            self._possibly_written = True
            self._spilled_hand_out = False
            return handle

    @property
    def device_handed_out(self) -> bool:
        """True while a device copy handed out by ``get('gpu')`` (in any state) may still be
        written through a device array the caller holds (so eviction keeps it)."""
        return self._possibly_written and any(ref() is not None for ref in self._handed_out)

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
                _backend.address_handed_out(self.device)

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
            runs = self._runs(None, State.DEVICE)
            if runs:
                self._download(stream, runs)
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
            if self._writers:
                self._drop_stale_writers(None)
                if self._writers:
                    # (its kernel writes the device buffer: dropping it now would lose the
                    # results, and the launch's labels would name a buffer that is gone)
                    raise RuntimeError(
                        f"{self.label}: free_device() while another thread's kernel launch "
                        "writing this array is in flight; call free_device() after the "
                        "launch returns (order the two threads yourself)"
                    )
            if self._possibly_written:  # (a host write through an export is not overwritten)
                self.check_host_exports()
            dirty = self._dirty_runs()  # (also a copy handed out by get('gpu'), possibly written)
            if dirty:
                self._download(None, dirty)
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
            or self._writers
            or self.device_handed_out
        ):
            return None
        return sum(hi - lo for lo, hi in self._dirty_runs())

    def _dirty_runs(self) -> list[tuple[int, int]]:
        """The byte ranges only the device copy may hold: those in state ``DEVICE``, and
        those in ``BOTH`` too while a copy handed out by ``get('gpu')`` may have been
        written since."""
        runs = self._runs(None, State.DEVICE)
        if self._possibly_written and self.state is not State.HOST:
            runs = coalesce(sorted(runs + self._runs(None, State.BOTH)), 0)
        return runs

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
            dirty = self._dirty_runs()
            spilled_hand_out = self._possibly_written and bool(dirty)  # (really spilled)
            if dirty:
                if not spill:
                    return 0
                self._download(None, dirty, spill=True)
                self.wait_host()
            self._drop_device()
            self._spilled_hand_out = spilled_hand_out
            return self.nbytes

    # --- internals ------------------------------------------------------------------------

    def _download(
        self, stream: Any, runs: list[tuple[int, int]] | None = None, spill: bool = False
    ) -> None:
        """Copy the device bytes of ``runs`` (None: all) to the host copy: BOTH there.

        Writes made through host exports are looked for first: a host byte written through
        one is current on the host only, and no copy (a coalesced gap included) goes over it.
        """
        host = self._host_buffer()
        if self._host_snapshot is not None:
            self.check_host_exports()
            written = self._runs(None, State.HOST)
            if written:
                runs = _minus([(0, self.nbytes)] if runs is None else runs, written)
                if not runs:
                    return
        self._order_after_device_work(stream)
        if runs == [(0, self.nbytes)]:
            runs = None
        copies = None if runs is None else self._mergeable(runs, State.HOST)
        _transfer.device_to_host(
            self.device, host, label=self.label, stream=stream, spill=spill, ranges=copies
        )
        self._set_state(None if runs is None else tuple(runs), State.BOTH, State.HOST)
        self._host_event = self._note_device_work(stream)
        _pinned_pool.fence(host, self._host_event)
        if spill:  # (the device copy is dropped next: HOST, nothing to watch)
            self._host_snapshot = None
        else:
            self._took_into_snapshot([(0, self.nbytes)] if runs is None else runs)

    def _download_staged(self, runs: list[tuple[int, int]]) -> None:
        """Copy the device bytes of ``runs`` to the host copy in one transfer of their
        covering span, through a scratch buffer: only the bytes of ``runs`` are written on
        the host (no state change; for :meth:`_cap`)."""
        if not runs:
            return
        host = self._host_buffer()
        self._order_after_device_work(None)
        self.wait_host()
        _transfer.device_to_host_staged(self.device, host, label=self.label, runs=runs)
        self._took_into_snapshot(runs)

    def _drop_device(self) -> None:
        """Let go of the (stale or duplicate) device copy; the host copy is current."""
        self._order_after_device_work(None)
        self.device = None
        self._block = None  # (it keeps what its free waits for: see _note_device_work)
        self._device_views.clear()  # views hold references to the device memory
        self._device_event = None
        self._default_stream_work = False
        self._launch = None
        self._launch_ranges = []
        self._undefined = []  # (one buffer left)
        # (every byte is current on the host now; one never made holds its fill still)
        self._set_state(None, State.HOST if self.host is not None else State.BOTH)
        self._end_hand_out()  # (evict_device sets _spilled_hand_out after this, if it spilled)
        self._host_snapshot = None
        if self._device_owned and self._exported_device is None:
            self._device_owned = False
            _memory.release(self)

    def _host_buffer(self) -> np.ndarray:
        host = self.host
        if host is None:
            with self.lock:  # (fast paths make it without the lock: made once, filled first)
                host = self.host
                if host is None:
                    host = _host_buffers.host_empty(
                        self.shape, self.dtype, self.order, self.host_memory
                    )
                    fill = self._fill
                    if fill is not None:
                        if fill[0] is not UNDEFINED:
                            host[...] = fill[0]
                        elif self.device is not None:
                            # ``empty``: the device buffer, made first, holds other bytes;
                            # both stay current (nothing to copy) until an export is taken.
                            both = self._runs(None, State.BOTH)
                            self._undefined = [(lo, hi) for lo, hi in both if lo < hi]
                        if self.device is not None:
                            self._fill = None  # (both buffers exist)
                    self.host = host
                    if fill is not None and fill[0] is UNDEFINED and self.device is None:
                        # ``empty``, host first: the new host buffer holds bytes no other
                        # buffer holds, so bytes "current on both sides" (never written) are
                        # the host's now (no label says a device buffer never made holds
                        # them; one made later gets them uploaded). Device first: see
                        # ``_undefined`` above.
                        both = self._runs(None, State.BOTH)
                        if both:
                            self._set_state(tuple(both), State.HOST)
        return host

    def _device_buffer(self, stream: Any) -> Any:
        if self.device is None:
            if self._exported_device is not None:  # kept for a consumer anyway: reuse it,
                self.device = self._exported_device  # so that the consumer sees current data
                self._block = _backend.pooled_block(self.device)
                return self.device
            _backend.check_device_dtype(self.dtype)
            # Within the device memory budget (may evict other arrays' device copies).
            device = _memory.allocate(
                self, lambda: _backend.device_empty(self.shape, self.dtype, self.order, stream)
            )
            self._device_owned = True
            fill = self._fill
            noted = False
            if fill is not None:
                if fill[0] is not UNDEFINED:  # made filled on the device: no copy
                    _backend.device_fill(device, fill[0], stream)
                    self._note_device_work(stream)
                    noted = True
                if self.host is not None:
                    self._fill = None  # (both buffers exist)
            self.device = device
            self._block = _backend.pooled_block(device)
            if fill is not None and fill[0] is UNDEFINED and self.host is not None:
                # ``empty``: the host buffer, made first, holds whatever was written to it
                # (maybe through an export, unseen where it equals the bytes it replaced);
                # the new device buffer holds other bytes. The host's are the array's.
                both = self._runs(None, State.BOTH)
                if both:
                    self._set_state(tuple(both), State.HOST)
            if not noted and self._block is not None:
                # Allocated from the pool on ``stream``: usable by work ordered after the
                # allocation there, so work on other streams is ordered after it as after
                # device work (the work this buffer is for follows on ``stream`` itself).
                self._note_device_work(stream)
        elif self._device_owned:
            _memory.touch(self)
        return self.device

    def _note_device_work(self, stream: Any) -> Any:
        """Record that device work (kernel or copy) on ``stream`` touches this allocation.

        Returns the event recorded for it: None for work on the default stream (except for
        mapped memory, whose host readers must wait for device writers), which every later
        copy and every blocking stream is ordered after anyway; a non-blocking stream is made
        to wait for the default stream then (see :meth:`_order_after_device_work`). Only
        the last event is kept, so it must cover all earlier work: ``stream`` is first made
        to wait for earlier work it was not ordered after (:meth:`_merge_earlier_work`). A
        pooled device buffer's block gets the same record (its free waits for it).
        """
        if self._device_event is not None or self._default_stream_work:
            ordered = self._ordered
            if (
                ordered is None
                or ordered[0] is not self._device_event
                or ordered[1] is not self._default_stream_work
                or ordered[2] is not stream
            ):
                # ``stream`` was not ordered after the earlier work on this allocation just
                # before this work (another thread noted work on another stream in between,
                # e.g. two kernels reading it at once): it is now, so that the event recorded
                # below, the only one kept, covers that work too.
                self._merge_earlier_work(stream)
        mapped = self.host_memory == "mapped"
        event = _backend.record_event(stream, always=mapped)
        self._device_event = event
        default = self._default_stream_work = (
            event is None and _backend.is_gpu_default_stream(stream)
        )
        self._ordered = (event, default, stream)  # (``stream`` is ordered after its own work)
        block = self._block
        if block is not None:  # (what the pooled buffer's free waits for, however it comes)
            block.last_event = event
            block.after_default_stream = default
        return event

    def _merge_earlier_work(self, stream: Any) -> None:
        """Make ``stream`` (None: the default stream) wait for the recorded earlier work."""
        target = 0 if stream is None else stream  # (device work on the default stream)
        if self._device_event is not None:
            _backend.wait_event(self._device_event, target)
        if self._default_stream_work and not _backend.is_default_stream(target):
            _backend.wait_for_default_stream(target)

    def _order_after_device_work(self, stream: Any) -> None:
        """Order work on ``stream`` (the host for None) after earlier device work."""
        ordered = self._ordered
        if (
            stream is not None
            and ordered is not None
            and ordered[2] is stream
            and ordered[0] is self._device_event
            and ordered[1] is self._default_stream_work
        ):
            return  # (``stream`` is ordered after that work already)
        if self._default_stream_work and stream is not None:
            _backend.wait_for_default_stream(stream)
        if self._device_event is not None:
            _backend.wait_event(self._device_event, stream)
            if stream is None:  # the host waited: that work is done
                self._device_event = None
        # (what work on ``stream`` is ordered after now; see _note_device_work)
        self._ordered = (self._device_event, self._default_stream_work, stream)

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
        ``pins.hold(key, (allocation, snapshot))`` (a :meth:`state_snapshot`;
        :class:`smartarray._core.memory.LaunchPins`; its release marks the copy used for
        the budget's least-recently-used order) and
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
                span = self._device_views.get((key, "extent")) if writes else None
                if writes and span is None:
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
                span = self._device_views.get((key, "extent"))
                if span is None:  # (the bytes a writing launch may write: _writers)
                    span = extent_of(key[0], key[1], key[2], key[3].itemsize, self.nbytes)
                    self._device_views[(key, "extent")] = span
            pins.hold(self.key, (self, (state, None)))  # (a state_snapshot: uniform)
            if writes:
                # In flight until the launch is enqueued (LaunchPins.__call__ ends it:
                # end_resident_write): host writes of other threads meanwhile are recorded
                # (see _writers), as for the general path's begin_device_write.
                assert span is not None
                self._writers.append((pins.token, _thread.get_ident(), span[0], [], [], []))
                pins.written.append(self)
            self._default_stream_work = default_stream_work
            self._ordered = None  # (a note on another stream must merge this launch's work)
            if default_stream_work:  # (recorded again once enqueued: LaunchPins.__call__)
                pins.default_work = True
                block = self._block
                if block is not None:  # (see _note_device_work; no event is pending here)
                    block.after_default_stream = True
            return value


def _minus(runs: list[tuple[int, int]], ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``runs`` outside ``ranges`` (both sorted, disjoint)."""
    result = []
    for lo, hi in runs:
        for a, b in ranges:
            if b <= lo or a >= hi:
                continue
            if a > lo:
                result.append((lo, a))
            lo = max(lo, b)
            if lo >= hi:
                break
        if lo < hi:
            result.append((lo, hi))
    return result


def _differing(x: np.ndarray, y: np.ndarray, offset: int) -> list[tuple[int, int]]:
    """The byte ranges where ``x`` and ``y`` (equal-length uint8 arrays) differ, shifted by
    ``offset``."""
    diff = np.concatenate(([False], x != y, [False]))
    edges = np.flatnonzero(diff[1:] != diff[:-1])
    return [
        (offset + int(b), offset + int(e)) for b, e in zip(edges[::2], edges[1::2], strict=True)
    ]


def _intersect(
    intervals: list[tuple[int, int]], extent: Extent | None, nbytes: int
) -> list[tuple[int, int]]:
    """The parts of ``intervals`` inside ``extent`` (None: all ``nbytes`` bytes)."""
    found = []
    for a, b in intervals:
        for c, d in ((0, nbytes),) if extent is None else extent:
            lo, hi = max(a, c), min(b, d)
            if lo < hi:
                found.append((lo, hi))
    return found


def _overlap(extent: Extent | None, other: Extent | None) -> bool:
    """True when two extents (None: every byte) share a byte."""
    if extent is None or other is None:
        return extent != () and other != ()
    return any(a < d and c < b for a, b in extent for c, d in other)


def _bytes_of(host: np.ndarray) -> np.ndarray:
    """The contiguous array ``host`` as flat bytes, in memory order."""
    return host.reshape(-1, order="A").view(np.uint8)


def _snapshot(host: np.ndarray) -> np.ndarray:
    """A copy of the bytes of the contiguous array ``host`` (see :func:`_changed_ranges`)."""
    return _bytes_of(host).copy()


def _changed_ranges(
    host: np.ndarray, snapshot: np.ndarray, runs: list[tuple[int, int]], exact: bool = False
) -> list[tuple[int, int]]:
    """The byte ranges within ``runs`` where ``host`` differs from ``snapshot``: compared in
    16 MiB pieces (as 8-byte words where they line up); the differing bytes of a piece found
    exactly, then merged within each run across gaps below the coalescing gap (at most 32
    ranges per run: past that, the run's covering range). With ``exact``, the differing
    bytes themselves (touching ranges merged, nothing else)."""
    a = _bytes_of(host)
    changed: list[tuple[int, int]] = []
    step = 16 << 20
    for lo, hi in runs:
        found: list[tuple[int, int]] = []
        for start in range(lo, hi, step):
            stop = min(start + step, hi)
            x, y = a[start:stop], snapshot[start:stop]
            if start % 8 == 0 and (stop - start) % 8 == 0:
                if np.array_equal(x.view(np.uint64), y.view(np.uint64)):
                    continue
            elif np.array_equal(x, y):
                continue
            found.extend(_differing(x, y, start))
        if exact:
            changed.extend(coalesce(found, 0))
            continue
        found = coalesce(found)
        if len(found) > 32:
            found = [(found[0][0], found[-1][1])]
        changed.extend(found)
    return changed
