"""The device memory budget: a limit on SmartArrays' device memory, kept by eviction.

Every device buffer smartarray allocates for an allocation is *charged* here, and the live
allocations holding one are kept in least-recently-used order (weakly: the registry never keeps
an array alive). Before an allocation that would take the total over the limit
(:func:`set_device_memory_limit`, or the ``SMARTARRAY_DEVICE_MEMORY_LIMIT`` environment
variable), and when the device itself runs out of memory, device copies are evicted, least
recently used first:

1. *clean* copies (the host copy is current too) are dropped, at no cost;
2. *dirty* copies (only the device copy is current) are *spilled*: one download into the host
   buffer (counted in the ledger as a spill), then dropped.

When the device itself runs out of memory, the device memory pool
(:mod:`smartarray._core.device_pool`) is trimmed first, and the allocation retried, before
anything is evicted. The budget counts the live buffers only, not what the pool keeps for
reuse.

Copies with in-flight asynchronous work come last (their event is waited for). Never evicted:
the allocation being served, the allocations used by a kernel launch or CUDA ufunc call being
prepared (:class:`LaunchPins`), allocations whose device address was exported through
``__cuda_array_interface__``, device arrays the user adopted without copying, and allocations
another thread is working on (their lock is taken without waiting, so two threads evicting
each other's arrays never deadlock). If the request still does not fit, a :class:`MemoryError`
names the request, the limit and what is held, and nothing was evicted for it.

The eviction itself (the download and the flag changes) is :meth:`Allocation.evict_device`;
this module only decides what to evict and keeps the accounts.
"""

from __future__ import annotations

import collections
import numbers
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import numpy as np

from . import backend as _backend
from .errors import TransferError


class Allocation(Protocol):
    """What the budget needs of an allocation: :class:`smartarray._core.coherence.Allocation`
    is one. (Typed structurally so that this module, which the state machine calls, does not
    import it back.)"""

    key: int
    nbytes: int
    lock: Any  # a re-entrant lock
    state: Any  # a coherence.State
    # (set by LaunchPins once a launch on the default stream is enqueued)
    _default_stream_work: bool
    _ordered: Any
    _block: Any
    # (a launch's writes in flight, and the labels: see LaunchPins.__call__)
    _writers: list[Any]
    _segments: Any

    @property
    def device_handed_out(self) -> bool: ...

    @property
    def label(self) -> str: ...

    def check_host_exports(self) -> None: ...

    def state_snapshot(self) -> Any: ...

    def cancel_launch(self, state: Any, launch: object = None) -> None: ...

    def end_resident_write(self, launch: object) -> bool: ...

    def refresh_host_exports(self, stream: Any = None) -> None: ...

    def end_failed_launch(self, launch: object) -> None: ...

    def eviction_cost(self) -> int | None: ...

    def device_busy(self) -> bool: ...

    def evict_device(self, spill: bool) -> int: ...


T = TypeVar("T")

ENVIRONMENT_VARIABLE = "SMARTARRAY_DEVICE_MEMORY_LIMIT"

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")

# How long an eviction keeps retrying allocations that other threads hold locked.
_CONTENTION_SECONDS = 1.0


def parse_size(value: int | str) -> int:
    """Bytes in ``value``: an int, or a string such as ``"4GB"``, ``"512 MiB"``, ``"1e6"``.

    Decimal units (``kB``, ``MB``, ``GB``, ``TB``, or ``k``, ``M``, ``G``, ``T``) are powers of
    1000, binary ones (``KiB``, ``MiB``, ``GiB``, ``TiB``) powers of 1024; case is ignored.

    Raises
    ------
    TypeError, ValueError
        For anything else, or a negative size.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, str)):
        raise TypeError(f"a size is a number of bytes or a string like '4GB'; got {value!r}")
    if isinstance(value, numbers.Integral):
        if value < 0:
            raise ValueError(f"a size cannot be negative; got {value}")
        return int(value)
    match = _SIZE.match(value)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"cannot read {value!r} as a size; write bytes (1000000) or a number with a unit "
            "(4GB, 512MiB, 1.5G; units: kB MB GB TB, KiB MiB GiB TiB)"
        )
    return int(float(match.group(1)) * _UNITS[unit])


def _limit_from_environment() -> int | None:
    text = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if text.lower() in ("", "none"):
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise ValueError(f"environment variable {ENVIRONMENT_VARIABLE}: {exc}") from None


class LaunchPins:
    """The allocations used by one kernel launch (or CUDA ufunc call) being prepared.

    They cannot be evicted until the launch is enqueued: calling the object (numba-cuda calls
    everything in a launch's ``retr`` list right after the launch) or dropping it releases
    them. Each allocation's state when the launch first touched it is kept, so that a launch
    whose preparation fails can put every flag back (:meth:`abort`). ``after_release``, if
    set (by the launch's argument callbacks, which run before the pins), is called once the
    pins are released: the launch's follow-up work (downloads that keep host views current,
    :mod:`smartarray._core.host_exports`). Releasing the pins makes the launch's allocations
    the most recently used (for the launch fast path, which pins without touching them).
    """

    def __init__(self, token: object = None) -> None:
        self.states: dict[int, tuple[Allocation, Any]] = {}  # key -> (allocation, its state)
        # ``hold(key, (alloc, state))``: pin without :meth:`add`'s checks, for a caller that
        # holds ``alloc.lock`` and has checked that no host export needs looking at (the
        # launch fast path, ``Allocation.launch_value``). It is ``states.setdefault``, one
        # C-level call: other threads read ``states`` only through single C-level copies
        # (see _candidates, _pinned_keys), so it needs no budget lock; the first state
        # recorded for an allocation is kept.
        self.hold: Callable[[int, tuple[Allocation, Any]], Any] = self.states.setdefault
        self.after_release: Callable[[], None] | None = None
        # Set by Allocation.launch_value when it pins for a launch on the default stream of a
        # GPU: once the launch is enqueued (the pins released), each allocation records that
        # work again, in case another thread's work on another stream was recorded between
        # the pinning and the enqueue (see __call__).
        self.default_work = False
        # What the launch's arguments record as the launch being prepared
        # (Allocation.begin_device_write): numba-cuda's ``retr`` list, or these pins.
        self.token: object = self if token is None else token
        # Allocations a writing argument pinned on the launch fast path: their write is in
        # flight until the launch is enqueued (Allocation.launch_value; ended in __call__).
        self.written: list[Allocation] = []
        self.thread = threading.get_ident()
        with _BUDGET.lock:
            _BUDGET.launches.add(self)

    def add(self, alloc: Allocation) -> None:
        """Pin ``alloc`` for this launch (call with ``alloc.lock`` held).

        The state recorded for :meth:`abort` is taken after writes through host exports are
        looked for, so that going back to it never makes a written host copy look clean.
        """
        if alloc.key not in self.states:
            alloc.check_host_exports()
            with _BUDGET.lock:
                self.states[alloc.key] = (alloc, alloc.state_snapshot())

    def abort(self) -> None:
        """The launch will not happen: restore every argument's flags, then unpin."""
        for alloc, state in list(self.states.values()):
            alloc.cancel_launch(state, self.token)
        self()

    def fail(self) -> None:
        """The launch raised after its arguments were prepared (its kernel may have run
        half-way): every argument keeps the state it was left in (a written one's host copy
        stays the authoritative one) and stops being part of a launch; then unpin, with no
        follow-up work."""
        for alloc, _ in list(self.states.values()):
            alloc.end_failed_launch(self.token)
        self.after_release = None
        self()

    def __call__(self) -> None:
        refresh: list[Allocation] = []
        if self.written:
            token = self.token
            for alloc in self.written:
                with alloc.lock:  # (the usual case inline: nobody touched it meanwhile,
                    # its state is still uniformly DEVICE: with a write in flight, any label
                    # change makes segments)
                    writers = alloc._writers
                    if (
                        len(writers) == 1
                        and writers[0][0] is token
                        and not writers[0][3]
                        and alloc._segments is None
                    ):
                        writers.clear()
                        continue
                if alloc.end_resident_write(token):  # (an export taken meanwhile)
                    refresh.append(alloc)
            self.written.clear()
        if self.default_work:
            # The launch's work on the default stream is enqueued now: every later device
            # work on another stream is ordered after it, and the free of a pooled buffer
            # too (Allocation._note_device_work; set inline: no call per argument).
            for alloc, _ in list(self.states.values()):
                if alloc._default_stream_work and alloc._ordered is None:
                    continue  # (as launch_value left it: a later note merges this launch)
                with alloc.lock:
                    alloc._default_stream_work = True
                    alloc._ordered = None
                    block = alloc._block
                    if block is not None:
                        block.after_default_stream = True
        with _BUDGET.lock:
            _BUDGET.launches.discard(self)
            entries = _BUDGET.entries
            for key in self.states:  # used by this launch: the most recently used now
                if key in entries:
                    entries.move_to_end(key)
            self.states.clear()
        self.token = None  # (it may be ``retr``, which holds these pins: no cycle is left)
        after, self.after_release = self.after_release, None
        if after is not None:
            after()
        for alloc in refresh:  # (host views taken while the launch was in flight: current)
            alloc.refresh_host_exports(0)


def launch_pins(retr: list[Any]) -> LaunchPins:
    """The :class:`LaunchPins` of the kernel launch whose ``retr`` list this is (made once)."""
    for item in retr:
        if isinstance(item, LaunchPins):
            return item
    pins = LaunchPins(token=retr)
    retr.append(pins)  # numba-cuda calls it right after the launch: the pins go
    return pins


def fail_launches() -> None:
    """A launch (or CUDA ufunc call) made by this thread raised: release the launches this
    thread prepared and never enqueued or released (:meth:`LaunchPins.fail`); a launch
    whose preparation failed was already aborted and released."""
    thread = threading.get_ident()
    with _BUDGET.lock:
        failed = [pins for pins in _BUDGET.launches if pins.thread == thread]
    for pins in failed:
        pins.fail()


class _Budget:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.limit: int | None = _limit_from_environment()
        self.used = 0  # charged device buffers plus reservations in progress
        self.peak = 0
        # Allocations holding a charged device buffer, least recently used first:
        # key -> (weak reference, bytes charged).
        self.entries: collections.OrderedDict[int, tuple[weakref.ref[Allocation], int]] = (
            collections.OrderedDict()
        )
        self.dead: collections.deque[int] = collections.deque()  # keys of dead allocations
        self.launches: weakref.WeakSet[LaunchPins] = weakref.WeakSet()

    def reap(self) -> None:
        """Uncharge allocations that died (call with the lock held)."""
        while self.dead:
            entry = self.entries.pop(self.dead.popleft(), None)
            if entry is not None:
                self.used -= entry[1]

    def add_used(self, nbytes: int) -> None:
        self.used += nbytes
        self.peak = max(self.peak, self.used)


_BUDGET = _Budget()


# --- public API ---------------------------------------------------------------------------


def set_device_memory_limit(nbytes: int | str | None) -> None:
    """Limit the device memory SmartArrays hold; ``None`` removes the limit.

    Parameters
    ----------
    nbytes : int, str or None
        Bytes (``2**30``) or a size such as ``"4GB"`` or ``"512MiB"``. The environment variable
        ``SMARTARRAY_DEVICE_MEMORY_LIMIT``, read when smartarray is imported, sets the initial
        limit the same way.

    Notes
    -----
    Before a device allocation that would exceed the limit, device copies are evicted in
    least-recently-used order: clean copies are dropped, dirty ones are spilled to the host
    (one download each, counted in the ledger as spills); see the memory management page.
    Lowering the limit below what is held evicts at once, as far as possible.

    Raises
    ------
    TypeError, ValueError
        For anything but a non-negative size or None.
    """
    limit = None if nbytes is None else parse_size(nbytes)
    with _BUDGET.lock:
        _BUDGET.limit = limit
    if limit is not None:
        _evict_down_to(limit, keep=())


def device_memory_limit() -> int | None:
    """The current device memory limit in bytes, or None if there is none."""
    return _BUDGET.limit


def device_memory_usage() -> int:
    """Bytes of device memory held by SmartArrays.

    Counts the base device buffers smartarray allocated for live arrays (views and cached
    device views share their base's bytes), including results of CUDA ufuncs. Not counted:
    device arrays adopted without a copy (``SmartArray(device_array, copy=False)``), whose
    memory is the caller's, and mapped host memory.
    """
    with _BUDGET.lock:
        _BUDGET.reap()
        return _BUDGET.used


def _peak_usage(reset: bool = False) -> int:
    """Highest :func:`device_memory_usage` seen (reservations included); for tests."""
    with _BUDGET.lock:
        _BUDGET.reap()
        peak = _BUDGET.peak
        if reset:
            _BUDGET.peak = _BUDGET.used
        return peak


# --- called by coherence --------------------------------------------------------------------


def allocate(alloc: Allocation, make: Callable[[], T]) -> T:
    """Make ``alloc``'s device buffer with ``make()`` within the limit, and charge it.

    Evicts other allocations' device copies first if needed, and again if the device reports
    that it is out of memory. Raises :class:`MemoryError` if the buffer cannot fit.
    """
    nbytes = alloc.nbytes
    _reserve(nbytes, alloc.label, keep=(alloc,))
    try:
        device = _make_evicting_on_oom(nbytes, alloc.label, (alloc,), make)
    except BaseException:
        with _BUDGET.lock:
            _BUDGET.used -= nbytes
        raise
    _register(alloc, nbytes)  # the reservation becomes the charge
    return device


def charge(alloc: Allocation) -> None:
    """Charge a device buffer allocated outside smartarray's control (a CUDA ufunc's result).

    Other device copies are evicted to get back under the limit, as far as possible: the
    buffer exists already, so the limit can only be restored afterwards.
    """
    with _BUDGET.lock:
        _BUDGET.add_used(alloc.nbytes)
    _register(alloc, alloc.nbytes)
    limit = _BUDGET.limit
    if limit is not None:
        _evict_down_to(limit, keep=(alloc,))


def release(alloc: Allocation) -> None:
    """``alloc`` no longer holds its charged device buffer."""
    with _BUDGET.lock:
        entry = _BUDGET.entries.pop(alloc.key, None)
        if entry is not None:
            _BUDGET.used -= entry[1]


def touch(alloc: Allocation) -> None:
    """``alloc``'s device copy is being used: make it the most recently used."""
    with _BUDGET.lock:
        if alloc.key in _BUDGET.entries:
            _BUDGET.entries.move_to_end(alloc.key)


@contextmanager
def temporary_device(
    shape: tuple[int, ...],
    dtype: np.dtype,
    label: str,
    keep: tuple[Allocation, ...],
    stream: Any = 0,
) -> Iterator[Any]:
    """A scratch device array for work on ``stream`` (allocated there, from the device pool
    if there is one), counted against the limit while the block runs."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    what = f"a scratch copy of {label}"
    _reserve(nbytes, what, keep)
    scratch = None
    try:
        scratch = _make_evicting_on_oom(
            nbytes, what, keep, lambda: _backend.device_empty(shape, dtype, "C", stream)
        )
        yield scratch
    finally:
        if scratch is not None:  # (the work on it, which its free waits for if pooled)
            _backend.used_on(scratch, stream)
        with _BUDGET.lock:
            _BUDGET.used -= nbytes


# --- internals ------------------------------------------------------------------------------


def _register(alloc: Allocation, nbytes: int) -> None:
    key = alloc.key
    dead = _BUDGET.dead
    ref = weakref.ref(alloc, lambda _ref: dead.append(key))  # no lock: may run inside one
    with _BUDGET.lock:
        _BUDGET.entries[key] = (ref, nbytes)


def _candidates(keep: tuple[Allocation, ...]) -> list[Allocation]:
    """Charged allocations in LRU order, less ``keep`` and those pinned by a launch."""
    with _BUDGET.lock:
        _BUDGET.reap()
        excluded = _pinned_keys()
        excluded.update(alloc.key for alloc in keep)
        found = []
        for key, (ref, _) in _BUDGET.entries.items():
            alloc = ref()
            if alloc is not None and key not in excluded:
                found.append(alloc)
        return found


def _pinned_keys() -> set[int]:
    """Keys of the allocations pinned by launches being prepared (call with the budget lock
    held; each launch's pins are copied in one C-level step, so a launch adding a pin in
    another thread never changes a dictionary this is iterating over: see
    ``LaunchPins.hold``)."""
    pinned: set[int] = set()
    for pins in list(_BUDGET.launches):
        pinned.update(pins.states)
    return pinned


def _is_pinned(alloc: Allocation) -> bool:
    """True while a launch being prepared pins ``alloc``."""
    with _BUDGET.lock:
        return alloc.key in _pinned_keys()


def _evict(candidates: list[Allocation], needed: int) -> tuple[int, bool]:
    """Evict from ``candidates`` until ``needed`` bytes are released.

    Order: clean idle copies, dirty idle copies, then copies with in-flight work (clean, then
    dirty), each least recently used first. Returns the bytes released and whether some
    candidate was skipped because another thread held it.
    """
    released = 0
    contended = False
    for busy in (False, True):
        for dirty in (False, True):
            for alloc in candidates:
                if released >= needed:
                    return released, contended
                cost = alloc.eviction_cost()
                if cost is None or (cost > 0) != dirty or alloc.device_busy() != busy:
                    continue
                if _held_by_this_thread(alloc):
                    continue  # this thread is in the middle of using it
                if not alloc.lock.acquire(blocking=False):
                    contended = True  # another thread is using it: never wait (deadlock)
                    continue
                try:
                    if _is_pinned(alloc):  # pinned (under its lock) since the candidates
                        continue  # were listed: in use by a launch being prepared
                    released += alloc.evict_device(spill=dirty)
                except TransferError:
                    continue  # a spill inside no_transfers(): refused before copying
                finally:
                    alloc.lock.release()
    return released, contended


def _held_by_this_thread(alloc: Allocation) -> bool:
    is_owned = getattr(alloc.lock, "_is_owned", None)
    return bool(is_owned()) if is_owned is not None else False


def _reserve(nbytes: int, label: str, keep: tuple[Allocation, ...]) -> None:
    """Add ``nbytes`` to the usage, evicting first if the limit requires it."""
    deadline = time.monotonic() + _CONTENTION_SECONDS
    while True:
        with _BUDGET.lock:
            _BUDGET.reap()
            limit = _BUDGET.limit
            if limit is None or _BUDGET.used + nbytes <= limit:
                _BUDGET.add_used(nbytes)
                return
            needed = _BUDGET.used + nbytes - limit
        candidates = _candidates(keep)
        evictable = sum(
            a.nbytes
            for a in candidates
            if a.eviction_cost() is not None and not _held_by_this_thread(a)
        )
        if nbytes > limit or evictable < needed:  # hopeless: evict nothing
            raise _no_room(nbytes, label, keep)
        released, contended = _evict(candidates, needed)
        if released == 0:
            if not contended or time.monotonic() > deadline:
                raise _no_room(nbytes, label, keep)
            time.sleep(0.001)


def _make_evicting_on_oom(
    nbytes: int, label: str, keep: tuple[Allocation, ...], make: Callable[[], T]
) -> T:
    """``make()``, evicting device copies and retrying while the device is out of memory.

    The first time, the device memory pool is trimmed instead (memory it keeps for reuse,
    or still waiting for a free on another stream, goes back to the device), and ``make()``
    retried, before anything is evicted. Evicted buffers go back to the pool, or to
    numba-cuda's deallocation queue, which numba-cuda flushes before it retries an
    allocation that ran out of memory.
    """
    trimmed = False
    while True:
        try:
            return make()
        except _backend.DeviceOutOfMemory as exc:
            if not trimmed:
                trimmed = True
                if _backend.trim_device_pool():
                    continue
            released, _ = _evict(_candidates(keep), nbytes)
            if released == 0:
                raise _no_room(nbytes, label, keep, out_of_memory=exc) from exc


def _evict_down_to(limit: int, keep: tuple[Allocation, ...]) -> None:
    """Evict (best effort, no error) until the usage is at most ``limit``."""
    with _BUDGET.lock:
        _BUDGET.reap()
        excess = _BUDGET.used - limit
    if excess > 0:
        _evict(_candidates(keep), excess)


def _describe(allocs: list[Allocation]) -> str:
    shown = ", ".join(f"{a.label} ({a.nbytes} bytes)" for a in allocs[:4])
    return shown + (f" and {len(allocs) - 4} more" if len(allocs) > 4 else "")


def _no_room(
    nbytes: int,
    label: str,
    keep: tuple[Allocation, ...],
    out_of_memory: BaseException | None = None,
) -> MemoryError:
    with _BUDGET.lock:
        _BUDGET.reap()
        limit, used = _BUDGET.limit, _BUDGET.used
        pinned = _pinned_keys()
        held = [alloc for ref, _ in _BUDGET.entries.values() if (alloc := ref()) is not None]
    in_use = [a for a in held if a.key in pinned or any(a is k for k in keep)]
    kept = [a for a in held if a.eviction_cost() is None and not any(a is u for u in in_use)]
    handed_out = [a for a in kept if a.device_handed_out]
    exported = [a for a in kept if not a.device_handed_out]
    evictable = [a for a in held if not any(a is b for b in in_use + kept)]
    parts = [f"{sum(a.nbytes for a in evictable)} bytes evictable"]
    if in_use:
        parts.append(f"in use by this operation: {_describe(in_use)}")
    if exported:
        parts.append(f"exported through __cuda_array_interface__: {_describe(exported)}")
    if handed_out:
        parts.append(
            f"handed out by get('gpu') and not yet declared (mark_changed): {_describe(handed_out)}"
        )
    if out_of_memory is not None:
        used -= nbytes  # (the request was reserved before the device refused it)
    held_text = f"SmartArrays hold {used} bytes of device memory ({'; '.join(parts)})"
    device = _backend.device_memory_info()
    device_text = (
        "" if device is None else f"the device has {device[0]} of its {device[1]} bytes free; "
    )
    limit_text = (
        "no smartarray device memory limit is set"
        if limit is None
        else f"the smartarray device memory limit is {limit} bytes"
    )
    # Advice: only what can help here.
    steps = []
    if device is not None and nbytes > device[1]:
        steps.append(
            f"the request is larger than the whole device ({device[1]} bytes), so no limit, "
            "eviction or freeing can make room: use a smaller array, or work on it in chunks "
            "(slices of it in turn, or dask)"
        )
    elif out_of_memory is None and limit is not None and nbytes > limit:
        steps.append(
            "the request alone is larger than the limit: raise the limit to at least "
            f"{nbytes + used - sum(a.nbytes for a in evictable)} bytes "
            "(smartarray.set_device_memory_limit), or use a smaller array"
        )
    else:
        if out_of_memory is None:
            steps.append("raise the limit (smartarray.set_device_memory_limit)")
        if used:
            steps.append("free device copies you no longer need (SmartArray.free_device)")
        if out_of_memory is not None:
            steps.append(
                "release device memory held outside SmartArrays (numba device arrays, other "
                "libraries; smartarray.release_device_pool() for what the pool keeps)"
            )
        if in_use:
            steps.append("pass fewer or smaller arrays to one launch")
        if out_of_memory is not None and limit is not None:
            steps.append(
                "set the limit below what the device has free, so that smartarray evicts "
                "before the device runs out"
            )
    advice = steps[0] if len(steps) == 1 else ", ".join(steps[:-1]) + ", or " + steps[-1]
    if out_of_memory is not None:
        cause = out_of_memory.__cause__ or out_of_memory  # the driver's or manager's error
        what = f"out of device memory allocating {nbytes} bytes for {label} ({cause})"
    else:
        what = f"cannot allocate {nbytes} bytes of device memory for {label}"
    return MemoryError(
        f"{what}: {device_text}{held_text}; {limit_text}. "
        f"{advice[0].upper()}{advice[1:]}. No data was lost."
    )
