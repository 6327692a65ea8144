"""Benchmark of inferred intents: an unannotated workflow, and the cost of the launch look-up.

Run by ``python -m smartarray.bench`` in the simulator and GPU tiers (or alone, as
``python -m smartarray.bench.intents``).

Workflow (transfers)
    ``steps`` launches of a relaxation kernel ``u += 0.1 * f`` (``u`` read and written, ``f``
    only read); every ``every``-th step an ``@njit`` function computes the energy of ``u`` on
    the host; at the end the host reads ``f`` (a sum) and ``u``. Written four ways: SmartArrays
    passed bare (intents inferred), SmartArrays annotated by hand (``InOut(u)``, ``In(f)``,
    ``energy(In(u))``), SmartArrays with every argument ``InOut`` (what a bare argument cost
    before inference), and numpy arrays with Numba's automatic transfers. Bytes moved are
    compared with the minimum: ``u`` and ``f`` uploaded once, ``u`` downloaded once per energy
    call (the kernel changed it, the host reads it), nothing else.
Look-up overhead
    What the launch hook adds per launch, divided by the number of SmartArray arguments: the
    cached analysis look-up, the pass over the arguments, the thread-local set and reset, and
    each argument's ``bare_intent`` query. Timed directly in CPU time of this thread (best of
    several rounds), since a simulated launch costs milliseconds; the same code runs on a GPU.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from numba import cuda, njit

from .._array import SmartArray
from .._core import backend as _backend
from .._core.transfer import track_transfers
from .._cuda import launch as _launch
from .._intents import In, InOut

THREADS = 128


@cuda.jit
def relax(u, f):  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < u.size:
        u[i] += 0.1 * f[i]


@njit
def energy(u):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    return (u * u).sum()


@cuda.jit
def read_many(a, b, c, d, out):  # type: ignore[no-untyped-def]  # pragma: no cover - a kernel
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i] + c[i] + d[i]


VARIANTS = (
    ("bare", "SmartArrays, bare (inferred intents)"),
    ("annotated", "SmartArrays, annotated by hand"),
    ("all_inout", "SmartArrays, every argument InOut (no inference)"),
    ("numpy", "numpy arrays, automatic transfers"),
)


def _workflow(u: Any, f: Any, steps: int, every: int, variant: str, counter: Any) -> Any:
    launch = relax[(u.size + THREADS - 1) // THREADS, THREADS]
    energies = []
    for step in range(steps):
        if variant == "bare":
            launch(u, f)
        elif variant == "annotated":
            launch(InOut(u), In(f))
        elif variant == "all_inout":
            launch(InOut(u), InOut(f))
        else:
            launch(counter.InOut(u), counter.InOut(f))
        if step % every == every - 1:
            if variant == "annotated":
                energies.append(energy(In(u)))
            elif variant == "all_inout":
                energies.append(energy(InOut(u)))
            else:
                energies.append(energy(u))
    total_f = float(np.sum(f))
    return np.array(u), total_f, energies


def workflow_transfers(n: int, steps: int = 20, every: int = 5) -> list[dict[str, Any]]:
    """Bytes moved by the four variants of the workflow, against the minimum."""
    from .common import CopyCounter

    u0 = np.linspace(0.0, 1.0, n)
    f0 = np.cos(np.arange(n, dtype=np.float64))
    expected_u = u0.copy()
    expected_energies = []
    for step in range(steps):
        expected_u += 0.1 * f0
        if step % every == every - 1:
            expected_energies.append(float((expected_u * expected_u).sum()))
    reads = steps // every
    # u and f up once; u down once per energy call, plus once at the end if the last step
    # had no energy call (the final host read then needs the latest u).
    downloads = reads + (0 if steps % every == 0 else 1)
    minimum = 2 * u0.nbytes + downloads * u0.nbytes
    rows = []
    for name, label in VARIANTS:
        counter = CopyCounter()
        with track_transfers() as ledger:
            if name == "numpy":
                result = _workflow(u0.copy(), f0.copy(), steps, every, name, counter)
            else:
                u, f = SmartArray(u0), SmartArray(f0)
                result = _workflow(u, f, steps, every, name, counter)
        final_u, total_f, energies = result
        if not (
            np.allclose(final_u, expected_u)
            and np.isclose(total_f, f0.sum())
            and np.allclose(energies, expected_energies)
        ):
            raise AssertionError(f"workflow variant {name!r} computed a wrong result")
        stats = counter.stats if name == "numpy" else ledger
        rows.append(
            {
                "variant": name,
                "label": label,
                "n": n,
                "steps": steps,
                "h2d_count": stats.h2d_count,
                "d2h_count": stats.d2h_count,
                "bytes": stats.nbytes,
                "minimum_bytes": minimum,
                "ratio_to_minimum": stats.nbytes / minimum,
            }
        )
    return rows


def _kernel_object(dispatcher: Any, args: tuple[Any, ...]) -> Any:
    """The object the launch hook caches the analysis on (launched once to fill it)."""
    dispatcher[1, THREADS](*args)  # compiles (on a GPU) and fills the cache
    return dispatcher


def lookup_overhead(rounds: int = 7, calls: int = 20_000) -> dict[str, Any]:
    """Time the launch hook's added work per SmartArray argument (µs), for 2 and 5 arguments."""
    n = THREADS
    arrays = [SmartArray(np.ones(n)) for _ in range(4)]
    out = SmartArray(np.zeros(n))
    results: dict[str, Any] = {}
    for label, dispatcher, args in (
        ("relax(u, f): 2 SmartArray arguments", relax, (out, arrays[0])),
        ("read_many(a, b, c, d, out): 5 SmartArray arguments", read_many, (*arrays, out)),
    ):
        kernel = _kernel_object(dispatcher, args)
        local = _launch._local
        plan, bare_intent = _launch.readonly_allocations, _launch.bare_intent
        key = _launch._CACHE_KEY
        best = float("inf")
        for _ in range(rounds):
            start = time.thread_time()  # CPU time: a shared machine deschedules us at times
            for _ in range(calls):  # what the hook adds to a launch (see _hooked_call)
                mask, rest, stores = kernel.__dict__.get(key)
                readonly = plan(mask, rest, args, stores)
                previous = getattr(local, "readonly", None)
                local.readonly = readonly
                for value in args:
                    bare_intent(value)
                local.readonly = previous
            best = min(best, (time.thread_time() - start) / calls)
        count = sum(isinstance(a, SmartArray) for a in args)
        results[label] = {
            "smartarray_args": count,
            "per_launch_us": best * 1e6,
            "per_argument_us": best * 1e6 / count,
        }
    # How fast this machine runs right now (a shared machine varies): the benchmarks page
    # compares with the same call measured on a quiet run.
    reference = _reference_seconds(rounds, calls) * 1e6
    results["reference: an @njit call with an ndarray"] = {
        "smartarray_args": 1,
        "per_launch_us": reference,
        "per_argument_us": reference,
    }
    return results


@njit
def _identity(a):  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
    return a


def _reference_seconds(rounds: int, calls: int) -> float:
    """CPU time of one ``@njit`` call with an ndarray argument (best of ``rounds``)."""
    array = np.ones(4)
    _identity(array)
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        for _ in range(calls):
            _identity(array)
        best = min(best, (time.thread_time() - start) / calls)
    return best


def report(rows: list[dict[str, Any]], lookup: dict[str, Any]) -> str:
    """The two tables as text."""
    lines = ["variant | uploads | downloads | bytes / minimum"]
    for row in rows:
        lines.append(
            f"{row['label']} | {row['h2d_count']} | {row['d2h_count']} | "
            f"{row['ratio_to_minimum']:.2f}x"
        )
    lines.append("")
    lines.append("launch look-up | per launch | per SmartArray argument")
    for label, value in lookup.items():
        lines.append(
            f"{label} | {value['per_launch_us']:.3f} µs | {value['per_argument_us']:.3f} µs"
        )
    return "\n".join(lines)


def main() -> int:
    """Run both parts and print them (simulator or GPU tier)."""
    if _backend.tier() == "host-only":
        print("needs the simulator (NUMBA_ENABLE_CUDASIM=1) or a GPU", file=sys.stderr)
        return 1
    n = 1024 if _backend.is_simulator() else 1 << 20
    print(report(workflow_transfers(n), lookup_overhead()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
