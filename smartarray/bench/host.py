"""Host-side speed: SmartArray ÷ ndarray for everyday numpy operations, in one process.

Run ``python -m smartarray.bench --host`` (or ``python -m smartarray.bench.host``) for the
table, or call :func:`measure_host_overhead` for the numbers.

Every row times the same statement with ndarrays and with SmartArrays whose host copy is
current (the steady state of host code: no transfer, no state change), in the same process,
on the same memory (the ndarrays are the SmartArrays' host buffers).
One *estimate* is the ratio of the best times of the two variants over a few interleaved
rounds (so that a burst of load on a shared machine hits both alike); the table gives the
median of several estimates. The last row compares a trivial ``@njit`` call with a
SmartArray argument against Numba's own floor for a non-ndarray argument (an object typed
through ``_numba_type_`` whose unboxing does nothing), which is the part of the overhead
that smartarray itself adds.
"""

from __future__ import annotations

import statistics
import timeit
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._array import SmartArray


@dataclass(frozen=True)
class Case:
    """One row of the table: ``statement`` run on ``x`` and ``y`` of ``size`` float64."""

    label: str
    statement: str
    size: int
    target: float


CASES = (
    Case("x[3], 16 float64", "x[3]", 16, 6.0),
    Case("x[3] = 1.0, 16 float64", "x[3] = 1.0", 16, 8.0),
    Case("x + y, 16 elements", "x + y", 16, 8.0),
    Case("x.sum(), 16 elements", "x.sum()", 16, 5.0),
    Case("x + y, 10^6 elements", "x + y", 10**6, 1.05),
    Case("x.sum(), 10^6 elements", "x.sum()", 10**6, 1.05),
)
NJIT_LABEL = "@njit trivial call ÷ Numba floor"
NJIT_TARGET = 1.2


def _calls_for(timer: timeit.Timer, seconds: float) -> int:
    """Calls that take about ``seconds`` (at least one)."""
    calls, elapsed = timer.autorange()
    return max(1, int(calls * seconds / max(elapsed, 1e-9)))


def _ratio_estimates(
    baseline: timeit.Timer, candidate: timeit.Timer, estimates: int, rounds: int, seconds: float
) -> tuple[list[float], float, float]:
    """``estimates`` ratios candidate ÷ baseline, and the best seconds per call of each."""
    n_base = _calls_for(baseline, seconds)
    n_cand = _calls_for(candidate, seconds)
    ratios: list[float] = []
    best_base = best_cand = float("inf")
    for _ in range(estimates):
        base = cand = float("inf")
        for _ in range(rounds):  # interleaved: load bursts hit both variants alike
            base = min(base, baseline.timeit(n_base) / n_base)
            cand = min(cand, candidate.timeit(n_cand) / n_cand)
        ratios.append(cand / base)
        best_base, best_cand = min(best_base, base), min(best_cand, cand)
    return ratios, best_base, best_cand


def _row(
    label: str,
    target: float,
    ratios: list[float],
    base: float,
    cand: float,
    judge: bool,
    base_name: str = "ndarray",
) -> dict[str, Any]:
    ratio = statistics.median(ratios)
    return {
        "label": label,
        "baseline": base_name,
        "baseline_us": base * 1e6,
        "smartarray_us": cand * 1e6,
        "ratio": ratio,
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "target": target,
        "met": ratio <= target if judge else None,
    }


def _njit_timers() -> tuple[timeit.Timer, timeit.Timer]:
    from .njit import _trivial, _TypedByNumbaTypeAttribute

    array = SmartArray(np.zeros(16))
    floor = _TypedByNumbaTypeAttribute()
    for arg in (array, array, floor):  # compile, and bring the array into its steady state
        _trivial(arg)
    return (
        timeit.Timer("f(a)", globals={"f": _trivial, "a": floor}),
        timeit.Timer("f(a)", globals={"f": _trivial, "a": array}),
    )


def measure_host_overhead(
    estimates: int = 5,
    rounds: int = 20,
    seconds: float = 0.003,
    njit: bool = True,
    judge: bool = True,
) -> list[dict[str, Any]]:
    """Measure every row of the host-speed table.

    Parameters
    ----------
    estimates : int
        Ratio estimates per row; the row reports their median.
    rounds : int
        Interleaved timing rounds per estimate; each variant's best round is used.
    seconds : float
        Approximate duration of one timing round of one variant.
    njit : bool
        Include the ``@njit`` row (compiles a trivial function on first use).
    judge : bool
        Compare each ratio with its target. Pass False for a quick measurement (a few short
        rounds), whose ratios are too noisy to judge: ``met`` is then None.

    Returns
    -------
    list of dict
        One dict per row: ``label``, ``baseline`` (what the ratio divides by),
        ``baseline_us`` and ``smartarray_us`` (best microseconds per operation), ``ratio``
        (median estimate), ``ratio_min``, ``ratio_max``, ``target`` and ``met`` (whether
        ``ratio <= target``; None when not judged).
    """
    rows = []
    rng = np.random.default_rng(0)
    for case in CASES:
        sx, sy = SmartArray(rng.random(case.size)), SmartArray(rng.random(case.size))
        # The ndarrays are the SmartArrays' own host buffers: both variants read the same
        # memory (two buffers made apart can differ by several percent in speed, e.g. in
        # their alignment to huge pages).
        x, y = sx.get("host"), sy.get("host")
        baseline = timeit.Timer(case.statement, globals={"x": x, "y": y})
        candidate = timeit.Timer(case.statement, globals={"x": sx, "y": sy})
        candidate.timeit(3)  # first use: caches, steady state
        ratios, base, cand = _ratio_estimates(baseline, candidate, estimates, rounds, seconds)
        rows.append(_row(case.label, case.target, ratios, base, cand, judge))
    if njit:
        floor, candidate = _njit_timers()
        ratios, base, cand = _ratio_estimates(floor, candidate, estimates, rounds, seconds)
        rows.append(_row(NJIT_LABEL, NJIT_TARGET, ratios, base, cand, judge, "Numba floor"))
    return rows


def _time(us: float) -> str:
    return f"{us:.3f} µs" if us < 10 else f"{us:.1f} µs"


def _verdict(met: bool | None) -> str:
    return "not judged" if met is None else "yes" if met else "NO"


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`measure_host_overhead` as a Markdown table."""
    from .common import format_table as table

    return table(
        ["operation", "baseline", "SmartArray", "ratio (range)", "target", "met"],
        [
            [
                r["label"],
                f"{_time(r['baseline_us'])} ({r['baseline']})",
                _time(r["smartarray_us"]),
                f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})",
                f"<= {r['target']:g}x",
                _verdict(r["met"]),
            ]
            for r in rows
        ],
    )


if __name__ == "__main__":  # pragma: no cover
    print(format_table(measure_host_overhead()))
