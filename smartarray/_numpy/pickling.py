"""Pickling SmartArrays: the data, made current on the host first, and what the user set.

``pickle.dumps(a)`` stores a host copy of the elements of ``a`` (a view is stored as a copy
of its own elements, as numpy stores a view), laid out as numpy would restore an ndarray of
that layout (Fortran order when ``a`` is F- but not C-contiguous, C order otherwise), with
what makes sense in another process: the ``label`` given to the array (not the default
``SmartArray#n`` name, which is per process), whether it is writable, and its host memory
kind. Only the device copy current: it is downloaded first, once (the array then has both
copies current, as after any host read). The restored array lives on the host; its device
copy is made when a kernel first needs it.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .. import _hooks
from .._array import SmartArray
from .._core import backend as _backend
from .._core import host_buffers as _host_buffers
from .._core.coherence import Allocation
from .._core.errors import HostMemory


def reduce(array: SmartArray) -> tuple[Any, ...]:
    """``array.__reduce__()``: :func:`restore` and its arguments."""
    alloc = array._alloc
    with alloc.lock:
        host = array._host_view(write=False)  # one download if only the device copy is current
        flags = host.flags
        data = host.copy(order="F" if flags.f_contiguous and not flags.c_contiguous else "C")
    # (``_label`` is None for the default, per-process name)
    return (restore, (data, alloc._label, array._writeable, alloc.host_memory))


def restore(
    data: np.ndarray,
    label: str | None = None,
    writeable: bool = True,
    host_memory: HostMemory = "pageable",
) -> SmartArray:
    """A new host-only SmartArray holding ``data`` (the array a pickle restored).

    ``host_memory`` is kept when this process can allocate that kind (pinned and mapped
    memory need CUDA), else the default kind of this process is used. ``data`` is used as it
    is only if it owns its memory (pickle protocols 0-4); otherwise (protocol 5) it is copied:
    an out-of-band buffer (``pickle.loads(p, buffers=...)``) is the caller's, and may back
    other arrays (a second load of the same buffers, the pickled array itself), whose writes
    this array's coherence state would never see.
    """
    if not (data.flags.c_contiguous or data.flags.f_contiguous):  # (never, from reduce)
        data = np.ascontiguousarray(data)
    layout: Literal["C", "F"] = "C" if data.flags.c_contiguous else "F"
    if host_memory != "pageable" and (_backend.tier() == "host-only" or data.dtype.hasobject):
        host_memory = _backend.default_host_memory(data.dtype)
    if host_memory == "pageable":
        # The array owns writable memory, read-only or not, and nobody else's (an empty one
        # shares no bytes, and keeps numpy's strides).
        owned = (data.flags.owndata or data.size == 0) and data.flags.writeable
        host = data if owned else data.copy(order=layout)
    else:
        host = _host_buffers.host_empty(data.shape, data.dtype, layout, host_memory)
        host[...] = data
    alloc = Allocation.on_host(host, layout, host_memory=host_memory, label=label)
    return SmartArray._view(
        alloc, 0, host.shape, tuple(host.strides), host.dtype, bool(writeable), None
    )


_hooks.reduce = reduce

# Pickles name ``smartarray._pickling.restore``, the name they had before the package had layers
# (``smartarray/__init__.py`` keeps that module name importable): pickles this version writes
# load in older versions too, and the other way round.
restore.__module__ = "smartarray._pickling"
