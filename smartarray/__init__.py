"""smartarray: a numpy-compatible array that keeps a host and a CUDA device copy coherent.

Set ``NUMBA_ENABLE_CUDASIM=1`` in the environment *before numba is first imported* (before
the process starts, e.g. ``NUMBA_ENABLE_CUDASIM=1 python script.py``; importing smartarray
imports numba) to use Numba's CUDA simulator on a machine without a GPU.
"""

import sys as _sys

# The layers, bottom first (docs/design.md): _core (state machine, transfers, memory), the
# class (_array, _hooks, _intents), then the glue, which registers itself with the class when
# imported: _numpy (the ndarray face), _numba (@jit), _cuda (kernels, CUDA ufuncs), _interop
# (DLPack, dask). Importing any smartarray.* module runs this file first, so every hook is
# filled before user code runs.
from . import _core

# isort: split
from . import _numpy  # (each layer registers itself, bottom first)

# isort: split
from . import _numba

# isort: split
from . import _cuda

# isort: split
from . import _interop

# isort: split
from ._array import SmartArray
from ._core.backend import device_pool_info, release_device_pool, tier
from ._core.errors import DeviceUnavailableError, SmartArrayKeptError, TransferError
from ._core.memory import device_memory_limit, device_memory_usage, set_device_memory_limit
from ._core.pinned_pool import pinned_pool_info, release_pinned_pool, set_pinned_pool_limit
from ._core.ranges import coalesce_bytes, set_coalesce_bytes
from ._core.transfer import (
    TransferRecord,
    TransferStats,
    no_transfers,
    reset_transfer_stats,
    track_transfers,
    transfer_stats,
)
from ._cuda.arguments import install_argument_hint_hooks
from ._cuda.explain import ArgumentIntent, IntentReport, explain_intents
from ._cuda.launch import install_launch_hooks
from ._cuda.launch_guard import install_launch_guard
from ._cuda.simulator_ufuncs import install_simulator_ufuncs
from ._cuda.ufuncs import SmartUFunc, cuda_ufunc, install_dispatch_hooks
from ._intents import In, InOut, Out
from ._interop import dask as _dask
from ._numba.types import SmartArrayType, numba_type
from ._numpy.creation import (
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

# Pickles, and the code Numba caches on disk (``cache=True``), name functions and classes by
# their module. Those written before the package had layers (up to 2026-11-23) name the flat
# modules: each name below stays importable as the module that holds that code now. SmartArray
# pickles still name ``smartarray._pickling.restore``, so that older versions read them too.
_FLAT_LAYOUT_NAMES = {
    "_pickling": _numpy.pickling,  # SmartArray pickles
    "_numba_types": _numba.types,  # SmartArrayType: pickles, Numba's cache index
    "_numba_cpu": _numba.cpu,  # compiled code cached by Numba loads _jit_constants
    "_errors": _core.errors,  # pickled exceptions (dask, multiprocessing)
    "_transfer": _core.transfer,  # TransferStats, TransferRecord
    "_explain": _cuda.explain,  # IntentReport, ArgumentIntent
    "_cuda_ufuncs": _cuda.ufuncs,  # SmartUFunc
    "_dask": _interop.dask,  # functions a dask graph refers to
}
for _old, _module in _FLAT_LAYOUT_NAMES.items():
    _sys.modules.setdefault(f"{__name__}.{_old}", _module)

install_dispatch_hooks()  # plain CUDA ufuncs handle SmartArrays precisely
install_simulator_ufuncs()  # in the simulator: @vectorize/@guvectorize(target='cuda') work
install_launch_guard()  # launches without CUDA raise DeviceUnavailableError
install_argument_hint_hooks()  # numba.cuda.In/Out/InOut(a) act as smartarray's intents
_dask.install()  # SmartArrays as dask chunks, whenever dask is imported (see _interop/dask.py)
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
    "coalesce_bytes",
    "cuda_ufunc",
    "device_memory_limit",
    "device_memory_usage",
    "device_pool_info",
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
    "release_device_pool",
    "release_pinned_pool",
    "reset_transfer_stats",
    "set_coalesce_bytes",
    "set_device_memory_limit",
    "set_pinned_pool_limit",
    "tier",
    "track_transfers",
    "transfer_stats",
    "zeros",
    "zeros_like",
]
