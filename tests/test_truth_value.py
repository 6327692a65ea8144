"""``bool()`` of a SmartArray never copies data just to refuse it (issue #11, item 7).

One element (0-d included): the element's truth, as numpy (the value is read like
``a.item()``). Otherwise numpy's ``ValueError``, without reading data; numba-cuda's own code
(written for device arrays) gets ``len(a) > 0``.
"""

from __future__ import annotations

import contextlib
import types
from unittest import mock

import numpy as np
import pytest

import smartarray as sa


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (np.array(0.0), False),
        (np.array(2.5), True),
        (np.array([0]), False),
        (np.array([[3]]), True),
    ],
)
def test_truth_value_of_one_element(data: np.ndarray, expected: bool) -> None:
    a = sa.asarray(data)
    assert bool(a) is expected is bool(data)
    assert (not a) is (not expected)


@pytest.mark.parametrize("shape", [(5,), (2, 3), (0,), (0, 3), (3, 0)])
def test_other_arrays_raise_numpys_error_without_reading(shape: tuple[int, ...]) -> None:
    a = sa.zeros(shape)
    with pytest.raises(ValueError) as numpy_error:
        bool(np.zeros(shape))
    with (
        mock.patch.object(sa.SmartArray, "_host_view", side_effect=AssertionError("read")),
        pytest.raises(ValueError, match="ambiguous") as error,
    ):
        bool(a)
    assert str(error.value).startswith(str(numpy_error.value))
    assert "out is None" in str(error.value)


@pytest.mark.device
def test_device_only_truth_copies_nothing_unless_one_element() -> None:
    a = sa.zeros((4, 4), where="gpu")
    a.mark_changed("gpu")  # current on the device only
    with sa.no_transfers():
        for array in (a, a[0], a[:0]):
            with pytest.raises(ValueError, match="ambiguous"):
                bool(array)
    assert a.location == "gpu"
    one = sa.full(1, 3.0, where="gpu")
    one.mark_changed("gpu")
    with sa.track_transfers() as stats:
        assert bool(one)
    assert (stats.h2d_count, stats.d2h_count) == (0, 1)
    assert one.location == "both"
    made = sa.full(1, 3.0, where="gpu")  # current on both sides: filled on the host, no copy
    with sa.track_transfers() as stats:
        assert bool(made)
    assert (stats.h2d_count, stats.d2h_count) == (0, 0)
    assert made.location == "both"


@pytest.mark.device
def test_numba_cuda_transpose_with_a_smartarray_output() -> None:
    # numba-cuda's transpose(a, b) allocates a new output when ``not b``.
    from numba.cuda.kernels import transpose as transpose_module

    patch: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if sa.tier() == "simulator":  # the simulator's driver has no device to ask
        device = types.SimpleNamespace(MAX_THREADS_PER_BLOCK=16)
        driver = types.SimpleNamespace(get_device=lambda: device)
        patch = mock.patch.object(transpose_module, "driver", driver)
    a = sa.asarray(np.arange(6.0).reshape(2, 3))
    b = sa.zeros((3, 2))
    with patch, sa.track_transfers() as stats:
        result = transpose_module.transpose(a, b)
    assert result is b
    # a uploaded; b's zeros are made on the device where the kernel first uses them
    assert (stats.h2d_count, stats.d2h_count) == (1, 0)
    np.testing.assert_array_equal(np.asarray(b), np.arange(6.0).reshape(2, 3).T)
