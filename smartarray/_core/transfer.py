"""The transfer layer: the one place where bytes cross the host<->device bus.

Every copy smartarray makes between host and device memory goes through :func:`host_to_device`
or :func:`device_to_host`, which check :func:`no_transfers`, perform the copy through the
backend and record it in the public *transfer ledger*. Tests assert exact counts from the
ledger; that is how transfers are measured without a GPU.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from . import backend as _backend
from .errors import TransferError

Direction = Literal["h2d", "d2h"]


@dataclass(frozen=True)
class TransferRecord:
    """One host<->device copy.

    Attributes
    ----------
    direction : {'h2d', 'd2h'}
        Host to device or device to host.
    nbytes : int
        Bytes copied.
    array : str
        Label of the allocation the copy was made for (``SmartArray.label``).
    asynchronous : bool
        True when the copy was enqueued on a non-default stream.
    spill : bool
        True for a device-to-host copy made to evict the array's device copy under the
        device memory limit (see :func:`smartarray.set_device_memory_limit`).
    offset : int
        Where the copied bytes start in the allocation's buffers (0 for a whole copy): a copy
        of part of an array (only the stale bytes, see docs/coherence.md) moves
        ``[offset, offset + nbytes)``.
    """

    direction: Direction
    nbytes: int
    array: str
    asynchronous: bool = False
    spill: bool = False
    offset: int = 0


@dataclass
class TransferStats:
    """Counters of host<->device copies.

    Returned by :func:`transfer_stats` (cumulative since the last reset) and by
    :func:`track_transfers` (the copies made inside the ``with`` block). ``records`` lists the
    individual copies (kept only by :func:`track_transfers`). ``spill_count`` and
    ``spill_bytes`` count the device-to-host copies made to evict dirty device copies under the
    device memory limit; they are included in ``d2h_count`` and ``d2h_bytes`` too.
    """

    h2d_count: int = 0
    h2d_bytes: int = 0
    d2h_count: int = 0
    d2h_bytes: int = 0
    spill_count: int = 0
    spill_bytes: int = 0
    records: list[TransferRecord] = field(default_factory=list, repr=False)

    @property
    def count(self) -> int:
        """Copies in both directions."""
        return self.h2d_count + self.d2h_count

    @property
    def nbytes(self) -> int:
        """Bytes moved in both directions."""
        return self.h2d_bytes + self.d2h_bytes

    def _add(self, record: TransferRecord, keep_record: bool) -> None:
        if record.direction == "h2d":
            self.h2d_count += 1
            self.h2d_bytes += record.nbytes
        else:
            self.d2h_count += 1
            self.d2h_bytes += record.nbytes
            if record.spill:
                self.spill_count += 1
                self.spill_bytes += record.nbytes
        if keep_record:
            self.records.append(record)

    def __str__(self) -> str:
        text = (
            f"host->device: {count_of(self.h2d_count, 'copy')}, "
            f"{count_of(self.h2d_bytes, 'byte')}; "
            f"device->host: {count_of(self.d2h_count, 'copy')}, "
            f"{count_of(self.d2h_bytes, 'byte')}"
        )
        if self.spill_count:
            text += (
                f" (of which spills: {count_of(self.spill_count, 'copy')}, "
                f"{count_of(self.spill_bytes, 'byte')})"
            )
        return text


def count_of(number: int, noun: str) -> str:
    """``'1 copy'``, ``'2 copies'``, ``'0 bytes'``: a count with its noun in the right number."""
    if number == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"
    return f"{number} {plural}"


class _Refusals(threading.local):
    """Per thread: how many ``no_transfers()`` blocks it is inside."""

    depth = 0


class _Ledger:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.totals = TransferStats()
        self.trackers: list[TransferStats] = []
        self.refusals = _Refusals()

    def record(self, record: TransferRecord) -> None:
        with self.lock:
            self.totals._add(record, keep_record=False)
            for tracker in self.trackers:
                tracker._add(record, keep_record=True)

    def check_allowed(self, direction: Direction, nbytes: int, label: str) -> None:
        if self.refusals.depth:
            raise TransferError(
                f"a {direction} copy of {nbytes} bytes for {label} was attempted inside "
                f"smartarray.no_transfers(); the data needed is not valid on that side"
            )


_LEDGER = _Ledger()


def transfer_stats() -> TransferStats:
    """Cumulative host<->device copies made by smartarray in this process.

    Returns
    -------
    TransferStats
        A snapshot with ``h2d_count``, ``h2d_bytes``, ``d2h_count``, ``d2h_bytes``,
        ``spill_count`` and ``spill_bytes``.
    """
    with _LEDGER.lock:
        t = _LEDGER.totals
        return TransferStats(
            t.h2d_count, t.h2d_bytes, t.d2h_count, t.d2h_bytes, t.spill_count, t.spill_bytes
        )


def reset_transfer_stats() -> None:
    """Set the cumulative counters of :func:`transfer_stats` back to zero."""
    with _LEDGER.lock:
        _LEDGER.totals = TransferStats()


@contextmanager
def track_transfers() -> Iterator[TransferStats]:
    """Count the copies made inside a ``with`` block (in any thread).

    Examples
    --------
    >>> with smartarray.track_transfers() as t:      # doctest: +SKIP
    ...     kernel[1, 32](x)
    >>> t.h2d_count                                  # doctest: +SKIP
    1
    """
    stats = TransferStats()
    with _LEDGER.lock:
        _LEDGER.trackers.append(stats)
    try:
        yield stats
    finally:
        with _LEDGER.lock:  # by identity: two trackers with equal counts are still distinct
            _LEDGER.trackers = [t for t in _LEDGER.trackers if t is not stats]


@contextmanager
def no_transfers() -> Iterator[None]:
    """Raise :class:`TransferError` on any host<->device copy this thread attempts inside
    the block.

    The copy is refused before it starts, so data and validity flags are unchanged. The block
    is the calling thread's: copies made by other threads meanwhile (theirs, or spills their
    allocations cause) go ahead. Everything smartarray copies for this thread's own work is
    refused, also for kernel launches and CUDA ufunc calls it makes (their arguments are
    prepared on this thread, before the launch); work already on a stream is the device's
    and copies nothing through smartarray.
    """
    refusals = _LEDGER.refusals
    refusals.depth += 1
    try:
        yield
    finally:
        refusals.depth -= 1


def host_to_device(
    host: np.ndarray,
    device: Any,
    *,
    label: str,
    stream: Any = None,
    ranges: list[tuple[int, int]] | None = None,
) -> None:
    """Copy a contiguous host buffer to its device twin (all of it, or the byte ``ranges``)
    and record each copy."""
    _copy("h2d", host, device, label, stream, ranges, spill=False)


def device_to_host(
    device: Any,
    host: np.ndarray,
    *,
    label: str,
    stream: Any = None,
    spill: bool = False,
    ranges: list[tuple[int, int]] | None = None,
) -> None:
    """Copy a contiguous device buffer to its host twin (all of it, or the byte ``ranges``)
    and record each copy.

    ``spill`` marks the copies made to evict a dirty device copy (counted as spills too).
    """
    _copy("d2h", host, device, label, stream, ranges, spill)


def device_to_host_staged(
    device: Any, host: np.ndarray, *, label: str, runs: list[tuple[int, int]]
) -> None:
    """Copy the device bytes of ``runs`` (sorted, disjoint) to the host in one transfer of
    their covering span, through a scratch host buffer; only the bytes of ``runs`` are
    written on the host. One record (the span's bytes). On the default stream, complete when
    this returns. Where the span is much larger than the runs (more than twice their bytes
    plus 1 MiB), the runs are copied one by one instead (one record each): the scratch
    buffer stays bounded by the bytes that need copying."""
    lo, hi = runs[0][0], runs[-1][1]
    if len(runs) == 1 or hi - lo > 2 * sum(b - a for a, b in runs) + (1 << 20):
        _copy("d2h", host, device, label, None, runs, False)
        return
    _LEDGER.check_allowed("d2h", hi - lo, label)
    scratch = np.empty(hi - lo, dtype=np.uint8)
    part = _backend.device_view(device, lo, (hi - lo,), (1,), _BYTES)
    _backend.copy_d2h(part, scratch, None)
    host_bytes = host.reshape(-1, order="A").view(np.uint8)
    for a, b in runs:
        host_bytes[a:b] = scratch[a - lo : b - lo]
    _LEDGER.record(TransferRecord("d2h", hi - lo, label, False, False, lo))


def _copy(
    direction: Direction,
    host: np.ndarray,
    device: Any,
    label: str,
    stream: Any,
    ranges: list[tuple[int, int]] | None,
    spill: bool,
) -> None:
    """Copy ``ranges`` (sorted, disjoint; None: everything) in ``direction``, one record
    each. Refused as a whole inside ``no_transfers()``, before anything is copied. Several
    ranges on the default stream are enqueued on one stream, then waited for once."""
    nbytes = host.nbytes
    if ranges is None or ranges == [(0, nbytes)]:
        ranges = [(0, nbytes)] if nbytes else []
        whole = True
    else:
        whole = False
    total = sum(hi - lo for lo, hi in ranges)
    if total == 0:
        return
    _LEDGER.check_allowed(direction, total, label)
    asynchronous = not _backend.is_default_stream(stream)
    if whole:
        if direction == "h2d":
            _backend.copy_h2d(host, device, stream)
        else:
            _backend.copy_d2h(device, host, stream)
        _LEDGER.record(TransferRecord(direction, nbytes, label, asynchronous, spill))
        return
    batch = stream
    if len(ranges) > 1 and not asynchronous and _backend.tier() == "gpu":
        batch = _backend.cuda().stream()  # one synchronisation for all of them, below
    host_bytes = host.reshape(-1, order="A").view(np.uint8)
    for lo, hi in ranges:
        part = _backend.device_view(device, lo, (hi - lo,), (1,), _BYTES)
        if direction == "h2d":
            _backend.copy_h2d(host_bytes[lo:hi], part, batch)
        else:
            _backend.copy_d2h(part, host_bytes[lo:hi], batch)
        _LEDGER.record(TransferRecord(direction, hi - lo, label, asynchronous, spill, lo))
    if batch is not stream:
        batch.synchronize()


_BYTES = np.dtype(np.uint8)
