"""numpy's random permutations and SmartArrays (issue #11, item 3).

``Generator.shuffle``/``RandomState.shuffle``/``np.random.shuffle`` take numpy's generic swap
``x[i], x[j] = x[j], x[i]`` for a SmartArray; ``smartarray._numpy.shuffle`` makes it swap copies of
the items, so that a SmartArray of any shape ends in the order an ndarray gets from the same
generator state, with its validity flags kept right. ``permutation`` and ``permuted`` read
through ``__array__`` and give numpy's results.
"""

from __future__ import annotations

import random
import sys
import threading
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import smartarray as sa
from smartarray._core.coherence import Allocation

SHAPES = [(7,), (5, 3), (4, 2, 3), (1, 4), (2,), (0, 3)]


def _data(shape: tuple[int, ...]) -> np.ndarray:
    return np.arange(float(np.prod(shape))).reshape(shape)


def _generator(x: Any, seed: int) -> None:
    np.random.default_rng(seed).shuffle(x)


def _random_state(x: Any, seed: int) -> None:
    np.random.RandomState(seed).shuffle(x)


def _global(x: Any, seed: int) -> None:
    np.random.seed(seed)
    np.random.shuffle(x)


SHUFFLES = [_generator, _random_state, _global]
SHUFFLE_IDS = ["Generator", "RandomState", "np.random.shuffle"]


def _shuffled_ndarray(data: np.ndarray, shuffle: Callable[[Any, int], None], seed: int) -> Any:
    expected = data.copy()
    shuffle(expected, seed)
    return expected


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("shuffle", SHUFFLES, ids=SHUFFLE_IDS)
def test_shuffle_gives_the_order_of_an_ndarray(
    shape: tuple[int, ...], shuffle: Callable[[Any, int], None]
) -> None:
    x = sa.asarray(_data(shape))
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        shuffle(x, 3)
    assert shown == []  # numpy's "not a Sequence" warning is handled, not shown
    np.testing.assert_array_equal(np.asarray(x), _shuffled_ndarray(_data(shape), shuffle, 3))
    assert x._shuffle is None  # the mode ended with numpy's loop
    assert x.location == "host"


def test_rows_are_permuted_not_duplicated() -> None:
    x = sa.asarray(_data((50, 2)))
    np.random.default_rng(0).shuffle(x)
    assert sorted(map(tuple, np.asarray(x))) == sorted(map(tuple, _data((50, 2))))
    assert not np.array_equal(np.asarray(x), _data((50, 2)))


@pytest.mark.parametrize("shuffle", SHUFFLES, ids=SHUFFLE_IDS)
@pytest.mark.parametrize("shape", [(6,), (5, 2)])
def test_structured_items_are_swapped_as_copies(
    shuffle: Callable[[Any, int], None], shape: tuple[int, ...]
) -> None:
    # A 1-d structured array's items (numpy.void) are views of it, like rows.
    data = np.zeros(shape, dtype=[("a", "i4"), ("b", "f8")])
    data["a"] = np.arange(data.size).reshape(shape)
    data["b"] = -data["a"]
    x = sa.asarray(data)
    shuffle(x, 4)
    np.testing.assert_array_equal(np.asarray(x), _shuffled_ndarray(data, shuffle, 4))


@pytest.mark.parametrize(
    "select",
    [
        lambda a: a[:, ::2],
        lambda a: a[::-1],
        lambda a: a.T,
        lambda a: a[1:5],
        lambda a: a[::2, 1:],
    ],
    ids=["columns-stepped", "rows-reversed", "transposed", "row-slice", "both-stepped"],
)
@pytest.mark.parametrize("shuffle", SHUFFLES, ids=SHUFFLE_IDS)
def test_views_shuffle_only_their_items(
    select: Callable[[Any], Any], shuffle: Callable[[Any, int], None]
) -> None:
    base = sa.asarray(_data((7, 4)))
    expected = _data((7, 4))
    shuffle(select(base), 8)
    shuffle(select(expected), 8)
    np.testing.assert_array_equal(np.asarray(base), expected)


def test_a_slice_of_a_bigger_array_leaves_the_rest_alone() -> None:
    x = sa.asarray(_data((10, 3)))
    np.random.default_rng(1).shuffle(x[3:8])
    after = np.asarray(x)
    np.testing.assert_array_equal(after[:3], _data((10, 3))[:3])
    np.testing.assert_array_equal(after[8:], _data((10, 3))[8:])
    assert sorted(map(tuple, after[3:8])) == sorted(map(tuple, _data((10, 3))[3:8]))


def test_indexing_right_after_a_shuffle_gives_views_again() -> None:
    x = sa.asarray(_data((5, 3)))
    np.random.default_rng(0).shuffle(x); row = x[0]  # fmt: skip  # noqa: E702
    assert isinstance(row, sa.SmartArray)
    row[...] = -1.0  # a view: the write lands in x
    np.testing.assert_array_equal(np.asarray(x)[0], [-1.0, -1.0, -1.0])
    rows = [x[i] for i in range(5)]
    rows[4][1] = 99.0
    assert np.asarray(x)[4, 1] == 99.0


def test_axis_other_than_0_is_numpys_error_with_data_unchanged() -> None:
    x = sa.asarray(_data((4, 3)))
    with pytest.raises(NotImplementedError, match="only supported on ndarray"):
        np.random.default_rng(0).shuffle(x, axis=1)
    np.testing.assert_array_equal(np.asarray(x), _data((4, 3)))
    # The mode numpy's warning started ends at the next read: an ordinary view.
    row = x[1]
    assert isinstance(row, sa.SmartArray) and x._shuffle is None
    row[0] = 7.0
    assert np.asarray(x)[1, 0] == 7.0
    # numpy checks ``axis != 0`` before normalising it for anything but an ndarray.
    y = sa.asarray(_data((6,)))
    with pytest.raises(NotImplementedError, match="only supported on ndarray"):
        np.random.default_rng(2).shuffle(y, axis=-1)
    np.testing.assert_array_equal(np.asarray(y), _data((6,)))


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.broadcast_to(sa.asarray(_data((1, 3))), (4, 3)),
        lambda: sa.SmartArray(_read_only(_data((4, 3))), copy=False),
        lambda: sa.SmartArray(_read_only(_data((5,))), copy=False),
        # issue 31: numpy's swap loop never writes 0 or 1 items, so these passed
        lambda: sa.SmartArray(_read_only(_data((1,))), copy=False),
        lambda: np.broadcast_to(sa.asarray(_data((1, 3))), (1, 3)),
        lambda: sa.SmartArray(_read_only(_data((0,))), copy=False),
    ],
    ids=["broadcast-view", "adopted-read-only", "adopted-read-only-1d", "1-item", "1-row", "empty"],
)
@pytest.mark.parametrize(
    "shuffle",
    [
        lambda x: np.random.default_rng(0).shuffle(x),
        lambda x: np.random.RandomState(0).shuffle(x),
        np.random.shuffle,
    ],
    ids=["Generator", "RandomState", "np.random"],
)
def test_read_only_arrays_are_refused_with_data_unchanged(
    make: Callable[[], Any], shuffle: Callable[[Any], None]
) -> None:
    x = make()
    before = np.asarray(x).copy()
    as_ndarray = before.copy()
    as_ndarray.flags.writeable = False
    with pytest.raises(ValueError) as expected:  # what numpy says for a read-only ndarray
        shuffle(as_ndarray)
    with sa.track_transfers() as t, pytest.raises(ValueError) as error:
        shuffle(x)
    assert str(error.value).startswith(str(expected.value)), (error.value, expected.value)
    assert "nothing was changed" in str(error.value) and t.count == 0
    np.testing.assert_array_equal(np.asarray(x), before)
    assert x._shuffle is None


def test_an_intent_is_not_shuffled() -> None:
    x = sa.asarray(_data((4, 3)))
    with pytest.raises(TypeError, match="no len"):
        np.random.default_rng(0).shuffle(sa.In(x))
    np.testing.assert_array_equal(np.asarray(x), _data((4, 3)))


def _read_only(data: np.ndarray) -> np.ndarray:
    data.flags.writeable = False
    return data


def test_users_warning_filters_do_not_break_it() -> None:
    expected = _shuffled_ndarray(_data((6, 2)), _generator, 5)
    x = sa.asarray(_data((6, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _generator(x, 5)
    np.testing.assert_array_equal(np.asarray(x), expected)
    y = sa.asarray(_data((6, 2)))
    with pytest.warns(DeprecationWarning, match="other"):
        _generator(y, 5)
        warnings.warn("other", DeprecationWarning, stacklevel=1)
    np.testing.assert_array_equal(np.asarray(y), expected)


def test_other_objects_still_get_numpys_warning() -> None:
    class Rows(list):  # type: ignore[type-arg]
        pass

    class NotASequence:
        def __init__(self) -> None:
            self.items = [1, 2, 3]

        def __len__(self) -> int:
            return 3

        def __getitem__(self, i: int) -> int:
            return self.items[i]

        def __setitem__(self, i: int, v: int) -> None:
            self.items[i] = v

    len(sa.asarray(_data((3, 2))))  # a SmartArray's len() taken last in this thread
    with pytest.warns(UserWarning, match="shuffling a 'NotASequence'"):
        np.random.default_rng(0).shuffle(NotASequence())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.random.default_rng(0).shuffle(Rows([1, 2, 3]))  # a Sequence: no warning


@pytest.mark.parametrize(
    "call",
    [
        lambda x: partial(np.random.default_rng(6).shuffle)(x),
        lambda x: list(map(np.random.default_rng(6).shuffle, [x])),
        lambda x: [np.random.default_rng(6).shuffle(item) for item in (x,)],
    ],
    ids=["partial", "map", "comprehension"],
)
def test_called_through_other_callables(call: Callable[[Any], Any]) -> None:
    x = sa.asarray(_data((6, 3)))
    call(x)
    np.testing.assert_array_equal(np.asarray(x), _shuffled_ndarray(_data((6, 3)), _generator, 6))


def test_the_same_array_shuffled_again_from_the_same_line() -> None:
    x = sa.asarray(_data((5, 2)))
    expected = _data((5, 2))
    rng, rng_nd = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(4):
        rng.shuffle(x)
        rng_nd.shuffle(expected)
    np.testing.assert_array_equal(np.asarray(x), expected)


def test_threads_shuffling_and_indexing_different_arrays() -> None:
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    errors: list[BaseException] = []

    def shuffler(seed: int) -> None:
        try:
            for round_ in range(30):
                x = sa.asarray(_data((12, 2)))
                np.random.default_rng(seed + round_).shuffle(x)
                expected = _shuffled_ndarray(_data((12, 2)), _generator, seed + round_)
                np.testing.assert_array_equal(np.asarray(x), expected)
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    def indexer() -> None:
        try:
            y = sa.asarray(_data((12, 2)))
            for round_ in range(200):
                row = y[round_ % 12]
                assert isinstance(row, sa.SmartArray)  # a view, never a shuffle's copy
                row[0] = float(round_)
                assert np.asarray(y)[round_ % 12, 0] == float(round_)
        except BaseException as error:
            errors.append(error)

    threads = [
        threading.Thread(target=shuffler, args=(0,)),
        threading.Thread(target=shuffler, args=(1000,)),
        threading.Thread(target=indexer),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []


def test_stdlib_random_shuffle_behaves_as_for_an_ndarray() -> None:
    # random.shuffle is pure Python and gives no warning: a 2-d ndarray gets duplicated rows
    # from it, and so does a 2-d SmartArray (the same result); 1-d arrays are shuffled.
    for shape in [(8,), (6, 2)]:
        x = sa.asarray(_data(shape))
        expected = _data(shape)
        random.Random(4).shuffle(x)
        random.Random(4).shuffle(expected)
        np.testing.assert_array_equal(np.asarray(x), expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple),
    seed=st.integers(0, 2**32 - 1),
    shuffle=st.sampled_from(SHUFFLES),
    step=st.sampled_from([1, 2, -1]),
)
def test_shuffle_matches_ndarray_property(
    shape: tuple[int, ...], seed: int, shuffle: Callable[[Any, int], None], step: int
) -> None:
    data = _data(shape)
    x = sa.asarray(data)[::step]
    expected = data.copy()[::step]
    shuffle(x, seed)
    shuffle(expected, seed)
    np.testing.assert_array_equal(np.asarray(x), expected)


@pytest.mark.parametrize("shape", SHAPES[:3])
def test_permutation_assignment_equals_numpy_shuffle(shape: tuple[int, ...]) -> None:
    expected = _shuffled_ndarray(_data(shape), _generator, 11)
    x = sa.asarray(_data(shape))
    x[...] = np.random.default_rng(11).permutation(x)
    np.testing.assert_array_equal(np.asarray(x), expected)


@pytest.mark.parametrize("shape", SHAPES[:3])
@pytest.mark.parametrize("axis", [0, -1])
def test_permutation_and_permuted_match_numpy(shape: tuple[int, ...], axis: int) -> None:
    x = sa.asarray(_data(shape))
    for method in ("permutation", "permuted"):
        got = getattr(np.random.default_rng(5), method)(x, axis=axis)
        expected = getattr(np.random.default_rng(5), method)(_data(shape), axis=axis)
        assert type(got) is np.ndarray
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.asarray(x), _data(shape))  # x itself untouched
    legacy = np.random.RandomState(5).permutation(x)
    np.testing.assert_array_equal(legacy, np.random.RandomState(5).permutation(_data(shape)))


@pytest.mark.device
@pytest.mark.parametrize("shape", [(6, 2), (5,), (3, 2, 2)])
def test_device_only_data_is_downloaded_once_and_marked_written_per_row(
    shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    x = sa.asarray(_data(shape), where="gpu")
    x.get("gpu")
    x.mark_changed("gpu")  # device only: the host copy is stale
    assert x.location == "gpu"
    marks: list[tuple[str, Any]] = []
    mark_changed = Allocation.mark_changed

    def counting(self: Allocation, where: str, extent: Any = None) -> None:
        marks.append((where, extent))
        mark_changed(self, where, extent)

    overwrite_host = Allocation.overwrite_host

    def counting_elements(self: Allocation, extent: Any) -> None:
        # (the element fast path of an array current partly on each side)
        marks.append(("host", extent))
        overwrite_host(self, extent)

    monkeypatch.setattr(Allocation, "mark_changed", counting)
    monkeypatch.setattr(Allocation, "overwrite_host", counting_elements)
    with sa.track_transfers() as moved:
        np.random.default_rng(0).shuffle(x)
    # Every byte downloaded once: in one copy, but a 1-d array's elements are read one by one
    # (numpy swaps x[i] and x[j]), a copy each (issue 21: a scalar read copies its element).
    assert (moved.d2h_count, moved.h2d_count) == (shape[0] if len(shape) == 1 else 1, 0)
    assert moved.d2h_bytes == x.nbytes
    # Each row written marks that row's bytes (issue 21: validity per byte range), until
    # every row has been written: the array is then current on the host only, and later
    # writes change no state (the element fast path). The rows numpy writes, in order, are
    # those it writes in a list shuffled with the same seed.
    written: list[int] = []

    class Rows(list):  # type: ignore[type-arg]
        def __setitem__(self, index: Any, value: Any) -> None:
            written.append(index)
            super().__setitem__(index, value)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (numpy's warning for a list of arrays, if any)
        np.random.default_rng(0).shuffle(Rows(_data(shape)))
    row = x.nbytes // shape[0]
    expected: list[tuple[str, Any]] = []
    seen: set[int] = set()
    for index in written:
        if len(seen) == shape[0]:
            break
        expected.append(("host", ((index * row, (index + 1) * row),)))
        seen.add(index)
    assert marks == expected
    assert x.location == "host" and not x.is_valid("gpu")
    expected = _shuffled_ndarray(_data(shape), _generator, 0)
    with sa.track_transfers() as moved:
        np.testing.assert_array_equal(x.get("gpu").copy_to_host(), expected)
    assert (moved.d2h_count, moved.h2d_count) == (0, 1)


@pytest.mark.device
def test_read_only_device_array_is_refused_without_copies() -> None:
    x = np.broadcast_to(sa.asarray(_data((1, 3)), where="gpu"), (4, 3))
    with sa.no_transfers(), pytest.raises(ValueError, match="read-only"):
        np.random.default_rng(0).shuffle(x)
