"""Shared test helpers (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import cuda

if TYPE_CHECKING:
    from smartarray import TransferStats

ROOT = Path(__file__).resolve().parents[1]


def run_python(
    args: list[str], *, simulator: bool, timeout: int
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` from the repository root, in the simulator tier or without it."""
    env = dict(os.environ)
    # This checkout's smartarray, whatever an installed (editable) copy points at.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def run_in_threads(worker: Callable[[int], None], count: int) -> None:
    """Run ``worker(0) … worker(count - 1)`` in threads at once; re-raise any failure here."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(k: int) -> None:
        try:
            barrier.wait()
            worker(k)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def libc_memset() -> Any:
    """The C library's ``memset(ptr, value, count)`` as a typed ctypes function (Numba calls
    it from ``@njit`` code with ``a.ctypes.data``), or None where it cannot be loaded."""
    try:
        memset = ctypes.CDLL(None).memset
    except (OSError, AttributeError, TypeError):  # pragma: no cover - no C library by that name
        return None
    memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    memset.restype = ctypes.c_void_p
    return memset


def counts(stats: TransferStats) -> tuple[int, int]:
    """(uploads, downloads) a ledger recorded."""
    return stats.h2d_count, stats.d2h_count


# --- kernels shared by the tests (module level: the simulator cannot run closures) --------


@cuda.jit
def inc(a):  # type: ignore[no-untyped-def]
    """``a += 1``, one thread per element of a 1-d array."""
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


# --- numba-cuda's own CUDA ufunc dispatchers, around hand-written kernels ---------------
#
# numba-cuda's dispatchers (the code that runs a CUDA ufunc call) accept any kernel shaped like
# the ones @vectorize/@guvectorize(target='cuda') generate. Tests build them here around
# hand-written kernels, so that they can pick the kernels; on a GPU they run unchanged. (The
# decorators themselves work in the simulator too: smartarray._cuda.simulator_ufuncs.)

F8 = np.dtype(np.float64)


@cuda.jit
def fill(a, v):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] = v


@cuda.jit
def add_scalar(a, v):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] += v


@cuda.jit
def copy_into(dst, src):  # type: ignore[no-untyped-def]  # reads only src (inferred In)
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@cuda.jit
def vectorized_add(a, b, out):  # type: ignore[no-untyped-def]  # what @vectorize makes of a + b
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def _gufunc_double_rows(a, out):  # type: ignore[no-untyped-def]  # a "(n)->(n)" gufunc kernel
    i = cuda.grid(1)
    if i < min(a.shape[0], out.shape[0]):
        for j in range(a.shape[1]):
            out[i, j] = 2 * a[i, j]


@cuda.jit
def _gufunc_double_and_triple_rows(a, twice, thrice):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)  # a "(n)->(n),(n)" gufunc kernel
    if i < min(a.shape[0], twice.shape[0], thrice.shape[0]):
        for j in range(a.shape[1]):
            twice[i, j] = 2 * a[i, j]
            thrice[i, j] = 3 * a[i, j]


def _add(a: Any, b: Any) -> Any:
    return a + b


def _double(a: Any, out: Any) -> None:
    out[:] = 2 * a


def numba_add_ufunc() -> Any:
    """numba-cuda's ``CUDAUFuncDispatcher`` for ``float64 + float64``."""
    from numba.cuda.vectorizers import CUDAUFuncDispatcher

    return CUDAUFuncDispatcher({(F8, F8): (F8, vectorized_add)}, _add)


def numba_double_rows_gufunc() -> Any:
    """numba-cuda's ``CUDAGeneralizedUFunc`` for ``(n)->(n)``: ``out = 2 * a``, row-wise."""
    from numba.cuda.deviceufunc import GUFuncEngine
    from numba.cuda.vectorizers import CUDAGeneralizedUFunc

    engine = GUFuncEngine.from_signature("(n)->(n)")
    return CUDAGeneralizedUFunc({(F8,): ((F8,), _gufunc_double_rows)}, engine, _double)


def numba_double_and_triple_rows_gufunc() -> Any:
    """numba-cuda's ``CUDAGeneralizedUFunc`` with two outputs, ``(n)->(n),(n)``."""
    from numba.cuda.deviceufunc import GUFuncEngine
    from numba.cuda.vectorizers import CUDAGeneralizedUFunc

    engine = GUFuncEngine.from_signature("(n)->(n),(n)")
    kernels = {(F8,): ((F8, F8), _gufunc_double_and_triple_rows)}
    return CUDAGeneralizedUFunc(kernels, engine, _double)


@contextlib.contextmanager
def numba_ufunc_support() -> Iterator[None]:
    """Checks that numba-cuda's CUDA ufunc dispatch has what it needs, then runs the block.

    In the simulator that is ``cuda.is_cuda_array`` and the broadcasting methods of
    ``CUDAGeneralizedUFunc``, which smartarray supplies when it is imported
    (``smartarray._cuda.simulator_ufuncs``; this was a test-only shim before); on a GPU
    numba-cuda has them.
    """
    assert hasattr(cuda, "is_cuda_array"), "smartarray did not install its simulator support"
    yield


# --- bodies of real @guvectorize(target='cuda') gufuncs (built by the tests, in the device
# tiers) -----------------------------------------------------------------------------------

GUFUNC_SIGNATURE = (["void(float64[:], float64[:])"], "()->()")


def gufunc_multiply(val, out):  # type: ignore[no-untyped-def]
    """PISA's ``multiply``: reads its output (``out *= val``)."""
    out[0] *= val[0]


def gufunc_assign(val, out):  # type: ignore[no-untyped-def]
    """Writes its output without reading it (``out = val``)."""
    out[0] = val[0]


def build_gufunc(body: Callable[..., Any]) -> Any:
    """``@guvectorize(*GUFUNC_SIGNATURE, target='cuda')`` of ``body``."""
    from numba import guvectorize

    return guvectorize(*GUFUNC_SIGNATURE, target="cuda")(body)


def copies(stats: TransferStats) -> list[tuple[str, int, int]]:
    """``(direction, byte offset, bytes)`` of every copy a ``track_transfers()`` block recorded,
    in order (since issue 21 a copy may move only the stale byte ranges of an array)."""
    return [(r.direction, r.offset, r.nbytes) for r in stats.records]
