"""CUDA glue: SmartArrays as ``@cuda.jit`` kernel arguments and CUDA-array-interface exports.

numba.cuda prepares each array argument of a launch by calling ``wrap_arg(value).to_device(
retr, stream)``, and ``wrap_arg`` returns the value itself when it is an ``ArgHint``. SmartArray
and the intents ``In``/``Out``/``InOut`` are ``ArgHint`` subclasses, so every launch calls
:func:`kernel_argument`, which

1. makes the device copy current on the launch's stream (``Out``: allocates without copying),
2. for writing intents, treats the device copy as stale until the launch has been enqueued
   (so a launch that fails leaves the host copy authoritative),
3. appends a callback to ``retr``, run by numba.cuda right after the launch, that marks the
   device copy changed (``InOut``/``Out``) and records an event on the stream; for a written
   array with a live host export (a kept ``np.asarray(a)``), the launch's pins, last in
   ``retr``, then download it (:mod:`smartarray._core.host_exports`),
4. returns what the launch needs: the device array (simulator) or numba-cuda's strided
   memory view of it (hardware, what ``numba.cuda.In(devary).to_device`` gives).

A chain of kernels over device-resident arrays takes a shorter path (:func:`_resident_argument`):
with nothing to copy, order or mark, the argument is only pinned and handed over.

numba-cuda's own hints wrapped around a SmartArray (``numba.cuda.In(a)``, ``Out``, ``InOut``)
go through :func:`kernel_argument` too, with their intent (:func:`install_argument_hint_hooks`):
left alone, numba-cuda would read the SmartArray through DLPack (which exports the host copy
while it is current) or the CUDA Array Interface, with no intent.
"""

from __future__ import annotations

from typing import Any

from .. import _hooks
from .._array import SmartArray
from .._core import backend as _backend
from .._core import host_exports as _host_exports
from .._core import memory as _memory
from .._core.memory import LaunchPins as _LaunchPins
from .._intents import read_only_target_error
from .launch import _local, bare_intent


def kernel_argument(
    array: SmartArray, intent: str, retr: list, stream: Any, hint: str | None = None
) -> Any:
    """Prepare ``array`` as a kernel argument with the given intent (see module docstring).

    A writing intent of a read-only array raises numpy's "assignment destination is
    read-only", or, for an explicit ``hint`` (``'numba.cuda.InOut()'``), the error naming it
    and the fix; nothing is prepared then (earlier arguments get their flags back).
    """
    alloc = array._alloc
    if intent != "out":
        writes = intent != "in"
        if not writes or array._writeable:
            # The steady state (see bare_kernel_argument, which repeats these lines inline).
            if type(stream) is int:
                default = stream == 0
            elif stream is getattr(_local, "stream", None):
                default = True
            else:
                default = _backend.is_default_stream(stream)
            if default:
                pins = retr[-1] if retr else None
                if type(pins) is not _LaunchPins:
                    pins = _memory.launch_pins(retr)
                work = getattr(_local, "work", None)
                if work is None:
                    work = _backend.is_gpu_default_stream(stream)
                value = alloc.launch_value(
                    (array._offset, array._shape, array._strides, array._dtype, writes),
                    writes,
                    pins,
                    work,
                )
                if value is not None:
                    return value
                value = _resident_argument(array, intent, retr, stream)
                if value is not None:
                    return value
    # ``retr`` is the one list numba-cuda passes for all arguments of this launch: it
    # identifies the launch, so an allocation passed twice is uploaded at most once, and the
    # launch's arguments are pinned against eviction by the device memory budget.
    pins = _memory.launch_pins(retr)
    try:
        if intent != "in":
            if hint is not None and not array._writeable:
                raise read_only_target_error(array, hint)
            array._check_writeable()
        # Only the bytes of the argument's view are made current, and marked written.
        span = array._span()
        overwrite = array._overwrites_span()
        with alloc.lock:
            pins.add(alloc)
            if intent == "out":
                device = array._device_view(
                    stream,
                    prepare=lambda s, e: alloc.prepare_device_write(overwrite, s, retr, e),
                )
            else:
                device = array._device_view(
                    stream, prepare=lambda s, e: alloc.ensure_device(s, retr, e)
                )
            if intent != "in":
                alloc.begin_device_write(retr, span)
    except BaseException:
        pins.abort()  # no launch: every argument prepared so far gets its flags back
        raise

    def after_launch() -> None:
        if intent == "in":
            alloc.device_read(stream)
        else:
            alloc.device_written(stream, span, pins.token)  # (``retr``: no closure cell for it)
            if alloc.host_exports:  # kept host views (np.asarray): downloaded after the pins
                _host_exports.after_launch_write(pins, alloc, stream)

    retr.append(after_launch)
    # numba-cuda calls ``retr``'s items in order after the launch: the pins go last, once
    # every argument's flags are set (an output overwritten whole from the host state looks
    # clean until then, and another thread's eviction could drop it with its results).
    retr.remove(pins)
    retr.append(pins)
    return _launch_value(device, intent)


def _resident_argument(array: SmartArray, intent: str, retr: list, stream: Any) -> Any:
    """The launch value for the steady state of a kernel chain, or None for the general path
    (call on the default stream, for ``'in'`` or ``'inout'``).

    When the device copy is current and is the only one a kernel can change (state DEVICE,
    or BOTH for ``In``), with no earlier device work to order after (no event pending), no
    launch in preparation, no kept host export and no mapped memory, a launch changes no
    flag: the argument is only pinned against eviction and handed over
    (``Allocation.launch_value``, which checks all that and caches the launch value with the
    device view, so that later launches find it in one call). Everything else takes the
    general path in :func:`kernel_argument`, which does the same when these conditions
    hold, in more steps.
    """
    writes = intent != "in"
    if writes and not array._writeable:
        return None  # (the general path raises the error)
    return array._alloc.launch_value(
        (array._offset, array._shape, array._strides, array._dtype, writes),
        writes,
        _memory.launch_pins(retr),
        _backend.is_gpu_default_stream(stream),
        _launch_value_inout if writes else _launch_value_in,
    )


def _launch_value(device: Any, intent: str) -> Any:
    """What numba-cuda's launch takes for ``device``: the device array (simulator; read-only
    for ``In``, so that a missed write raises), or its strided memory view (hardware)."""
    if _backend.is_simulator():
        if intent == "in":
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

            readonly = device._ary.view()
            readonly.flags.writeable = False
            return FakeCUDAArray(readonly)
        return device
    view = getattr(device, "_strided_memory_view_shim", None)  # (what numba.cuda.In gives)
    return view if view is not None else _backend.cuda().In(device).to_device([], 0)


def _launch_value_in(device: Any) -> Any:
    return _launch_value(device, "in")


def _launch_value_inout(device: Any) -> Any:
    return _launch_value(device, "inout")


_HINT_HOOK_MARK = "_smartarray_hint_hook"


def install_argument_hint_hooks() -> None:
    """Make ``numba.cuda.In/Out/InOut`` around a SmartArray act as smartarray's intents.

    Wraps ``to_device`` of numba-cuda's hint classes (the simulator's under the simulator);
    hints around anything else are untouched. Idempotent.
    """
    from numba.cuda import args

    intents = ((args.InOut, "inout"), (args.Out, "out"), (args.In, "in"))

    def hook(original: Any) -> Any:
        def to_device(self: Any, retr: list, stream: Any = 0) -> Any:
            value = self.value
            if isinstance(value, SmartArray):
                cls, intent = next(item for item in intents if isinstance(self, item[0]))
                hint = f"numba.cuda.{cls.__name__}()"
                return kernel_argument(value, intent, retr, stream, hint)
            return original(self, retr, stream)

        setattr(to_device, _HINT_HOOK_MARK, True)
        to_device.__doc__ = original.__doc__
        return to_device

    for cls, _ in intents:
        original = cls.to_device
        if not getattr(original, _HINT_HOOK_MARK, False):
            cls.to_device = hook(original)  # type: ignore[method-assign]


def bare_kernel_argument(array: SmartArray, retr: list | None = None, stream: Any = 0) -> Any:
    """Kernel-argument hook called by numba.cuda at launch (``SmartArray.to_device``).

    Called by the user (``a.to_device()``, no ``retr``), it returns ``a.get('gpu', stream)``:
    see :meth:`SmartArray.to_device`.

    The intent is inferred from the kernel's code: ``In`` when no argument of the launch may
    write this array's memory, else ``InOut`` (see :mod:`smartarray._cuda.launch`); then the
    array is prepared as :func:`kernel_argument` does.

    Notes
    -----
    Installed as ``SmartArray.to_device`` (see the end of this module): numba-cuda calls it
    for every bare SmartArray argument of every launch, so the steady state of a kernel
    chain is handled here inline: the intent (:func:`bare_intent`, from the launch's
    read-only allocations), the stream (the launch hook records the launch's stream when it
    is the default one, and whether work on it is asynchronous default-stream work) and the
    launch's pins (kept last in ``retr``), then one call of the core,
    ``Allocation.launch_value``, which returns the launch value cached with the device view,
    pinned. Anything else goes to :func:`kernel_argument`.
    """
    if retr is None:  # a.to_device() by the user, not numba-cuda preparing a launch
        return array.get("gpu", stream=stream)
    alloc = array._alloc
    readonly = getattr(_local, "readonly", None)
    if readonly is not None and alloc in readonly:
        intent = "in"
    elif readonly is None or array._writeable:
        intent = "inout"
    else:
        intent = bare_intent(array)
    writes = intent == "inout"
    if not writes or array._writeable:
        if type(stream) is int:
            default = stream == 0
        elif stream is getattr(_local, "stream", None):
            default = True
        else:
            default = _backend.is_default_stream(stream)
        if default:
            if not retr:  # the first argument of the launch: its pins
                pins = _LaunchPins(retr)
                retr.append(pins)
            else:
                pins = retr[-1]
                if type(pins) is not _LaunchPins:
                    pins = _memory.launch_pins(retr)
            work = getattr(_local, "work", None)
            if work is None:
                work = _backend.is_gpu_default_stream(stream)
            value = alloc.launch_value(
                (array._offset, array._shape, array._strides, array._dtype, writes),
                writes,
                pins,
                work,
            )
            if value is not None:
                return value
    return kernel_argument(array, intent, retr, stream)


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
        if array._writeable:  # (only the exported view's bytes: made current above)
            alloc.mark_changed("gpu", array._span())
        interface = dict(device.__cuda_array_interface__)
    if not array._writeable:
        interface["data"] = (interface["data"][0], True)
    return interface


_hooks.bare_kernel_argument = bare_kernel_argument
# numba-cuda calls ``to_device`` of every bare SmartArray argument of every launch: the class's
# own method forwards to the slot above; installed directly, the steady state runs one Python
# frame less per argument (as the numpy face installs its fast operators on the class).
SmartArray.to_device = bare_kernel_argument  # type: ignore[method-assign,assignment]
_hooks.kernel_argument = kernel_argument
_hooks.cuda_array_interface = export_cuda_array_interface
