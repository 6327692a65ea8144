"""Per-call overhead of passing a SmartArray instead of an ndarray to an ``@njit`` function.

Run ``python -m smartarray.bench.njit`` for a one-line report, or call
:func:`measure_njit_overhead` for the numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit, types

from .._array import SmartArray
from .._intents import In


@njit
def _trivial(a: Any) -> None:  # pragma: no cover - compiled
    return None


class _TypedByNumbaTypeAttribute:
    """A non-ndarray argument that Numba types through ``_numba_type_`` and unboxes for free.

    Calling a jitted function with it measures what Numba's dispatcher charges for any
    argument that is not an ndarray (the C type cache misses for such objects), before any
    SmartArray code runs: the floor of the SmartArray overhead.
    """

    __slots__ = ()
    _numba_type_ = types.none


def _time_per_call(func: Callable[[Any], Any], arg: Any, calls: int) -> float:
    """Seconds per call of ``func(arg)``, averaged over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        func(arg)
    return (time.perf_counter() - start) / calls


def _time_per_call_new_intent(func: Callable[[Any], Any], array: SmartArray, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        func(In(array))
    return (time.perf_counter() - start) / calls


def measure_njit_overhead(
    repeats: int = 15, calls: int = 20_000, small_size: int = 16, large_size: int = 1 << 22
) -> dict[str, Any]:
    """Measure the per-call cost of a trivial ``@njit`` function, SmartArray vs ndarray.

    Each variant is timed over ``calls`` consecutive calls; the best (lowest) of ``repeats``
    such rounds is kept. Variants are interleaved within each round so that drifts in machine
    load affect them alike. SmartArrays are measured with their host copy already valid (the
    steady state of repeated CPU calls: no transfer, no state change), in the same process
    as the ndarray baseline.

    Parameters
    ----------
    repeats : int
        Rounds; the minimum over rounds is reported.
    calls : int
        Calls per round and variant.
    small_size, large_size : int
        float64 element counts of the small and large arrays. Equal costs for both sizes
        show that nothing in the call path depends on the array size.

    Returns
    -------
    dict
        Times are microseconds per call (float), ratios are SmartArray time over ndarray time:

        ``ndarray_us``, ``smartarray_us``, ``ratio``
            small array, bare SmartArray argument (read-write intent).
        ``ndarray_large_us``, ``smartarray_large_us``, ``ratio_large``
            the same with ``large_size`` elements.
        ``readonly_us``, ``ratio_readonly``
            ``smartarray.In(a)`` made once and passed on every call (read-only intent).
        ``readonly_new_intent_us``
            ``f(smartarray.In(a))``, a new intent object made (and typed) on every call.
        ``floor_us``, ``ratio_floor``
            an object typed through ``_numba_type_`` whose unboxing does nothing: what
            Numba's dispatcher itself costs for a non-ndarray argument, hence the lowest
            ratio any SmartArray design built on ``_numba_type_`` can reach.
        ``repeats``, ``calls``, ``small_size``, ``large_size``
            the parameters used.
    """
    small_nd = np.zeros(small_size)
    large_nd = np.zeros(large_size)
    small_sa = SmartArray(np.zeros(small_size))
    large_sa = SmartArray(np.zeros(large_size))
    readonly = In(small_sa)
    floor_arg = _TypedByNumbaTypeAttribute()
    plain: dict[str, Any] = {
        "ndarray": small_nd,
        "smartarray": small_sa,
        "ndarray_large": large_nd,
        "smartarray_large": large_sa,
        "readonly": readonly,
        "floor": floor_arg,
    }
    for arg in plain.values():  # compile, and bring each array into its steady state
        _trivial(arg)
        _trivial(arg)
    _trivial(In(small_sa))

    best = dict.fromkeys([*plain, "readonly_new_intent"], float("inf"))
    for _ in range(max(1, repeats)):
        for name, arg in plain.items():
            best[name] = min(best[name], _time_per_call(_trivial, arg, calls))
        new_intent = _time_per_call_new_intent(_trivial, small_sa, max(1, calls // 10))
        best["readonly_new_intent"] = min(best["readonly_new_intent"], new_intent)

    us = {name: seconds * 1e6 for name, seconds in best.items()}
    return {
        "ndarray_us": us["ndarray"],
        "smartarray_us": us["smartarray"],
        "ratio": us["smartarray"] / us["ndarray"],
        "ndarray_large_us": us["ndarray_large"],
        "smartarray_large_us": us["smartarray_large"],
        "ratio_large": us["smartarray_large"] / us["ndarray_large"],
        "readonly_us": us["readonly"],
        "ratio_readonly": us["readonly"] / us["ndarray"],
        "readonly_new_intent_us": us["readonly_new_intent"],
        "floor_us": us["floor"],
        "ratio_floor": us["floor"] / us["ndarray"],
        "repeats": repeats,
        "calls": calls,
        "small_size": small_size,
        "large_size": large_size,
    }


def format_report(result: dict[str, Any]) -> str:
    """A short human-readable summary of :func:`measure_njit_overhead`'s result."""
    return (
        f"@njit per-call overhead (best of {result['repeats']} x {result['calls']} calls)\n"
        f"  ndarray          {result['ndarray_us']:.3f} us\n"
        f"  SmartArray       {result['smartarray_us']:.3f} us  ratio {result['ratio']:.2f}x\n"
        f"  large ndarray    {result['ndarray_large_us']:.3f} us\n"
        f"  large SmartArray {result['smartarray_large_us']:.3f} us  "
        f"ratio {result['ratio_large']:.2f}x\n"
        f"  In(a), reused    {result['readonly_us']:.3f} us  "
        f"ratio {result['ratio_readonly']:.2f}x\n"
        f"  In(a) per call   {result['readonly_new_intent_us']:.3f} us\n"
        f"  Numba floor for a non-ndarray argument {result['floor_us']:.3f} us  "
        f"ratio {result['ratio_floor']:.2f}x"
    )


if __name__ == "__main__":  # pragma: no cover
    print(format_report(measure_njit_overhead()))
