"""Byte ranges of an allocation: which side holds the current bytes of each range.

An allocation whose bytes are not all current on the same side(s) keeps a :class:`Segments`
(see :mod:`smartarray._core.coherence`): the byte range ``[0, nbytes)`` cut into consecutive
segments, each labelled with the side(s) whose copy of it is current (a
:class:`~smartarray._core.coherence.State`: host only, device only, or both). A byte is
never stale on both sides: every byte is in exactly one segment, and every label names at
least one side.

The number of segments is capped (:data:`MAX_SEGMENTS`) by the allocation
(:meth:`smartarray._core.coherence.Allocation._cap`), which decides what may be relabelled
and makes the copies a merge needs; :meth:`Segments.absorb_both` and
:meth:`Segments.cheapest_window` are its two moves.

Extents (the bytes a view covers) are tuples of disjoint ``(start, stop)`` pairs in
increasing order; :func:`extent_of` computes a view's.
"""

from __future__ import annotations

import math
import os
from typing import Any

# At most this many segments per allocation between operations (see Allocation._cap).
MAX_SEGMENTS = 64
# A strided view's extent lists at most this many intervals (one per row of contiguous
# bytes), else it is its covering interval.
MAX_EXTENT_INTERVALS = 64

Extent = tuple[tuple[int, int], ...]


def _coalesce_from_environment() -> int:
    text = os.environ.get("SMARTARRAY_COALESCE_BYTES", "").strip()
    if not text:
        return DEFAULT_COALESCE_BYTES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(
            f"SMARTARRAY_COALESCE_BYTES={text!r} is not a whole number of bytes "
            "(use 0 to copy exactly the stale ranges)"
        ) from None
    if value < 0:
        raise ValueError(f"SMARTARRAY_COALESCE_BYTES={text!r} must be 0 or more")
    return value


# Stale ranges closer than this many bytes move in one copy, the gap included. A copy costs a
# fixed ~5-10 us (driver call and DMA set-up) plus bytes / bandwidth; at ~25 GB/s (PCIe 4/5
# pinned) 64 KiB take ~2.6 us, less than one copy's fixed cost: copying such a gap is
# cheaper than a second copy. (docs/coherence.md, "Coalescing".)
DEFAULT_COALESCE_BYTES = 64 << 10
_coalesce_bytes = _coalesce_from_environment()


def set_coalesce_bytes(nbytes: int) -> None:
    """Set the gap below which neighbouring stale ranges are copied in one transfer.

    Parameters
    ----------
    nbytes : int
        The largest gap, in bytes, copied along with the stale ranges around it. ``0`` copies
        exactly the stale ranges, never merged. The default is 64 KiB, or the environment
        variable ``SMARTARRAY_COALESCE_BYTES`` read at import.
    """
    global _coalesce_bytes
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"set_coalesce_bytes: {nbytes!r} is not a byte count (an int >= 0)")
    _coalesce_bytes = nbytes


def coalesce_bytes() -> int:
    """The gap set by :func:`set_coalesce_bytes` (bytes)."""
    return _coalesce_bytes


def coalesce(ranges: list[tuple[int, int]], gap: int | None = None) -> list[tuple[int, int]]:
    """Merge sorted disjoint ``ranges`` whose gaps are smaller than ``gap`` bytes (the
    setting of :func:`set_coalesce_bytes` by default). ``gap=0`` merges only touching ones."""
    if gap is None:
        gap = _coalesce_bytes
    merged: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if merged and lo - merged[-1][1] < max(gap, 1):
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


class Segments:
    """``[0, nbytes)`` cut into labelled segments (see the module docstring).

    ``bounds`` holds the segments' starts and the end (``bounds[0] == 0``,
    ``bounds[-1] == nbytes``); ``labels[i]`` is the label of ``[bounds[i], bounds[i + 1])``.
    Neighbouring segments never have the same label.
    """

    __slots__ = ("both", "bounds", "labels")

    def __init__(self, nbytes: int, label: Any, both: Any) -> None:
        self.bounds = [0, nbytes]
        self.labels = [label]
        self.both = both  # the label "current on both sides" (merged away when coarsening)

    def copy(self) -> Segments:
        new = Segments.__new__(Segments)
        new.bounds = list(self.bounds)
        new.labels = list(self.labels)
        new.both = self.both
        return new

    def uniform(self) -> Any:
        """The one label of every byte, or None."""
        return self.labels[0] if len(self.labels) == 1 else None

    def _split(self, at: int) -> int:
        """Make ``at`` a segment boundary; return its index in ``bounds``."""
        bounds = self.bounds
        lo, hi = 0, len(bounds)
        while lo < hi:  # bisect_left
            mid = (lo + hi) // 2
            if bounds[mid] < at:
                lo = mid + 1
            else:
                hi = mid
        if bounds[lo] != at:
            bounds.insert(lo, at)
            self.labels.insert(lo, self.labels[lo - 1])
        return lo

    def assign(self, start: int, stop: int, label: Any) -> None:
        """Label ``[start, stop)`` with ``label``."""
        if start >= stop:
            return
        i = self._split(start)
        j = self._split(stop)
        self.bounds[i + 1 : j] = []
        self.labels[i:j] = [label]
        self._merge_around(i)

    def _merge_around(self, i: int) -> None:
        labels, bounds = self.labels, self.bounds
        if i + 1 < len(labels) and labels[i + 1] == labels[i]:
            del labels[i + 1]
            del bounds[i + 1]
        if i > 0 and labels[i - 1] == labels[i]:
            del labels[i]
            del bounds[i]

    def absorb_both(self, side: Any) -> bool:
        """Relabel the smallest segment current on both sides that touches one labelled
        ``side`` as ``side`` (merging them); False if there is none. No byte becomes stale
        on ``side``: the merged bytes are current there."""
        bounds, labels, both = self.bounds, self.labels, self.both
        best = -1
        size = 0
        last = len(labels) - 1
        for i, label in enumerate(labels):
            if label is both and (
                (i > 0 and labels[i - 1] is side) or (i < last and labels[i + 1] is side)
            ):
                span = bounds[i + 1] - bounds[i]
                if best < 0 or span < size:
                    best, size = i, span
        if best < 0:
            return False
        labels[best] = side
        self._merge_around(best)
        return True

    def cheapest_window(
        self, count: int, blocked: list[tuple[int, int]]
    ) -> tuple[int, int] | None:
        """The bytes ``(start, stop)`` of the ``count`` consecutive segments with the smallest
        span that share no byte with ``blocked`` (sorted intervals); None if none does."""
        bounds = self.bounds
        best: tuple[int, int] | None = None
        for i in range(len(self.labels) - count + 1):
            lo, hi = bounds[i], bounds[i + count]
            if best is not None and hi - lo >= best[1] - best[0]:
                continue
            if any(a < hi and lo < b for a, b in blocked):
                continue
            best = (lo, hi)
        return best

    def runs(self, extent: Extent | None, label: Any) -> list[tuple[int, int]]:
        """The parts of ``extent`` (all bytes for None) labelled ``label``, in order."""
        bounds, labels = self.bounds, self.labels
        found: list[tuple[int, int]] = []
        for lo, hi in extent if extent is not None else ((0, bounds[-1]),):
            for i, seg_label in enumerate(labels):
                a, b = bounds[i], bounds[i + 1]
                if b <= lo:
                    continue
                if a >= hi:
                    break
                if seg_label == label:
                    a, b = max(a, lo), min(b, hi)
                    if found and found[-1][1] == a:
                        found[-1] = (found[-1][0], b)
                    else:
                        found.append((a, b))
        return found

    def labels_in(self, extent: Extent | None) -> set[Any]:
        """The labels of the bytes of ``extent`` (all bytes for None)."""
        if extent is None:
            return set(self.labels)
        bounds, labels = self.bounds, self.labels
        found = set()
        for lo, hi in extent:
            for i, seg_label in enumerate(labels):
                if bounds[i + 1] > lo and bounds[i] < hi:
                    found.add(seg_label)
        return found

    def items(self) -> list[tuple[int, int, Any]]:
        """``(start, stop, label)`` of every segment."""
        return [(self.bounds[i], self.bounds[i + 1], x) for i, x in enumerate(self.labels)]


def extent_of(
    offset: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, nbytes: int
) -> tuple[Extent | None, bool]:
    """The bytes of a buffer of ``nbytes`` bytes that a view covers, and whether they are
    exactly its elements' bytes (writing every element overwrites all of them).

    The bytes are None for all of the buffer, else disjoint ``(start, stop)`` intervals in
    increasing order. A view whose elements are contiguous is one interval. A strided view
    is the intervals of its contiguous rows while there are at most
    :data:`MAX_EXTENT_INTERVALS` of them, else its covering interval (from its lowest to its
    highest byte; not exact).
    """
    size = math.prod(shape)
    if size == 0:
        # No bytes: of an empty buffer, all of it (so that reads and writes change its state
        # as they do for any whole array); of a non-empty one, nothing.
        return (None, True) if nbytes == 0 else ((), True)
    dims = [(abs(st), n, st) for n, st in zip(shape, strides, strict=True) if n > 1]
    lo = offset + sum(st * (n - 1) for _, n, st in dims if st < 0)
    hi = offset + sum(st * (n - 1) for _, n, st in dims if st > 0) + itemsize
    exact = _exact(shape, strides, itemsize, hi - lo)
    if exact and lo <= 0 and hi >= nbytes:
        return None, True  # every byte of the buffer
    # Innermost dimensions that are contiguous together form one row of ``row`` bytes.
    dims.sort()
    row = itemsize
    k = 0
    while k < len(dims) and dims[k][0] == row:
        row *= dims[k][1]
        k += 1
    outer = dims[k:]
    if not outer or hi - lo == row:
        return _whole_or(((lo, hi),), nbytes), exact
    rows = math.prod(n for _, n, _ in outer)
    if rows > MAX_EXTENT_INTERVALS:
        return _whole_or(((lo, hi),), nbytes), False
    starts = [lo]
    for step, n, _ in outer:
        starts = [s + step * j for s in starts for j in range(n)]
    starts.sort()
    intervals: list[tuple[int, int]] = []
    for s in starts:
        if intervals and s <= intervals[-1][1]:
            intervals[-1] = (intervals[-1][0], max(intervals[-1][1], s + row))
        else:
            intervals.append((s, s + row))
    return _whole_or(tuple(intervals), nbytes), rows * row == sum(b - a for a, b in intervals)


def _whole_or(extent: Extent, nbytes: int) -> Extent | None:
    """None for an extent of every byte of the buffer, else ``extent``."""
    return None if extent == ((0, nbytes),) else extent


def _exact(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, span: int) -> bool:
    """True when the elements fill their covering span (no gap, no overlap)."""
    return math.prod(shape) * itemsize == span and all(
        st != 0 for n, st in zip(shape, strides, strict=True) if n > 1
    )
