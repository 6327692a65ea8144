"""Benchmarks: ``python -m smartarray.bench`` (also installed as ``smartarray-bench``).

The command line and the transfer and timing benchmarks are in :mod:`smartarray.bench.cli`;
the parts it runs are ``common`` (kernels, copy counting, tables), ``njit`` (CPU ``@njit``
call overhead), ``host`` (the host-speed table), ``intents`` (inferred intents), ``memory``
(oversubscription and the pinned pool), ``throughput`` (GPU copy throughput) and ``dask``
(a chunked pipeline on a LocalCluster). Nothing in the library imports this package.
"""

from .cli import (
    THREADS,
    CopyCounter,
    add,
    blocks,
    format_table,
    initial_condition,
    main,
    smooth,
    smooth_reference,
)

__all__ = [
    "THREADS",
    "CopyCounter",
    "add",
    "blocks",
    "format_table",
    "initial_condition",
    "main",
    "smooth",
    "smooth_reference",
]
