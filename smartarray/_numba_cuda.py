"""CUDA glue: SmartArrays as ``@cuda.jit`` kernel arguments and CUDA-array-interface exports.

numba.cuda prepares each array argument of a launch by calling ``wrap_arg(value).to_device(
retr, stream)``, and ``wrap_arg`` returns the value itself when it is an ``ArgHint``. SmartArray
and the intents ``In``/``Out``/``InOut`` are ``ArgHint`` subclasses, so every launch calls
:func:`kernel_argument`, which

1. makes the device copy current on the launch's stream (``Out``: allocates without copying),
2. for writing intents, treats the device copy as stale until the launch has been enqueued
   (so a launch that fails leaves the host copy authoritative),
3. appends a callback to ``retr``, run by numba.cuda right after the launch, that marks the
   device copy changed (``InOut``/``Out``) and records an event on the stream,
4. returns what the launch needs: the device array (simulator) or numba-cuda's strided
   memory view of it (hardware, through ``numba.cuda.In(devary).to_device``).
"""

from __future__ import annotations

from typing import Any

from . import _backend, _memory
from ._array import SmartArray


def kernel_argument(array: SmartArray, intent: str, retr: list, stream: Any) -> Any:
    """Prepare ``array`` as a kernel argument with the given intent (see module docstring)."""
    alloc = array._alloc
    # ``retr`` is the one list numba-cuda passes for all arguments of this launch: it
    # identifies the launch, so an allocation passed twice is uploaded at most once, and the
    # launch's arguments are pinned against eviction by the device memory budget.
    pins = _memory.launch_pins(retr)
    try:
        if intent != "in":
            array._check_writeable()
        whole = array._covers_allocation()
        with alloc.lock:
            pins.add(alloc)
            if intent == "out":
                device = array._device_view(
                    stream, prepare=lambda s: alloc.prepare_device_write(whole, s, launch=retr)
                )
            else:
                device = array._device_view(
                    stream, prepare=lambda s: alloc.ensure_device(s, launch=retr)
                )
            if intent != "in":
                alloc.begin_device_write(launch=retr)
    except BaseException:
        pins.abort()  # no launch: every argument prepared so far gets its flags back
        raise

    def after_launch() -> None:
        if intent == "in":
            alloc.device_read(stream)
        else:
            alloc.device_written(stream)

    retr.append(after_launch)
    if _backend.is_simulator():
        if intent == "in":
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            readonly = device._ary.view()
            readonly.flags.writeable = False
            return FakeCUDAArray(readonly)
        return device
    return _backend.cuda().In(device).to_device(retr, stream)


def export_cuda_array_interface(array: SmartArray) -> dict[str, Any]:
    """``__cuda_array_interface__`` of ``array``'s device copy (made current, marked changed)."""
    if _backend.tier() != "gpu":
        raise AttributeError(
            "__cuda_array_interface__ needs a real CUDA GPU "
            f"(this process runs in the {_backend.tier()} tier)"
        )
    alloc = array._alloc
    with alloc.lock:
        device = array._device_view()
        alloc.device_exported()
        if array._writeable:
            alloc.mark_changed("gpu")
        interface = dict(device.__cuda_array_interface__)
    if not array._writeable:
        interface["data"] = (interface["data"][0], True)
    return interface
