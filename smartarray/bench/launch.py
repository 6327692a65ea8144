"""Benchmark (GPU only): launch cost by number of array arguments, and result allocations.

``python -m smartarray.bench`` runs it on a GPU (issue 22):

* **Per-launch time** of kernels with 0, 1, 2, 3 and 4 array arguments (the first written,
  the others read), launched ``launches`` times in a row on arrays of ``n`` float64, with
  hand-managed Numba device arrays and with device-resident SmartArrays (the steady state:
  nothing copied), in one run, the two variants interleaved, median of ``repeats`` runs after
  a warm-up. Kernels without signatures, as users write them (each launch types its
  arguments). The ratio is SmartArray time ÷ device-array time, per argument count.
* **Result allocations** of a steady ``z = add(x, y)`` loop with SmartArray inputs and a
  ``@vectorize(target='cuda')`` add: device buffers allocated per call, how many the pool
  served without growing (its reserved bytes before and after), from
  :func:`smartarray.device_pool_info`.

Both run in the simulator too (tests call them with tiny sizes), where the timings mean
nothing and there is no pool.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from .._array import SmartArray
from .._core import backend as _backend
from .._numpy.creation import zeros
from .common import THREADS, blocks

ARGUMENT_COUNTS = (0, 1, 2, 3, 4)


# Kernels at module level, using the module-level name ``cuda`` (which the simulator swaps
# while it runs a kernel). ``touch0`` still does something, so that its launch is a real one.
@cuda.jit
def touch0():  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    cuda.grid(1)


@cuda.jit
def touch1(a):  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0


@cuda.jit
def touch2(a, b):  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0 + b[i]


@cuda.jit
def touch3(a, b, c):  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0 + b[i] + c[i]


@cuda.jit
def touch4(a, b, c, d):  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1.0 + b[i] + c[i] + d[i]


KERNELS = (touch0, touch1, touch2, touch3, touch4)


def _repeat(kernel: Any, arrays: list[Any], launches: int) -> Callable[[], None]:
    """``launches`` launches of the configured ``kernel`` on ``arrays``."""

    def run() -> None:
        for _ in range(launches):
            kernel(*arrays)

    return run


def _seconds(run: Callable[[], Any]) -> float:
    """Wall time of ``run()``, the device synchronised before and after."""
    cuda.synchronize()
    start = time.perf_counter()
    run()
    cuda.synchronize()
    return time.perf_counter() - start


def launch_timings(
    launches: int = 1000, repeats: int = 7, n: int = 1 << 10
) -> list[dict[str, Any]]:
    """Microseconds per launch for each argument count, device arrays and SmartArrays.

    Parameters
    ----------
    launches
        Launches per timed run.
    repeats
        Timed runs per variant (after one warm-up), alternating the two variants.
    n
        float64 elements per array (small: launch-bound).

    Returns
    -------
    list of dict
        Per argument count: ``arguments``, ``n``, ``launches``, ``device_us`` and
        ``smartarray_us`` (median µs per launch) and ``ratio`` (SmartArray ÷ device).
    """
    grid = (blocks(n), THREADS)
    rows = []
    for count in ARGUMENT_COUNTS:
        kernel = KERNELS[count][grid]
        device = [cuda.to_device(np.zeros(n)) for _ in range(count)]
        smart = [zeros(n, where="gpu") for _ in range(count)]

        runs = {
            "device": _repeat(kernel, device, launches),
            "smartarray": _repeat(kernel, smart, launches),
        }
        times: dict[str, list[float]] = {"device": [], "smartarray": []}
        for run in runs.values():
            run()  # warm-up: compiles the kernel for these argument types
        for _ in range(repeats):  # interleaved: a slow spell of the machine hits both alike
            for name, run in runs.items():
                times[name].append(_seconds(run))
        device_us = statistics.median(times["device"]) / launches * 1e6
        smart_us = statistics.median(times["smartarray"]) / launches * 1e6
        if count:  # every launch added one to the first array
            expected = (1 + repeats) * launches
            if not np.all(np.asarray(smart[0]) == expected):
                raise AssertionError("the SmartArray launches computed a wrong result")
        rows.append(
            {
                "arguments": count,
                "n": n,
                "launches": launches,
                "device_us": device_us,
                "smartarray_us": smart_us,
                "ratio": smart_us / device_us,
            }
        )
    return rows


def result_allocations(add: Any, n: int = 1 << 20, calls: int = 100) -> dict[str, Any]:
    """Device allocations of a steady ``z = add(x, y)`` loop over device-resident SmartArrays.

    Parameters
    ----------
    add
        A ``@vectorize(['float32(float32, float32)'], target='cuda')`` ufunc.
    n
        float32 elements per array.
    calls
        Calls in the measured loop (after a few untimed ones).

    Returns
    -------
    dict
        ``pool`` (False without a pool: numba-cuda or the simulator allocates), and with a
        pool: ``allocations_per_call``, ``frees_per_call``, ``reserved_growth_bytes`` (how
        much the pool took from the device during the loop: 0 when every allocation was
        served from memory it kept) and ``pool_hits`` (allocations served without growing
        the pool, counted as allocations less the growth in buffers of this size).
    """
    x = SmartArray(np.arange(n, dtype=np.float32), where="gpu")
    y = SmartArray(np.ones(n, dtype=np.float32), where="gpu")
    z = add(x, y)
    z = add(x, y)  # two results take turns: the pool holds both from here
    before = _backend.device_pool_info()
    for _ in range(calls):
        z = add(x, y)
    after = _backend.device_pool_info()
    if not np.array_equal(np.asarray(z), np.arange(n, dtype=np.float32) + 1):
        raise AssertionError("the ufunc loop computed a wrong result")
    row: dict[str, Any] = {"n": n, "calls": calls, "pool": bool(after["enabled"])}
    if not after["enabled"]:
        return row
    allocations = after["allocations"] - before["allocations"]
    growth = None
    if after.get("reserved_bytes") is not None and before.get("reserved_bytes") is not None:
        growth = max(0, after["reserved_bytes"] - before["reserved_bytes"])
    nbytes = n * 4
    row.update(
        {
            "allocations_per_call": allocations / calls,
            "frees_per_call": (after["frees"] - before["frees"]) / calls,
            "reserved_growth_bytes": growth,
            "pool_hits": None if growth is None else allocations - -(-growth // nbytes),
        }
    )
    return row
