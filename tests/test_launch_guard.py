"""Kernel launches with SmartArrays where there is no CUDA (issue #11, item 11).

numba-cuda's ``CudaSupportError`` ("CUDA driver library cannot be found") becomes one
``smartarray.DeviceUnavailableError`` (no chained cause: issue 24) naming the kernel and
``NUMBA_ENABLE_CUDASIM=1``, or saying that the variable was set too late; data and flags stay
as they were, and launches without SmartArrays keep numba-cuda's own error.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from helpers import inc, run_python

import smartarray as sa
from smartarray._cuda import launch_guard as _launch_guard


@pytest.mark.hostonly
@pytest.mark.parametrize(
    "wrap", [lambda a: a, sa.In, sa.InOut, sa.Out], ids=["bare", "In", "InOut", "Out"]
)
def test_launch_without_cuda_raises_device_unavailable(wrap: object) -> None:
    from numba.cuda.cudadrv.error import CudaSupportError

    a = sa.asarray(np.arange(4.0))
    with sa.track_transfers() as stats, pytest.raises(sa.DeviceUnavailableError) as error:
        inc[1, 4](wrap(a))  # type: ignore[operator]
    message = str(error.value)
    assert message.startswith("cannot launch CUDA kernel 'inc' with SmartArray arguments")
    assert "NUMBA_ENABLE_CUDASIM=1" in message
    assert "before numba is first imported" in message
    assert "too late" not in message
    # numba-cuda's reason, on one line, without its "Error at driver init:" frame and ":"
    assert "\n" not in message and ":)" not in message and "driver init" not in message
    # One clean exception: no cause, no context shown (numba-cuda's traceback is noise).
    assert error.value.__cause__ is None and error.value.__suppress_context__
    assert not isinstance(error.value, CudaSupportError)
    assert stats.count == 0
    assert a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))


@pytest.mark.hostonly
def test_launch_says_when_the_simulator_was_requested_too_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # numba was imported by this process long ago: setting the variable now is too late.
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    a = sa.asarray(np.arange(4.0))
    with pytest.raises(sa.DeviceUnavailableError) as error:
        inc[1, 4](a)
    message = str(error.value)
    assert "NUMBA_ENABLE_CUDASIM is set in os.environ, but too late" in message
    assert "before any import of numba or smartarray" in message
    assert "NUMBA_ENABLE_CUDASIM=1 python script.py" in message
    assert error.value.__cause__ is None and error.value.__suppress_context__
    # The same for other device requests.
    with pytest.raises(sa.DeviceUnavailableError, match="but too late"):
        sa.zeros(4, where="gpu")
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")  # asks for no simulator: nothing to say
    with pytest.raises(sa.DeviceUnavailableError) as error:
        inc[1, 4](a)
    assert "too late" not in str(error.value)


_LAUNCH = """
    import numpy as np
    from numba import cuda
    import smartarray as sa
    {late}

    @cuda.jit
    def scale(x, k):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= k

    scale[1, 256](sa.SmartArray(np.arange(256.0)), 1.5)
"""


@pytest.mark.hostonly
@pytest.mark.parametrize("late", [False, True], ids=["no-simulator", "simulator-set-too-late"])
def test_launch_without_cuda_prints_one_clean_traceback(late: bool) -> None:
    setting = "import os; os.environ['NUMBA_ENABLE_CUDASIM'] = '1'" if late else ""
    script = textwrap.dedent(_LAUNCH.format(late=setting))
    proc = run_python(["-W", "ignore", "-c", script], simulator=False, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr
    assert err.count("Traceback") == 1, err
    assert "During handling" not in err and "direct cause" not in err, err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("smartarray.DeviceUnavailableError: cannot launch CUDA")  # issue 31
    assert "'scale'" in last and "NUMBA_ENABLE_CUDASIM=1 python script.py" in last
    assert ("but too late" in last) is late
    assert len(err.splitlines()) < 20, err


@pytest.mark.hostonly
def test_launch_of_plain_arrays_keeps_numba_cudas_error() -> None:
    from numba.cuda.cudadrv.error import CudaSupportError

    with pytest.raises(CudaSupportError) as error:
        inc[1, 4](np.arange(4.0))
    assert not isinstance(error.value, sa.DeviceUnavailableError)


def test_guard_is_installed_once() -> None:
    assert _launch_guard.install_launch_guard() is (sa.tier() != "simulator")
    assert _launch_guard.install_launch_guard() is (sa.tier() != "simulator")


@pytest.mark.device
def test_launches_still_work_with_a_device() -> None:
    a = sa.asarray(np.arange(4.0))
    inc[1, 4](a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) + 1)


@pytest.mark.hostonly
def test_to_device_without_cuda_raises_device_unavailable() -> None:
    # issue 31: SmartArray.to_device() is public (see test_cuda_kernels.py for what it does)
    a = sa.SmartArray(np.arange(4.0))
    with pytest.raises(sa.DeviceUnavailableError, match="NUMBA_ENABLE_CUDASIM=1"):
        a.to_device()
    assert a.location == "host" and np.array_equal(a, np.arange(4.0))


# issue 31: a CUDA ufunc called with SmartArrays without CUDA gave a 21-line traceback through
# smartarray's internals; it now gives the kernels' one-line DeviceUnavailableError.
_UFUNC = """
    import numpy as np
    from numba import vectorize
    import smartarray as sa

    @vectorize(target="cuda")  # no signatures: compiled at the first call
    def twice(x):
        return 2 * x

    twice(sa.SmartArray(np.arange(4.0)))
"""


@pytest.mark.hostonly
def test_cuda_ufunc_without_cuda_prints_one_clean_traceback() -> None:
    proc = run_python(["-W", "ignore", "-c", textwrap.dedent(_UFUNC)], simulator=False, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    err = proc.stderr
    assert err.count("Traceback") == 1 and "During handling" not in err, err
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("smartarray.DeviceUnavailableError: cannot call CUDA ufunc 'twice'")
    assert "NUMBA_ENABLE_CUDASIM=1 python script.py" in last
    assert len(err.splitlines()) < 15, err


@pytest.mark.hostonly
def test_cuda_ufunc_calls_without_cuda_change_nothing() -> None:
    from numba import vectorize

    @vectorize(target="cuda")
    def twice(x):  # type: ignore[no-untyped-def]
        return 2 * x

    a, out = sa.SmartArray(np.arange(4.0)), sa.zeros(4)
    calls = (
        lambda: twice(a),
        lambda: twice(a, out=out),
        lambda: twice(np.arange(4.0), out=sa.Out(out)),
        lambda: twice.reduce(a),
        lambda: sa.cuda_ufunc(twice)(a),
    )
    for call in calls:
        with sa.track_transfers() as stats, pytest.raises(sa.DeviceUnavailableError) as error:
            call()
        assert str(error.value).startswith("cannot call CUDA ufunc 'twice': this process has no")
        assert "NUMBA_ENABLE_CUDASIM=1" in str(error.value) and stats.count == 0
    assert a.location == "host" and np.array_equal(a, np.arange(4.0))
    assert np.array_equal(out, np.zeros(4))


@pytest.mark.hostonly
def test_cuda_ufunc_with_signatures_fails_at_decoration_as_documented() -> None:
    # Documented (docs/getting-started.md): eager signatures compile at decoration, before
    # any SmartArray is involved, so smartarray cannot tell that error from numba-cuda's.
    from numba import vectorize
    from numba.cuda.cudadrv.error import CudaSupportError

    with pytest.raises(CudaSupportError):

        @vectorize(["float64(float64)"], target="cuda")
        def twice(x):  # type: ignore[no-untyped-def]  # pragma: no cover - never compiled
            return 2 * x
