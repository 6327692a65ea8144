"""numpy's random permutations and SmartArrays (issue #11, item 3).

``Generator.shuffle``/``np.random.shuffle`` would corrupt a 2-d SmartArray (numpy's generic
swap of views): they are refused before any data moves. ``permutation`` and ``permuted``
read through ``__array__`` and give numpy's results; ``x[...] = rng.permutation(x)`` is the
in-place shuffle, equal to ``rng.shuffle`` on an ndarray for the same seed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import smartarray as sa

SHAPES = [(7,), (5, 3), (4, 2, 3)]


def _data(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(float(np.prod(shape))).reshape(shape)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "shuffle",
    [
        lambda x: np.random.default_rng(3).shuffle(x),
        lambda x: np.random.default_rng(3).shuffle(x, axis=-1),
        lambda x: np.random.RandomState(3).shuffle(x),
        np.random.shuffle,
    ],
    ids=["Generator", "Generator-axis", "RandomState", "np.random.shuffle"],
)
def test_in_place_shuffle_is_refused_before_touching_data(
    shape: tuple[int, ...], shuffle: Callable[[Any], None]
) -> None:
    x = sa.asarray(_data(shape))
    with pytest.raises(UserWarning, match="shuffling a 'SmartArray'"):
        shuffle(x)
    np.testing.assert_array_equal(np.asarray(x), _data(shape))
    assert x.location == "host"


def test_refused_even_when_warnings_are_ignored() -> None:
    x = sa.asarray(_data((5, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UserWarning, match="SmartArray"):
            np.random.default_rng(0).shuffle(x)
    np.testing.assert_array_equal(np.asarray(x), _data((5, 3)))


@pytest.mark.parametrize("shape", SHAPES)
def test_permutation_assignment_equals_numpy_shuffle(shape: tuple[int, ...]) -> None:
    expected = _data(shape)
    np.random.default_rng(11).shuffle(expected)
    x = sa.asarray(_data(shape))
    x[...] = np.random.default_rng(11).permutation(x)
    np.testing.assert_array_equal(np.asarray(x), expected)
    # No rows duplicated: the same multiset of rows.
    assert sorted(map(tuple, np.asarray(x).reshape(shape[0], -1))) == sorted(
        map(tuple, _data(shape).reshape(shape[0], -1))
    )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("axis", [0, -1])
def test_permutation_and_permuted_match_numpy(shape: tuple[int, ...], axis: int) -> None:
    x = sa.asarray(_data(shape))
    for method in ("permutation", "permuted"):
        got = getattr(np.random.default_rng(5), method)(x, axis=axis)
        expected = getattr(np.random.default_rng(5), method)(_data(shape), axis=axis)
        np.testing.assert_array_equal(np.asarray(got), expected)
    np.testing.assert_array_equal(np.asarray(x), _data(shape))  # x itself untouched
    legacy = np.random.RandomState(5).permutation(x)
    np.testing.assert_array_equal(legacy, np.random.RandomState(5).permutation(_data(shape)))


@pytest.mark.device
def test_refused_shuffle_of_a_device_array_copies_nothing() -> None:
    x = sa.asarray(_data((6, 2)), where="gpu")
    x.get("gpu")
    x.mark_changed("gpu")
    with sa.no_transfers(), pytest.raises(UserWarning, match="SmartArray"):
        np.random.default_rng(0).shuffle(x)
    assert x.location == "gpu"
    np.testing.assert_array_equal(np.asarray(x), _data((6, 2)))
