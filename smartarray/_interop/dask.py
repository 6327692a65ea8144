"""dask integration: SmartArrays as dask.array chunks and dask.distributed data.

Nothing here imports dask. :func:`install` (run when smartarray is imported) registers
SmartArray with every dask module that is already imported, and puts a small import hook on
``sys.meta_path`` that registers it with the others right after they are first imported, in
whichever order the user imports smartarray and dask:

``dask.sizeof``
    ``sizeof(chunk)``: the bytes of the chunk's elements, counted once (as for an ndarray),
    whichever copies are current. No data is touched.
``dask.tokenize``
    the token of a chunk whose host copy is current hashes those bytes in place (like an
    ndarray's); a chunk current only on the device gets a unique random token, since hashing
    its data would need a device-to-host copy.
``distributed.protocol.serialize`` (the ``'dask'`` family)
    a chunk ships its host copy, made current first (one device-to-host copy, in the ledger
    of the sending process, if only the device copy was current). The frame is a memoryview
    of the host buffer, not a copy, for contiguous chunks (distributed's own ndarray
    serializer lays out the frames). The receiver adopts the frame as its host copy.
``distributed.protocol.cuda`` (the ``'cuda'`` family, used by dask-cuda's UCX transport)
    a chunk whose device copy is current ships that device buffer: no host copy on either
    side, and it arrives current on the receiving GPU. Other chunks fall back to ``'dask'``.
``dask.array.backends``
    the array functions dask looks up by chunk type (``concatenate``, ``tensordot``,
    ``einsum``, ``take``, ``empty``, ``divide``, ``percentile``, ``to_numpy``) run on SmartArrays
    and return SmartArrays, so a dask array built from SmartArrays keeps SmartArray chunks.
``dask_cuda.is_device_object`` / ``dask_cuda.get_device_memory_objects``
    dask-cuda's device-memory spilling sees a chunk as device memory exactly when its device
    copy is current, without reading ``__cuda_array_interface__`` (which would upload it).

Every registration is by the exact class. dask looks types up along their MRO, running lazy
registrations of the modules it meets there; SmartArray's MRO includes numba-cuda's
``ArgHint``, whose module would run distributed's numba registration, which fails in the CUDA
simulator. An exact registration is found before that walk.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .._array import SmartArray
from .._core import backend as _backend

# --- the chunk-level operations (no dask import needed to call them) -----------------------


def sizeof(array: SmartArray) -> int:
    """Bytes of ``array``'s elements, counted once (broadcast axes once, like dask's ndarray
    sizeof), whichever of the host and device copies are current."""
    # (the layout read with no call between: another thread may set the shape)
    layout = zip(array._shape, array._strides, strict=True)
    shape = [1 if stride == 0 else n for n, stride in layout]
    return int(np.prod(shape, dtype=np.int64)) * array.itemsize


def current_host_view(array: SmartArray) -> np.ndarray | None:
    """``array``'s host data as an ndarray view (no copy), or None if the host copy is stale."""
    alloc = array._alloc
    with alloc.lock:
        if not alloc.is_valid("host", array._span()):
            return None
        return _host_ndarray(array)


def _host_ndarray(array: SmartArray) -> np.ndarray:
    """The host copy made current (copying from the device if it is stale), as a view."""
    alloc = array._alloc
    with alloc.lock:
        host = alloc.ensure_host(None, array._span())
        return _backend.strided_view(
            host, array._offset, array.shape, array.strides, array.dtype, array._writeable
        )


def is_device_object(array: SmartArray) -> bool:
    """True when ``array``'s device copy is current (dask-cuda keeps it in device memory).

    Mapped host memory is host memory the device reads in place: not a device object.
    """
    alloc = array._alloc
    return (
        alloc.is_valid("gpu", array._span())
        and alloc.device is not None
        and (alloc.host_memory != "mapped")
    )


def device_memory_objects(array: SmartArray) -> list[Any]:
    """The device buffer holding ``array``'s current data, if any (for dask-cuda)."""
    return [array._alloc.device] if is_device_object(array) else []


def dask_serialize(array: SmartArray, context: dict[str, Any] | None = None) -> tuple[dict, list]:
    """Header and frames of ``array``'s host copy, made current first (zero-copy frames)."""
    from distributed.protocol.numpy import serialize_numpy_ndarray

    host = _host_ndarray(array)
    header, frames = serialize_numpy_ndarray(host, context=context)
    if "writeable" in header:  # of the chunk, also when its data had to be made contiguous
        header["writeable"] = [bool(host.flags.writeable)]
    return {"ndarray": header}, frames


def dask_deserialize(header: dict, frames: Sequence[Any]) -> SmartArray:
    """A SmartArray current on the host that adopts the received host data (no copy)."""
    from distributed.protocol.numpy import deserialize_numpy_ndarray

    host = deserialize_numpy_ndarray(header["ndarray"], list(frames))
    array = SmartArray._adopt(host)  # copies only layouts it cannot adopt (broadcasts)
    if array._writeable and not host.flags.writeable:  # a read-only chunk stays read-only
        array = SmartArray._view(
            array._alloc, array._offset, array.shape, array.strides, array.dtype, False, None
        )
    return array


def cuda_serialize(array: SmartArray) -> tuple[dict, list]:
    """Header and the device buffer of ``array``, if its device copy is current.

    Raises
    ------
    NotImplementedError
        When the device copy is not current, or the chunk is not one contiguous block of
        device memory: distributed then tries the next family (``'dask'``, host bytes).
    """
    from distributed.protocol import pickle

    alloc = array._alloc
    flags = array.flags
    if not (flags.c_contiguous or flags.f_contiguous) or min(array.strides, default=0) < 0:
        raise NotImplementedError("only contiguous SmartArrays ship their device buffer")
    with alloc.lock:
        if not is_device_object(array):
            raise NotImplementedError("the device copy is not current: ship the host copy")
        # (current already: waits for pending device work)
        device = alloc.ensure_device(None, None, array._span())
        if _backend.tier() == "gpu":
            _backend.cuda().synchronize()  # kernels still writing it, on any stream
        _backend.address_handed_out(device)  # (sent by UCX on streams smartarray never sees)
        frame = _backend.device_view(
            device, array._offset, (array.nbytes,), (1,), np.dtype(np.uint8)
        )
        header = {  # (the layout read under the lock: the shape setter holds it)
            "shape": list(array._shape),
            "strides": list(array._strides),
            "dtype": pickle.dumps(array.dtype),
            "writeable": array._writeable,
        }
    return header, [frame]


def cuda_deserialize(header: dict, frames: Sequence[Any]) -> SmartArray:
    """A SmartArray current on the device that adopts the received device buffer."""
    from distributed.protocol import pickle

    (frame,) = frames
    dtype = pickle.loads(header["dtype"])
    shape, strides = tuple(header["shape"]), tuple(header["strides"])
    device = _backend.device_view(_backend.as_device_array(frame), 0, shape, strides, dtype)
    adopted = SmartArray(device, copy=False)
    if header["writeable"]:
        return adopted
    return SmartArray._view(adopted._alloc, 0, shape, strides, dtype, False, None)


def tokenize(array: SmartArray) -> Any:
    """dask token: a hash of the current host bytes, else (device only) a random token."""
    from dask.tokenize import normalize_token

    host = current_host_view(array)
    if host is None:
        return ("smartarray.SmartArray", "device-current", uuid.uuid4().hex)
    return ("smartarray.SmartArray", normalize_token(host), array._writeable)


def to_numpy(array: SmartArray, **kwargs: Any) -> np.ndarray:
    """A numpy copy of ``array`` (dask's ``to_backend('numpy')``)."""
    return np.array(array)


# --- registrations, one per dask module -----------------------------------------------------


def _register_sizeof(module: ModuleType) -> None:
    module.sizeof.register(SmartArray, sizeof)


def _register_tokenize(module: ModuleType) -> None:
    module.normalize_token.register(SmartArray, tokenize)


def _register_dask_family(module: ModuleType) -> None:
    module.dask_serialize.register(SmartArray, dask_serialize)
    module.dask_deserialize.register(SmartArray, dask_deserialize)


def _register_cuda_family(module: ModuleType) -> None:
    module.cuda_serialize.register(SmartArray, cuda_serialize)
    module.cuda_deserialize.register(SmartArray, cuda_deserialize)


def _register_array_functions(module: ModuleType) -> None:
    from dask.array import dispatch
    from dask.array.percentile import _percentile

    from .._numpy.creation import empty

    dispatch.concatenate_lookup.register(SmartArray, np.concatenate)
    dispatch.tensordot_lookup.register(SmartArray, np.tensordot)
    dispatch.einsum_lookup.register(SmartArray, np.einsum)
    dispatch.take_lookup.register(SmartArray, np.take)
    dispatch.empty_lookup.register(SmartArray, empty)
    dispatch.divide_lookup.register(SmartArray, np.divide)
    dispatch.percentile_lookup.register(SmartArray, _percentile)
    dispatch.to_numpy_dispatch.register(SmartArray, to_numpy)


def _register_is_device_object(module: ModuleType) -> None:
    module.is_device_object.register(SmartArray, is_device_object)


def _register_device_memory_objects(module: ModuleType) -> None:
    module.dispatch.register(SmartArray, device_memory_objects)


REGISTRATIONS: dict[str, Callable[[ModuleType], None]] = {
    "dask.sizeof": _register_sizeof,
    "dask.tokenize": _register_tokenize,
    "distributed.protocol.serialize": _register_dask_family,
    "distributed.protocol.cuda": _register_cuda_family,
    "dask.array.backends": _register_array_functions,
    "dask_cuda.is_device_object": _register_is_device_object,
    "dask_cuda.get_device_memory_objects": _register_device_memory_objects,
}
"""The dask modules smartarray registers with, and how (module name -> registration)."""

_done: set[str] = set()
_lock = threading.RLock()


def _register(name: str, module: ModuleType) -> None:
    with _lock:
        if name in _done:
            return
        _done.add(name)
        if not set(REGISTRATIONS) - _done and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
    try:
        REGISTRATIONS[name](module)
    except Exception as exc:  # never break the user's import of dask
        warnings.warn(
            f"smartarray could not register SmartArray with {name} ({exc!r}); SmartArrays "
            "may not work as dask chunks in this process",
            RuntimeWarning,
            stacklevel=2,
        )


def registered() -> frozenset[str]:
    """Names of the dask modules SmartArray has been registered with in this process."""
    with _lock:
        return frozenset(_done)


class _RegisteringLoader(importlib.abc.Loader):
    """Wraps a module's loader: runs the module, then smartarray's registration with it."""

    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _register(self._name, module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, ...
        return getattr(self._loader, name)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """A ``sys.meta_path`` entry that registers SmartArray when a dask module is imported.

    It finds nothing itself: for the watched names it asks the other finders for the
    module's spec and wraps the spec's loader. Any other name costs one dict lookup.
    """

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in REGISTRATIONS or fullname in _done:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _RegisteringLoader(spec.loader, fullname)
        return spec


_FINDER = _AfterImportFinder()


def install() -> None:
    """Register SmartArray with the dask modules imported so far, and hook the others.

    Idempotent; run when smartarray is imported.
    """
    for name in REGISTRATIONS:
        module = sys.modules.get(name)
        if module is not None:
            _register(name, module)
    with _lock:
        if set(REGISTRATIONS) - _done and _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
