"""Kernel launches with SmartArrays on a machine without CUDA raise DeviceUnavailableError.

numba-cuda compiles a kernel on its first launch and asks the CUDA driver for the current
device while doing so, before any argument hook of ours runs; without a driver that fails
with numba-cuda's ``CudaSupportError`` ("CUDA driver library cannot be found"), which does
not say that the simulator is the way out. ``CUDADispatcher.call`` (every
``kernel[grid, block](...)`` launch) is wrapped: when a launch with a SmartArray (or an
In/Out/InOut intent) among its arguments fails so and smartarray's tier is host-only, the
error becomes one :class:`~smartarray.DeviceUnavailableError` (raised ``from None``: no chained
traceback through numba-cuda's driver code) that names the kernel, numba-cuda's reason on one
line and the fix: ``NUMBA_ENABLE_CUDASIM=1`` set before numba is first imported, or, when the
variable is in ``os.environ`` but was set after numba was imported, that it came too late.
Other launches and other errors pass unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._core import backend as _backend
from .._core.errors import DeviceUnavailableError

_HOOK_MARK = "_smartarray_launch_guard"


def _involves_smartarray(args: Any) -> bool:
    from .._array import SmartArray
    from .._intents import _Intent

    return any(isinstance(arg, (SmartArray, _Intent)) for arg in args)


def _reason(error: BaseException) -> str:
    """numba-cuda's message on one line, without its ``Error at driver init:`` frame.

    (numba-cuda words a missing driver as ``"Error at driver init: \\n\\nCUDA driver library
    cannot be found.\\nEnsure ...\\n:"``.)
    """
    text = " ".join(str(error).split())
    text = text.removeprefix("Error at driver init:").strip()
    return text.rstrip(":").strip().rstrip(".") or type(error).__name__


def _guarded(original: Callable[..., Any], support_error: type[BaseException]) -> Any:
    @functools.wraps(original)
    def call(self: Any, args: Any, launch_config: Any) -> Any:
        try:
            return original(self, args, launch_config)
        except support_error as error:
            if _involves_smartarray(args) and _backend.tier() == "host-only":
                name = getattr(getattr(self, "py_func", None), "__name__", "?")
                raise DeviceUnavailableError(
                    f"cannot launch CUDA kernel {name!r} with SmartArray arguments: this "
                    f"process has no CUDA device (numba-cuda: {_reason(error)}). "
                    + _backend.device_fix()
                ) from None  # numba-cuda's reason is in the message; its traceback is noise
            raise

    setattr(call, _HOOK_MARK, True)
    return call


def install_launch_guard() -> bool:
    """Wrap numba-cuda's ``CUDADispatcher.call`` (idempotent).

    Returns False where there is nothing to wrap (the simulator has its own dispatcher and
    needs no driver).
    """
    try:
        from numba.cuda.cudadrv.error import CudaSupportError
        from numba.cuda.dispatcher import CUDADispatcher
    except ImportError:  # pragma: no cover - numba-cuda is a hard dependency
        return False
    original = getattr(CUDADispatcher, "call", None)
    if original is None or getattr(original, _HOOK_MARK, False):
        return original is not None
    CUDADispatcher.call = _guarded(original, CudaSupportError)  # type: ignore[method-assign]
    return True
