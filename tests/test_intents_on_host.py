"""Intents given to host code: numpy ufuncs and functions, CPU ``@vectorize``/``@guvectorize``
(issue 24, item 10).

``In(x)``, ``Out(y)`` and ``InOut(y)`` work with ``@njit``, kernels and CUDA ufuncs; code that
switches target with one flag passes them to CPU ufuncs too. There they act as the SmartArray
itself (as for ``@njit``, ``Out`` is ``InOut``): ``In`` is read, ``Out``/``InOut`` written, with
the same flags and the same transfers as the bare array (compared ledger to ledger, and
counted exactly). ``In`` as an output and ``Out`` as an input are refused, as for CUDA ufuncs,
before anything is copied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numba import guvectorize, vectorize

import smartarray as sa

N = 6

device = pytest.mark.device


@vectorize(["float64(float64)"])
def plus_one(a):  # type: ignore[no-untyped-def]
    return a + 1.0


@vectorize
def scaled(a, b):  # type: ignore[no-untyped-def]  # dynamic: compiled at the first call
    return a * b


@guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")
def running_sum(a, out):  # type: ignore[no-untyped-def]
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i]
        out[i] = total


@guvectorize("(n)->(n)")
def doubled(a, out):  # type: ignore[no-untyped-def]  # dynamic gufunc
    for i in range(a.shape[0]):
        out[i] = 2 * a[i]


Wrap = Callable[[sa.SmartArray], Any]


def _bare(array: sa.SmartArray) -> sa.SmartArray:
    return array


#: name -> (call(x, y, In, Out), downloads and y's location after it when x and y start
#: current on the device only). ``In`` wraps what is read, ``Out`` what is written (``InOut``
#: in the cases whose name says so).
CASES: dict[str, tuple[Callable[[Any, Any, Wrap, Wrap], Any], int, str]] = {
    "np.add(In(x), 1.5)": (lambda x, y, i, o: np.add(i(x), 1.5), 1, "gpu"),
    "np.add(x, 1, out=Out(y))": (lambda x, y, i, o: np.add(x, 1.0, out=o(y)), 2, "host"),
    "np.add(In(x), 1, Out(y))": (lambda x, y, i, o: np.add(i(x), 1.0, o(y)), 2, "host"),
    "np.multiply(In(x), y, out=(InOut(y),))": (
        lambda x, y, i, o: np.multiply(i(x), y, out=(o(y),)),
        2,
        "host",
    ),
    "np.add.reduce(In(x))": (lambda x, y, i, o: np.add.reduce(i(x)), 1, "gpu"),
    "np.add.accumulate(In(x), out=Out(y))": (
        lambda x, y, i, o: np.add.accumulate(i(x), out=o(y)),
        2,
        "host",
    ),
    "np.add.at(InOut(y), [0, 2], In(x[:2]))": (
        lambda x, y, i, o: np.add.at(o(y), [0, 2], i(x[:2])),
        2,
        "host",
    ),
    "np.add(x, y, out=Out(y), where=In(x > 2))": (
        lambda x, y, i, o: np.add(x, y, out=o(y), where=i(x > 2)),
        2,
        "host",
    ),
    "@vectorize plus_one(In(x))": (lambda x, y, i, o: plus_one(i(x)), 1, "gpu"),
    "@vectorize plus_one(In(x), out=Out(y))": (
        lambda x, y, i, o: plus_one(i(x), out=o(y)),
        2,
        "host",
    ),
    "@vectorize plus_one(x, Out(y))": (lambda x, y, i, o: plus_one(x, o(y)), 2, "host"),
    "@vectorize scaled(In(x), In(y))": (lambda x, y, i, o: scaled(i(x), i(y)), 2, "both"),
    "@vectorize scaled(In(x), 2.0, Out(y))": (
        lambda x, y, i, o: scaled(i(x), 2.0, o(y)),
        2,
        "host",
    ),
    "@guvectorize running_sum(In(x))": (lambda x, y, i, o: running_sum(i(x)), 1, "gpu"),
    "@guvectorize running_sum(In(x), Out(y))": (
        lambda x, y, i, o: running_sum(i(x), o(y)),
        2,
        "host",
    ),
    "@guvectorize running_sum(In(x), out=Out(y))": (
        lambda x, y, i, o: running_sum(i(x), out=o(y)),
        2,
        "host",
    ),
    "@guvectorize doubled(In(x), Out(y))": (lambda x, y, i, o: doubled(i(x), o(y)), 2, "host"),
    "np.sum(In(x))": (lambda x, y, i, o: np.sum(i(x)), 1, "gpu"),
    "np.concatenate([In(x), In(y)])": (
        lambda x, y, i, o: np.concatenate([i(x), i(y)]),
        2,
        "both",
    ),
    "np.dot(In(x), In(y))": (lambda x, y, i, o: np.dot(i(x), i(y)), 2, "both"),
    "np.cumsum(In(x), out=Out(y))": (lambda x, y, i, o: np.cumsum(i(x), out=o(y)), 2, "host"),
    "np.copyto(Out(y), In(x))": (lambda x, y, i, o: np.copyto(o(y), i(x)), 2, "host"),
    "np.clip(In(x), 1, 3, out=InOut(y))": (
        lambda x, y, i, o: np.clip(i(x), 1, 3, out=o(y)),
        2,
        "host",
    ),
}


def _writer(name: str) -> Wrap:
    return sa.InOut if "InOut" in name else sa.Out


def _arrays(on_device: bool) -> tuple[sa.SmartArray, sa.SmartArray]:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.linspace(-1.0, 1.0, N))
    if on_device:
        for array in (x, y):
            array.get("gpu")
            array.mark_changed("gpu")  # the device copy is the only current one
    return x, y


def _run(name: str, on_device: bool, intents: bool) -> dict[str, Any]:
    call = CASES[name][0]
    x, y = _arrays(on_device)
    wrap_in, wrap_out = (sa.In, _writer(name)) if intents else (_bare, _bare)
    with sa.track_transfers() as t:
        result = call(x, y, wrap_in, wrap_out)
    if result is y:
        result = "y"  # out= returns the SmartArray passed, as for the bare array
    elif isinstance(result, sa.SmartArray):
        result = ("a new SmartArray", np.array(result).tolist(), result.location)
    elif isinstance(result, np.generic | float):
        result = float(result)
    locations = (x.location, y.location)
    return {
        "result": result,
        "ledger": [(r.direction, r.nbytes) for r in t.records],
        "locations": locations,
        "x": np.array(x).tolist(),
        "y": np.array(y).tolist(),
    }


@pytest.mark.parametrize("name", list(CASES))
def test_intents_act_as_the_array_itself_in_host_calls(name: str) -> None:
    bare = _run(name, on_device=False, intents=False)
    annotated = _run(name, on_device=False, intents=True)
    assert annotated == bare
    assert bare["ledger"] == []


@device
@pytest.mark.parametrize("name", list(CASES))
def test_intents_in_host_calls_move_exactly_what_the_array_would(name: str) -> None:
    bare = _run(name, on_device=True, intents=False)
    annotated = _run(name, on_device=True, intents=True)
    assert annotated == bare
    _, downloads, y_location = CASES[name]
    if name == "np.add.at(InOut(y), [0, 2], In(x[:2]))":
        # y whole, then only the two elements of x that x[:2] covers (issue 21), which leaves
        # the rest of x current on the device only
        assert annotated["ledger"] == [("d2h", N * 8), ("d2h", 2 * 8)]
        assert annotated["locations"] == ("gpu", y_location)
        return
    assert annotated["ledger"] == [("d2h", N * 8)] * downloads
    # In leaves both copies current; a written array is current on the host only
    assert annotated["locations"] == ("both", y_location)


# --- misplaced intents are refused before anything is copied ---------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda x, y: np.add(x, 1.0, out=sa.In(y)),
        lambda x, y: np.add(x, 1.0, sa.In(y)),
        lambda x, y: np.add.at(sa.In(y), [0], 1.0),
        lambda x, y: plus_one(x, out=sa.In(y)),
        lambda x, y: plus_one(x, sa.In(y)),
        lambda x, y: running_sum(x, sa.In(y)),
        lambda x, y: np.copyto(sa.In(y), x),
        lambda x, y: np.cumsum(x, out=sa.In(y)),
    ],
)
@pytest.mark.parametrize("start", ["host", "gpu"])
def test_in_as_an_output_is_refused(call: Callable[..., Any], start: str) -> None:
    if start == "gpu" and sa.tier() == "host-only":
        pytest.skip("needs a device copy")
    x, y = _arrays(on_device=start == "gpu")
    with sa.track_transfers() as t, pytest.raises(TypeError) as info:
        call(x, y)
    message = str(info.value)
    assert "smartarray.In(" in message and "output" in message
    assert "smartarray.Out(" in message  # the fix
    assert t.records == [] and y.location == ("host" if start == "host" else "gpu")
    np.testing.assert_array_equal(np.asarray(y), np.linspace(-1.0, 1.0, N))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, y: np.add(sa.Out(x), 1.0),
        lambda x, y: np.add(sa.Out(x), 1.0, out=y),
        lambda x, y: plus_one(sa.Out(x)),
        lambda x, y: running_sum(sa.Out(x), y),
        lambda x, y: np.sum(sa.Out(x)),
        lambda x, y: np.copyto(y, sa.Out(x)),
    ],
)
def test_out_as_an_input_is_refused(call: Callable[..., Any]) -> None:
    x, y = _arrays(on_device=False)
    with sa.track_transfers() as t, pytest.raises(TypeError) as info:
        call(x, y)
    message = str(info.value)
    assert "smartarray.Out(" in message and "input" in message
    assert "smartarray.InOut(" in message  # the fix
    assert t.records == [] and (x.location, y.location) == ("host", "host")
    np.testing.assert_array_equal(np.asarray(y), np.linspace(-1.0, 1.0, N))


# --- np.asarray -------------------------------------------------------------------------------


def test_asarray_of_an_intent_is_the_arrays_host_view() -> None:
    x, _ = _arrays(on_device=False)
    read = np.asarray(sa.In(x))
    assert type(read) is np.ndarray and not read.flags.writeable  # In: only read
    np.testing.assert_array_equal(read, np.arange(N))
    assert np.shares_memory(read, np.asarray(x))
    written = np.asarray(sa.InOut(x))
    assert written.flags.writeable
    written[0] = 42.0  # a write through the view reaches x, as np.asarray(x)'s would
    assert x[0] == 42.0
    assert np.asarray(sa.Out(x)).flags.writeable
    converted = np.asarray(sa.In(x), dtype=np.float32)
    assert converted.dtype == np.float32 and converted[0] == 42.0
    copied = np.array(sa.In(x))
    assert copied.flags.writeable and not np.shares_memory(copied, np.asarray(x))


@device
def test_asarray_of_an_intent_moves_what_asarray_of_the_array_moves() -> None:
    x, _ = _arrays(on_device=True)
    with sa.track_transfers() as t:
        read = np.asarray(sa.In(x))
    assert [(r.direction, r.nbytes) for r in t.records] == [("d2h", N * 8)]
    assert x.location == "both"
    np.testing.assert_array_equal(read, np.arange(N))
    written = np.asarray(sa.InOut(x))
    written[1] = -1.0  # found before the device copy is next used: re-uploaded once
    with sa.track_transfers() as t:
        x.get("gpu")
    # Only the bytes that differ from the snapshot go up (issue 21): 1.0 and -1.0 differ in
    # their sign bit only, in the last byte of element 1 (little-endian float64).
    assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [("h2d", 15, 1)]
