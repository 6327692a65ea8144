"""Memory-management basics with a SmartArray instead of explicit copies.

Numba's CUDA guide teaches memory management with ``cuda.to_device`` and ``copy_to_host``.
Here the same steps use one SmartArray: a doubling kernel on an ``arange``, a Fortran-order
reshape, ``ravel``, contiguity checks, and the two calls from the old ``numba.SmartArray`` API,
``get`` and ``mark_changed``. Nothing is copied until the other side needs the data.

Run with a GPU, or anywhere with the CUDA simulator::

    NUMBA_ENABLE_CUDASIM=1 python examples/memory_basics.py
"""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda

import smartarray as sa

N = 1024
THREADS = 256
BLOCKS = (N + THREADS - 1) // THREADS


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


@cuda.jit
def double_2d(m):
    i, j = cuda.grid(2)
    if i < m.shape[0] and j < m.shape[1]:
        m[i, j] *= 2


def main() -> None:
    print(f"smartarray tier: {sa.tier()}")
    sa.reset_transfer_stats()

    # 1. A kernel on an arange: no cuda.to_device, no copy_to_host.
    a = sa.SmartArray(np.arange(N, dtype=np.float64), label="a")
    print(f"new array:           location={a.location}")
    with sa.track_transfers() as t:
        double[BLOCKS, THREADS](a)  # the launch copies a to the device once...
        double[BLOCKS, THREADS](a)  # ...and this one copies nothing
    print(f"two kernels:         location={a.location}  ({t})")
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    assert a.location == "gpu"

    with sa.track_transfers() as t:
        assert np.array_equal(a, 4 * np.arange(N))  # the host asks: one copy back
    print(f"host comparison:     location={a.location}  ({t})")
    assert (t.h2d_count, t.d2h_count) == (0, 1)

    # 2. Layout: reshape and ravel give views when numpy would, without touching the data.
    m = a.reshape((32, 32), order="F")
    assert m.base is a and m.flags.f_contiguous and not m.flags.c_contiguous
    print(f"reshape(order='F'):  shape={m.shape} C={m.flags.c_contiguous} F={m.flags.f_contiguous}")
    with sa.track_transfers() as t:
        double_2d[(2, 2), (16, 16)](m)  # a kernel on the view writes a's memory
    assert a.location == "gpu" and t.h2d_count == 0  # the device copy was already current

    flat_f = m.ravel(order="F")  # F order of an F-contiguous array: a view of a's memory
    assert flat_f.base is not None and flat_f.label == a.label and flat_f.flags.c_contiguous
    with sa.track_transfers() as t:
        flat_c = m.ravel()  # C order of an F-contiguous array: numpy must copy (on the host)
    assert flat_c.base is None and flat_c.label != a.label and t.d2h_count == 1
    print(f"ravel('F') is a view; ravel('C') is a copy made on the host ({t})")
    assert np.array_equal(flat_c, (8 * np.arange(N)).reshape((32, 32), order="F").ravel())

    # The device copy of a SmartArray is a Numba device array with the same layout.
    d = m.get("gpu")
    print(
        f"m.get('gpu'):        {type(d).__name__} C={d.is_c_contiguous()} F={d.is_f_contiguous()}"
    )
    assert d.is_f_contiguous() and not d.is_c_contiguous()

    # 3. get() hands out raw buffers; mark_changed() says which one you wrote.
    h = a.get("host")  # a writable numpy.ndarray sharing a's host memory
    h[:4] = -1.0  # a raw write: smartarray cannot see it...
    a.mark_changed("host")  # ...so say so: the device copy is now stale
    print(f"get('host') + write + mark_changed('host'): location={a.location}")
    assert a.location == "host"

    g = a.get("gpu")  # one copy up; returns a Numba device array
    double[BLOCKS, THREADS](g)  # a kernel on the raw device array: invisible to smartarray...
    a.mark_changed("gpu")  # ...so say so: the host copy is now stale
    print(f"get('gpu') + kernel + mark_changed('gpu'):  location={a.location}")
    assert a.location == "gpu"

    expected = 16 * np.arange(N, dtype=np.float64)
    expected[:4] = -2.0
    assert np.array_equal(a, expected)

    total = sa.transfer_stats()
    print(f"ledger: {total}")
    # Uploads: the first kernel, then get('gpu') after the host write.
    # Downloads: the comparison, ravel('C'), and the final comparison.
    assert (total.h2d_count, total.d2h_count) == (2, 3)
    print("memory_basics: OK")


if __name__ == "__main__":
    if sa.tier() == "host-only":  # no GPU and no simulator: say how to run it instead
        sys.exit(
            "memory_basics.py needs a CUDA GPU or Numba's CUDA simulator, and "
            "this machine has no CUDA. Run it in the simulator:\n"
            "    NUMBA_ENABLE_CUDASIM=1 python examples/memory_basics.py"
        )
    main()
