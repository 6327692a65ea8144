"""``python -m smartarray``: versions, this machine's tier, pinned memory, and a short demo.

The demo runs the same chain of kernels over numpy arrays and over SmartArrays and shows the
host<->device copies each makes. Without any CUDA (the ``host-only`` tier) it re-runs itself
in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``, so that it works on every machine.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Sequence

import numpy as np

import smartarray as sa

from ._core.transfer import count_of
from .bench import cli as bench
from .bench.common import exit_quietly_on_broken_pipe

TIER_TEXT = {
    "gpu": "gpu (a CUDA GPU: kernels run on the device)",
    "simulator": (
        "simulator (Numba's CUDA simulator, NUMBA_ENABLE_CUDASIM=1: kernels run in Python on "
        "the CPU; transfers are counted exactly as on a GPU, timings mean nothing)"
    ),
    "host-only": (
        "host-only (no usable CUDA GPU or driver; device operations raise "
        "DeviceUnavailableError unless NUMBA_ENABLE_CUDASIM=1 is set before numba is "
        "imported)"
    ),
}


def versions() -> str:
    """One line with the versions of smartarray and what it runs on."""
    parts = [
        f"smartarray {sa.__version__}",
        f"numba {importlib.metadata.version('numba')}",
        f"numba-cuda {importlib.metadata.version('numba-cuda')}",
        f"numpy {np.__version__}",
        f"Python {platform.python_version()}",
    ]
    return ", ".join(parts)


def pinned_status() -> str:
    """Whether a SmartArray with a pinned (page-locked) host buffer round-trips through the
    device."""
    tier = sa.tier()
    if tier == "host-only":
        return "not available (no CUDA)"
    expected = np.arange(1 << 16, dtype=np.float64)
    try:
        a = sa.SmartArray(expected, host_memory="pinned", label="pinned check")
        with sa.track_transfers() as t:
            a.to_gpu()
            a.mark_changed("gpu")  # pretend a kernel wrote it: the next read copies back
            a.to_host()
        ok = np.array_equal(a, expected) and (t.h2d_count, t.d2h_count) == (1, 1)
    except Exception as exc:  # report any failure (e.g. a low locked-memory limit)
        return f"FAILED: {type(exc).__name__}: {exc}"
    if not ok:
        return "FAILED: the round trip through the device did not give the data back"
    if tier == "simulator":
        return (
            "emulated by the simulator (ordinary host memory, same smartarray code path): "
            f"{expected.nbytes}-byte round trip OK"
        )
    return f"works: {expected.nbytes}-byte round trip through page-locked host memory OK"


def demo() -> None:
    """A chain of kernels over numpy arrays and over SmartArrays: the copies each makes."""
    on_gpu = sa.tier() == "gpu"
    n, steps = (1 << 20, 100) if on_gpu else (1024, 10)
    u0 = bench.initial_condition(n)
    grid = (bench.blocks(n), bench.THREADS)
    print(
        f"\nDemo: {steps} launches of a smoothing kernel on {n} float64 values "
        f"({u0.nbytes} bytes), then the result is read on the host."
    )

    counter = bench.CopyCounter()
    expected = bench.chain_numpy(u0, steps, counter)
    c = counter.stats
    print("\nnumpy arrays (Numba copies every array argument in and out around each launch):")
    print(
        f"  {count_of(c.h2d_count, 'host->device copy')}, "
        f"{count_of(c.d2h_count, 'device->host copy')}, {count_of(c.nbytes, 'byte')}"
    )

    u = sa.SmartArray(u0, label="u")
    v = sa.SmartArray(shape=n, where="gpu", label="v")  # scratch made on the device: no copy
    events: list[tuple[str, sa.TransferRecord]] = []
    for step in range(1, steps + 1):
        with sa.track_transfers() as t:
            bench.smooth[grid](u, v)
        events += [(f"launch {step}", record) for record in t.records]
        u, v = v, u
    with sa.track_transfers() as t:
        result = u.get("host")
    events += [("reading the result", record) for record in t.records]
    assert np.allclose(result, expected)
    h2d = [r for _, r in events if r.direction == "h2d"]
    d2h = [r for _, r in events if r.direction == "d2h"]
    moved = sum(r.nbytes for _, r in events)
    print("\nSmartArrays (copies only when the other side needs the data):")
    print(
        f"  {count_of(len(h2d), 'host->device copy')}, "
        f"{count_of(len(d2h), 'device->host copy')}, {count_of(moved, 'byte')}"
    )
    for when, record in events:
        arrow = "host->device" if record.direction == "h2d" else "device->host"
        print(f"    {when}: {arrow} {record.nbytes} bytes of {record.array}")
    print("  no other launch copied anything; the result equals the numpy arrays' result")
    print(f"\n=> {c.nbytes / moved:.0f}x fewer bytes moved with SmartArrays.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m smartarray``.

    Returns the exit status: 141 when the reader of the output went away (``| head``), with no
    traceback; otherwise 0 (or the status of the simulator re-run).
    """
    return exit_quietly_on_broken_pipe(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m smartarray",
        description="Versions, this machine's tier, pinned memory, and a short demo of the "
        "host<->device copies a chain of kernels makes over numpy arrays and over SmartArrays.",
    )
    parser.add_argument("--no-demo", action="store_true", help="skip the demo")
    parser.add_argument("--demo-only", action="store_true", help="run only the demo")
    args = parser.parse_args(argv)
    tier = sa.tier()
    if not args.demo_only:
        print(versions())
        print(f"tier: {TIER_TEXT[tier]}")
        if tier == "gpu":
            print(f"device: {bench.gpu_description()}")
        print(f"pinned host memory: {pinned_status()}")
    if args.no_demo:
        return 0
    if tier == "host-only":
        print(
            "\nNo CUDA here: re-running the demo in Numba's CUDA simulator "
            "(NUMBA_ENABLE_CUDASIM=1) in a subprocess.",
            flush=True,
        )
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        command = [sys.executable, "-m", "smartarray", "--demo-only"]
        return subprocess.run(command, env=env, check=False).returncode
    demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
