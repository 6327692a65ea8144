"""Two independent pipelines on two CUDA streams, with pinned (page-locked) host buffers.

Each SmartArray is uploaded, processed by two kernels and downloaded on its own stream:
``to_gpu(stream=...)``, ``kernel[blocks, threads, stream](...)`` and ``to_host(stream=...)``
only enqueue work, so on a GPU the copies of one stream overlap with the other's kernels.
Asynchronous copies need page-locked host memory, which is what ``host_memory='pinned'`` asks
for (and the default for arrays smartarray allocates itself on a GPU). Reading a SmartArray on
the host waits for its pending download; raw buffers from ``get('host')`` need the stream
synchronised first. The ledger marks copies enqueued on a stream as asynchronous.

In Numba's CUDA simulator, streams and pinned memory are accepted but emulated (everything runs
in order, in ordinary memory): the example runs unchanged and the ledger counts are the same.

Run with a GPU, or anywhere with the CUDA simulator::

    NUMBA_ENABLE_CUDASIM=1 python examples/streams_pinned.py
"""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda

import smartarray as sa

ON_GPU = sa.tier() == "gpu"
N = 1 << 22 if ON_GPU else 256  # the simulator runs every CUDA thread in Python
THREADS = 256
BLOCKS = (N + THREADS - 1) // THREADS


@cuda.jit
def scale(x, factor):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= factor


@cuda.jit
def shift(x, offset):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += offset


def main() -> None:
    sa.reset_transfer_stats()
    if not ON_GPU:
        print(f"tier {sa.tier()}: streams and pinned memory are emulated (no overlap)")

    # Device memory is allocated on first use, and allocating it can synchronise the whole
    # device: make both device buffers before queueing asynchronous work, so that the two
    # pipelines can overlap. where="gpu" allocates the device buffer now; the page-locked host
    # buffer comes with the first host write, which overwrites everything (nothing copied).
    a = sa.empty(N, dtype=np.float32, where="gpu", host_memory="pinned")
    b = sa.empty(N, dtype=np.float32, where="gpu", host_memory="pinned")
    a[...] = np.arange(N, dtype=np.float32)
    b.fill(1.0)
    assert a.host_memory == b.host_memory == "pinned"
    assert a.location == b.location == "host"  # the device copies are stale now

    # --8<-- [start:streams]
    streams = [cuda.stream(), cuda.stream()]
    with sa.track_transfers() as t:
        for array, stream in zip((a, b), streams, strict=True):
            array.to_gpu(stream=stream)  # asynchronous upload
            scale[BLOCKS, THREADS, stream](array, 2.0)  # kernels in stream order
            shift[BLOCKS, THREADS, stream](array, 1.0)
            array.to_host(stream=stream)  # asynchronous download
        # A SmartArray read waits for its own pending download: no synchronize needed here.
        assert np.array_equal(a, 2 * np.arange(N, dtype=np.float32) + 1)
        # get('host', stream=s) returns the raw buffer without waiting: synchronise s first.
        raw_b = b.get("host", stream=streams[1])
        streams[1].synchronize()
        assert np.all(raw_b == 3.0)
    # --8<-- [end:streams]

    for record in t.records:
        print(f"  {record}")
    assert [r.direction for r in t.records] == ["h2d", "d2h", "h2d", "d2h"]
    assert all(r.asynchronous for r in t.records)
    print(f"a and b: location={a.location}, {b.location}; {t}")

    print(f"ledger: {sa.transfer_stats()}")
    print("streams_pinned: OK")


if __name__ == "__main__":
    if sa.tier() == "host-only":  # no GPU and no simulator: say how to run it instead
        sys.exit(
            "streams_pinned.py needs a CUDA GPU or Numba's CUDA simulator, and "
            "this machine has no CUDA. Run it in the simulator:\n"
            "    NUMBA_ENABLE_CUDASIM=1 python examples/streams_pinned.py"
        )
    main()
