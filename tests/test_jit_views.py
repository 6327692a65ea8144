"""Views Numba makes without a ``parent`` come back as views of the argument (issue #11, 4).

``np.broadcast_to``, ``as_strided`` and ``sliding_window_view`` inside ``@njit`` return
arrays whose Numba ``parent`` is null; they still point into the argument's memory and must
come back as SmartArray views sharing its coherence state (read-only where numpy's are), not
as detached, writable copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import inc
from numba import njit
from numba.core.errors import TypingError
from numpy.lib.stride_tricks import as_strided, sliding_window_view

import smartarray as sa
from smartarray import SmartArray


@njit
def broadcast(a: Any) -> Any:
    return np.broadcast_to(a, (3, 4))


@njit
def strided(a: Any) -> Any:
    return as_strided(a, shape=(3, 2), strides=(8, 8))


@njit
def windows(a: Any) -> Any:
    return sliding_window_view(a, 2)


@njit
def broadcast_of_slice(a: Any) -> Any:
    return np.broadcast_to(a[1:3], (2, 2))


CASES = {
    "broadcast_to": (broadcast, lambda x: np.broadcast_to(x, (3, 4))),
    "as_strided": (strided, lambda x: as_strided(x, shape=(3, 2), strides=(8, 8))),
    "sliding_window_view": (windows, lambda x: sliding_window_view(x, 2)),
    "broadcast of a slice": (broadcast_of_slice, lambda x: np.broadcast_to(x[1:3], (2, 2))),
}


@pytest.mark.parametrize("case", list(CASES))
def test_parentless_views_are_views_of_the_argument(case: str) -> None:
    function, reference = CASES[case]
    a = sa.asarray(np.arange(4.0))
    result = function(a)
    expected = reference(np.arange(4.0))
    assert isinstance(result, SmartArray)
    assert result.base is a
    assert result.shape == expected.shape and result.strides == expected.strides
    np.testing.assert_array_equal(np.asarray(result), expected)
    a[1] = 10.0  # later writes to the argument show through the view
    assert 10.0 in np.asarray(result)


def test_broadcast_result_is_read_only_like_numpy() -> None:
    a = sa.asarray(np.arange(4.0))
    result = broadcast(a)
    assert not result.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        result[0, 0] = 1.0
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))


def test_writes_through_an_as_strided_view_reach_the_argument() -> None:
    a = sa.asarray(np.arange(4.0))
    result = strided(a)
    assert result.flags.writeable  # as numpy's as_strided (writeable=True by default)
    result[2, 1] = 42.0  # element 3 of a
    assert a[3] == 42.0


@pytest.mark.device
def test_view_follows_device_writes_to_the_argument() -> None:
    a = sa.asarray(np.arange(4.0))
    result = broadcast(a)
    inc[1, 4](a)  # the device copy changes; the view shares the allocation
    with sa.track_transfers() as stats:
        values = np.asarray(result).copy()
    np.testing.assert_array_equal(values, np.broadcast_to(np.arange(4.0) + 1, (3, 4)))
    assert (stats.h2d_count, stats.d2h_count) == (0, 1)


# --- np.frombuffer (found by numba's test_array_methods.test_np_frombuffer with the shim) ----


@njit
def bytes_of(a: Any) -> Any:
    return np.frombuffer(a, dtype=np.uint8)


@njit
def int32_window(a: Any) -> Any:
    return np.frombuffer(a, dtype=np.int32, count=3, offset=1)


def test_frombuffer_of_a_smartarray_is_a_view_of_it() -> None:
    a = sa.asarray(np.arange(4, dtype=np.int32))
    result = bytes_of(a)
    assert isinstance(result, SmartArray)
    assert result.base is a and result.dtype == np.uint8 and result.shape == (16,)
    np.testing.assert_array_equal(np.asarray(result), np.arange(4, dtype=np.int32).view(np.uint8))
    result[4] = 7  # the low byte of a[1] (little-endian machines)
    assert a[1] == np.frombuffer(np.asarray(result).tobytes(), np.int32)[1]
    a[3] = 0  # and the argument's writes show through the view
    assert not np.asarray(result)[12:].any()


def test_frombuffer_count_offset_and_errors_are_numbas() -> None:
    values = np.arange(12, dtype=np.int64)
    expected = int32_window(values)  # Numba's own np.frombuffer, on an ndarray
    assert type(expected) is np.ndarray
    result = int32_window(sa.asarray(values))
    assert isinstance(result, SmartArray)
    np.testing.assert_array_equal(np.asarray(result), expected)
    with pytest.raises(ValueError, match="buffer is smaller than requested size"):
        njit(lambda b: np.frombuffer(b, dtype=np.int32, count=100))(sa.asarray(values))
    strided_view = sa.asarray(values)[::2]
    with pytest.raises(TypingError, match="must be buffer-like"):
        bytes_of(strided_view)  # (Numba's error for non-contiguous buffers)


def test_frombuffer_of_a_read_only_argument_is_read_only() -> None:
    a = sa.asarray(np.arange(4, dtype=np.int32))
    result = bytes_of(sa.In(a))
    assert isinstance(result, SmartArray) and not result.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        result[0] = 1
    np.testing.assert_array_equal(np.asarray(a), np.arange(4, dtype=np.int32))


@pytest.mark.device
def test_frombuffer_view_follows_device_writes_and_marks_its_own() -> None:
    a = sa.asarray(np.zeros(4, dtype=np.int8))
    result = bytes_of(a)
    inc[1, 4](a)  # a kernel writes the argument after the view was made
    with sa.track_transfers() as stats:
        seen = np.asarray(result).copy()  # not the stale host bytes
    np.testing.assert_array_equal(seen, np.ones(4, dtype=np.uint8))
    assert (stats.h2d_count, stats.d2h_count) == (0, 1)
    result[2] = 40  # a host write through the view makes the device copy stale
    with sa.track_transfers() as stats:
        inc[1, 4](a)
    assert (stats.h2d_count, stats.d2h_count) == (1, 0)
    np.testing.assert_array_equal(np.asarray(a), [2, 2, 41, 2])
