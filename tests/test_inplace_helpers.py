"""Helpers that write through ``np.asarray(x)`` (issue #11, item 6).

``np.asarray(a)`` is a read-only view of a SmartArray's host copy, so such a helper fails
with numpy's read-only error, writing nothing and changing no flag; the two documented
fixes work with exact copy counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import inc

import smartarray as sa


def center_through_asarray(x: Any) -> None:
    x = np.asarray(x)
    x -= x.mean()


def center(x: Any) -> None:
    x -= x.mean()


def test_asarray_helper_fails_loudly_without_writing() -> None:
    a = sa.asarray(np.arange(4.0))
    with pytest.raises(ValueError, match="read-only"):
        center_through_asarray(a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))
    assert a.location == "host"


def test_helper_writing_through_the_smartarray_works() -> None:
    a = sa.asarray(np.arange(4.0))
    center(a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) - 1.5)
    plain = np.arange(4.0)
    center(plain)  # the same helper, unchanged, for ndarrays
    np.testing.assert_array_equal(plain, np.arange(4.0) - 1.5)


def test_get_host_and_mark_changed_fix() -> None:
    a = sa.asarray(np.arange(4.0))
    host = a.get("host")
    center_through_asarray(host)
    a.mark_changed("host")
    np.testing.assert_array_equal(np.asarray(a), np.arange(4.0) - 1.5)


@pytest.mark.device
def test_fixes_keep_the_device_copy_right() -> None:
    a = sa.asarray(np.arange(4.0))
    inc[1, 4](a)  # device copy current, host stale
    with sa.track_transfers() as failed, pytest.raises(ValueError, match="read-only"):
        center_through_asarray(a)
    assert (failed.h2d_count, failed.d2h_count) == (0, 1)  # np.asarray read the host copy
    assert a.location == "both"
    center(a)
    assert a.location == "host"
    with sa.track_transfers() as stats:
        inc[1, 4](a)
        result = np.asarray(a).copy()
    np.testing.assert_array_equal(result, np.arange(4.0) - 1.5 + 1)
    assert (stats.h2d_count, stats.d2h_count) == (1, 1)
