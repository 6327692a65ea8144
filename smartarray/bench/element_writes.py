"""Element writes into a device-current array: time per write and copies on the next read.

A loop ``a[i] = v`` over every other element of an array whose current copy is on the device
makes a byte range per element. The state machine keeps at most
:data:`smartarray._core.ranges.MAX_SEGMENTS` of them (docs/coherence.md, "Byte ranges"), so
the time per write must not grow with ``n``, and the read that follows makes a bounded number
of copies. The baseline is what a careful hand-written program does: one download of the
device array, then the same loop on a plain ndarray.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import cuda

from .._array import SmartArray
from .._core.ranges import MAX_SEGMENTS
from .._core.transfer import track_transfers

SIZES = (1_000, 10_000, 100_000)


def _fill_kernel() -> Any:
    @cuda.jit
    def fill(x, v):  # type: ignore[no-untyped-def]
        i = cuda.grid(1)
        if i < x.size:
            x[i] = v

    return fill


def _device_current(n: int, fill: Any) -> SmartArray[Any, Any]:
    a = SmartArray(np.zeros(n))
    fill[(n + 255) // 256, 256](a, 1.0)
    return a


def measure(sizes: tuple[int, ...] = SIZES, writes: int = 2000) -> list[dict[str, Any]]:
    """One row per ``n``: ``writes`` element writes (every other element from the start,
    fewer if ``n`` is smaller), then a read of the whole array; the same with an ndarray
    loop after one download (``copy_to_host``). Checks both give the same values."""
    fill = _fill_kernel()
    rows = []
    for n in sizes:
        count = min(writes, n // 2)
        indices = range(0, 2 * count, 2)
        a = _device_current(n, fill)
        with track_transfers() as during:
            start = time.perf_counter()
            for i in indices:
                a[i] = 3.0
            seconds = time.perf_counter() - start
        ranges = len(a.coherence_ranges())
        with track_transfers() as read:
            total = float(a.sum())
        d = cuda.to_device(np.zeros(n))
        fill[(n + 255) // 256, 256](d, 1.0)
        start = time.perf_counter()
        host = d.copy_to_host()
        for i in indices:
            host[i] = 3.0
        hand_seconds = time.perf_counter() - start
        if total != float(host.sum()):
            raise AssertionError(f"element writes, n={n}: SmartArray {total} != {host.sum()}")
        rows.append(
            {
                "n": n,
                "writes": count,
                "us_per_write": seconds / count * 1e6,
                "copies_during": during.count,
                "ranges": ranges,
                "copies_on_read": read.count,
                "hand_us_per_write": hand_seconds / count * 1e6,
            }
        )
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """The rows as a table (see :func:`measure`)."""
    lines = [
        "| n | writes | µs per write | copies during the loop | ranges after | copies on "
        "the read | by hand: download + ndarray loop, µs per write |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['writes']} | {r['us_per_write']:.2f} | {r['copies_during']} | "
            f"{r['ranges']} (cap {MAX_SEGMENTS}) | {r['copies_on_read']} | "
            f"{r['hand_us_per_write']:.2f} |"
        )
    return "\n".join(lines)
