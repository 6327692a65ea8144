"""Host exports: ndarray views of the host copy, watched for writes and kept current.

``np.asarray(a)`` (``SmartArray.__array__``) hands out a view of ``a``'s host copy, made
current first: writable for a writable ``a``, as numpy hands out an ndarray itself, so that
``x = np.asarray(x); x -= x.mean()`` writes ``a``. Writes through it cannot be seen as they
happen (numpy, ``@njit`` and C code write through its data pointer): the coherence state
machine finds them by comparing the host bytes with a snapshot before the device copy is next
used (:meth:`~smartarray._core.coherence.Allocation.check_host_exports`; the snapshot is taken by
:func:`export` and whenever both copies become equal while exports are alive). A caller may
also *keep* that view::

    h = np.asarray(x)
    for step in range(3):
        kernel[1, n](x)      # writes x's device copy
        print(h.sum())       # must see the kernel's results

With ndarrays and Numba's automatic transfers this is right (``h`` is ``x``, copied back after
every launch). For a SmartArray, a device write leaves only the device copy current, so the
kept view would silently show old values. This module keeps such views current instead:

* **Lifetime.** Each export is an ndarray whose ``base`` is a per-export handle, an instance
  of the ndarray subclass :class:`_ExportHandle` (a view of the same memory). numpy collapses
  the ``base`` of a view of a view to the memory's owner, but only through bases of the new
  view's own type: the handle, of another type, stays in the base chain of *every* view derived
  from the export (``h[1:]``, ``h.T``, ``h.reshape(...)``, ``memoryview(h)``, ``np.asarray``
  of those). Its own base is a view of type :class:`_Anchor` (so that numpy does not collapse
  past the handle either), whose base is the cached host view. The handle's finalizer runs
  when the last derived view is gone.
* **Counter.** An allocation counts its live exports in ``Allocation.host_exports``, a list
  used as an atomic counter: an export appends one item under the allocation's lock, its
  finalizer pops one (``list.append``/``list.pop`` are atomic; a finalizer may run in any
  thread, at any point, so it takes no lock). Checking for live exports is one attribute read
  and a truth test: nothing is scanned per launch.
* **Refresh.** While the count is not zero, each device write of the allocation is followed,
  before control returns to the caller, by a download through the transfer layer (counted in
  the ledger), ordered after the write on its stream and waited for
  (:meth:`~smartarray._core.coherence.Allocation.refresh_host_exports`): both copies are current
  afterwards. Kernel launches do it once per written allocation, after every argument's flags
  are set and the launch's pins are released (:class:`LaunchRefresh`); CUDA ufuncs after
  their call; ``SmartArray.mark_changed('gpu')`` at once. This is Numba's conservative
  copy-back for ndarrays, paid only while an export lives (a launch with no live export pays
  one truth test per written argument).

Taking an export costs no transfer when the host copy is current (one download from the
``DEVICE`` state, as any host read), and, while the device copy is current too, a host copy
of the allocation (the snapshot); releasing it costs nothing and changes no flag. Device
writes that smartarray cannot see are not covered: writes through a pointer handed out earlier
(``__cuda_array_interface__``, ``a.get('gpu')``, a DLPack device export) need
``a.mark_changed('gpu')``, which then refreshes the exports. ``a.get('host')`` and DLPack host
exports are raw buffers, not tracked here (the caller's job, with ``mark_changed``).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import TransferError

if TYPE_CHECKING:
    from .coherence import Allocation
    from .memory import LaunchPins


class _Anchor(np.ndarray):
    """The base of an export's handle: a type of its own, so numpy stops collapsing there."""


class _ExportHandle(np.ndarray):
    """The base of one host export; finalized when the last view derived from it is gone."""

    __slots__ = ("_counter", "_owner")
    _counter: list[None]
    _owner: weakref.ref[Allocation]

    def __del__(self) -> None:
        try:
            counter = self._counter
        except AttributeError:  # a view of the handle itself (``h.base[1:]``): not counted
            return
        counter.pop()


def export(alloc: Allocation, host_view: np.ndarray) -> np.ndarray:
    """A new ndarray over ``host_view``'s memory (writable if it is), counted as a live
    export of ``alloc`` for as long as it or any view derived from it lives, and watched for
    writes (:meth:`Allocation.watch_host_exports`).

    Call with ``alloc.lock`` held and ``alloc``'s host copy current; ``host_view`` is a view
    of ``alloc``'s host buffer.
    """
    handle = host_view.view(_Anchor).view(_ExportHandle)
    counter = alloc.host_exports
    counter.append(None)
    handle._counter = counter
    handle._owner = weakref.ref(alloc)
    alloc.watch_host_exports()
    return handle.view(np.ndarray)


def exporting_allocation(obj: Any) -> Allocation | None:
    """The live allocation whose host export ``obj`` is, or is a view of (through ndarray
    bases, memoryviews and Numba's NRT meminfos: ``np.asarray(a)[1:]``, ``a.data``, a view
    an ``@njit`` function returned), else None."""
    for _ in range(64):  # (numpy collapses base chains: they are short)
        if isinstance(obj, _ExportHandle):
            owner = getattr(obj, "_owner", None)
            if owner is not None:
                return owner()
        if isinstance(obj, memoryview):
            obj = obj.obj
        elif isinstance(obj, np.ndarray):
            obj = obj.base
        elif isinstance(parent := getattr(obj, "parent", None), np.ndarray):
            obj = parent  # (numba.core.runtime.nrt.MemInfo: the ndarray it came from)
        else:
            return None
    return None


def live_exports(alloc: Allocation) -> int:
    """How many host exports of ``alloc`` are alive."""
    return len(alloc.host_exports)


def refresh(alloc: Allocation, stream: Any = None) -> None:
    """After a device write of ``alloc`` on ``stream``: bring its live host exports up to date
    (one download, waited for), or do nothing if there are none."""
    if not alloc.host_exports:
        return
    try:
        alloc.refresh_host_exports(stream)
    except TransferError as error:
        raise _refused([alloc.label]) from error


def _refused(labels: list[str]) -> TransferError:
    """The error for refreshes of ``labels`` refused inside ``no_transfers()``."""
    if len(labels) == 1:
        what = (
            f"{labels[0]} was written on the device while a host view of it handed out by "
            "np.asarray() is alive: keeping that view current needs"
        )
    else:
        what = (
            f"{', '.join(labels)} were written on the device while host views of them handed "
            "out by np.asarray() are alive: keeping those views current needs"
        )
    return TransferError(
        f"{what} a device-to-host copy, refused inside smartarray.no_transfers() (the device copy "
        "holds the results, and the view shows the old values until the array is next "
        "read on the host outside the block, e.g. by np.asarray() again; release the "
        "view, e.g. `del h`, before the block, or launch outside it)"
    )


class LaunchRefresh:
    """Refreshes the live host exports of the allocations one kernel launch wrote.

    Made by the first argument callback of a launch that finds a written allocation with live
    exports (:func:`after_launch_write`), and run by the launch's pins once they are released
    (``LaunchPins.after_release``): after every argument's flags are set, so that an
    allocation behind several written arguments (``k(x, x)``) is downloaded once, and with
    nothing left pinned if the download is refused (``no_transfers()``).
    """

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written: list[tuple[Allocation, Any]] = []

    def __call__(self) -> None:
        """Refresh every written allocation; the refreshes refused inside ``no_transfers()``
        are named together in one :class:`TransferError`, raised after all were tried."""
        written, self.written = self.written, []
        refused: list[str] = []
        first: TransferError | None = None
        for alloc, stream in written:
            try:
                refresh(alloc, stream)
            except TransferError as error:
                refused.append(alloc.label)
                first = first or error
        if first is not None:
            raise _refused(refused) from first.__cause__


def after_launch_write(pins: LaunchPins, alloc: Allocation, stream: Any) -> None:
    """A launch wrote ``alloc`` on ``stream`` (its flags are set) and ``alloc`` has live host
    exports: refresh them once the launch's ``pins`` are released."""
    refresh_later = pins.after_release
    if not isinstance(refresh_later, LaunchRefresh):
        refresh_later = LaunchRefresh()
        pins.after_release = refresh_later
    if not any(done is alloc for done, _ in refresh_later.written):  # (k(x, x): once)
        refresh_later.written.append((alloc, stream))
