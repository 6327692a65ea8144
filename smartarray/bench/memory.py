"""Oversubscription and pinned-pool benchmarks (part of ``python -m smartarray.bench``).

Oversubscription (simulator: counts; GPU: counts and time)
    SmartArrays whose total is three times the device memory limit
    (:func:`smartarray.set_device_memory_limit`) go through ``passes`` passes of kernels, then
    are read on the host. Two workloads: *update* (9 arrays, room for 3: ``x = 2 x + 1`` in
    place, each array read and written) and *map* (6 inputs and 6 outputs, room for 4:
    ``y = 2 x + 1``, ``x`` passed ``In``, ``y`` passed ``Out``). The bytes
    smartarray moves (uploads, and downloads: spills plus the final reads) are compared with a
    hand-written out-of-core loop over the same chunks: per pass, upload each chunk the kernel
    reads, launch, download each chunk it writes. That loop is run too (with Numba device
    arrays, counting its copies) and its results must match.
Pinned pool (GPU only)
    Time to make and drop a SmartArray with a page-locked host buffer, with the pinned pool
    (the default) and without it (``set_pinned_pool_limit(0)``).
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
from numba import cuda

from .._array import SmartArray
from .._core import memory as _memory
from .._core import pinned_pool as _pinned_pool
from .._core.transfer import track_transfers
from .._intents import In, Out
from .._numpy.creation import empty
from .common import _median_seconds

THREADS = 256
OVERSUBSCRIPTION = 3  # the workload is this many times the device memory limit
TARGET_RATIO = 1.10


def _blocks(n: int) -> int:
    return (n + THREADS - 1) // THREADS


# Kernels: module level, using the module-level name ``cuda`` (swapped by the simulator).


@cuda.jit
def update(x):  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2 * x[i] + 1


@cuda.jit
def map_into(y, x):  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < y.size:
        y[i] = 2 * x[i] + 1


def _initial(arrays: int, n: int) -> list[np.ndarray]:
    return [np.arange(n, dtype=np.float64) % 97 + k for k in range(arrays)]


def _reference(workload: str, initial: list[np.ndarray], passes: int) -> list[np.ndarray]:
    if workload == "map":
        half = len(initial) // 2
        return [2 * x + 1 for x in initial[:half]]
    out = []
    for x in initial:
        x = x.copy()
        for _ in range(passes):
            x = 2 * x + 1
        out.append(x)
    return out


def _smartarray_run(workload: str, arrays: list[SmartArray], passes: int) -> list[np.ndarray]:
    """The workload on SmartArrays (their host copies hold the data), then read on the host."""
    n = arrays[0].size
    if workload == "map":
        half = len(arrays) // 2
        xs, ys = arrays[:half], arrays[half:]
        for _ in range(passes):
            for x, y in zip(xs, ys, strict=True):
                map_into[_blocks(n), THREADS](Out(y), In(x))
        return [y.get("host") for y in ys]
    for _ in range(passes):
        for x in arrays:
            update[_blocks(n), THREADS](x)
    return [x.get("host") for x in arrays]


def _hand_written_run(
    workload: str, host: list[np.ndarray], buffers: list[Any], passes: int, counts: dict[str, int]
) -> list[np.ndarray]:
    """The out-of-core loop written by hand over page-locked ``host`` chunks: upload what the
    kernel reads into a reused device buffer, launch, download what it wrote."""
    n = host[0].size
    nbytes = host[0].nbytes

    def upload(h: np.ndarray, d: Any) -> None:
        d.copy_to_device(h)
        counts["h2d_bytes"] += nbytes

    def download(d: Any, h: np.ndarray) -> None:
        d.copy_to_host(h)
        counts["d2h_bytes"] += nbytes

    if workload == "map":
        half = len(host) // 2
        for _ in range(passes):
            for x, y in zip(host[:half], host[half:], strict=True):
                upload(x, buffers[0])
                map_into[_blocks(n), THREADS](buffers[1], buffers[0])
                download(buffers[1], y)
        return host[half:]
    for _ in range(passes):
        for x in host:
            upload(x, buffers[0])
            update[_blocks(n), THREADS](buffers[0])
            download(buffers[0], x)
    return host


def oversubscription(
    workload: str, arrays: int, n: int, passes: int, timed: bool = False, repeats: int = 3
) -> dict[str, Any]:
    """Run one workload under a limit of a third of its size; return counts (and times).

    Buffers are made before the runs (timed runs start from host data that has just changed,
    so that every run uploads it again). Results of the first runs are checked.
    """
    initial = _initial(arrays, n)
    expected = _reference(workload, initial, passes)
    nbytes = initial[0].nbytes
    limit_arrays = arrays // OVERSUBSCRIPTION
    previous = _memory.device_memory_limit()
    hand_counts = {"h2d_bytes": 0, "d2h_bytes": 0}
    smart = [SmartArray(x) for x in initial]
    host = [cuda.pinned_array_like(x) for x in initial]
    buffers = [cuda.device_array_like(initial[0]) for _ in range(2)]
    for h, x in zip(host, initial, strict=True):
        h[...] = x
    try:
        # Room for exactly ``limit_arrays`` more: device copies left by earlier benchmarks
        # are evicted first (clean ones would otherwise make room for more, for free).
        gc.collect()
        _memory.set_device_memory_limit(0)
        _memory.set_device_memory_limit(_memory.device_memory_usage() + limit_arrays * nbytes)
        with track_transfers() as t:
            got = _smartarray_run(workload, smart, passes)
        hand = _hand_written_run(workload, host, buffers, passes, hand_counts)
        for name, result in (("smartarray", got), ("hand-written", hand)):
            if not all(np.allclose(r, e) for r, e in zip(result, expected, strict=True)):
                raise AssertionError(f"oversubscription {workload}: {name} computed a wrong result")
        row: dict[str, Any] = {
            "workload": workload,
            "arrays": arrays,
            "n": n,
            "passes": passes,
            "array_bytes": nbytes,
            "limit_arrays": limit_arrays,
            "limit_bytes": limit_arrays * nbytes,
            "h2d_bytes": t.h2d_bytes,
            "d2h_bytes": t.d2h_bytes,
            "spill_count": t.spill_count,
            "spill_bytes": t.spill_bytes,
            "hand_h2d_bytes": hand_counts["h2d_bytes"],
            "hand_d2h_bytes": hand_counts["d2h_bytes"],
        }
        # Downloads: spills plus the final reads, against the loop's downloads; and all bytes.
        row["d2h_ratio"] = t.d2h_bytes / hand_counts["d2h_bytes"]
        row["ratio"] = t.nbytes / (hand_counts["h2d_bytes"] + hand_counts["d2h_bytes"])
        if timed:

            def changed() -> None:  # new host data: every run uploads it again
                for a, x in zip(smart, initial, strict=True):
                    a[...] = x
                for h, x in zip(host, initial, strict=True):
                    h[...] = x

            row["seconds"] = _median_seconds(
                lambda: _smartarray_run(workload, smart, passes), repeats, changed
            )
            row["hand_seconds"] = _median_seconds(
                lambda: _hand_written_run(workload, host, buffers, passes, dict(hand_counts)),
                repeats,
                changed,
            )
            row["time_ratio"] = row["seconds"] / row["hand_seconds"]
        return row
    finally:
        _memory.set_device_memory_limit(previous)


def pinned_pool_timings(n: int, creations: int, repeats: int) -> list[dict[str, Any]]:
    """Seconds to make (and drop) a pinned SmartArray of ``n`` float64, with and without the
    pool (real GPU only)."""
    rows: list[dict[str, Any]] = []
    limit = _pinned_pool.POOL.limit
    try:
        for name, pool_limit in (("with pool", limit), ("without pool", 0)):
            _pinned_pool.set_pinned_pool_limit(pool_limit)
            _pinned_pool.release_pinned_pool()

            def create() -> None:
                for _ in range(creations):
                    a = empty(n, host_memory="pinned")
                    del a

            seconds = _median_seconds(create, repeats) / creations
            rows.append({"variant": name, "n": n, "bytes": n * 8, "seconds": seconds})
    finally:
        _pinned_pool.set_pinned_pool_limit(limit)
    for row in rows:
        row["ratio_to_without"] = row["seconds"] / rows[1]["seconds"]
    return rows


def run(tier: str, quick: bool) -> tuple[dict[str, Any], str]:
    """The oversubscription (and, on a GPU, pinned pool) benchmarks and their report."""
    sizes = {("gpu", False): 1 << 23, ("gpu", True): 1 << 20}  # simulator: small (slow)
    n = sizes.get((tier, quick), 256 if quick else 1024)
    passes = 2 if quick else 3
    timed = tier == "gpu"
    rows = [
        oversubscription("update", 9, n, passes, timed),  # 9 arrays, room for 3
        oversubscription("map", 12, n, passes, timed),  # 6 inputs and 6 outputs, room for 4
    ]
    lines = [
        f"Oversubscription: data {OVERSUBSCRIPTION}x the device memory limit, {n} float64 per "
        f"array, {passes} passes; bytes moved by SmartArrays vs a hand-written out-of-core loop",
        "workload: arrays (room for) | uploads | downloads (of which spills) | hand-written "
        "uploads / downloads | x hand-written",
    ]
    for r in rows:
        lines.append(
            f"{r['workload']}: {r['arrays']} ({r['limit_arrays']}) | {r['h2d_bytes']} | "
            f"{r['d2h_bytes']} ({r['spill_bytes']}) | {r['hand_h2d_bytes']} / "
            f"{r['hand_d2h_bytes']} | {r['ratio']:.2f} (downloads {r['d2h_ratio']:.2f}; "
            f"target <= {TARGET_RATIO})"
            + (f" | time {r['time_ratio']:.2f}x hand-written" if timed else "")
        )
    results: dict[str, Any] = {"oversubscription": rows, "pinned_pool": None}
    if tier == "gpu":
        pool = [
            row
            for size in ((1 << 16, 1 << 20) if quick else (1 << 16, 1 << 20, 1 << 24))
            for row in pinned_pool_timings(size, 20, 3 if quick else 7)
        ]
        results["pinned_pool"] = pool
        lines.append("\nPinned SmartArray creation (empty + drop), seconds per array")
        for row in pool:
            lines.append(
                f"{row['variant']:12} | {row['bytes']} bytes | {row['seconds'] * 1e6:.1f} us | "
                f"{row['ratio_to_without']:.3f} x without"
            )
    return results, "\n".join(lines)
