"""Benchmarks: ``python -m smartarray.bench`` (also installed as ``smartarray-bench``).

The command line and the transfer and timing benchmarks are in :mod:`smartarray.bench.cli`;
the parts it runs are ``common`` (kernels, copy counting, tables), ``njit`` (CPU ``@njit``
call overhead), ``host`` (the host-speed table), ``intents`` (inferred intents), ``memory``
(oversubscription and the pinned pool), ``throughput`` (GPU copy throughput) and ``dask``
(a chunked pipeline on a LocalCluster). Nothing in the library imports this package.
"""

from typing import Any

from . import cli
from .cli import *  # noqa: F403  (the names of the command line module's __all__)
from .cli import __all__ as __all__


def __getattr__(name: str) -> Any:
    """The command line module's other names (``smartarray.bench`` was that module)."""
    try:
        return getattr(cli, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
