"""A dask pipeline over SmartArray chunks on two worker processes: @njit, then kernels.

The input is a SmartArray split into chunks by ``dask.array.from_array``. Each chunk is
cleaned on the host by an ``@njit`` function, then smoothed by several ``@cuda.jit`` kernel
launches, one ``map_blocks`` task each, and the result is summed and gathered. The chunks
are spread over a ``LocalCluster`` of two worker processes; each chunk stays on its
worker's device between the kernel tasks, which the workers' transfer ledgers show: every
chunk goes up once and comes down once.

Needs dask and dask.distributed (``pip install -e ".[dask]"`` in a checkout of smartarray).
Run with a GPU, or anywhere with the CUDA simulator (the worker processes inherit the
environment variable)::

    NUMBA_ENABLE_CUDASIM=1 python examples/dask_pipeline.py

On a machine with several GPUs, dask-cuda's ``LocalCUDACluster()`` (one worker per GPU) runs
the same pipeline unchanged: see docs/dask.md.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
from numba import cuda, njit

import smartarray as sa

try:
    import dask.array as da
    from dask.distributed import Client, LocalCluster
except ImportError as error:  # the [dask] extra is not installed
    sys.exit(
        f"dask_pipeline.py needs dask and dask.distributed, which are not installed ({error}). "
        "Install them with smartarray's [dask] extra, in a checkout of smartarray:\n"
        '    pip install -e ".[dask]"\n'
        'or on their own: pip install "dask[array]" distributed'
    )

ON_GPU = sa.tier() == "gpu"
N = 1 << 22 if ON_GPU else 2048  # the simulator runs every CUDA thread in Python
CHUNK = N // 8
STEPS = 3
THREADS = 256


# --8<-- [start:tasks]
@njit
def clip_negative(x):
    """Host pre-processing, in place: negative readings become 0."""
    for i in range(x.size):
        if x[i] < 0.0:
            x[i] = 0.0


def clean(block: sa.SmartArray) -> sa.SmartArray:
    """A cleaned copy of the chunk (from_array's chunks are views of the input)."""
    out = block.copy()
    clip_negative(out)
    return out


@cuda.jit
def relax(u, out):
    """One smoothing step inside the chunk, with insulated ends."""
    i = cuda.grid(1)
    n = u.size
    if i < n:
        left = u[i - 1] if i > 0 else u[i]
        right = u[i + 1] if i < n - 1 else u[i]
        out[i] = u[i] + 0.25 * (left - 2.0 * u[i] + right)


def smooth(block: sa.SmartArray) -> sa.SmartArray:
    """One kernel launch: a new chunk, current on this worker's device."""
    out = sa.empty_like(block, where="gpu")
    relax[(block.size + THREADS - 1) // THREADS, THREADS](sa.In(block), sa.Out(out))
    return out


# --8<-- [end:tasks]


def reference(data: np.ndarray) -> np.ndarray:
    """The same pipeline in numpy."""
    out = np.maximum(data, 0.0)
    chunks = out.reshape(-1, CHUNK)
    for _ in range(STEPS):
        left = np.concatenate([chunks[:, :1], chunks[:, :-1]], axis=1)
        right = np.concatenate([chunks[:, 1:], chunks[:, -1:]], axis=1)
        chunks = chunks + 0.25 * (left - 2.0 * chunks + right)
    return chunks.reshape(-1)


# --8<-- [start:make-cluster]
def make_cluster() -> LocalCluster:
    """Two worker processes: one per GPU with dask-cuda on a machine with 2 GPUs or more."""
    if ON_GPU and len(cuda.gpus) >= 2 and importlib.util.find_spec("dask_cuda"):
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(n_workers=2)  # sets CUDA_VISIBLE_DEVICES per worker
    # One thread per worker: the simulator cannot run two kernels at once in one process.
    return LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)


# --8<-- [end:make-cluster]


def main() -> None:
    data = np.sin(np.arange(N) / 50.0) * 10.0
    readings = sa.SmartArray(data)
    meta = sa.empty(0)
    # --8<-- [start:cluster]
    with make_cluster() as cluster, Client(cluster) as client:
        x = da.from_array(readings, chunks=CHUNK)
        y = x.map_blocks(clean, meta=meta)
        for _ in range(STEPS):
            y = y.map_blocks(smooth, meta=meta)
        (y,) = client.persist([y])  # device-resident chunks, on both workers
        total = client.compute(y.sum()).result(timeout=300)
        result = client.compute(y).result(timeout=300)
        per_worker = client.run(sa.transfer_stats)  # each worker's ledger
    # --8<-- [end:cluster]

    expected = reference(data)
    assert type(result) is sa.SmartArray
    np.testing.assert_allclose(np.asarray(result), expected, rtol=1e-12, atol=1e-12)
    assert abs(total - expected.sum()) <= 1e-9 * np.abs(expected).sum()
    print(f"{N} elements in {N // CHUNK} chunks, {STEPS} kernel tasks per chunk,", end=" ")
    print("2 worker processes")
    print(f"sum = {total:.6f}")
    for address, stats in sorted(per_worker.items()):
        print(f"  worker {address}: {stats}")
    up = sum(s.h2d_bytes for s in per_worker.values())
    down = sum(s.d2h_bytes for s in per_worker.values())
    # Each chunk went up once (first kernel) and came down once (for the sum): no copies
    # between the kernel tasks, which found their chunk on the device.
    assert len(per_worker) == 2 and up == down == data.nbytes, (up, down)
    print(f"each chunk crossed the bus twice in all: {up} bytes up, {down} bytes down")
    print("ledger:", sa.transfer_stats(), "(this process: the client)")
    print("dask_pipeline: OK")


if __name__ == "__main__":
    if sa.tier() == "host-only":  # no GPU and no simulator: say how to run it instead
        sys.exit(
            "dask_pipeline.py needs a CUDA GPU or Numba's CUDA simulator, and "
            "this machine has no CUDA. Run it in the simulator:\n"
            "    NUMBA_ENABLE_CUDASIM=1 python examples/dask_pipeline.py"
        )
    main()
