"""Benchmarks: ``python -m smartarray.bench`` (also installed as ``smartarray-bench``).

Three parts, chosen by the tier this process runs in (:func:`smartarray.tier`):

Transfers (simulator and GPU)
    Host<->device copies made by the same computation written three ways, against the
    minimum (each input uploaded once, each result downloaded once):

    * a kernel chain (``steps`` launches of a 3-point smoothing stencil) over (a) numpy arrays
      with Numba's automatic transfers, (b) hand-managed device arrays, (c) SmartArrays;
    * the classic add progression with a ``@cuda.jit`` add kernel: host arrays; device
      inputs; device inputs and output; SmartArrays;
    * an unannotated workflow (kernels, ``@njit`` reads, host reads) with SmartArrays bare,
      annotated by hand and all ``InOut``, and with numpy arrays, and the time the launch hook
      adds per SmartArray argument (:mod:`smartarray.bench.intents`).

    SmartArray copies are read from smartarray's ledger; the copies Numba makes for plain
    arrays are counted by :class:`CopyCounter`.
Timings (real GPU only)
    The chain variants timed at two sizes (with the time per launch), and the add
    progression with a ``@vectorize(target='cuda')`` ufunc (SmartArrays with ``out=``, and
    with the host-array code unchanged, a new result each call), with the ratios (c)/(b) and
    SmartArrays / device inputs and output; the time per launch of kernels with 0 to 4 array
    arguments, device arrays and SmartArrays side by side, and the device allocations of a
    steady ``z = add(x, y)`` loop (:mod:`smartarray.bench.launch`).
Oversubscription and pinned pool (:mod:`smartarray.bench.memory`)
    A workload three times the device memory limit: bytes moved (and, on a GPU, time)
    against a hand-written out-of-core loop; pinned SmartArray creation with and without the
    pinned pool (GPU only).
CPU ``@njit`` overhead (every tier)
    Per-call overhead of passing a SmartArray instead of an ndarray to an ``@njit`` function,
    measured by :mod:`smartarray.bench.njit` when that module is present.
Host speed (every tier; alone with ``--host``)
    SmartArray ÷ ndarray for everyday numpy operations (indexing, operators, reductions) and
    the ``@njit`` call ÷ Numba's floor, measured by :mod:`smartarray.bench.host`.
dask (``--dask``, instead of the above)
    A chunked kernel pipeline on a LocalCluster of 1 and of 2 worker processes: the copies
    each worker made, and (meaningful on a GPU) wall time; see :mod:`smartarray.bench.dask`.

Results are printed as tables and written to ``<out>/bench-<tier>.json`` and, when
matplotlib is installed (``pip install -e ".[plot]"`` in a checkout),
``<out>/bench-<tier>.png``. On a machine with no CUDA at all the benchmarks re-run themselves
in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numba import cuda

from .._array import SmartArray
from .._core import backend as _backend
from .._core.transfer import TransferStats, track_transfers
from .._intents import In, Out
from .._numpy.creation import empty, empty_like
from .common import (
    THREADS,
    CopyCounter,
    _median_seconds,
    add,
    blocks,
    exit_quietly_on_broken_pipe,
    format_table,
    initial_condition,
    smooth,
    smooth_reference,
)

__all__ = [
    "THREADS",
    "CopyCounter",
    "add",
    "blocks",
    "format_table",
    "initial_condition",
    "main",
    "smooth",
    "smooth_reference",
]

HELP_DESCRIPTION = """\
smartarray's benchmarks: the host<->device copies SmartArrays make against numpy arrays and
hand-managed device arrays, the time they take on a GPU, and what they cost on the host."""
HELP_EPILOG = """\
parts (which ones run depends on this machine: GPU, CUDA simulator, or no CUDA):
  transfers    copies made by a kernel chain, the add progression and an unannotated
               workflow, against the minimum (simulator and GPU)
  timings      the kernel chain and a @vectorize(target='cuda') add, timed; the time per
               launch by number of array arguments; allocations of z = add(x, y) (GPU only)
  memory       data 3x the device memory limit against an out-of-core loop, and the
               pinned host-buffer pool
  CPU          the cost of an @njit call with a SmartArray argument
  host speed   SmartArray / ndarray for indexing, operators and reductions (alone: --host)
  dask         a chunked kernel pipeline on 1 and 2 worker processes (alone: --dask)

Results are printed as tables and written to OUT/bench-<tier>.json, with a plot
OUT/bench-<tier>.png when matplotlib is installed (pip install -e ".[plot]" in a checkout).
Without CUDA the benchmarks re-run themselves in Numba's CUDA simulator. With --quick the
host-speed ratios are reported but not judged against their targets.
"""
QUICK_HOST_NOTE = (
    "--quick: a few short timing rounds, too noisy to judge these ratios against their "
    "targets; run without --quick to judge them."
)
GPU_TIMINGS_NEED_A_GPU = (
    "GPU timings need a real CUDA GPU: this run has none, so only transfer counts (and the CPU "
    "@njit overhead) were measured. Run `python -m smartarray.bench` on a machine with a GPU "
    "for the timing tables."
)


# --- the kernel chain, three ways -------------------------------------------------------


def _same(array: Any) -> Any:
    return array


def _steps(u: Any, v: Any, steps: int, hint: Callable[[Any], Any] = _same) -> Any:
    """Launch ``smooth`` ``steps`` times, alternating ``u`` and ``v``; return the result's."""
    grid = (blocks(u.size), THREADS)
    for _ in range(steps):
        smooth[grid](hint(u), hint(v))
        u, v = v, u
    return u


def chain_numpy(u0: np.ndarray, steps: int, counter: CopyCounter | None = None) -> np.ndarray:
    """(a) numpy arrays: Numba copies each array in and out around every launch."""
    hint = counter.InOut if counter else _same
    result: np.ndarray = _steps(u0.copy(), np.empty_like(u0), steps, hint)
    return result


def chain_device(u0: np.ndarray, steps: int, counter: CopyCounter | None = None) -> np.ndarray:
    """(b) hand-managed device arrays: one upload, ``steps`` launches, one download."""
    counter = counter or CopyCounter()
    d_u = counter.to_device(u0)
    return counter.copy_to_host(_steps(d_u, cuda.device_array_like(u0), steps))


def chain_smartarray(u0: np.ndarray, steps: int) -> np.ndarray:
    """(c) SmartArrays passed as they are: smartarray copies only when needed."""
    u = SmartArray(u0)
    v = empty_like(u, where="gpu")  # made on the device: nothing to upload
    result: np.ndarray = _steps(u, v, steps).get("host")
    return result


def chain_transfers(n: int, steps: int) -> list[dict[str, Any]]:
    """Copies made by the three chain variants, each checked against :func:`smooth_reference`."""
    u0 = initial_condition(n)
    expected = smooth_reference(u0, steps)
    minimum = 2 * u0.nbytes  # the input up once, the result down once
    rows = []
    for name, label in CHAIN_VARIANTS:
        counter = CopyCounter()
        with track_transfers() as ledger:
            if name == "numpy":
                result = chain_numpy(u0, steps, counter)
            elif name == "device":
                result = chain_device(u0, steps, counter)
            else:
                result = chain_smartarray(u0, steps)
        if not np.allclose(result, expected):
            raise AssertionError(f"chain variant {name!r} computed a wrong result")
        stats = ledger if name == "smartarray" else counter.stats
        rows.append(_transfer_row(name, label, stats, minimum, n=n, steps=steps))
    return rows


CHAIN_VARIANTS = (
    ("numpy", "(a) numpy arrays, automatic transfers"),
    ("device", "(b) hand-managed device arrays"),
    ("smartarray", "(c) SmartArrays"),
)

ADD_STAGES = (
    ("host", "1. host arrays"),
    ("device_inputs", "2. device inputs"),
    ("device_inputs_output", "3. device inputs and output"),
    ("smartarray", "4. SmartArrays"),
)
# Timed on a GPU only: the host-array code (``z = add(x, y)``) unchanged, on SmartArrays.
ADD_UNCHANGED = ("smartarray_no_out", "4b. SmartArrays, host-array code (new result)")


def _transfer_row(
    name: str, label: str, stats: TransferStats, minimum: int, **extra: Any
) -> dict[str, Any]:
    return {
        "variant": name,
        "label": label,
        **extra,
        "h2d_count": stats.h2d_count,
        "h2d_bytes": stats.h2d_bytes,
        "d2h_count": stats.d2h_count,
        "d2h_bytes": stats.d2h_bytes,
        "bytes": stats.nbytes,
        "minimum_bytes": minimum,
        "ratio_to_minimum": stats.nbytes / minimum,
    }


# --- the add progression with a @cuda.jit kernel ------------------------------------------


def add_transfers(n: int, calls: int) -> list[dict[str, Any]]:
    """Copies made by ``calls`` additions at each stage of the add progression (kernel form).

    Host arrays are passed as ``In(x), In(y), Out(out)``, the copies a CUDA ufunc makes for
    host arrays. Device results are copied back once at the end, to check them.
    """
    launch = add[blocks(n), THREADS]
    x = np.arange(n, dtype=np.float32)
    y = 2 * x
    expected = x + y
    minimum = x.nbytes + y.nbytes + expected.nbytes
    rows = []
    for name, label in ADD_STAGES:
        counter = CopyCounter()
        with track_transfers() as ledger:
            if name == "host":
                out = np.empty_like(x)
                for _ in range(calls):
                    launch(counter.In(x), counter.In(y), counter.Out(out))
                result = out
            elif name in ("device_inputs", "device_inputs_output"):
                d_x, d_y = counter.to_device(x), counter.to_device(y)
                d_out = cuda.device_array_like(x)
                for _ in range(calls):
                    if name == "device_inputs":  # like a ufunc, a new device result each call
                        d_out = cuda.device_array_like(x)
                    launch(d_x, d_y, d_out)
                result = counter.copy_to_host(d_out)
            else:
                sx, sy = SmartArray(x), SmartArray(y)
                s_out = empty(n, dtype=np.float32, where="gpu")
                for _ in range(calls):
                    launch(In(sx), In(sy), Out(s_out))
                result = np.asarray(s_out)
        if not np.array_equal(result, expected):
            raise AssertionError(f"add stage {name!r} computed a wrong result")
        stats = ledger if name == "smartarray" else counter.stats
        rows.append(_transfer_row(name, label, stats, minimum, n=n, calls=calls))
    return rows


# --- timings on a real GPU ------------------------------------------------------------------


def chain_timings(n: int, steps: int, repeats: int) -> list[dict[str, Any]]:
    """Seconds for a whole chain (upload, ``steps`` launches, download) per variant.

    Buffers are allocated once, before timing; each timed run starts from host data that has
    just changed, so every variant has to upload it again. (b) copies from and to page-locked
    host buffers, as SmartArrays do by default on a GPU, so that (c)/(b) compares the
    bookkeeping and not two kinds of host memory.
    """
    u0 = initial_condition(n)
    expected = smooth_reference(u0, steps) if n <= 1 << 16 else None
    host = [np.empty_like(u0), np.empty_like(u0)]  # (a)
    d = [cuda.device_array_like(u0), cuda.device_array_like(u0)]  # (b)
    source_b, result_b = cuda.pinned_array_like(u0), cuda.pinned_array_like(u0)
    source_b[...] = u0
    s = [SmartArray(u0), empty_like(u0, where="gpu")]  # (c)
    assert s[0].host_memory == "pinned"

    def setup_numpy() -> None:
        host[0][...] = u0

    def run_device() -> None:
        d[0].copy_to_device(source_b)
        _steps(d[0], d[1], steps).copy_to_host(result_b)

    def setup_smartarray() -> None:
        s[0][...] = u0  # the host data changed: the device copy is stale

    seconds = {
        "numpy": _median_seconds(lambda: _steps(host[0], host[1], steps), repeats, setup_numpy),
        "device": _median_seconds(run_device, repeats),
        "smartarray": _median_seconds(
            lambda: _steps(s[0], s[1], steps).get("host"), repeats, setup_smartarray
        ),
    }
    final = steps % 2  # which buffer holds the result
    if expected is not None:
        for name, got in (
            ("numpy", host[final]),
            ("device", result_b),
            ("smartarray", np.asarray(s[final])),
        ):
            if not np.allclose(got, expected):
                raise AssertionError(f"timed chain variant {name!r} computed a wrong result")
    rows = []
    for name, label in CHAIN_VARIANTS:
        rows.append(
            {
                "variant": name,
                "label": label,
                "n": n,
                "steps": steps,
                "seconds": seconds[name],
                "us_per_launch": seconds[name] / steps * 1e6,
                "ratio_to_device": seconds[name] / seconds["device"],
            }
        )
    return rows


@functools.cache
def _add_ufunc() -> Any:
    from numba import vectorize

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add_ufunc(x, y):  # pragma: no cover - runs on the GPU
        return x + y

    return add_ufunc


def add_ufunc_timings(n: int, calls: int, repeats: int) -> list[dict[str, Any]]:
    """Seconds per call of a ``@vectorize(target='cuda')`` add at each stage (real GPU only)."""
    add_ufunc = _add_ufunc()
    x = np.arange(n, dtype=np.float32)
    y = 2 * x
    d_x, d_y = cuda.to_device(x), cuda.to_device(y)
    d_out = cuda.device_array_like(x)
    sx, sy = SmartArray(x), SmartArray(y)
    s_out = empty(n, dtype=np.float32, where="gpu")

    def repeat(call: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(calls):
                call()

        return run

    stages: dict[str, Callable[[], Any]] = {
        "host": lambda: add_ufunc(x, y),
        "device_inputs": lambda: add_ufunc(d_x, d_y),
        "device_inputs_output": lambda: add_ufunc(d_x, d_y, out=d_out),
        "smartarray": lambda: add_ufunc(sx, sy, out=s_out),
        "smartarray_no_out": lambda: add_ufunc(sx, sy),
    }
    seconds = {
        name: _median_seconds(repeat(call), repeats) / calls for name, call in stages.items()
    }
    if not np.array_equal(np.asarray(s_out), x + y):
        raise AssertionError("the SmartArray ufunc stage computed a wrong result")
    if not np.array_equal(np.asarray(add_ufunc(sx, sy)), x + y):
        raise AssertionError("the SmartArray ufunc stage without out= computed a wrong result")
    return [
        {
            "variant": name,
            "label": label,
            "n": n,
            "seconds_per_call": seconds[name],
            "ratio_to_device_inputs_output": seconds[name] / seconds["device_inputs_output"],
        }
        for name, label in (*ADD_STAGES, ADD_UNCHANGED)
    ]


def gpu_description() -> str:
    """Name, compute capability and memory of the current GPU (real GPU tier only)."""
    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    major, minor = device.compute_capability
    total = cuda.current_context().get_memory_info()[1]
    return f"{name} (compute capability {major}.{minor}, {total / 2**30:.1f} GiB)"


# --- CPU @njit overhead ---------------------------------------------------------------------


def njit_overhead() -> tuple[dict[str, Any] | None, str]:
    """:func:`smartarray.bench.njit.measure_njit_overhead` and its report, if the module exists."""
    try:
        from . import njit as bench_njit
    except ImportError:
        return None, "not measured: smartarray.bench.njit is not available in this installation"
    result: dict[str, Any] = bench_njit.measure_njit_overhead()
    report = getattr(bench_njit, "format_report", None)
    if report is None:
        return result, "\n".join(f"  {key}: {value}" for key, value in result.items())
    return result, str(report(result))


# --- reporting ------------------------------------------------------------------------------


def transfer_table(rows: Sequence[dict[str, Any]]) -> str:
    """The transfer rows of :func:`chain_transfers` or :func:`add_transfers` as a table."""
    return format_table(
        ["variant", "H2D copies", "D2H copies", "bytes moved", "minimum", "x minimum"],
        [
            [
                r["label"],
                r["h2d_count"],
                r["d2h_count"],
                r["bytes"],
                r["minimum_bytes"],
                f"{r['ratio_to_minimum']:.1f}",
            ]
            for r in rows
        ],
    )


def launch_table(rows: Sequence[dict[str, Any]], repeats: int) -> str:
    """The rows of :func:`smartarray.bench.launch.launch_timings` as a titled table."""
    first = rows[0]
    title = (
        f"Timings: time per launch by number of array arguments, {first['launches']} launches "
        f"of kernels without signatures, n={first['n']} float64, median of {repeats} runs"
    )
    table = format_table(
        ["array arguments", "device arrays", "SmartArrays", "SmartArrays / device arrays"],
        [
            [
                r["arguments"],
                f"{r['device_us']:.1f} µs",
                f"{r['smartarray_us']:.1f} µs",
                f"{r['ratio']:.2f}",
            ]
            for r in rows
        ],
    )
    return f"{title}\n{table}"


def allocation_report(row: dict[str, Any]) -> str:
    """:func:`smartarray.bench.launch.result_allocations` in words."""
    head = (
        f"Device allocations: z = add(x, y) on SmartArrays, n={row['n']} float32, "
        f"{row['calls']} calls"
    )
    if not row["pool"]:
        return f"{head}\n  no device memory pool (numba-cuda allocates each result)"
    growth = row["reserved_growth_bytes"]
    return (
        f"{head}\n  per call: {row['allocations_per_call']:.2f} allocations, "
        f"{row['frees_per_call']:.2f} frees; the pool grew by "
        + ("(not reported)" if growth is None else f"{growth} bytes")
        + ("" if row["pool_hits"] is None else f"; pool hits: {row['pool_hits']}")
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


# The GPU targets the timing panels of the plot draw (docs/benchmarks.md): a SmartArray kernel
# chain within 1.05x, and a SmartArray CUDA ufunc call with out= within 1.10x, of the time of
# hand-managed device arrays.
CHAIN_TARGET = 1.05
ADD_TARGET = 1.10


def _named_bars(
    ax: Any, labels: Sequence[str], values: Sequence[float], fmt: str, color: str
) -> None:
    """Horizontal bars from 0, the first on top, each named in full just above it."""
    positions = [2.0 * k for k in range(len(labels))][::-1]
    bars = ax.barh(positions, values, height=0.9, color=color)
    ax.bar_label(bars, fmt=fmt, padding=4)
    for y, label in zip(positions, labels, strict=True):  # (over the reference lines)
        box = {"facecolor": "white", "edgecolor": "none", "pad": 1.0}
        ax.text(0.0, y + 0.5, label, va="bottom", ha="left", bbox=box, zorder=3)
    ax.set_yticks([])
    ax.set_ylim(-0.8, positions[0] + 2.9)  # a band on top for the legend
    ax.spines[["top", "right", "left"]].set_visible(False)


def _title_and_legend(ax: Any, title: str) -> None:
    """The title, and the legend in the band above the bars."""
    ax.set_title(title)
    ax.legend(loc="upper right", ncols=2, framealpha=1.0)


def _plot_transfers(ax: Any, rows: Sequence[dict[str, Any]], title: str) -> None:
    """Bytes moved ÷ the minimum, one named bar per variant."""
    ratios = [r["ratio_to_minimum"] for r in rows]
    _named_bars(ax, [r["label"] for r in rows], ratios, "%.1fx", "tab:blue")
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1, label="minimum")
    ax.set_xlim(0, max(ratios) * 1.15)
    ax.set_xlabel("bytes moved ÷ minimum (lower is better)")
    _title_and_legend(ax, title)


def _plot_ratios(
    ax: Any, labels: Sequence[str], ratios: Sequence[float], target: float, title: str, note: str
) -> None:
    """SmartArray time ÷ hand-managed time, on a linear axis from 0, with the target."""
    _named_bars(ax, labels, ratios, "%.2fx", "tab:orange")
    ax.axvline(1.0, color="black", linewidth=1, label="hand-managed")
    ax.axvline(target, color="tab:red", linestyle="--", linewidth=1.2, label=f"target {target:g}x")
    ax.set_xlim(0, max(*ratios, target) * 1.2)
    ax.set_xlabel(f"time ÷ hand-managed device arrays (lower is better)\n{note}")
    _title_and_legend(ax, title)


def _ms3(seconds: float) -> str:
    """Milliseconds to 3 significant digits, trailing zeros kept (0.100 ms, 1216 ms)."""
    ms = seconds * 1e3
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:#.3g} ms"


def _size(n: int) -> str:
    exponent = n.bit_length() - 1
    return f"2^{exponent}" if n == 1 << exponent else f"{n:,}"


def _plot_chain_timings(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    """(c) SmartArrays ÷ (b) hand-managed device arrays, per size."""
    labels, ratios, numpy_ratios = [], [], []
    for n in sorted({r["n"] for r in rows}):
        by_variant = {r["variant"]: r for r in rows if r["n"] == n}
        smart, device = by_variant["smartarray"], by_variant["device"]
        labels.append(
            f"n = {_size(n)}: SmartArrays {_ms3(smart['seconds'])}, "
            f"hand-managed {_ms3(device['seconds'])}"
        )
        ratios.append(smart["ratio_to_device"])
        numpy_ratios.append(f"{by_variant['numpy']['ratio_to_device']:.3g}x")
    _plot_ratios(
        ax,
        labels,
        ratios,
        CHAIN_TARGET,
        f"Time: kernel chain, {rows[0]['steps']} launches",
        "(numpy arrays, automatic transfers: " + ", ".join(numpy_ratios) + ")",
    )


def _plot_add_timings(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    """The SmartArray ufunc stages ÷ the hand-managed stage that allocates alike."""
    seconds = {r["variant"]: r["seconds_per_call"] for r in rows}
    by_variant = {r["variant"]: r for r in rows}
    pairs = (  # SmartArray stage, hand-managed stage with the same allocations, their names
        ("smartarray", "device_inputs_output", "out=", "device inputs and output"),
        ("smartarray_no_out", "device_inputs", "new result", "device inputs, new result"),
    )
    labels, ratios = [], []
    for smart, device, smart_name, device_name in pairs:
        if smart in seconds and device in seconds:
            labels.append(
                f"SmartArrays, {smart_name}: {_ms3(seconds[smart])};\n"
                f"{device_name}: {_ms3(seconds[device])}"
            )
            ratios.append(seconds[smart] / seconds[device])
    host = by_variant["host"]["ratio_to_device_inputs_output"] if "host" in by_variant else None
    _plot_ratios(
        ax,
        labels,
        ratios,
        ADD_TARGET,
        f"Time per call: CUDA ufunc add, n = {_size(rows[0]['n'])}",
        "" if host is None else f"(host arrays: {host:.3g}x device inputs and output)",
    )


PLOT_FONT_SIZE = 13  # readable at page width (the figure is 1300 pixels wide)


def plot_figure(results: dict[str, Any], plt: Any) -> Any:
    """The figure :func:`write_plot` saves (made with ``font.size`` :data:`PLOT_FONT_SIZE`).

    A grid of panels: one row of two for the transfers (bytes moved ÷ the minimum, per named
    variant); with GPU timings, a row for the time of the SmartArray variants ÷ that of
    hand-managed device arrays, on a linear axis from 0 with the target drawn; and a row for
    the everyday idioms (bytes moved ÷ what a hand-written program moves).
    """
    timings = results.get("timings")
    transfers = results["transfers"]
    idioms = results.get("idioms")  # (absent from results recorded before issue 21)
    rows = 1 + bool(timings) + bool(idioms)
    fig, axes = plt.subplots(rows, 2, figsize=(13, 5 * rows), squeeze=False)
    steps, calls = transfers["chain"][0]["steps"], transfers["add"][0]["calls"]
    _plot_transfers(axes[0][0], transfers["chain"], f"Bytes: kernel chain, {steps} launches")
    _plot_transfers(axes[0][1], transfers["add"], f"Bytes: add progression, {calls} calls")
    if timings:
        _plot_chain_timings(axes[1][0], timings["chain"])
        _plot_add_timings(axes[1][1], timings["add"])
    if idioms:
        row = axes[rows - 1]
        named = [{"label": r["idiom"], "ratio_to_minimum": r["ratio"]} for r in idioms]
        _plot_transfers(row[0], named, f"Bytes: everyday idioms, n={idioms[0]['n']}")
        row[1].axis("off")
    meta = results["meta"]
    fig.suptitle(f"smartarray.bench: {meta['tier']}, {meta['date']}")
    fig.tight_layout()
    return fig


def write_plot(results: dict[str, Any], path: Path) -> bool:
    """Plot the results to ``path`` (PNG, :func:`plot_figure`); False without matplotlib.

    The GPU plot in the docs is made from the recorded results:
    ``write_plot(json.loads(Path("docs/img/bench-gpu.json").read_text()),
    Path("docs/img/bench-gpu.png"))``.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    with plt.rc_context({"font.size": PLOT_FONT_SIZE}):
        fig = plot_figure(results, plt)
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return True


def _meta() -> dict[str, Any]:
    from .. import __version__

    meta: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "tier": _backend.tier(),
        "machine": f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "smartarray": __version__,
        "numba": importlib.metadata.version("numba"),
        "numba-cuda": importlib.metadata.version("numba-cuda"),
        "numpy": np.__version__,
        "load_average": _load_average(),  # (1 min, when the run began)
        "indexing": _indexing(),
    }
    if _backend.tier() == "gpu":
        meta["gpu"] = gpu_description()
    return meta


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the benchmarks for this tier, print the tables and return the results."""
    tier = _backend.tier()
    results: dict[str, Any] = {"meta": _meta(), "transfers": None, "timings": None}
    meta = results["meta"]
    print(
        f"smartarray {meta['smartarray']}, tier: {tier}"
        + (f", {meta['gpu']}" if "gpu" in meta else "")
    )

    n = args.n if args.n is not None else (1024 if tier == "simulator" else 1 << 20)
    steps = args.steps if args.steps is not None else (4 if args.quick else 20)
    calls = 2 if args.quick else 5
    print(f"\nTransfers: kernel chain, n={n} float64, {steps} launches")
    chain = chain_transfers(n, steps)
    print(transfer_table(chain))
    print(f"\nTransfers: add progression (@cuda.jit add kernel), n={n} float32, {calls} calls")
    add = add_transfers(n, calls)
    print(transfer_table(add))
    results["transfers"] = {"chain": chain, "add": add}

    from . import intents as bench_intents

    every = 5
    workflow_steps = 20 if not args.quick else 10
    print(
        f"\nTransfers: unannotated workflow (kernel, @njit read every {every} steps, host "
        f"reads), n={n} float64, {workflow_steps} launches"
    )
    workflow = bench_intents.workflow_transfers(n, workflow_steps, every)
    lookup = bench_intents.lookup_overhead(rounds=3 if args.quick else 7)
    print(bench_intents.report(workflow, lookup))
    results["transfers"]["workflow"] = workflow
    results["intent_lookup"] = lookup

    from . import idioms as bench_idioms

    idiom_n = 1 << 14
    print(
        f"\nTransfers: everyday idioms, n={idiom_n} float64, coalescing gap 0: bytes moved ÷ "
        "what a careful hand-written program moves"
    )
    results["idioms"] = bench_idioms.measure(idiom_n)
    print(bench_idioms.report(results["idioms"]))

    from . import element_writes as bench_element_writes

    print(
        "\nElement writes a[i] = 3.0 (every other element) into a device-current float64 array,"
        " then a.sum(); by hand: one copy_to_host, then the loop on the ndarray"
    )
    results["element_writes"] = bench_element_writes.measure(
        (1_000, 10_000) if args.quick else bench_element_writes.SIZES
    )
    print(bench_element_writes.report(results["element_writes"]))
    if tier == "gpu":
        idiom_big = 1 << 22
        results["idiom_timings"] = bench_idioms.timings(idiom_big, 3 if args.quick else 7)
        print(f"\nTimings: everyday idioms, n={idiom_big} float64, default gap")
        print(
            format_table(
                ["idiom", "SmartArrays", "by hand", "ratio"],
                [
                    [r["idiom"], _ms(r["seconds"]), _ms(r["hand_seconds"]), f"{r['ratio']:.2f}"]
                    for r in results["idiom_timings"]
                ],
            )
        )

    if tier == "gpu":
        repeats = 3 if args.quick else 7
        gpu_steps = 20 if args.quick else 100
        sizes = (1 << 10, 1 << 20) if args.quick else (1 << 10, 1 << 22)
        chain_t = [row for size in sizes for row in chain_timings(size, gpu_steps, repeats)]
        add_n = 1 << 20 if args.quick else 1 << 24
        add_t = add_ufunc_timings(add_n, 10, repeats)
        results["timings"] = {"chain": chain_t, "add": add_t, "repeats": repeats}
        print(f"\nTimings: kernel chain, {gpu_steps} launches, median of {repeats} runs")
        print(
            format_table(
                ["variant", "n", "time per chain", "per launch", "/ (b)"],
                [
                    [
                        r["label"],
                        r["n"],
                        _ms(r["seconds"]),
                        f"{r['us_per_launch']:.1f} µs",
                        f"{r['ratio_to_device']:.2f}",
                    ]
                    for r in chain_t
                ],
            )
        )
        print(f"\nTimings: add progression, @vectorize(target='cuda'), n={add_n} float32")
        print(
            format_table(
                ["stage", "time per call", "/ stage 3"],
                [
                    [
                        r["label"],
                        _ms(r["seconds_per_call"]),
                        f"{r['ratio_to_device_inputs_output']:.2f}",
                    ]
                    for r in add_t
                ],
            )
        )
        from . import launch as bench_launch

        launches = 200 if args.quick else 1000
        launch_t = bench_launch.launch_timings(launches=launches, repeats=repeats)
        allocations = bench_launch.result_allocations(
            _add_ufunc(), n=add_n, calls=10 if args.quick else 100
        )
        results["timings"]["launch"] = launch_t
        results["timings"]["ufunc_allocations"] = allocations
        print(f"\n{launch_table(launch_t, repeats)}")
        print(f"\n{allocation_report(allocations)}")
        from . import throughput as bench_throughput

        results["throughput"] = bench_throughput.measure(repeats=3 if args.quick else 7)
        print(f"\n{bench_throughput.report(results['throughput'])}")
    else:
        results["timings_note"] = GPU_TIMINGS_NEED_A_GPU
        print(f"\n{GPU_TIMINGS_NEED_A_GPU}")

    from . import memory as bench_memory

    results["memory"], report = bench_memory.run(tier, args.quick)
    print(f"\n{report}")

    print("\nCPU: ", end="")
    results["njit"], report = njit_overhead()
    print(report)
    results["host"] = host_speed(args.quick)
    return results


def host_speed(quick: bool) -> list[dict[str, Any]]:
    """Measure and print the host-speed table (:mod:`smartarray.bench.host`), each row as
    soon as it is measured."""
    from . import host as bench_host

    estimates = 3 if quick else 5
    load_before = _load_average()
    print(
        "\nHost speed: SmartArray ÷ ndarray, same process. Each row is the median of "
        f"{estimates} estimates\n(an estimate: the best time of each variant over interleaved "
        "rounds): that estimate's two times\nand its ratio, then the range of all the ratios.",
        flush=True,
    )
    print(f"SmartArray's indexing: {_indexing()}.", flush=True)
    print(bench_host.format_header(), flush=True)

    def show(row: dict[str, Any]) -> None:
        print(bench_host.format_row(row), flush=True)

    if quick:  # a few short rounds: too noisy to judge against the targets
        rows = bench_host.measure_host_overhead(
            estimates=estimates, rounds=1, seconds=0.005, judge=False, on_row=show
        )
    else:
        rows = bench_host.measure_host_overhead(estimates=estimates, on_row=show)
    print(
        f"Load average (1 min) before: {load_before}, after: {_load_average()} (the targets "
        "are judged on a quiet machine: below 0.5)."
    )
    if quick:
        print(QUICK_HOST_NOTE)
    return rows


def _indexing() -> str:
    """Where SmartArray's indexing fast paths run: the C slots of smartarray._speedups, or
    their Python twins (the module not built, or SMARTARRAY_PURE_PYTHON set)."""
    from .. import _array

    if _array._speedups is not None:
        return "C slots (smartarray._speedups)"
    if _array._compiled is not None:
        return "Python (smartarray._speedups turned off by SMARTARRAY_PURE_PYTHON)"
    return "Python (smartarray._speedups not built: no C compiler at install)"


def _load_average() -> str:
    """The 1-minute load average, as ``uptime`` prints it ("unknown" where there is none)."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):  # (not on Windows)
        return "unknown"


def positive_int(text: str) -> int:
    """An argparse ``type`` for counts: a whole number of at least 1.

    Raises
    ------
    argparse.ArgumentTypeError
        For anything else, naming the value (argparse prints it as a one-line error).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be at least 1, got {value} (leave the option out for the default)"
        )
    return value


def program_name() -> str:
    """How the user started the benchmarks: ``smartarray-bench`` (the installed script) or
    ``python -m smartarray.bench``."""
    started_as = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    return "smartarray-bench" if started_as == "smartarray-bench" else "python -m smartarray.bench"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m smartarray.bench`` and ``smartarray-bench``.

    Returns the exit status: 0, 1 when a part cannot run here (``--dask`` without dask), 141
    when the reader of the output went away (``| head``). Bad options exit with status 2 and
    a one-line error (argparse).
    """
    return exit_quietly_on_broken_pipe(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name(),
        description=HELP_DESCRIPTION,
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer launches and repeats; host-speed ratios are not judged",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench-results"), help="output folder (bench-results)"
    )
    parser.add_argument(
        "--n",
        type=positive_int,
        default=None,
        help="elements for the transfer part (default: 1024 in the simulator, 2^20 on a GPU)",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=None,
        help="launches in the kernel chain (default: 20, 4 with --quick)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not write the PNG plot")
    parser.add_argument(
        "--host", action="store_true", help="only the host-speed table (SmartArray ÷ ndarray)"
    )
    parser.add_argument(
        "--dask",
        action="store_true",
        help="only the dask benchmark: a chunked kernel pipeline on 1 and 2 worker processes",
    )
    args = parser.parse_args(argv)

    if args.host:
        host_results: dict[str, Any] = {"meta": _meta(), "host": host_speed(args.quick)}
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "bench-host.json"
        path.write_text(json.dumps(host_results, indent=2) + "\n")
        print(f"\nwrote {path}")
        return 0

    if _backend.tier() == "host-only":
        print("No CUDA GPU here: re-running the benchmarks in Numba's CUDA simulator.", flush=True)
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        command = [
            sys.executable,
            "-m",
            "smartarray.bench",
            *(argv if argv is not None else sys.argv[1:]),
        ]
        return subprocess.run(command, env=env, check=False).returncode

    if args.dask:
        return _run_dask(args)
    results = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"bench-{results['meta']['tier']}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {stem.with_suffix('.json')}")
    if not args.no_plot:
        if write_plot(results, stem.with_suffix(".png")):
            print(f"wrote {stem.with_suffix('.png')}")
        else:
            print("no plot: matplotlib is not installed (pip install -e '.[plot]' in a checkout)")
    return 0


def _run_dask(args: argparse.Namespace) -> int:
    """``--dask``: :mod:`smartarray.bench.dask`, written to ``<out>/bench-<tier>-dask.json``."""
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        print(f"the dask benchmark needs dask: pip install -e '.[dask]' in a checkout ({exc})")
        return 1
    from . import dask as bench_dask

    results = {"meta": _meta(), "dask": bench_dask.run(args.quick)}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench-{results['meta']['tier']}-dask.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
