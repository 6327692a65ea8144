"""DLPack: ``SmartArray.__dlpack__`` / ``__dlpack_device__``, and adopting DLPack producers.

Which copy is exported
    ``dl_device=None`` (what ``np.from_dlpack`` asks for): the host copy, unless this process
    has a GPU and only the device copy is current, then the device copy. ``__dlpack_device__``
    reports that choice. ``dl_device=(1, 0)`` (kDLCPU) always exports the host copy and
    ``dl_device=(2, n)`` (kDLCUDA, the current device ``n``) the device copy. The exported copy
    is made current first (through the transfer layer, so a stale copy costs one ledger copy).

Writes by the consumer
    The consumer gets a pointer it may write through, so exporting a writable SmartArray
    marks the exported copy changed (the other one becomes stale), exactly as
    ``__cuda_array_interface__`` does for the device copy. A read-only SmartArray
    (``a.readonly()``, an adopted read-only ndarray) exports read-only, with the DLPack 1.0
    read-only flag, and changes nothing; DLPack 0.x cannot flag read-only memory, so then it
    needs a consumer asking for ``max_version >= (1, 0)`` (as ``np.from_dlpack`` does).

``copy=``
    ``None`` and ``False`` export the SmartArray's own (host or device) buffer: smartarray
    keeps two copies of the data, so making the requested one current is not a copy in the
    DLPack sense. ``True`` exports a new buffer with a snapshot of the data and changes no
    flags.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _hooks
from .._core import backend as _backend

if TYPE_CHECKING:
    from .._array import SmartArray

KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13


def _current_device_id() -> int:
    return int(_backend.cuda().get_current_device().id)


def _default_side(array: SmartArray) -> str:
    if _backend.tier() == "gpu" and array._alloc.on_device_side(array._span()):
        return "gpu"
    return "host"


def dlpack_device(array: SmartArray) -> tuple[int, int]:
    """``__dlpack_device__``: where ``__dlpack__()`` without ``dl_device`` exports from."""
    if _default_side(array) == "gpu":
        return (KDL_CUDA, _current_device_id())
    return (KDL_CPU, 0)


def _requested_side(array: SmartArray, dl_device: Any) -> str:
    if dl_device is None:
        return _default_side(array)
    if (
        not isinstance(dl_device, tuple)
        or len(dl_device) != 2
        or not all(isinstance(v, int) for v in dl_device)
    ):
        raise TypeError(f"dl_device must be a (device_type, device_id) tuple; got {dl_device!r}")
    device_type, device_id = dl_device
    if device_type == KDL_CPU:
        return "host"
    if device_type == KDL_CUDA:
        if _backend.tier() != "gpu":
            raise BufferError(
                f"dl_device={dl_device!r} asks for a CUDA export, but this process has no GPU "
                f"(tier {_backend.tier()!r}): only kDLCPU exports, dl_device=(1, 0)"
            )
        if device_id != _current_device_id():
            raise BufferError(
                f"dl_device={dl_device!r}: the device copy lives on CUDA device "
                f"{_current_device_id()}, not {device_id}"
            )
        return "gpu"
    raise BufferError(
        f"dl_device={dl_device!r}: a SmartArray exports its host copy (kDLCPU, (1, 0)) or, "
        f"on a GPU, its device copy (kDLCUDA, (2, device_id))"
    )


def export(array: SmartArray, stream: Any, max_version: Any, dl_device: Any, copy: Any) -> Any:
    """``__dlpack__``: a DLPack capsule of ``array``'s host or device copy (module docstring)."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be True, False or None; got {copy!r}")
    if max_version is not None and (not isinstance(max_version, tuple) or len(max_version) != 2):
        raise TypeError(f"max_version must be a (major, minor) tuple; got {max_version!r}")
    side = _requested_side(array, dl_device)
    if side == "host":
        if stream is not None:
            raise ValueError(
                f"stream={stream!r} applies to CUDA exports; a host (kDLCPU) export takes "
                "stream=None"
            )
        return _export_host(array, max_version, bool(copy))
    return _export_device(array, stream, max_version, bool(copy))


def _check_readonly_flag(array: SmartArray, max_version: Any, copy: bool) -> None:
    if not array._writeable and not copy and (max_version is None or max_version[0] < 1):
        raise BufferError(
            "this SmartArray is read-only, and DLPack before 1.0 cannot mark memory "
            "read-only: the consumer must ask for max_version=(1, 0) or later (np.from_dlpack "
            "does), or pass copy=True for a writable copy"
        )


def _export_host(array: SmartArray, max_version: Any, copy: bool) -> Any:
    _check_readonly_flag(array, max_version, copy)
    alloc = array._alloc
    with alloc.lock:
        if copy:
            data = np.array(array._host_view(write=False), copy=True)
        elif array._writeable:
            data = array._host_view(write=True).view()
            alloc.host_written(array._span())
            array._hand_out_host()
        else:
            data = array._host_view(write=False).view()
            array._hand_out_host()
    return data.__dlpack__(max_version=max_version)


class _DeviceExport:
    """A CUDA-array-interface holder for cuda.core to wrap; keeps the exporter alive."""

    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, interface: dict[str, Any], owner: Any) -> None:
        self.__cuda_array_interface__ = interface
        self.owner = owner


def _export_device(array: SmartArray, stream: Any, max_version: Any, copy: bool) -> Any:
    _check_readonly_flag(array, max_version, copy)
    from cuda.core.utils import StridedMemoryView

    # copy=True: a snapshot (copied on the device when only the device copy is current),
    # made current on the device by the export below.
    source = array.copy() if copy else array
    # The same bookkeeping as __cuda_array_interface__: device copy current, exported (its
    # memory outlives any free_device), and marked changed unless read-only.
    holder = _DeviceExport(_hooks.cuda_array_interface(source), source)
    view = StridedMemoryView.from_cuda_array_interface(holder, stream_ptr=-1)
    return view.__dlpack__(stream=stream, max_version=max_version)


def is_producer(obj: Any) -> bool:
    """True for a DLPack producer that is neither an ndarray nor a SmartArray."""
    return (
        not isinstance(obj, np.ndarray)
        and hasattr(type(obj), "__dlpack__")
        and hasattr(type(obj), "__dlpack_device__")
    )


class _ImportedDevice:
    """A DLPack CUDA tensor seen through the CUDA Array Interface (for Numba to adopt)."""

    __slots__ = ("__cuda_array_interface__", "view")

    def __init__(self, view: Any) -> None:
        layout = view._layout
        self.view = view  # keeps the capsule, and so the producer's memory, alive
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": tuple(view.shape),
            "strides": None if layout.is_contiguous_c else tuple(layout.strides_in_bytes),
            "typestr": np.dtype(view.dtype).str,
            "data": (int(view.ptr), bool(view.readonly)),
            "stream": None,
        }


def host_or_device_source(obj: Any) -> tuple[str, Any]:
    """What ``SmartArray(producer)`` reads a DLPack producer as: ``('host', ndarray)`` for
    host memory (zero-copy, through ``np.from_dlpack``) or ``('gpu', interface_holder)`` for
    CUDA memory."""
    device_type, _ = obj.__dlpack_device__()
    if device_type in (KDL_CPU, KDL_CUDA_HOST):
        return "host", np.from_dlpack(obj)
    if device_type in (KDL_CUDA, KDL_CUDA_MANAGED):
        if _backend.tier() != "gpu":
            raise BufferError(
                f"{type(obj).__name__} holds CUDA memory, but this process has no GPU "
                f"(tier {_backend.tier()!r})"
            )
        from cuda.core.utils import StridedMemoryView

        return "gpu", _ImportedDevice(StridedMemoryView.from_dlpack(obj, stream_ptr=-1))
    raise BufferError(
        f"{type(obj).__name__} exports DLPack device type {device_type}; SmartArray adopts "
        f"host (kDLCPU) and CUDA (kDLCUDA) memory"
    )


def source(obj: Any) -> tuple[str, Any] | None:
    """What ``SmartArray(obj)`` reads ``obj`` as when it is a DLPack producer (see
    :func:`host_or_device_source`); None when it is not one."""
    return host_or_device_source(obj) if is_producer(obj) else None


_hooks.dlpack_export = export
_hooks.dlpack_device = dlpack_device
_hooks.dlpack_source = source
