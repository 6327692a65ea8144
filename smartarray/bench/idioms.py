"""Everyday idioms: bytes moved by SmartArray code ÷ what a careful hand-written program moves.

Each idiom is written as a Numba user writes it with SmartArrays, and run inside
``track_transfers()``; the hand-written minimum is the bytes a program managing device arrays
by hand would copy (computed, per idiom, from the sizes involved). The coalescing gap is set
to 0 while they run (exactly the stale ranges move), so the ratios are those of the
range-granular coherence itself. On a GPU each idiom is also timed, with the default gap,
against the hand-written program (device arrays, ``copy_to_device``/``copy_to_host`` of just
the bytes needed).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._core import backend as _backend
from .._core import ranges as _ranges
from .._core.transfer import track_transfers
from .common import format_table

STEPS = 10


cuda: Any = None  # numba.cuda, imported by _kernels (a global, as the simulator needs)


@functools.cache
def _kernels() -> tuple[Any, Any]:
    global cuda
    cuda = _backend.cuda()

    @cuda.jit
    def double_into(x, out):  # pragma: no cover - compiled
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, x.size, stride):
            out[i] = 2 * x[i]

    @cuda.jit
    def step(u):  # pragma: no cover - compiled
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, u.size, stride):
            u[i] = u[i] + 1.0

    return double_into, step


def idioms(n: int) -> list[tuple[str, Callable[[], None], int]]:
    """``(name, run, minimum_bytes)`` for each idiom at ``n`` float64 elements."""
    import smartarray as sa

    double_into, step = _kernels()
    grid = (1, 32) if _backend.is_simulator() else ((n + 255) // 256, 256)
    nbytes = n * 8

    def empty_like_output() -> None:
        x = sa.SmartArray(np.arange(n, dtype=np.float64))
        out = sa.empty_like(x)
        double_into[grid](x, out)
        np.asarray(out)

    def zeros_output() -> None:
        x = sa.SmartArray(np.arange(n, dtype=np.float64))
        out = sa.zeros(n)
        double_into[grid](x, out)
        np.asarray(out)

    def boundary_value() -> None:
        u = sa.SmartArray(np.zeros(n))
        for k in range(STEPS):
            u[0] = float(k)
            step[grid](u)

    def convergence_check() -> None:
        v = sa.SmartArray(np.zeros(n))
        for _ in range(STEPS):
            step[grid](v)
            float(v[n // 2])
        np.asarray(v)

    def halo() -> None:
        w = sa.SmartArray(np.zeros(n))
        for k in range(STEPS):
            w[:16] = float(k)
            step[grid](w)

    def slice_read() -> None:
        y = sa.SmartArray(np.zeros(n))
        step[grid](y)
        np.asarray(y[100:200])

    def kernel_on_view() -> None:
        z = sa.SmartArray(np.zeros(n))
        step[grid](z[1024:2048])

    return [
        ("out = empty_like(x); kernel; read out", empty_like_output, 2 * nbytes),
        ("out = zeros(n); kernel; read out", zeros_output, 2 * nbytes),
        (f"u[0] = b; kernel, {STEPS} steps", boundary_value, nbytes + (STEPS - 1) * 8),
        (
            f"kernel; read v[n//2], {STEPS} steps; read v",
            convergence_check,
            2 * nbytes + (STEPS - 1) * 8,
        ),
        (f"w[:16] = halo; kernel, {STEPS} steps", halo, nbytes + (STEPS - 1) * 128),
        ("kernel; read y[100:200]", slice_read, nbytes + 800),
        ("kernel on z[1024:2048]", kernel_on_view, 8192),
    ]


def measure(n: int) -> list[dict[str, Any]]:
    """Run every idiom at ``n`` elements with the coalescing gap 0: bytes moved and ratio."""
    rows = []
    before = _ranges.coalesce_bytes()
    _ranges.set_coalesce_bytes(0)
    try:
        for name, run, minimum in idioms(n):
            with track_transfers() as t:
                run()
            rows.append(
                {
                    "idiom": name,
                    "n": n,
                    "bytes": t.nbytes,
                    "copies": t.count,
                    "minimum_bytes": minimum,
                    "ratio": t.nbytes / minimum,
                }
            )
    finally:
        _ranges.set_coalesce_bytes(before)
    return rows


def timings(n: int, repeats: int) -> list[dict[str, Any]]:
    """On a GPU: seconds per run of each idiom (default gap), best of ``repeats``."""
    rows = []
    for name, run, _ in idioms(n):
        run()  # compile and warm up
        best = float("inf")
        for _ in range(repeats):
            _backend.cuda().synchronize()
            start = time.perf_counter()
            run()
            _backend.cuda().synchronize()
            best = min(best, time.perf_counter() - start)
        rows.append({"idiom": name, "n": n, "seconds": best})
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    """The idioms table: bytes moved, the hand-written minimum and their ratio."""
    return format_table(
        ["idiom", "bytes moved", "copies", "hand-written", "ratio"],
        [
            [r["idiom"], r["bytes"], r["copies"], r["minimum_bytes"], f"{r['ratio']:.2f}"]
            for r in rows
        ],
    )
