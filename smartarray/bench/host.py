"""Host-side speed: SmartArray ÷ ndarray for everyday numpy operations, in one process.

Run ``python -m smartarray.bench --host`` (or ``python -m smartarray.bench.host``) for the
table, or call :func:`measure_host_overhead` for the numbers.

Every row times the same statement with ndarrays and with SmartArrays whose host copy is
current (the steady state of host code: no transfer, no state change), in the same process,
on the same memory (the ndarrays are the SmartArrays' host buffers).
One *estimate* is the best time of each variant over a few interleaved rounds (so that a
burst of load on a shared machine hits both alike) and their ratio. Each row of the table is
the *median estimate* of several, the one whose ratio is the median: its two times and its
ratio, so that the columns agree (SmartArray time ÷ ndarray time = ratio), with the range of
all the estimates' ratios. The indexing rows also time the statement on a class defined in
Python whose ``__getitem__``/``__setitem__`` only forward to the ndarray (a slice wrapped in a
new instance): the "Python floor" column, the ratio no Python-level class can go below on
that machine. The last row compares a trivial ``@njit`` call with a
SmartArray argument against Numba's own floor for a non-ndarray argument (an object typed
through ``_numba_type_`` whose unboxing does nothing), which is the part of the overhead
that smartarray itself adds.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._array import SmartArray


@dataclass(frozen=True)
class Case:
    """One row of the table: ``statement`` run on ``x`` and ``y`` of ``size`` float64, as
    ndarrays and as SmartArrays; or, with ``baseline_statement``, ``statement`` against
    ``baseline_statement`` (``baseline`` names it), both run on the ndarray ``nx``."""

    label: str
    statement: str
    size: int
    target: float
    baseline_statement: str | None = None
    baseline: str = "ndarray"
    floor: bool = False  # also time ``statement`` on _Forwarding wrappers of the ndarrays


class _Forwarding:
    """The least any Python class standing for an ndarray costs when indexed: ``__getitem__``
    and ``__setitem__`` only forward to the ndarray, and a slice's result is wrapped in a new
    instance (one attribute). Its ratio to the ndarray is the "Python floor" column: what
    CPython charges a class defined in Python for the same statement, before any work of
    its own."""

    __slots__ = ("_a",)

    def __init__(self, array: np.ndarray) -> None:
        self._a = array

    def __getitem__(self, key: Any) -> Any:
        item = self._a[key]
        if type(key) is slice:
            view = object.__new__(_Forwarding)
            view._a = item
            return view
        return item

    def __setitem__(self, key: Any, value: Any) -> None:
        self._a[key] = value


CASES = (
    Case("x[3], 16 float64", "x[3]", 16, 3.0, floor=True),
    Case("x[3] = 1.0, 16 float64", "x[3] = 1.0", 16, 3.0, floor=True),
    Case("x[1:5], 16 float64", "x[1:5]", 16, 4.0, floor=True),
    Case("x + y, 16 elements", "x + y", 16, 5.0),
    Case(
        "SmartArray(ndarray), 16 float64",
        "SmartArray(nx)",
        16,
        8.0,
        baseline_statement="nx.copy()",
        baseline="ndarray.copy()",
    ),
    Case("x.sum(), 16 elements", "x.sum()", 16, 1.2),
    Case("x + y, 10^6 elements", "x + y", 10**6, 1.05),
    Case("x.sum(), 10^6 elements", "x.sum()", 10**6, 1.02),
)
NJIT_LABEL = "@njit trivial call ÷ Numba floor"
NJIT_TARGET = 1.2


def _calls_for(timer: timeit.Timer, seconds: float) -> int:
    """Calls that take about ``seconds`` (at least one)."""
    calls, elapsed = timer.autorange()
    return max(1, int(calls * seconds / max(elapsed, 1e-9)))


def _estimates(
    baseline: timeit.Timer, candidate: timeit.Timer, estimates: int, rounds: int, seconds: float
) -> list[tuple[float, float]]:
    """``estimates`` pairs (baseline, candidate): each variant's best seconds per call over
    ``rounds`` interleaved rounds."""
    n_base = _calls_for(baseline, seconds)
    n_cand = _calls_for(candidate, seconds)
    pairs: list[tuple[float, float]] = []
    for _ in range(estimates):
        base = cand = float("inf")
        for _ in range(rounds):  # interleaved: load bursts hit both variants alike
            base = min(base, baseline.timeit(n_base) / n_base)
            cand = min(cand, candidate.timeit(n_cand) / n_cand)
        pairs.append((base, cand))
    return pairs


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The estimate whose ratio is the median (for an even number, the lower of the middle
    two)."""
    return sorted(pairs, key=lambda pair: pair[1] / pair[0])[(len(pairs) - 1) // 2]


def _row(
    label: str,
    target: float,
    pairs: list[tuple[float, float]],
    judge: bool,
    base_name: str = "ndarray",
    floor_pairs: list[tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """A table row from the estimates: the median estimate's times and ratio, and the range
    of all the ratios; with ``floor_pairs`` (ndarray, _Forwarding), the median of those."""
    ratios = [cand / base for base, cand in pairs]
    base, cand = _median(pairs)
    ratio = cand / base
    floor = None
    if floor_pairs:
        floor_base, floor_cand = _median(floor_pairs)
        floor = floor_cand / floor_base
    return {
        "label": label,
        "baseline": base_name,
        "baseline_us": base * 1e6,
        "smartarray_us": cand * 1e6,
        "ratio": ratio,
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "estimates": len(pairs),
        "target": target,
        "met": ratio <= target if judge else None,
        "floor_ratio": floor,
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
    on_row: Callable[[dict[str, Any]], object] | None = None,
) -> list[dict[str, Any]]:
    """Measure every row of the host-speed table.

    Parameters
    ----------
    estimates : int
        Estimates per row; the row reports the median one.
    rounds : int
        Interleaved timing rounds per estimate; each variant's best round is used.
    seconds : float
        Approximate duration of one timing round of one variant.
    njit : bool
        Include the ``@njit`` row (compiles a trivial function on first use).
    judge : bool
        Compare each ratio with its target. Pass False for a quick measurement (a few short
        rounds), whose ratios are too noisy to judge: ``met`` is then None.
    on_row : callable, optional
        Called with each row as soon as it is measured (the command line prints it then).

    Returns
    -------
    list of dict
        One dict per row, all from the row's median estimate (the estimate whose ratio is the
        median, so that ``smartarray_us / baseline_us == ratio``): ``label``, ``baseline``
        (what the ratio divides by), ``baseline_us`` and ``smartarray_us`` (that estimate's
        best microseconds per operation of each variant), ``ratio``, ``ratio_min`` and
        ``ratio_max`` (over all the estimates), ``estimates``, ``target`` and ``met``
        (whether ``ratio <= target``; None when not judged), and ``floor_ratio`` (the
        indexing rows: the median estimate of a forwarding Python class ÷ ndarray; else None).
    """
    rows = []

    def add(row: dict[str, Any]) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    rng = np.random.default_rng(0)
    for case in CASES:
        sx, sy = SmartArray(rng.random(case.size)), SmartArray(rng.random(case.size))
        # The ndarrays are the SmartArrays' own host buffers: both variants read the same
        # memory (two buffers made apart can differ by several percent in speed, e.g. in
        # their alignment to huge pages).
        x, y = sx.get("host"), sy.get("host")
        if case.baseline_statement is None:
            baseline = timeit.Timer(case.statement, globals={"x": x, "y": y})
            candidate = timeit.Timer(case.statement, globals={"x": sx, "y": sy})
        else:
            nx = x.copy()
            baseline = timeit.Timer(case.baseline_statement, globals={"nx": nx})
            candidate = timeit.Timer(case.statement, globals={"nx": nx, "SmartArray": SmartArray})
        candidate.timeit(3)  # first use: caches, steady state
        pairs = _estimates(baseline, candidate, estimates, rounds, seconds)
        floor_pairs = None
        if case.floor:
            wrapped = {"x": _Forwarding(x), "y": _Forwarding(y)}
            floor = timeit.Timer(case.statement, globals=wrapped)
            floor_pairs = _estimates(baseline, floor, estimates, rounds, seconds)
        add(_row(case.label, case.target, pairs, judge, case.baseline, floor_pairs))
    if njit:
        floor, candidate = _njit_timers()
        pairs = _estimates(floor, candidate, estimates, rounds, seconds)
        add(_row(NJIT_LABEL, NJIT_TARGET, pairs, judge, "Numba floor"))
    return rows


def _time(us: float) -> str:
    return f"{us:.3f} µs" if us < 10 else f"{us:.1f} µs"


def _verdict(met: bool | None) -> str:
    return "not judged" if met is None else "yes" if met else "NO"


HEADERS = ("operation", "baseline", "SmartArray", "ratio (range)", "target", "met", "Python floor")
# Fixed widths, so that a row can be printed as soon as it is measured (wider cells widen
# their own row only: the table stays valid Markdown).
_WIDTHS = (max(len(c.label) for c in (*CASES, Case(NJIT_LABEL, "", 0, 0))), 27, 11, 21, 8, 10, 12)


def _line(cells: tuple[str, ...] | list[str]) -> str:
    return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, _WIDTHS, strict=True)) + " |"


def format_header() -> str:
    """The first two lines of :func:`format_table` (column names and the rule)."""
    return _line(HEADERS) + "\n|" + "|".join("-" * (w + 2) for w in _WIDTHS) + "|"


def format_row(row: dict[str, Any]) -> str:
    """One line of :func:`format_table`."""
    return _line(
        [
            row["label"],
            f"{_time(row['baseline_us'])} ({row['baseline']})",
            _time(row["smartarray_us"]),
            f"{row['ratio']:.2f}x ({row['ratio_min']:.2f}-{row['ratio_max']:.2f})",
            f"<= {row['target']:g}x",
            _verdict(row["met"]),
            "-" if row.get("floor_ratio") is None else f"{row['floor_ratio']:.2f}x",
        ]
    )


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`measure_host_overhead` as a Markdown table: each row's median
    estimate (both times and the ratio), and the range of its estimates' ratios."""
    return "\n".join([format_header(), *(format_row(row) for row in rows)])


if __name__ == "__main__":  # pragma: no cover
    print(format_table(measure_host_overhead()))
