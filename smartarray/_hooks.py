"""SmartArray's extension points: the glue registers its implementations here.

:mod:`smartarray._array` defines SmartArray and imports none of the layers built on top of it
(the numpy face, the Numba and CUDA glue, interop). Where a SmartArray method needs one of
them, it calls the function stored in this module, and each of those modules stores its
function here when it is imported::

    # at the end of smartarray/_cuda/arguments.py
    _hooks.bare_kernel_argument = bare_kernel_argument

``import smartarray`` imports every glue module, and importing any ``smartarray.*`` module
imports the package first, so the hooks are filled before user code can call them. The import
graph is a DAG: ``_array`` -> ``_hooks``; glue -> ``_array`` and ``_hooks``. This module
imports nothing of smartarray's, so the array parameter of each slot is typed ``Any`` (each
implementation is typed precisely in its module). Registration is idempotent (it is an
assignment). A hook called before its module was imported raises ``RuntimeError`` naming that
module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


def _unregistered(module: str) -> Callable[..., Any]:
    def hook(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"smartarray.{module} is not imported, so SmartArray cannot do this: "
            "import smartarray (the package) before using SmartArray"
        )

    return hook


# Returned by ``shuffled_read`` when a read is an ordinary one.
NOT_SHUFFLING: Any = object()

# --- the numpy face (smartarray._numpy) ------------------------------------------------------

# Construction (_numpy.construct): ``SmartArray.__init__(self, obj, copy, shape, dtype, order,
# where, host_memory, stream, label)`` once its arguments are checked.
construct: Callable[..., None] = _unregistered("_numpy.construct")

# NEP 13 and NEP 18 (_numpy.protocols): ``__array_ufunc__(ufunc, method, inputs, kwargs)``,
# ``__array_function__(func, types, args, kwargs)``; ``call_on_host(func, args, kwargs)``
# (``func`` run on host views, written arrays marked changed, results wrapped); and
# ``host_call()``, the object that unwraps one call's arguments into host views.
array_ufunc: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any] = _unregistered(
    "_numpy.protocols"
)
array_function: Callable[[Any, Any, Any, Any], Any] = _unregistered("_numpy.protocols")
call_on_host: Callable[[Callable[..., Any], tuple[Any, ...], dict[str, Any]], Any] = _unregistered(
    "_numpy.protocols"
)
host_call: Callable[[], Any] = _unregistered("_numpy.protocols")
# ``call_method(array, name, args, kwargs)``: ``array.<name>(*args, **kwargs)`` run as
# ndarray's method on the host copy (what the forwarded methods do).
call_method: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any] = _unregistered(
    "_numpy.protocols"
)
# The same two protocols for the intents (``In(a)``, ``Out(a)``, ``InOut(a)``): the call with
# each intent replaced by its SmartArray.
intent_array_ufunc: Callable[[Any, str, tuple[Any, ...], dict[str, Any]], Any] = _unregistered(
    "_numpy.protocols"
)
intent_array_function: Callable[[Any, Any, Any, Any], Any] = _unregistered("_numpy.protocols")

# Host fast paths (_numpy.fastpath): an array's read-only host view if reading it needs no
# copy, wait or lock, else None.
readable_host: Callable[[Any], Any] = _unregistered("_numpy.fastpath")

# ``a.flat`` (_numpy.flatiter): the iterator, and ``a.flat = value``; ``iter(a)`` of a 1-d array.
flat: Callable[[Any], Any] = _unregistered("_numpy.flatiter")
iterate: Callable[[Any], Iterator[Any]] = _unregistered("_numpy.flatiter")  # iter(a), 1-d
assign_flat: Callable[[Any, Any], None] = _unregistered("_numpy.flatiter")

# numpy's in-place shuffles (_numpy.shuffle): ``len(a)`` notes the array; ``a[i]`` while it
# is shuffled returns a copy (``shuffled_read(array, key, caller_frame)``, or NOT_SHUFFLING).
note_length: Callable[[Any], None] = _unregistered("_numpy.shuffle")
shuffled_read: Callable[[Any, int, Any], Any] = _unregistered("_numpy.shuffle")

# Pickling (_numpy.pickling): ``__reduce__``.
reduce: Callable[[Any], tuple[Any, ...]] = _unregistered("_numpy.pickling")

# --- Numba (smartarray._numba) ----------------------------------------------------------------

# Numba types (_numba.types): the Numba type of an array (``_numba_type_``), given whether it
# is read-only.
numba_type: Callable[[Any, bool], Any] = _unregistered("_numba.types")

# --- CUDA (smartarray._cuda) and the intents -----------------------------------------------

# CUDA kernel arguments (_cuda.arguments): the device array a launch gets for a bare
# SmartArray (intent inferred), and for ``In``/``Out``/``InOut(array)`` (intent given), each
# called with ``(array, [intent,] retr, stream)``; and ``__cuda_array_interface__`` (the
# device copy made current and marked changed).
bare_kernel_argument: Callable[[Any, list[Any], Any], Any] = _unregistered("_cuda.arguments")
kernel_argument: Callable[[Any, str, list[Any], Any], Any] = _unregistered("_cuda.arguments")
cuda_array_interface: Callable[[Any], dict[str, Any]] = _unregistered("_cuda.arguments")

# Intents (smartarray._intents): ``smartarray.In(array)``, for ``SmartArray.readonly()``.
read_only_intent: Callable[[Any], Any] = _unregistered("_intents")

# --- interop (smartarray._interop) -----------------------------------------------------------

# DLPack (_interop.dlpack): ``__dlpack__(stream, max_version, dl_device, copy)``,
# ``__dlpack_device__()``, and what ``SmartArray(obj)`` reads a producer ``obj`` as:
# ``('host', ndarray)``, ``('gpu', interface holder)``, or None for a non-producer.
dlpack_export: Callable[[Any, Any, Any, Any, Any], Any] = _unregistered("_interop.dlpack")
dlpack_device: Callable[[Any], tuple[int, int]] = _unregistered("_interop.dlpack")
dlpack_source: Callable[[Any], tuple[str, Any] | None] = _unregistered("_interop.dlpack")

REGISTERED_BY = {
    "construct": "_numpy.construct",
    "array_ufunc": "_numpy.protocols",
    "array_function": "_numpy.protocols",
    "call_on_host": "_numpy.protocols",
    "host_call": "_numpy.protocols",
    "call_method": "_numpy.protocols",
    "intent_array_ufunc": "_numpy.protocols",
    "intent_array_function": "_numpy.protocols",
    "readable_host": "_numpy.fastpath",
    "flat": "_numpy.flatiter",
    "iterate": "_numpy.flatiter",
    "assign_flat": "_numpy.flatiter",
    "note_length": "_numpy.shuffle",
    "shuffled_read": "_numpy.shuffle",
    "reduce": "_numpy.pickling",
    "numba_type": "_numba.types",
    "bare_kernel_argument": "_cuda.arguments",
    "kernel_argument": "_cuda.arguments",
    "cuda_array_interface": "_cuda.arguments",
    "read_only_intent": "_intents",
    "dlpack_export": "_interop.dlpack",
    "dlpack_device": "_interop.dlpack",
    "dlpack_source": "_interop.dlpack",
}
"""Each hook and the module that registers it (checked by the tests)."""
