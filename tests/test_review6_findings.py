"""Findings of the sixth review (views computed without a template, 2026-11-28).

Each test fails on the commit that made views of any array by direct layout computation
(48ea769) and passes since: numpy's result for an empty field or ``.imag`` view of an empty
array, ``transpose`` given its axes as an array, and a slice step beyond a C integer.
"""

from __future__ import annotations

import numpy as np
import pytest

from smartarray import SmartArray


@pytest.mark.parametrize(
    ("make", "view"),
    [
        (lambda: np.zeros(0, [("a", "i4"), ("b", "f8")]), lambda a: a["b"]),
        (lambda: np.zeros(0, complex), lambda a: a.imag),
        (lambda: np.zeros((0, 3), complex), lambda a: a.imag.T),
    ],
)
def test_empty_views_at_an_offset_of_an_empty_array(make, view) -> None:  # type: ignore[no-untyped-def]
    expected = view(make())
    got = view(SmartArray(make()))
    assert got.shape == expected.shape and got.dtype == expected.dtype


@pytest.mark.parametrize("axes", [np.array([1, 0]), [1, 0], (1, 0)])
def test_transpose_with_axes_given_as_one_sequence(axes: object) -> None:
    plain = np.arange(6.0).reshape(2, 3)
    got = SmartArray(plain.copy()).transpose(axes)
    expected = plain.transpose(axes)  # type: ignore[arg-type]
    assert got.shape == expected.shape and got.strides == expected.strides
    np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize(
    ("shape", "key"),
    [((2, 3), (slice(None), slice(None, None, 2**62))), ((6,), slice(None, None, -(2**62)))],
)
def test_a_step_beyond_a_c_integer_gives_numpys_view(shape: tuple[int, ...], key: object) -> None:
    plain = np.arange(6.0).reshape(shape)
    expected = plain[key]  # type: ignore[index]
    got = SmartArray(plain.copy())[key]
    assert got.shape == expected.shape and got.strides == expected.strides
    np.testing.assert_array_equal(np.asarray(got), expected)
