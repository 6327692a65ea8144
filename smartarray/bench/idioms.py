"""Everyday idioms: bytes moved by SmartArray code ÷ what a careful hand-written program moves.

Each idiom is written as a Numba user writes it with SmartArrays, and run inside
``track_transfers()``; the hand-written minimum is the bytes a program managing device arrays
by hand would copy (computed, per idiom, from the sizes involved). The coalescing gap is set
to 0 while they run (exactly the stale ranges move), so the ratios are those of the
range-granular coherence itself. On a GPU each idiom is also timed, with the default gap,
against the hand-written program (device arrays, ``copy_to_device``/``copy_to_host`` of just
the bytes needed; both written in :func:`idioms`, and checked to compute the same in the
simulator tier).
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


Idiom = tuple[str, Callable[[], Any], Callable[[], Any], int]


def idioms(n: int) -> list[Idiom]:
    """``(name, smartarray_run, hand_written_run, minimum_bytes)`` for each idiom at ``n``
    float64 elements. Each run returns the array it computed (a SmartArray; a device array or
    an ndarray for the hand-written one, which copies just the bytes needed with
    ``copy_to_device``/``copy_to_host``), for checking that both compute the same."""
    import smartarray as sa

    cuda_ = _backend.cuda()
    double_into, step = _kernels()
    grid = (1, 32) if _backend.is_simulator() else ((n + 255) // 256, 256)
    nbytes = n * 8

    def empty_like_output() -> Any:
        x = sa.SmartArray(np.arange(n, dtype=np.float64))
        out = sa.empty_like(x)
        double_into[grid](x, out)
        np.asarray(out)
        return out

    def zeros_output() -> Any:
        x = sa.SmartArray(np.arange(n, dtype=np.float64))
        out = sa.zeros(n)
        double_into[grid](x, out)
        np.asarray(out)
        return out

    def output_by_hand() -> Any:
        x = cuda_.to_device(np.arange(n, dtype=np.float64))
        out = cuda_.device_array(n)
        double_into[grid](x, out)
        return out.copy_to_host()

    def boundary_value() -> Any:
        u = sa.SmartArray(np.zeros(n))
        for k in range(STEPS):
            u[0] = float(k)
            step[grid](u)
        return u

    def boundary_value_by_hand() -> Any:
        u = cuda_.to_device(np.zeros(n))
        for k in range(STEPS):
            u[0:1].copy_to_device(np.array([float(k)]))
            step[grid](u)
        return u

    def convergence_check() -> Any:
        v = sa.SmartArray(np.zeros(n))
        for _ in range(STEPS):
            step[grid](v)
            float(v[n // 2])
        np.asarray(v)
        return v

    def convergence_check_by_hand() -> Any:
        v = cuda_.to_device(np.zeros(n))
        for _ in range(STEPS):
            step[grid](v)
            float(v[n // 2 : n // 2 + 1].copy_to_host()[0])
        return v.copy_to_host()

    def halo() -> Any:
        w = sa.SmartArray(np.zeros(n))
        for k in range(STEPS):
            w[:16] = float(k)
            step[grid](w)
        return w

    def halo_by_hand() -> Any:
        w = cuda_.to_device(np.zeros(n))
        for k in range(STEPS):
            w[:16].copy_to_device(np.full(16, float(k)))
            step[grid](w)
        return w

    def slice_read() -> Any:
        y = sa.SmartArray(np.zeros(n))
        step[grid](y)
        return np.asarray(y[100:200])

    def slice_read_by_hand() -> Any:
        y = cuda_.to_device(np.zeros(n))
        step[grid](y)
        return y[100:200].copy_to_host()

    def kernel_on_view() -> Any:
        z = sa.SmartArray(np.zeros(n))
        step[grid](z[1024:2048])
        return z[1024:2048]

    def kernel_on_view_by_hand() -> Any:
        z = cuda_.to_device(np.zeros(n)[1024:2048])
        step[grid](z)
        return z

    return [
        ("out = empty_like(x); kernel; read out", empty_like_output, output_by_hand, 2 * nbytes),
        ("out = zeros(n); kernel; read out", zeros_output, output_by_hand, 2 * nbytes),
        (
            f"u[0] = b; kernel, {STEPS} steps",
            boundary_value,
            boundary_value_by_hand,
            nbytes + (STEPS - 1) * 8,
        ),
        (
            f"kernel; read v[n//2], {STEPS} steps; read v",
            convergence_check,
            convergence_check_by_hand,
            2 * nbytes + (STEPS - 1) * 8,
        ),
        (
            f"w[:16] = halo; kernel, {STEPS} steps",
            halo,
            halo_by_hand,
            nbytes + (STEPS - 1) * 128,
        ),
        ("kernel; read y[100:200]", slice_read, slice_read_by_hand, nbytes + 800),
        ("kernel on z[1024:2048]", kernel_on_view, kernel_on_view_by_hand, 8192),
    ]


def as_host(result: Any) -> np.ndarray:
    """An idiom's result as an ndarray (SmartArray, device array or ndarray)."""
    if hasattr(result, "copy_to_host"):
        return np.asarray(result.copy_to_host())
    return np.asarray(result)


def measure(n: int) -> list[dict[str, Any]]:
    """Run every idiom at ``n`` elements with the coalescing gap 0: bytes moved and ratio."""
    rows = []
    before = _ranges.coalesce_bytes()
    _ranges.set_coalesce_bytes(0)
    try:
        for name, run, _, minimum in idioms(n):
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
    """On a GPU: seconds per run of each idiom with SmartArrays (default gap) and written by
    hand, best of ``repeats`` each, interleaved, and their ratio."""
    rows = []
    for name, run, by_hand, _ in idioms(n):
        run()  # compile and warm up
        by_hand()
        best = {"smartarray": float("inf"), "hand": float("inf")}
        for _ in range(repeats):
            for variant, call in (("smartarray", run), ("hand", by_hand)):
                _backend.cuda().synchronize()
                start = time.perf_counter()
                call()
                _backend.cuda().synchronize()
                best[variant] = min(best[variant], time.perf_counter() - start)
        rows.append(
            {
                "idiom": name,
                "n": n,
                "seconds": best["smartarray"],
                "hand_seconds": best["hand"],
                "ratio": best["smartarray"] / best["hand"],
            }
        )
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
