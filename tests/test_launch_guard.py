"""Kernel launches with SmartArrays where there is no CUDA (issue #11, item 11).

numba-cuda's ``CudaSupportError`` ("CUDA driver library cannot be found") becomes
``smartarray.DeviceUnavailableError`` naming ``NUMBA_ENABLE_CUDASIM=1``; data and flags stay
as they were, and launches without SmartArrays keep numba-cuda's own error.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import inc

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
    assert "NUMBA_ENABLE_CUDASIM=1" in str(error.value)
    assert "before numba is first imported" in str(error.value)
    assert isinstance(error.value.__cause__, CudaSupportError)
    assert stats.count == 0
    assert a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))


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
