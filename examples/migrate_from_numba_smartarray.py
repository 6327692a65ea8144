"""Code written for Numba's old ``numba.SmartArray``, running unchanged on smartarray.

``numba.SmartArray`` (removed from Numba) had a small API: ``SmartArray(obj, where=...)`` or
``SmartArray(shape=..., dtype=..., where=...)``, ``get('host'/'gpu')`` and
``mark_changed(where)``, plus passing the array to ``@jit`` functions and ``@cuda.jit``
kernels. The ``legacy_*`` functions below are written in that style; the only change is the
import line. The ledger shows which copies the old code triggers.

Run with a GPU, or anywhere with the CUDA simulator::

    NUMBA_ENABLE_CUDASIM=1 python examples/migrate_from_numba_smartarray.py
"""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda, jit

import smartarray

# --8<-- [start:import]
# Before: from numba import SmartArray
from smartarray import SmartArray

# --8<-- [end:import]

# ---- legacy code, unchanged -------------------------------------------------------------


@cuda.jit
def transpose(a, b):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        b[j, i] = a[i, j]


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def identity(x):
    return x


def tail(x):
    return x[1:]


def wave(x):
    return np.cos(np.sin(x))


def legacy_transpose_twice():
    a = SmartArray(np.arange(16, dtype=float).reshape(4, 4))
    b = SmartArray(where="gpu", shape=(4, 4), dtype=float)
    c = SmartArray(where="gpu", shape=(4, 4), dtype=float)
    transpose[(1, 1), (4, 4)](a, b)
    transpose[(1, 1), (4, 4)](b, c)
    assert (c.get("host") == a.get("host")).all()
    return c


def legacy_get_and_mark_changed():
    x = SmartArray(np.arange(8.0), where="gpu")  # uploaded right away
    d = x.get("gpu")  # the device array itself
    increment[1, 32](d)  # a kernel on the raw device array...
    x.mark_changed("gpu")  # ...declared, so the host copy is refreshed when asked for
    h = x.get("host")  # the host ndarray itself
    h *= 10  # a raw host write...
    x.mark_changed("host")  # ...declared, so the device copy is refreshed when asked for
    increment[1, 32](x)
    assert (x.get("host") == 10 * np.arange(1.0, 9.0) + 1).all()
    return x


def legacy_jit_and_numpy():
    a = SmartArray(np.int32([42, 8, -5]))
    assert jit(nopython=True)(identity)(a) is a
    aa = jit(nopython=True)(tail)(a)
    assert isinstance(aa, SmartArray) and list(aa) == [8, -5]
    w = jit(nopython=True)(wave)(a)
    assert isinstance(w, SmartArray)
    assert np.allclose(w.get("host"), np.cos(np.sin(a.get("host"))))
    f = a.astype(np.float64)
    assert isinstance(f, SmartArray) and f.dtype.type is np.float64
    ap = SmartArray(np.arange(16).reshape(4, 4))
    ap[:, :] = 1
    eq = ap == SmartArray(np.ones(dtype=ap.dtype, shape=(4, 4)))
    assert isinstance(eq, SmartArray) and eq.all()


# ---- end of legacy code -------------------------------------------------------------------


def main() -> None:
    smartarray.reset_transfer_stats()
    for run in (legacy_transpose_twice, legacy_get_and_mark_changed, legacy_jit_and_numpy):
        with smartarray.track_transfers() as t:
            run()
        print(f"{run.__name__:<28} {t}")
    # transpose: a up; c down. a is not copied back: transpose only reads its first argument,
    # so the bare argument is inferred In (numba.SmartArray counted it as written and copied it
    # back). get/mark_changed: x up at construction, down at get('host'), up for the kernel,
    # down for the check. jit and numpy: no copy.
    total = smartarray.transfer_stats()
    print(f"ledger: {total}")
    assert (total.h2d_count, total.d2h_count) == (3, 3)
    print("migrate_from_numba_smartarray: OK")


if __name__ == "__main__":
    if smartarray.tier() == "host-only":  # no GPU and no simulator: say how to run it instead
        sys.exit(
            "migrate_from_numba_smartarray.py needs a CUDA GPU or Numba's CUDA simulator, and "
            "this machine has no CUDA. Run it in the simulator:\n"
            "    NUMBA_ENABLE_CUDASIM=1 python examples/migrate_from_numba_smartarray.py"
        )
    main()
