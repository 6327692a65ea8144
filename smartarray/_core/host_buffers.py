"""Host buffers of each kind: pageable (``numpy.empty``), pinned (from the pool) or mapped.

The one place that allocates the host side of an allocation (:mod:`smartarray._core.coherence`) or
of a new SmartArray. It sits above both :mod:`smartarray._core.backend` (the CUDA runtime) and
:mod:`smartarray._core.pinned_pool` (which reuses page-locked buffers and uses the runtime), so
the runtime never imports the pool.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from . import backend as _backend
from . import pinned_pool as _pinned_pool
from .errors import HostMemory


@functools.cache
def machine_memory() -> tuple[int, int] | None:
    """This machine's (RAM, swap) in bytes, or None where they cannot be read.

    Read once per process from ``/proc/meminfo`` (Linux), else RAM from ``os.sysconf`` with
    no swap. These are the machine's totals, not what is free now, nor a container's limit.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo if ":" in line)
        ram = int(fields["MemTotal"].split()[0]) * 1024
        swap = int(fields.get("SwapTotal", "0 kB").split()[0]) * 1024
        return ram, swap
    except (OSError, KeyError, ValueError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), 0
    except (AttributeError, ValueError, OSError):  # pragma: no cover - no sysconf here
        return None


def _size_text(nbytes: int) -> str:
    """Bytes as numpy's MemoryError writes them: 3 significant digits, binary units."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    size, unit = float(nbytes), 0
    while size >= 1024 and unit < len(units) - 1:
        size, unit = size / 1024, unit + 1
    return f"{nbytes} bytes" if unit == 0 else f"{size:#.3g} {units[unit]}"


def check_host_fits(nbytes: int, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Refuse a new array whose host buffer this machine could never hold.

    numpy raises ``MemoryError`` when it allocates such a buffer (on Linux, a request larger
    than RAM + swap is refused outright); SmartArray makes its host buffer where it is first
    used, so the creation functions call this first. It compares with the machine's total
    memory, not with what is free: an array that fits the machine but not its free memory
    still fails only when its buffer is made, as a numpy array would (or, on Linux with
    overcommit, when its pages are first written). Nothing is allocated.

    Raises
    ------
    MemoryError
        With numpy's wording, the machine's memory, and the fix.
    """
    memory = machine_memory()
    if memory is None or nbytes <= sum(memory):
        return
    ram, swap = memory
    raise MemoryError(
        f"Unable to allocate {_size_text(nbytes)} for an array with shape {shape} and data "
        f"type {dtype}: more than this machine's memory ({_size_text(ram)} RAM + "
        f"{_size_text(swap)} swap). SmartArray makes its buffers where they are first used, "
        "but refuses at creation an array whose host buffer could never be made; nothing was "
        "allocated. Use a smaller array, or, for an array that lives on the device only, "
        "where='gpu' (its device buffer is allocated at once, and its host buffer only if "
        "the host reads it)"
    )


def host_empty(shape: tuple[int, ...], dtype: np.dtype, order: str, kind: HostMemory) -> Any:
    """Allocate an uninitialised contiguous host buffer of the given kind."""
    if kind == "pageable":
        return np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    if dtype.hasobject:
        raise TypeError(
            f"arrays of dtype {dtype} hold Python objects, which cannot live in {kind} host "
            "memory (numpy would never release them, and the device cannot use them); use "
            "host_memory='pageable'"
        )
    _backend.require_device()
    if 0 in shape:  # (the driver cannot page-lock 0 bytes)
        return np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    if kind == "pinned":  # reused from the pool (page-locking is slow; ordinary memory in
        # the simulator, where the pool works the same way)
        return _pinned_pool.POOL.empty(shape, dtype, order)
    if _backend.tier() == "simulator":
        return np.empty(shape, dtype=dtype, order=order)  # type: ignore[call-overload]
    mapped = _backend.cuda().mapped_array(shape, dtype=dtype, order=order)
    # A plain ndarray over the mapped buffer (its base, the MappedNDArray, keeps the buffer
    # alive and holds its device pointer): numba-cuda's MappedNDArray is a device array
    # first, whose ``view``/``flags`` are DeviceNDArray's, not ndarray's.
    return np.ndarray.view(mapped, np.ndarray)
