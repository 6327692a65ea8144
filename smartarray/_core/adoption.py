"""Explicit adoption of a caller's host memory (``SmartArray(a, copy=False)``), made loud.

A SmartArray cannot see writes made through a foreign ndarray: after such a write its device
copy (if current) silently holds old data. ``smartarray.asarray`` and ``SmartArray(obj)``
therefore copy foreign data; only ``SmartArray(a, copy=False)`` shares it, and then:

* the adopted ndarray, and every ndarray it is a view of (also for a read-only ndarray over
  writable memory, whose SmartArray is read-only), is made **read-only** while the
  SmartArray (any view of it) lives, so a write through them raises numpy's
  ``ValueError: assignment destination is read-only`` instead of being lost; their
  writeability comes back when the last SmartArray using the memory is gone;
* memory already adopted by a live writable SmartArray cannot be adopted again, and memory a
  live read-only SmartArray adopted cannot be adopted by a writable one (two coherence states
  over one buffer would each miss the other's writes: a device copy marked current would
  keep old bytes); read-only adoptions of the same memory may coexist;
* a SmartArray's own host buffer, once handed out raw (``a.get('host')``, a DLPack host
  export: :func:`register_handed_out`), cannot be adopted either, for the same reason (and
  locking it read-only would break ``a``'s own writes and downloads).

Arrays numpy or Numba just returned (results SmartArray wraps) are fresh and nobody else
holds them: they are adopted without any of this (``SmartArray._adopt``).
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

# Guards the registry below. Never taken by a finalizer while it waits: a finalizer (run by the
# cyclic garbage collector at any allocation, possibly on a thread that holds this lock)
# queues its release in ``_pending`` and applies it only if it gets the lock at once; whoever
# holds the lock applies the queue before reading the registry and before letting go.
_lock = threading.Lock()
_pending: collections.deque[tuple[int, list[int]]] = collections.deque()
# Live explicit adoptions, and SmartArrays' own host buffers handed out raw: token -> (first
# byte, end byte, what holds the memory, writeable).
_adopted: dict[int, tuple[int, int, str, bool]] = {}
# ndarrays made read-only by adoptions: id -> [the ndarray, number of adoptions locking it].
_locked: dict[int, list[Any]] = {}
_tokens = iter(range(1, 1 << 62))


@contextmanager
def _registry() -> Iterator[None]:
    """Hold ``_lock`` with the queued releases applied, and apply those queued meanwhile."""
    try:
        with _lock:
            _apply_pending()
            try:
                yield
            finally:  # (also when the body raises: an adoption refused)
                _apply_pending()
    finally:
        _drain()  # a release queued after the last look, while the lock was still held


def _drain() -> None:
    """Apply queued releases if the lock is free now; never wait for it."""
    while _pending:
        if not _lock.acquire(blocking=False):
            return  # its holder applies them before it lets go (see _registry)
        try:
            _apply_pending()
        finally:
            _lock.release()


def _bounds(array: np.ndarray) -> tuple[int, int]:
    if array.size == 0:
        address = int(array.__array_interface__["data"][0])
        return address, address
    lo, hi = np.lib.array_utils.byte_bounds(array)
    return int(lo), int(hi)


def _lockable_chain(source: Any) -> list[np.ndarray]:
    """``source`` and the ndarrays it is a view of that are writeable, or read-only only
    because an adoption locked them (call with ``_lock`` held)."""
    chain = []
    array = source
    while isinstance(array, np.ndarray):
        if array.flags.writeable or id(array) in _locked:
            chain.append(array)
        array = array.base
    return chain


def adopt(source: Any, host: np.ndarray, owner: object, label: str) -> None:
    """Register the explicit adoption of ``source``'s memory (viewed by ``host``) by ``owner``.

    ``host`` must be a view of the memory made before this call (it stays writeable);
    ``owner`` is the Allocation, whose lifetime the locks follow.

    Raises
    ------
    ValueError
        If the memory overlaps memory a live SmartArray adopted, unless both are read-only;
        nothing changes.
    """
    lo, hi = _bounds(host)
    writeable = bool(host.flags.writeable)
    with _registry():
        if hi > lo:
            holder = _overlapping(lo, hi, writeable)
            if holder is not None:
                _apply_pending()  # (an owner freed by a collection that ran just now)
                holder = _overlapping(lo, hi, writeable)
            if holder is not None:
                raise ValueError(
                    f"this memory is already {holder}; two SmartArrays over one buffer "
                    f"would each miss the other's writes: use that SmartArray (or a view "
                    f"of it), or copy"
                )
        token = next(_tokens)
        _adopted[token] = (lo, hi, f"adopted by {label} (SmartArray(..., copy=False))", writeable)
        locked = []
        # For a read-only SmartArray only the writable ndarrays its memory is a view of are
        # locked (the source itself is read-only already, and stays the caller's).
        for array in _lockable_chain(source):
            entry = _locked.setdefault(id(array), [array, 0])
            entry[1] += 1
            array.flags.writeable = False
            locked.append(id(array))
    weakref.finalize(owner, _release, token, locked)


def register_handed_out(host: np.ndarray, owner: object, label: str) -> None:
    """``host``, the host buffer of the allocation ``owner`` (named ``label``), was handed
    out raw: refuse adoptions of any part of it while ``owner`` lives (locks nothing).

    Call once per allocation (``Allocation.host_handed_out`` says whether it was done).
    """
    lo, hi = _bounds(host)
    with _registry():
        token = next(_tokens)
        _adopted[token] = (
            lo, hi, f"the host buffer of {label} (handed out by get('host') or DLPack)", True
        )  # fmt: skip
    weakref.finalize(owner, _release, token, [])


def _overlapping(lo: int, hi: int, writeable: bool) -> str | None:
    """What holds memory overlapping ``[lo, hi)`` in a way that refuses this adoption."""
    for other_lo, other_hi, holder, other_writeable in _adopted.values():
        if lo < other_hi and other_lo < hi and (writeable or other_writeable):
            return holder
    return None


def _release(token: int, locked: list[int]) -> None:
    """Finalizer of an adoption's (or hand-out's) owner: queue the release, and apply it now
    if the registry is free. It never waits: the collector may run it on a thread that holds
    the lock (waiting would hang that thread for good)."""
    _pending.append((token, locked))
    _drain()


def _apply_pending() -> None:
    """Apply the queued releases (call with ``_lock`` held)."""
    while _pending:
        _apply_release(*_pending.popleft())


def _apply_release(token: int, locked: list[int]) -> None:
    """Undo :func:`adopt` once its SmartArray is gone: writeable again if no one else locks
    (call with ``_lock`` held)."""
    _adopted.pop(token, None)
    for key in locked:
        entry = _locked.get(key)
        if entry is not None:
            entry[1] -= 1
    # numpy makes a view writeable only while its base is: retry until nothing changes
    # (a view whose base another adoption still locks waits for that one's release).
    progress = True
    while progress:
        progress = False
        for key, (array, count) in list(_locked.items()):
            if count == 0:
                try:
                    array.flags.writeable = True
                except ValueError:
                    continue
                del _locked[key]
                progress = True
    for key, (array, count) in list(_locked.items()):
        if count == 0 and not any(id(base) in _locked for base in _bases(array)):
            del _locked[key]  # made read-only for good by someone else meanwhile


def _bases(array: np.ndarray) -> list[Any]:
    bases = []
    base = array.base
    while isinstance(base, np.ndarray):
        bases.append(base)
        base = base.base
    return bases
