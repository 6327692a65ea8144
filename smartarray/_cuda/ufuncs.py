"""CUDA ufuncs (``@vectorize``/``@guvectorize`` with ``target='cuda'``) over SmartArrays.

Left to itself, numba-cuda detects device arrays in a ufunc call only through
``__cuda_array_interface__``; that interface cannot tell an input from an output, so it would
have to mark every SmartArray argument changed on the device, and results would come back as
Numba device arrays.

:class:`SmartUFunc` handles SmartArrays precisely instead: inputs are made current on the
device (on the call's stream) and stay valid on both sides, outputs (``out=``, or positional
outputs of a gufunc) are written in place on the device and marked changed there (and
downloaded at once if a host view of them is kept: :mod:`smartarray._core.host_exports`), and
a result the ufunc allocates comes back as a device-resident SmartArray.
:func:`install_dispatch_hooks` (run when smartarray is imported) routes every call of a plain
CUDA ufunc, gufunc or ``ufunc.reduce`` that involves a SmartArray or an intent through it, so
user code needs no wrapper; calls without SmartArrays go straight to numba-cuda, untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import SmartArray
from .._core import backend as _backend
from .._core import host_exports as _host_exports
from .._core import memory as _memory
from .._core.errors import DeviceUnavailableError
from .._intents import In, Out, _Intent
from .._numpy.creation import empty

try:  # (numba-cuda's kernel-argument hint; the simulator's under the simulator)
    from numba.cuda.args import ArgHint as _ArgHint
except ImportError:  # pragma: no cover - numba-cuda is a hard dependency

    class _ArgHint:  # type: ignore[no-redef]
        def __init__(self, value: Any) -> None:
            self.value = value


def _check_intents(inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> None:
    # Before anything is copied, so a misuse changes nothing.
    if any(isinstance(value, Out) for value in inputs):
        raise TypeError("smartarray.Out() marks an output; pass it as out=, not as an input")
    if any(isinstance(value, In) for value in outputs):
        raise TypeError("smartarray.In() marks a read-only input; it cannot be an output")


def _bare(value: Any) -> Any:
    """The SmartArray inside an intent; any other value as it is."""
    return value.array if isinstance(value, _Intent) else value


def _check_elementwise_layouts(values: tuple[Any, ...]) -> None:
    # numba's CUDA ufuncs ravel multi-dimensional arguments; a non-C-contiguous device array
    # cannot be ravelled in place, so numba would go through the host behind the ledger's
    # back (and, for an output, write a temporary instead of the array itself).
    for array in values:
        if isinstance(array, SmartArray) and array.ndim > 1 and not array.flags.c_contiguous:
            raise ValueError(
                f"CUDA ufuncs need C-contiguous multi-dimensional arguments; got a "
                f"{array.shape} array with strides {array.strides}: pass a.copy(order='C')"
            )


def _check_broadcasting(inputs: tuple[Any, ...]) -> None:
    # numba broadcasts a device input with 0-strides, and a multi-dimensional broadcast result
    # cannot be ravelled on the device: numba would copy it through the host, outside the
    # ledger. Refuse that for SmartArrays before anything is copied.
    try:
        shape = np.broadcast_shapes(*(np.shape(value) for value in inputs))
    except ValueError:
        return  # numba's own error, raised before any copy
    if len(shape) < 2:
        return
    for array in inputs:
        if isinstance(array, SmartArray) and array.shape != shape:
            raise ValueError(
                f"CUDA ufuncs broadcast a {array.shape} device argument to {shape} through the "
                f"host; pass one of shape {shape} instead, e.g. "
                f"smartarray.SmartArray(np.broadcast_to(x, {shape}).copy())"
            )


def _unwrap_input(
    value: Any, stream: Any, touched: list[SmartArray], launch: _memory.LaunchPins
) -> Any:
    if isinstance(value, SmartArray):
        alloc = value._alloc
        touched.append(value)
        with alloc.lock:
            launch.add(alloc)  # not evicted for a later argument of this call
            resident = _resident(value, stream, writes=False)
            if resident is not None:
                return resident
            return value._device_view(
                stream, prepare=lambda s, e: alloc.ensure_device(s, launch, e)
            )
    return value


def _resident(array: SmartArray, stream: Any, writes: bool) -> Any:
    """The device view of ``array`` if the call can use it as it is (nothing to copy or
    order: ``Allocation.resident_view``), else None (call with the lock held)."""
    if not _backend.is_default_stream(stream):
        return None
    return array._alloc.resident_view(
        writes, array._offset, array._shape, array._strides, array._dtype
    )


def _unwrap_output(
    value: Any, read: bool, stream: Any, written: list[SmartArray], launch: _memory.LaunchPins
) -> Any:
    """The device array for an output; its old contents are uploaded only if ``read``."""
    if isinstance(value, SmartArray):
        alloc = value._alloc
        overwrite = value._overwrites_span() and not read
        with alloc.lock:
            launch.add(alloc)
            device = _resident(value, stream, writes=True)
            if device is None:
                device = value._device_view(
                    stream,
                    prepare=lambda s, e: alloc.prepare_device_write(overwrite, s, launch, e),
                )
            # (resident too: in flight until device_written, so that host writes of other
            # threads into the output's extent meanwhile are recorded)
            alloc.begin_device_write(launch, value._span())
        written.append(value)
        return device
    return value


def _is_device_array(value: Any) -> bool:
    """A Numba device array (not a SmartArray): numba-cuda then keeps results on the device."""
    if isinstance(value, (SmartArray, _Intent, np.ndarray)) or value is None:
        return False
    return bool(_backend.cuda().cudadrv.devicearray.is_cuda_ndarray(value))


_OUTPUT_READS = "_smartarray_output_reads"


def gufunc_output_reads(ufunc: Any, nin: int, nout: int) -> tuple[bool, ...]:
    """Per output of a CUDA gufunc: may its kernel read the output's old contents?

    Every kernel of the gufunc (one per signature) is analysed (:mod:`smartarray._numba.access`):
    an output is read-write unless no kernel provably reads it. Cached on ``ufunc``.
    Objects that are not numba-cuda gufuncs (no ``kernelmap``) read all their outputs.
    """
    kernelmap = getattr(ufunc, "kernelmap", None)
    # (keyed by the number of kernels too: a signature added later is analysed as well)
    key = (nout, len(kernelmap) if isinstance(kernelmap, dict) else -1)
    cached = getattr(ufunc, "__dict__", {}).get(_OUTPUT_READS)
    if cached is not None and cached[0] == key:
        return cached[1]
    if not isinstance(kernelmap, dict) or not kernelmap:
        reads = (True,) * nout
    else:
        from .._numba import access as _access

        accesses = [_access.analyse(kernel) for _, kernel in kernelmap.values()]
        reads = tuple(any(access.reads_at(nin + j) for access in accesses) for j in range(nout))
    if hasattr(ufunc, "__dict__"):
        ufunc.__dict__[_OUTPUT_READS] = (key, reads)
    return reads


# --- what numba-cuda would work out on every call, worked out once per signature --------

_SIGNATURES = "_smartarray_signatures"


class _Signature:
    """What numba-cuda resolves for a call of a CUDA ufunc (``@vectorize``) with given input
    types: the result dtype and the kernel (``CUDAUFuncMechanism``'s ``get_function``), and,
    on a GPU, from the first launch on, the kernel specialised for 1-d C-contiguous arrays
    of those types and its threads per block (what ``ForAll`` computes on every call: the
    specialisation's argument types and an occupancy query)."""

    __slots__ = ("kernel", "resty", "specialized", "threads")

    def __init__(self, resty: np.dtype, kernel: Any) -> None:
        self.resty = resty
        self.kernel = kernel
        self.specialized: Any = None
        self.threads = 0


def _type_key(value: Any) -> Any:
    """An input's part of the signature key: its dtype, or for a scalar ``('scalar', the dtype
    numba-cuda gives it)``."""
    if isinstance(value, (int, float, complex, np.number)):
        return ("scalar", np.asarray(value).dtype)
    return value.dtype


def _stand_in(value: Any) -> Any:
    """What numba-cuda's signature resolution is given for an input: scalars as they are,
    arrays as a one-element host array of their dtype (it reads only their dtypes; a
    SmartArray itself would be read through numpy, which copies it to the host)."""
    if isinstance(value, (int, float, complex, np.number)):
        return value
    return np.empty(1, dtype=value.dtype)


def _signature(ufunc: Any, inputs: tuple[Any, ...] | list[Any]) -> _Signature:
    """The :class:`_Signature` of ``ufunc`` (a ``CUDAUFuncDispatcher``) for ``inputs``,
    resolved by numba-cuda's own code the first time (its ``TypeError`` for a signature the
    ufunc lacks propagates) and cached on the ufunc by the inputs' types."""
    key = tuple(map(_type_key, inputs))
    cache = ufunc.__dict__.get(_SIGNATURES)
    if cache is None:
        cache = ufunc.__dict__[_SIGNATURES] = {}
    signature = cache.get(key)
    if signature is None:
        from numba.cuda.vectorizers import CUDAUFuncMechanism

        mechanism = CUDAUFuncMechanism(ufunc.functions, list(map(_stand_in, inputs)))
        mechanism.get_arguments()
        resty, kernel = mechanism.get_function()
        signature = cache[key] = _Signature(np.dtype(resty), kernel)
    return signature


def _is_ufunc_dispatcher(ufunc: Any) -> bool:
    """True for numba-cuda's ``@vectorize(target='cuda')`` dispatcher."""
    from numba.cuda.vectorizers import CUDAUFuncDispatcher

    return isinstance(ufunc, CUDAUFuncDispatcher)


def _allocate_result(ufunc: Any, inputs: tuple[Any, ...], stream: Any) -> SmartArray | None:
    """The result array of a ``@vectorize`` call without ``out=``, allocated by smartarray
    (current on the device, nothing copied), or None to let numba-cuda allocate it.

    Only where numba-cuda would keep its result on the device with SmartArray inputs: no
    Numba device array among the inputs (numba-cuda's rule then returns device arrays),
    and a result of at least one dimension. Its dtype is what numba-cuda resolves for the
    inputs (:func:`_signature`; its errors propagate), its shape the inputs' broadcast
    shape (numba-cuda raises its own error for shapes that do not broadcast)."""
    if not _is_ufunc_dispatcher(ufunc):
        return None
    shapes: list[tuple[int, ...]] = []
    for value in inputs:
        if isinstance(value, (int, float, complex, np.number)):
            shapes.append((1,))  # (numba-cuda makes a scalar a 1-element array)
        elif isinstance(value, (SmartArray, np.ndarray)):
            shapes.append(value.shape)
        else:
            return None  # a device array, or something numba-cuda reads its own way
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        return None
    if not shape:
        return None
    signature = _signature(ufunc, inputs)
    return empty(shape, dtype=signature.resty, where="gpu", stream=stream)


class _Ready(_ArgHint):  # type: ignore[misc]
    """A kernel argument ready for numba-cuda's launch: ``to_device`` returns it as it is."""

    def to_device(self, retr: list, stream: Any = 0) -> Any:
        return self.value


def _c_contiguous(array: Any) -> bool:
    step = array.dtype.itemsize
    for extent, stride in zip(reversed(array.shape), reversed(array.strides), strict=True):
        if extent > 1 and stride != step:
            return False
        step *= extent
    return True


def _launch_elementwise(ufunc: Any, inputs: list[Any], out: Any, stream: Any) -> bool:
    """Run a ``@vectorize`` call on device arrays as numba-cuda would, with what it
    recomputes on every call taken from the :class:`_Signature` cache; False (nothing done)
    where the call needs numba-cuda's own path.

    That is a call whose inputs are device arrays of the output's shape (no scalar, no
    broadcast), every one C-contiguous, with a non-empty output of the dtype numba-cuda
    resolves. numba-cuda's ``CUDAUFuncMechanism.call`` would resolve the signature, ravel
    the arrays and launch the kernel through ``ForAll``, which specialises it for the
    arguments' types and asks the driver for its threads per block on every call; here the
    signature, the specialisation and the block size are cached, and on a GPU the arrays
    are handed to the launch ready (their strided memory views), skipping numba-cuda's
    per-array argument conversion. The kernel and the launch configuration are the same.
    """
    size = out.size
    if not size or not _is_ufunc_dispatcher(ufunc) or not _backend.is_device_array(out):
        return False
    shape = out.shape
    for array in inputs:
        if not _backend.is_device_array(array) or array.shape != shape:
            return False
    arrays = [*inputs, out]
    for array in arrays:
        if not _c_contiguous(array):
            return False
    try:
        signature = _signature(ufunc, inputs)
    except TypeError:
        return False  # (numba-cuda raises it again, its own way)
    if out.dtype != signature.resty:
        return False
    if len(shape) != 1:
        arrays = [array.ravel() for array in arrays]
    if _backend.tier() != "gpu":
        signature.kernel.forall(size, stream=stream)(*arrays)  # (numba-cuda's own launch)
        return True
    ready = []
    for array in arrays:
        view = getattr(array, "_strided_memory_view_shim", None)  # (a DeviceNDArray's)
        if view is None:
            return False
        ready.append(_Ready(view))
    specialized = signature.specialized
    if specialized is None:
        from numba.cuda.dispatcher import ForAll

        specialized = signature.kernel.specialize(*arrays)
        forall = ForAll(signature.kernel, size, tpb=0, stream=stream, sharedmem=0)
        signature.threads = forall._compute_thread_per_block(specialized)
        signature.specialized = specialized
    threads = signature.threads
    specialized[(size + threads - 1) // threads, threads, stream, 0](*ready)
    return True


class SmartUFunc:
    """A CUDA ufunc or gufunc that keeps SmartArray arguments on the device.

    Parameters
    ----------
    ufunc
        The object returned by ``numba.vectorize(..., target='cuda')`` or
        ``numba.guvectorize(..., target='cuda')``.
    """

    def __init__(self, ufunc: Callable[..., Any]) -> None:
        self.ufunc = ufunc
        engine = getattr(ufunc, "engine", None)
        # gufuncs take their outputs positionally after nin inputs; ufuncs only via out=.
        self.nin: int | None = engine.nin if engine is not None else None
        self.__name__ = getattr(ufunc, "__name__", type(ufunc).__name__)
        self.__doc__ = getattr(ufunc, "__doc__", None)

    def _require_device(self) -> None:
        """Without CUDA (the host-only tier), one :class:`~smartarray.DeviceUnavailableError`
        naming this ufunc and the fix, as a kernel launch gives, before anything is touched
        (numba-cuda's own error would come from deep inside, after smartarray's)."""
        if _backend.tier() == "host-only":
            raise DeviceUnavailableError(
                f"cannot call CUDA ufunc {self.__name__!r}: this process has no CUDA device. "
                + _backend.device_fix()
            )

    def __call__(self, *args: Any, out: Any = None, stream: Any = 0, **kwargs: Any) -> Any:
        self._require_device()
        nin = len(args) if self.nin is None else self.nin
        inputs, positional_outputs = args[:nin], args[nin:]
        if positional_outputs and out is not None:
            raise ValueError(  # numba-cuda's own exception and wording
                "cannot specify argument 'out' as both positional and keyword; pass outputs "
                "either positionally or as out=, not both"
            )
        outputs: tuple[Any, ...]
        if positional_outputs:
            outputs = positional_outputs
        elif out is None:
            outputs = ()
        else:
            outputs = out if isinstance(out, tuple) else (out,)
        _check_intents(inputs, outputs)
        # Past that check, intents only matter for outputs: does the call read them?
        # InOut: yes. Out: no. Bare: @vectorize never reads its output; a gufunc's kernels
        # are analysed.
        if self.nin is None:
            inferred: tuple[bool, ...] = (False,) * len(outputs)
        else:
            inferred = gufunc_output_reads(self.ufunc, self.nin, len(outputs))
        output_reads = [
            value.intent == "inout" if isinstance(value, _Intent) else reads
            for value, reads in zip(outputs, inferred, strict=True)
        ]
        inputs, outputs = tuple(map(_bare, inputs)), tuple(map(_bare, outputs))
        if self.nin is None:
            _check_elementwise_layouts((*inputs, *outputs))
            _check_broadcasting(inputs)
        for target in outputs:
            if isinstance(target, SmartArray):
                target._check_writeable()
        read: list[SmartArray] = []
        written: list[SmartArray] = []
        # One token per call, as for a kernel launch: an allocation behind several arguments
        # (``g(a, p[:2], p[2:])``) is uploaded at most once, and the call's arguments are
        # pinned against eviction by the device memory budget until the call is made.
        launch = _memory.LaunchPins()
        try:
            device_inputs = [_unwrap_input(a, stream, read, launch) for a in inputs]
            if not outputs and read and self.nin is None:
                # A result to allocate: smartarray does it (from the device memory pool on a
                # GPU), once the inputs are pinned, and passes it as the output.
                result_array = _allocate_result(self.ufunc, inputs, stream)
                if result_array is not None:
                    outputs, output_reads = (result_array,), [False]
            device_outputs = [
                _unwrap_output(o, reads, stream, written, launch)
                for o, reads in zip(outputs, output_reads, strict=True)
            ]
        except BaseException:
            launch.abort()  # nothing ran: every argument gets its flags back
            raise
        try:
            if positional_outputs or (device_outputs and self.nin is not None):
                # (a gufunc's several outputs go positionally: numba-cuda's out= takes one)
                result = self.ufunc(*device_inputs, *device_outputs, stream=stream, **kwargs)
            elif device_outputs:
                target = device_outputs[0] if len(device_outputs) == 1 else tuple(device_outputs)
                if not (
                    len(device_outputs) == 1
                    and not kwargs
                    and _launch_elementwise(self.ufunc, device_inputs, target, stream)
                ):
                    result = self.ufunc(*device_inputs, out=target, stream=stream, **kwargs)
            else:
                result = self.ufunc(*device_inputs, stream=stream, **kwargs)
        except BaseException:
            launch.fail()  # (its kernels may have run: written outputs stay HOST)
            raise
        try:
            for array in written:
                array._alloc.device_written(stream, array._span(), launch)
        except BaseException:
            launch.fail()  # (the outputs not labelled yet are no longer in flight)
            raise
        for array in read:
            array._alloc.device_read(stream)
        # Unpinned only now: an output overwritten whole from the host state looks clean (its
        # device copy stale) until device_written, and could be dropped with its results.
        launch()
        for array in written:  # kept host views (np.asarray) of outputs: downloaded into
            _host_exports.refresh(array._alloc, stream)
        if outputs:
            return outputs[0] if len(outputs) == 1 else outputs
        if not read or any(_is_device_array(a) for a in inputs):
            # numba-cuda's rule: with a device array among the inputs, results are device
            # arrays (code written for numba-cuda calls .copy_to_host() on them).
            return result
        results = tuple(
            SmartArray(r, copy=False) for r in (result if isinstance(result, tuple) else (result,))
        )
        for array in results:  # written on the device by this call, on its stream
            array._alloc.device_written(stream)
            # Allocated by numba-cuda for this call: charged to the device memory budget
            # (which may evict other device copies to get back under the limit).
            array._alloc.own_device()
        return results if isinstance(result, tuple) else results[0]

    def reduce(self, array: Any, stream: Any = 0) -> Any:
        """``ufunc.reduce`` over a 1-d array, reading a SmartArray's device copy.

        numba-cuda's ``reduce`` overwrites the device array it is given with partial results,
        so a SmartArray's device copy is first copied on the device (no bus traffic) and the
        reduction runs on that scratch copy. The array's device copy is made current (one
        upload if it is stale) and stays valid, as does its host copy. The result is a host
        scalar, as with numba-cuda's own ``reduce``.
        """
        self._require_device()
        if isinstance(array, Out):
            raise TypeError("smartarray.Out() marks an output; reduce only reads its argument")
        value = _bare(array)
        if not isinstance(value, SmartArray):
            return self.ufunc.reduce(value, stream=stream)  # type: ignore[attr-defined]
        if value.ndim != 1 or not value.flags.c_contiguous:
            raise ValueError(
                f"reduce needs a contiguous 1-d array; got shape {value.shape} with strides "
                f"{value.strides}: pass a.ravel() or a.copy()"
            )
        if value.size == 0:
            raise TypeError("Reduction on an empty array.")  # numba-cuda's own message
        if value.size == 1:  # numba-cuda returns the element itself; read it where current
            return value[0]
        alloc = value._alloc
        # The scratch copy counts against the device memory limit while the reduction runs.
        with _memory.temporary_device(
            value.shape, value.dtype, alloc.label, (alloc,), stream or 0
        ) as scratch:
            with alloc.lock:
                device = value._device_view(stream)
                _backend.copy_d2d(device, scratch, stream)
                alloc.device_read(stream)
            return self.ufunc.reduce(scratch, stream=stream)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"smartarray.cuda_ufunc({self.__name__})"


def cuda_ufunc(ufunc: Callable[..., Any]) -> SmartUFunc:
    """Wrap a CUDA ufunc/gufunc so SmartArray arguments and results stay on the device.

    Examples
    --------
    >>> @smartarray.cuda_ufunc                                          # doctest: +SKIP
    ... @numba.vectorize(["float32(float32, float32)"], target="cuda")
    ... def add(a, b):
    ...     return a + b
    >>> z = add(x, y)            # x, y SmartArrays: z is a device-resident SmartArray
    """
    return SmartUFunc(ufunc)


# --- plain CUDA ufuncs: the dispatch hooks ----------------------------------------------

_HOOK_MARK = "__smartarray_hook__"


def _involves_smartarrays(values: tuple[Any, ...]) -> bool:
    for value in values:
        if isinstance(value, tuple):
            if _involves_smartarrays(value):
                return True
        elif isinstance(value, (SmartArray, _Intent)):
            return True
    return False


_SMART_UFUNC = "_smartarray_smart_ufunc"


def _smart(ufunc: Any) -> SmartUFunc:
    """The :class:`SmartUFunc` of a numba-cuda ufunc dispatcher (made once, kept on it)."""
    smart = ufunc.__dict__.get(_SMART_UFUNC)
    if smart is None:
        smart = ufunc.__dict__[_SMART_UFUNC] = SmartUFunc(ufunc)
    return smart  # type: ignore[no-any-return]


def _hooked_call(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _involves_smartarrays((*args, kwargs.get("out"))):
            return _smart(self)(*args, **kwargs)
        return original(self, *args, **kwargs)

    setattr(__call__, _HOOK_MARK, True)
    return __call__


def _hooked_reduce(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def reduce(self: Any, arg: Any, stream: Any = 0) -> Any:
        if _involves_smartarrays((arg,)):
            return _smart(self).reduce(arg, stream=stream)
        return original(self, arg, stream=stream)

    setattr(reduce, _HOOK_MARK, True)
    return reduce


def install_dispatch_hooks() -> bool:
    """Route calls of plain numba-cuda ufuncs that involve SmartArrays through SmartUFunc.

    Wraps ``__call__`` of numba-cuda's ``CUDAUFuncDispatcher`` (``@vectorize``) and
    ``CUDAGeneralizedUFunc`` (``@guvectorize``), and ``CUDAUFuncDispatcher.reduce``. Calls
    without a SmartArray or intent among their arguments (or in ``out=``) are passed on
    unchanged. Idempotent; returns False if numba-cuda's ufunc module cannot be imported.
    """
    try:
        from numba.cuda import vectorizers
    except ImportError:  # pragma: no cover - numba-cuda is a hard dependency
        return False
    targets = [
        (vectorizers.CUDAUFuncDispatcher, "__call__", _hooked_call),
        (vectorizers.CUDAGeneralizedUFunc, "__call__", _hooked_call),
        (vectorizers.CUDAUFuncDispatcher, "reduce", _hooked_reduce),
    ]
    for cls, name, hook in targets:
        original = getattr(cls, name)
        if not getattr(original, _HOOK_MARK, False):
            setattr(cls, name, hook(original))
    return True
