"""Regression tests for bugs found by using SmartArrays as an adversarial NumPy + Numba user.

Each test names the path that lost data, served stale data, or failed where an ndarray works.
Tests marked ``device`` need the CUDA simulator or a GPU (tier 2/3).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import inc
from numba import vectorize

import smartarray
from smartarray import SmartArray


@vectorize(["float64(float64)"])
def plus_one(x: float) -> float:
    return x + 1


@vectorize(["float64(float64, float64)"])
def plus(x: float, y: float) -> float:
    return x + y


# --- Numba CPU @vectorize (DUFunc) with outputs -----------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda f, a: f(a, out=a),
        lambda f, a: f(a, a),
        lambda f, a: f(a, out=(a,)),
    ],
    ids=["out=a", "positional", "out=(a,)"],
)
def test_cpu_vectorize_writes_a_smartarray_output(call: Any) -> None:
    # Numba's DUFunc hands __array_ufunc__ its arguments unnormalised (out=a, not out=(a,);
    # positional outputs as inputs): out=a was tested for truth (ValueError) and a positional
    # output was unwrapped read-only ("output array is read-only").
    a = SmartArray(np.arange(4.0))
    result = call(plus_one, a)
    assert result is a
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0, 4.0])


def test_cpu_vectorize_output_view_of_the_input_allocation() -> None:
    a = SmartArray(np.arange(6.0))
    reference = np.arange(6.0)
    plus(a[::2], 10.0, out=a[1::2])
    plus(reference[::2], 10.0, out=reference[1::2])
    np.testing.assert_array_equal(a, reference)
    result = plus(a, 1.0, out=a[::-1])
    plus(reference, 1.0, out=reference[::-1])
    assert isinstance(result, SmartArray)
    np.testing.assert_array_equal(a, reference)


def test_cpu_vectorize_bad_output_changes_nothing() -> None:
    a = SmartArray(np.arange(4.0))
    ints = SmartArray(np.arange(4))
    with pytest.raises(TypeError, match="both positionally and as out="):
        plus_one(a, a, out=a)
    with pytest.raises(TypeError, match="Cannot cast"):
        plus_one(a, out=ints)
    np.testing.assert_array_equal(a, np.arange(4.0))
    np.testing.assert_array_equal(ints, np.arange(4))


@pytest.mark.device
def test_cpu_vectorize_output_with_a_current_device_copy() -> None:
    a = SmartArray(np.arange(4.0))
    inc[1, 4](a)  # only the device copy is current
    with smartarray.track_transfers() as ledger:
        plus_one(a, out=a)  # host ufunc: one download, the device copy is then stale
        assert a.location == "host"
        inc[1, 4](a)  # one upload
        assert a.tolist() == [3.0, 4.0, 5.0, 6.0]  # one download
    assert (ledger.h2d_count, ledger.d2h_count) == (1, 2)
