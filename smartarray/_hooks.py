"""SmartArray's extension points: the glue modules register their implementations here.

:mod:`smartarray._array` defines SmartArray and imports none of the modules built on top of it
(the Numba types, the CUDA kernel-argument glue, DLPack, the intents). Where a SmartArray
method needs one of them, it calls the function stored in this module, and each of those
modules stores its function here when it is imported::

    # at the end of smartarray/_numba_cuda.py
    _hooks.bare_kernel_argument = bare_kernel_argument

``import smartarray`` imports every glue module, and importing any ``smartarray.*`` module
imports the package first, so the hooks are filled before user code can call them. The import
graph is a DAG: ``_array`` -> ``_hooks``; glue -> ``_array`` and ``_hooks``. Registration is
idempotent (it is an assignment). A hook called before its module was imported raises
``RuntimeError`` naming that module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._array import SmartArray


def _unregistered(module: str) -> Callable[..., Any]:
    def hook(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"smartarray.{module} is not imported, so SmartArray cannot do this: "
            "import smartarray (the package) before using SmartArray"
        )

    return hook


# Numba types (smartarray._numba_types): the Numba type of an array (``_numba_type_``), given
# whether it is read-only.
numba_type: Callable[[SmartArray, bool], Any] = _unregistered("_numba_types")

# CUDA kernel arguments (smartarray._numba_cuda): the device array a launch gets for a bare
# SmartArray (intent inferred), and for ``In``/``Out``/``InOut(array)`` (intent given), each
# called with ``(array, [intent,] retr, stream)``; and ``__cuda_array_interface__`` (the
# device copy made current and marked changed).
bare_kernel_argument: Callable[[SmartArray, list, Any], Any] = _unregistered("_numba_cuda")
kernel_argument: Callable[[SmartArray, str, list, Any], Any] = _unregistered("_numba_cuda")
cuda_array_interface: Callable[[SmartArray], dict[str, Any]] = _unregistered("_numba_cuda")

# Intents (smartarray._intents): ``smartarray.In(array)``, for ``SmartArray.readonly()``.
read_only_intent: Callable[[SmartArray], Any] = _unregistered("_intents")

# DLPack (smartarray._dlpack): ``__dlpack__(stream, max_version, dl_device, copy)``,
# ``__dlpack_device__()``, and what ``SmartArray(obj)`` reads a producer ``obj`` as:
# ``('host', ndarray)``, ``('gpu', interface holder)``, or None for a non-producer.
dlpack_export: Callable[[SmartArray, Any, Any, Any, Any], Any] = _unregistered("_dlpack")
dlpack_device: Callable[[SmartArray], tuple[int, int]] = _unregistered("_dlpack")
dlpack_source: Callable[[Any], tuple[str, Any] | None] = _unregistered("_dlpack")

REGISTERED_BY = {
    "numba_type": "_numba_types",
    "bare_kernel_argument": "_numba_cuda",
    "kernel_argument": "_numba_cuda",
    "cuda_array_interface": "_numba_cuda",
    "read_only_intent": "_intents",
    "dlpack_export": "_dlpack",
    "dlpack_device": "_dlpack",
    "dlpack_source": "_dlpack",
}
"""Each hook and the module that registers it (checked by the tests)."""
