"""Benchmark (GPU only): host<->device throughput of pinned SmartArrays vs Numba's own copies.

``python -m smartarray.bench`` runs it on a GPU; alone: ``python -m smartarray.bench.throughput``.

For each size, the same bytes are copied between a page-locked host buffer and a device buffer
that both exist already:

* **SmartArray**: ``a.mark_changed('host'); a.to_gpu()`` (one upload through smartarray's
  transfer layer) and ``a.mark_changed('gpu'); a.to_host()`` (one download);
* **Numba, preallocated**: ``d.copy_to_device(h)`` and ``d.copy_to_host(h)`` with ``h`` from
  ``cuda.pinned_array`` and ``d`` from ``cuda.device_array``;
* **Numba, cuda.to_device**: ``cuda.to_device(h)`` (allocates the device array each time, as
  the usual idiom does), uploads only.

Each copy is timed with the device synchronised before and after; the best of ``repeats`` runs
is reported (a copy's time has a floor, and noise only adds to it). Target: SmartArray
throughput at least 0.90 of Numba's preallocated copies at 64 MiB and above.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import SmartArray
from .._core import backend as _backend
from .common import format_table

SIZES = (1 << 26, 1 << 28)  # bytes: 64 MiB and 256 MiB
TARGET = 0.90


def _best_seconds(copy: Callable[[], Any], prepare: Callable[[], None], repeats: int) -> float:
    cuda = _backend.cuda()
    best = float("inf")
    for _ in range(repeats + 1):  # (the first run is a warm-up)
        prepare()
        cuda.synchronize()
        start = time.perf_counter()
        copy()
        cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def _seconds_for(nbytes: int, repeats: int) -> dict[tuple[str, str], float]:
    cuda = _backend.cuda()
    n = nbytes // 8
    a = SmartArray(np.arange(n, dtype=np.float64))
    assert a.host_memory == "pinned"
    a.to_gpu()
    h = cuda.pinned_array(n, dtype=np.float64)
    h[...] = 1.0
    d = cuda.device_array(n, dtype=np.float64)

    def nothing() -> None:
        pass

    return {
        ("h2d", "smartarray"): _best_seconds(a.to_gpu, lambda: a.mark_changed("host"), repeats),
        ("h2d", "numba"): _best_seconds(lambda: d.copy_to_device(h), nothing, repeats),
        ("h2d", "to_device"): _best_seconds(lambda: cuda.to_device(h), nothing, repeats),
        ("d2h", "smartarray"): _best_seconds(a.to_host, lambda: a.mark_changed("gpu"), repeats),
        ("d2h", "numba"): _best_seconds(lambda: d.copy_to_host(h), nothing, repeats),
    }


def measure(sizes: tuple[int, ...] = SIZES, repeats: int = 7) -> list[dict[str, Any]]:
    """Seconds and GB/s per direction and variant for each size in bytes (GPU only)."""
    rows: list[dict[str, Any]] = []
    for nbytes in sizes:
        seconds = _seconds_for(nbytes, repeats)
        for direction in ("h2d", "d2h"):
            baseline = seconds[(direction, "numba")]
            for variant in ("smartarray", "numba", "to_device"):
                if (direction, variant) not in seconds:
                    continue
                s = seconds[(direction, variant)]
                rows.append(
                    {
                        "direction": direction,
                        "variant": variant,
                        "bytes": nbytes,
                        "seconds": s,
                        "gb_per_s": nbytes / s / 1e9,
                        "ratio_to_numba": baseline / s,  # throughput ratio
                    }
                )
    return rows


LABELS = {
    "smartarray": "SmartArray (pinned)",
    "numba": "Numba, preallocated, pinned",
    "to_device": "Numba, cuda.to_device(pinned)",
}


def report(rows: list[dict[str, Any]]) -> str:
    """The throughput table, with the target check on the SmartArray rows."""
    table = format_table(
        ["direction", "variant", "MiB", "GB/s", "throughput / Numba preallocated", "target"],
        [
            [
                r["direction"],
                LABELS[r["variant"]],
                r["bytes"] >> 20,
                f"{r['gb_per_s']:.1f}",
                f"{r['ratio_to_numba']:.2f}",
                (">= 0.90: " + ("met" if r["ratio_to_numba"] >= TARGET else "NOT met"))
                if r["variant"] == "smartarray"
                else "",
            ]
            for r in rows
        ],
    )
    return (
        "Throughput: pinned host <-> device, best of 7 copies after a warm-up, device "
        "synchronised around each\n" + table
    )


def main() -> None:
    if _backend.tier() != "gpu":
        raise SystemExit("the throughput benchmark needs a real CUDA GPU")
    print(report(measure()))


if __name__ == "__main__":
    main()
