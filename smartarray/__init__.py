"""smartarray: a numpy-compatible array that keeps a host and a CUDA device copy coherent.

Set ``NUMBA_ENABLE_CUDASIM=1`` in the environment *before numba is first imported* (before
the process starts, e.g. ``NUMBA_ENABLE_CUDASIM=1 python script.py``; importing smartarray
imports numba) to use Numba's CUDA simulator on a machine without a GPU.
"""

from __future__ import annotations

# The glue modules register themselves when imported: the Numba extension (_numba_cpu), dask's
# lookups (_dask), and SmartArray's hooks (smartarray._hooks; _dlpack here, the others below).
from . import _dask, _dlpack, _numba_buffers, _numba_cpu  # noqa: F401
from ._array import SmartArray
from ._backend import tier
from ._creation import (
    asarray,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from ._cuda_ufuncs import SmartUFunc, cuda_ufunc, install_dispatch_hooks
from ._errors import DeviceUnavailableError, SmartArrayKeptError, TransferError
from ._explain import ArgumentIntent, IntentReport, explain_intents
from ._intents import In, InOut, Out
from ._launch_guard import install_launch_guard
from ._launch_intents import install_launch_hooks
from ._memory import device_memory_limit, device_memory_usage, set_device_memory_limit
from ._numba_cuda import install_argument_hint_hooks
from ._numba_types import SmartArrayType, numba_type
from ._pinned_pool import pinned_pool_info, release_pinned_pool, set_pinned_pool_limit
from ._transfer import (
    TransferRecord,
    TransferStats,
    no_transfers,
    reset_transfer_stats,
    track_transfers,
    transfer_stats,
)

install_dispatch_hooks()  # plain CUDA ufuncs handle SmartArrays precisely
install_launch_guard()  # launches without CUDA raise DeviceUnavailableError
install_argument_hint_hooks()  # numba.cuda.In/Out/InOut(a) act as smartarray's intents
_dask.install()  # SmartArrays as dask chunks, whenever dask is imported (see _dask.py)
install_launch_hooks()  # bare SmartArray kernel arguments get inferred intents

__version__ = "0.1.0"

__all__ = [
    "ArgumentIntent",
    "DeviceUnavailableError",
    "In",
    "InOut",
    "IntentReport",
    "Out",
    "SmartArray",
    "SmartArrayKeptError",
    "SmartArrayType",
    "SmartUFunc",
    "TransferError",
    "TransferRecord",
    "TransferStats",
    "__version__",
    "asarray",
    "cuda_ufunc",
    "device_memory_limit",
    "device_memory_usage",
    "empty",
    "empty_like",
    "explain_intents",
    "full",
    "full_like",
    "no_transfers",
    "numba_type",
    "ones",
    "ones_like",
    "pinned_pool_info",
    "release_pinned_pool",
    "reset_transfer_stats",
    "set_device_memory_limit",
    "set_pinned_pool_limit",
    "tier",
    "track_transfers",
    "transfer_stats",
    "zeros",
    "zeros_like",
]
