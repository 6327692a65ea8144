"""dask benchmark: a chunked kernel pipeline on 1 and on 2 worker processes.

Run by ``python -m smartarray.bench --dask`` (needs ``pip install -e ".[dask]"`` in a checkout).

The pipeline: ``dask.array.from_array`` of a SmartArray, ``steps`` ``map_blocks`` tasks per
chunk that each launch the 3-point smoothing kernel of :mod:`smartarray.bench` (a new
device-resident chunk per task), then ``persist``, ``sum`` and a gather of the result. The
same pipeline runs on a ``LocalCluster`` of one worker process and of two. Per
configuration it reports the host<->device copies each worker made (its smartarray ledger),
how many result chunks each worker holds at the end (replicas included), the bytes the
workers sent (to each other and the client), and the wall time of the pipeline (median of
``repeats`` runs after an untimed warm-up run). Each configuration runs
the chunks as ``from_array`` makes them (views of one array) and copied first by a task of
their own. Wall times are meaningful on a GPU only: the simulator runs every CUDA thread in
Python.
"""

from __future__ import annotations

import statistics
import textwrap
import time
from typing import Any

import numpy as np

from .._array import SmartArray
from .._core import backend as _backend
from .._core.transfer import reset_transfer_stats, transfer_stats
from .._intents import In, Out
from .._numpy.creation import empty, empty_like
from .common import THREADS, blocks, format_table, initial_condition, smooth, smooth_reference


def smooth_block(block: SmartArray) -> SmartArray:
    """One ``map_blocks`` task: one smoothing launch into a new device-resident chunk."""
    out = empty_like(block, where="gpu")
    smooth[blocks(block.size), THREADS](In(block), Out(out))
    return out


def copy_block(block: SmartArray) -> SmartArray:
    """A first task that gives the chunk its own allocation (``from_array``'s chunks are views
    of one array, whose first upload on a worker is the whole array)."""
    return block.copy()


def _worker_counters(dask_worker: Any) -> dict[str, int]:
    ledger = transfer_stats()
    return {
        "h2d_count": ledger.h2d_count,
        "h2d_bytes": ledger.h2d_bytes,
        "d2h_count": ledger.d2h_count,
        "d2h_bytes": ledger.d2h_bytes,
        "sent_bytes": int(dask_worker.transfer_outgoing_bytes_total),
    }


def _reset(dask_worker: Any) -> None:
    reset_transfer_stats()
    dask_worker.transfer_outgoing_bytes_total = 0


def run_pipeline(
    client: Any, data: np.ndarray, chunk: int, steps: int, copy_first: bool = False
) -> dict[str, Any]:
    """Run the pipeline once on ``client``'s cluster; return its counts and wall time.

    With ``copy_first`` each chunk is first copied into its own allocation (on the host).
    """
    import dask.array as da
    from distributed import wait

    client.run(_reset)
    meta = empty(0)
    start = time.perf_counter()
    y = da.from_array(SmartArray(data), chunks=chunk)
    if copy_first:
        y = y.map_blocks(copy_block, meta=meta)
    for _ in range(steps):
        y = y.map_blocks(smooth_block, meta=meta)
    (y,) = client.persist([y])
    wait(y)
    total = client.compute(y.sum()).result()
    result = client.compute(y).result()
    seconds = time.perf_counter() - start
    placement = client.who_has(y)
    workers = client.run(_worker_counters)
    del y
    expected = np.concatenate(
        [smooth_reference(part, steps) for part in np.split(data, len(data) // chunk)]
    )
    if not (np.allclose(np.asarray(result), expected) and np.isclose(total, expected.sum())):
        raise AssertionError("the dask pipeline computed a wrong result")
    chunks_per_worker = {address: 0 for address in workers}
    for holders in placement.values():
        for address in holders:
            chunks_per_worker[address] += 1
    return {"seconds": seconds, "workers": workers, "chunks_per_worker": chunks_per_worker}


def measure(
    n: int, chunk: int, steps: int, repeats: int, worker_counts: tuple[int, ...] = (1, 2)
) -> list[dict[str, Any]]:
    """The pipeline on a LocalCluster of each number of worker processes in ``worker_counts``."""
    from distributed import Client, LocalCluster

    data = initial_condition(n)
    rows = []
    for n_workers in worker_counts:
        with (
            LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(n_workers)
            run_pipeline(client, data, chunk, steps)  # warm-up: imports, kernel compilation
            variants = {
                copy_first: [
                    run_pipeline(client, data, chunk, steps, copy_first) for _ in range(repeats)
                ]
                for copy_first in (False, True)
            }
        for copy_first, runs in variants.items():
            rows.append(_row(runs, n_workers, copy_first, data, chunk, steps))
    return rows


def _row(
    runs: list[dict[str, Any]],
    n_workers: int,
    copy_first: bool,
    data: np.ndarray,
    chunk: int,
    steps: int,
) -> dict[str, Any]:
    last = runs[-1]
    per_worker = list(last["workers"].values())
    n = data.size
    return {
        "worker_processes": n_workers,
        "chunks_as": "copies" if copy_first else "views",
        "n": n,
        "chunk": chunk,
        "chunks": n // chunk,
        "steps": steps,
        "seconds": statistics.median(r["seconds"] for r in runs),
        "h2d_count": sum(w["h2d_count"] for w in per_worker),
        "h2d_bytes": sum(w["h2d_bytes"] for w in per_worker),
        "d2h_count": sum(w["d2h_count"] for w in per_worker),
        "d2h_bytes": sum(w["d2h_bytes"] for w in per_worker),
        "sent_bytes": sum(w["sent_bytes"] for w in per_worker),
        "chunks_per_worker": sorted(last["chunks_per_worker"].values()),
        "per_worker": per_worker,
        "minimum_bytes": 2 * data.nbytes,
    }


CHUNKS_HELD_LEGEND = (
    "result chunks held: at the end of the run, how many of the {chunks} result chunks each "
    "worker process holds, one number per worker ('4 + 8': one worker holds 4, the other "
    "8); replicas included, so the numbers add up to more than {chunks} when a chunk was "
    "copied to a second worker (the sum and the gather do that)"
)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`measure` as a table, then the meaning of its "result chunks held"
    column."""
    text = format_table(
        [
            "worker processes",
            "chunks",
            "result chunks held",
            "H2D copies",
            "D2H copies",
            "bytes moved",
            "minimum",
            "bytes sent by workers",
            "time (median)",
        ],
        [
            [
                r["worker_processes"],
                r["chunks_as"],
                " + ".join(str(c) for c in r["chunks_per_worker"]),
                r["h2d_count"],
                r["d2h_count"],
                r["h2d_bytes"] + r["d2h_bytes"],
                r["minimum_bytes"],
                r["sent_bytes"],
                f"{r['seconds'] * 1e3:.1f} ms",
            ]
            for r in rows
        ],
    )
    chunks = rows[0]["chunks"] if rows else 0
    return f"{text}\n{textwrap.fill(CHUNKS_HELD_LEGEND.format(chunks=chunks), 100)}"


def run(quick: bool) -> dict[str, Any]:
    """Measure for this tier, print the table, return the results."""
    on_gpu = _backend.tier() == "gpu"
    n = (1 << 22 if quick else 1 << 24) if on_gpu else 2048
    chunk = n // 8
    steps = (10 if quick else 50) if on_gpu else 4
    repeats = 3 if quick or not on_gpu else 7
    print(
        f"\ndask: {steps} kernel map_blocks per chunk, n={n} float64 in {n // chunk} chunks, "
        f"persist + sum + gather, LocalCluster of 1 and 2 worker processes (1 thread each); "
        "chunks: from_array's views of one array, or copied first by a task of their own"
    )
    rows = measure(n, chunk, steps, repeats)
    print(table(rows))
    if not on_gpu:
        print("(times are not meaningful in the simulator, which runs every CUDA thread in Python)")
    return {"n": n, "chunk": chunk, "steps": steps, "repeats": repeats, "rows": rows}
