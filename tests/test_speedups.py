"""smartarray._speedups: SmartArray's indexing fast paths as C slots, against their Python
twins (``SmartArray._getitem_py`` and ``SmartArray._setitem_py``), which are SmartArray's
``__getitem__`` and ``__setitem__`` without the module (``SMARTARRAY_PURE_PYTHON=1``; `.ci/run`
runs the host tier so too).

Every key and value is applied to two equal arrays in the same state, one through each path:
the results (values, type, layout, base), the exceptions (type and message), the arrays'
contents and their coherence state must be the same.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

import smartarray as sa
from smartarray import _array
from smartarray._core.coherence import State

compiled = pytest.mark.skipif(
    _array._speedups is None, reason="smartarray._speedups not built, or turned off"
)

_bounds = st.one_of(st.none(), st.integers(-20, 20), st.integers(-20, 20).map(np.int64))
_keys = st.one_of(
    st.integers(-20, 20),
    st.builds(slice, _bounds, _bounds, st.sampled_from([None, None, 1, 2, -1])),
    st.integers(-20, 20).map(np.intp),
    st.just(2**70),
    st.just(-(2**70)),
    st.builds(slice, st.just(2**70), st.none()),
    st.builds(slice, st.just(1.5), st.none()),
    st.just(Ellipsis),
    st.just((1,)),
    st.just(True),
)
_values = st.one_of(
    st.floats(allow_nan=True),
    st.integers(-(2**70), 2**70),
    st.just(np.float32(2.5)),
    st.just(True),
    st.just("3"),
    st.just([1.0]),
)
_dtypes = st.sampled_from(["f8", "f4", "i4", "u1", ">f8", "c16"])


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("result", call())
    except Exception as error:  # (compared: type and message)
        return ("error", (type(error), str(error)))


def _same_result(left: Any, right: Any, x: sa.SmartArray, y: sa.SmartArray) -> None:
    assert type(left) is type(right)
    if isinstance(left, sa.SmartArray):
        assert left.shape == right.shape and left.strides == right.strides
        assert left.dtype == right.dtype and left.flags.writeable == right.flags.writeable
        assert left._offset == right._offset
        assert (left.base is x) == (right.base is y)
        np.testing.assert_array_equal(left.get("host"), right.get("host"))
    else:
        np.testing.assert_array_equal(left, right)


def _pair(dtype: str, state: str) -> tuple[sa.SmartArray, sa.SmartArray]:
    data = (np.arange(16) % 7).astype(dtype)
    arrays = []
    for _ in range(2):
        array = sa.SmartArray(data)
        if state == "allocated":
            assert array._alloc is not None  # (made now)
        elif state == "host read":
            array.sum()
            array[0]
        elif state == "read-only":
            frozen = data.copy()
            frozen.flags.writeable = False
            array = sa.SmartArray(frozen, copy=False)
        elif state == "view":
            array = sa.SmartArray(np.concatenate([data, data]))[3:19]
        arrays.append(array)
    return arrays[0], arrays[1]


_states = st.sampled_from(["new", "allocated", "host read", "read-only", "view"])


@compiled
@settings(max_examples=300, deadline=None)
@given(dtype=_dtypes, state=_states, key=_keys)
def test_reads_match_the_python_method(dtype: str, state: str, key: Any) -> None:
    x, y = _pair(dtype, state)
    left = _outcome(lambda: x[key])
    right = _outcome(lambda: sa.SmartArray._getitem_py(y, key))
    assert left[0] == right[0], (left, right)
    if left[0] == "error":
        assert left[1] == right[1]
    else:
        _same_result(left[1], right[1], x, y)


@compiled
@settings(max_examples=300, deadline=None)
@given(dtype=_dtypes, state=_states, key=_keys, value=_values)
def test_writes_match_the_python_method(dtype: str, state: str, key: Any, value: Any) -> None:
    x, y = _pair(dtype, state)
    with np.errstate(all="ignore"):
        left = _outcome(lambda: x.__setitem__(key, value))
        right = _outcome(lambda: sa.SmartArray._setitem_py(y, key, value))
    assert left == right
    np.testing.assert_array_equal(x.get("host"), y.get("host"))
    assert x._alloc.state is y._alloc.state


@compiled
def test_a_view_is_made_with_the_python_method_s_attributes() -> None:
    x = sa.SmartArray(np.arange(16.0))
    for key in (slice(1, 5), slice(None, 3), slice(4, None), slice(None)):
        fast = x[key]
        python = sa.SmartArray._getitem_py(x, key)
        for name in _array.FIELDS:
            assert hasattr(fast, name) == hasattr(python, name), name
            if name in ("_alloc_if_made", "_base"):  # (objects: the same ones)
                assert getattr(fast, name) is getattr(python, name), name
            elif hasattr(fast, name):
                assert getattr(fast, name) == getattr(python, name), name
        assert vars(fast) == vars(python)  # (nothing in either instance dict)
        fast[0] = -1.0  # (both share x's memory and state)
        assert python[0] == -1.0 == x[key.start or 0]


@compiled
def test_element_reads_and_writes_follow_the_state() -> None:
    """The C element paths read the host copy only where the Python method would; after a
    device write (simulated by a state change) they take the general path, which makes the
    host copy current."""
    x = sa.SmartArray(np.arange(8.0))
    x[2] = 5.0
    assert x[2] == 5.0 and x._alloc._host_token is not None
    alloc = x._alloc
    with alloc.lock:  # (what a device write leaves: the host copy stale, no token)
        alloc._set_state(None, State.DEVICE)
    if alloc.device is None:  # (host tier: no device copy to read; the state is restored)
        with alloc.lock:
            alloc._set_state(None, State.HOST)
    assert alloc._host_token is None
    assert x[2] == 5.0
    x[3] = 7
    assert x[3] == 7.0 and x.get("host")[3] == 7.0


def test_deleting_items_is_refused_as_numpy_refuses_it() -> None:
    x = sa.SmartArray(np.arange(4.0))
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del x[0]
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del np.arange(4.0)[0]
    np.testing.assert_array_equal(x, np.arange(4.0))


def test_an_array_never_initialised_is_told_apart_without_an_error() -> None:
    blank = object.__new__(sa.SmartArray)
    assert not _array._made(blank)
    assert _array._made(sa.SmartArray(np.arange(3.0)))
    with pytest.raises(AttributeError):
        blank._shape  # noqa: B018  (an unset slot)


def test_the_slots_are_traversed_by_the_garbage_collector() -> None:
    x = sa.SmartArray(np.arange(8.0))
    view = x[1:5]
    view._own_host = [view]  # type: ignore[assignment]  # (a cycle through a slot)
    ref = weakref.ref(view)
    del view
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(_array._compiled is None, reason="smartarray._speedups not built")
def test_smartarray_pure_python_turns_the_module_off() -> None:
    code = (
        "import numpy as np, smartarray as sa, smartarray._array as A\n"
        "x = sa.SmartArray(np.arange(8.0))\n"
        "v = x[1:5]; x[2] = 9.0\n"
        "assert A._speedups is None and A._compiled is not None\n"
        "assert type(sa.SmartArray.__dict__['__getitem__']).__name__ == 'function'\n"
        "print(v[1], x[2], type(v).__name__)\n"
    )
    env = dict(os.environ, SMARTARRAY_PURE_PYTHON="1")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["9.0", "9.0", "SmartArray"]
