"""What the benchmark modules share: the kernels, their reference, timing and tables.

:mod:`smartarray.bench` (the command line) and the benchmark modules it runs
(:mod:`smartarray.bench.intents`, :mod:`smartarray.bench.memory`, :mod:`smartarray.bench.host`,
:mod:`smartarray.bench.dask`) all import from here, so none of them imports another.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import cuda

from .._core.transfer import Direction, TransferRecord, TransferStats

THREADS = 256


def blocks(n: int) -> int:
    """Blocks of :data:`THREADS` threads needed to cover ``n`` elements."""
    return (n + THREADS - 1) // THREADS


# --- counting the copies Numba makes for plain arrays --------------------------------------


class CopyCounter:
    """Counts the host<->device copies made for plain numpy and Numba device arrays.

    smartarray's ledger only sees SmartArrays. To compare against code that uses plain arrays,
    pass kernel arguments through :meth:`In`, :meth:`Out` and :meth:`InOut` (Numba's own
    argument hints, counted when the launch makes the copy: ``In`` uploads, ``Out`` downloads
    after the launch, ``InOut`` does both; a bare ndarray argument is ``InOut``) and make
    explicit copies with :meth:`to_device` and :meth:`copy_to_host`.

    Attributes
    ----------
    stats : TransferStats
        The copies counted so far, in the ledger's format.
    """

    def __init__(self) -> None:
        self.stats = TransferStats()

    def _count(self, direction: Direction, nbytes: int) -> None:
        self.stats._add(TransferRecord(direction, nbytes, "plain array"), keep_record=True)

    def _hint(self, kind: str, array: np.ndarray) -> Any:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"CopyCounter.{kind}() takes a host ndarray, got {type(array)}")
        return _counting_hint(kind)(array, self)

    def In(self, array: np.ndarray) -> Any:
        """``numba.cuda.In(array)``, counting its upload."""
        return self._hint("In", array)

    def Out(self, array: np.ndarray) -> Any:
        """``numba.cuda.Out(array)``, counting its download."""
        return self._hint("Out", array)

    def InOut(self, array: np.ndarray) -> Any:
        """``numba.cuda.InOut(array)`` (what a bare ndarray argument gets), counting both."""
        return self._hint("InOut", array)

    def to_device(self, array: np.ndarray, stream: Any = 0) -> Any:
        """``numba.cuda.to_device(array)``, counted."""
        self._count("h2d", array.nbytes)
        return cuda.to_device(array, stream=stream)

    def copy_to_host(self, device: Any, stream: Any = 0) -> np.ndarray:
        """``device.copy_to_host()``, counted."""
        self._count("d2h", int(device.size) * device.dtype.itemsize)
        return device.copy_to_host(stream=stream)


@functools.cache
def _counting_hint(kind: str) -> type:
    base = getattr(cuda, kind)

    class Counted(base):  # type: ignore[misc,valid-type]
        def __init__(self, value: np.ndarray, counter: CopyCounter) -> None:
            super().__init__(value)
            self.counter = counter

        def to_device(self, retr: list, stream: Any = 0) -> Any:
            nbytes = self.value.nbytes
            if kind != "Out":
                self.counter._count("h2d", nbytes)
            device = super().to_device(retr, stream)
            if kind != "In":
                retr.append(lambda: self.counter._count("d2h", nbytes))
            return device

    Counted.__name__ = Counted.__qualname__ = f"Counted{kind}"
    return Counted


# --- kernels ----------------------------------------------------------------------------
# They use the module-level name ``cuda``, which the simulator swaps while it runs a kernel.
# Their arguments are typed by Numba at launch, hence no annotations.


@cuda.jit
def smooth(u, v):  # pragma: no cover - a kernel
    """One chain step: ``v[i] = (u[i-1] + 2 u[i] + u[i+1]) / 4``, ends clamped."""
    i = cuda.grid(1)
    n = u.size
    if i < n:
        left = u[i - 1] if i > 0 else u[i]
        right = u[i + 1] if i < n - 1 else u[i]
        v[i] = 0.25 * left + 0.5 * u[i] + 0.25 * right


@cuda.jit
def add(x, y, out):  # pragma: no cover - a kernel
    """``out[i] = x[i] + y[i]``: the kernel form of the add ufunc."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def smooth_reference(u0: np.ndarray, steps: int) -> np.ndarray:
    """The kernel chain computed with numpy on the host (to check every variant)."""
    u = np.array(u0, dtype=np.float64)
    for _ in range(steps):
        padded = np.concatenate(([u[0]], u, [u[-1]]))
        u = 0.25 * padded[:-2] + 0.5 * padded[1:-1] + 0.25 * padded[2:]
    return u


def initial_condition(n: int) -> np.ndarray:
    """The chain's input: ``n`` float64 values with a step and a spike."""
    u0 = np.zeros(n)
    u0[n // 2] = 1.0
    u0[: n // 8] = 0.5
    return u0


def _median_seconds(
    run: Callable[[], Any], repeats: int, setup: Callable[[], Any] | None = None
) -> float:
    """Median wall time of ``run()`` (device synchronised), after one untimed warm-up run."""
    times = []
    for i in range(repeats + 1):
        if setup is not None:
            setup()
        cuda.synchronize()
        start = time.perf_counter()
        run()
        cuda.synchronize()
        if i:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table (also valid Markdown)."""
    cells = [[str(h) for h in headers]] + [[str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def exit_quietly_on_broken_pipe(body: Callable[[], int]) -> int:
    """Run a command line's ``body`` and return its exit status; if the reader of its output
    went away (``python -m smartarray | head``), stop quietly with status 141 (128 + SIGPIPE,
    what a shell reports for a command killed by it) instead of a ``BrokenPipeError``
    traceback."""
    try:
        status = body()
        sys.stdout.flush()  # inside the try: a late flush can find the pipe closed too
    except BrokenPipeError:
        # Python flushes stdout once more at exit: point it at /dev/null so that is silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
    return status
