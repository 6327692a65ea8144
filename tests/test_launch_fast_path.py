"""The steady-state launch path (issue 22): a few attribute reads per resident argument.

When an argument's device copy is current and a launch has nothing to copy, order or mark,
``_cuda.arguments.bare_kernel_argument`` (installed as ``SmartArray.to_device``) hands
numba-cuda the launch value cached with the device view, through one call of the core
(``Allocation.launch_value``), which also pins the argument for the launch. Here:

1. the cost, counted as Python calls that run code of the smartarray package
   (``sys.setprofile``), per argument per launch, for a 2-argument kernel chain and a
   5-argument launch, with no transfer (the ledger) and the right results; the same for the
   launch hook of the GPU tier (``CUDADispatcher.call``), driven without a GPU;
2. what the path must keep: a writing launch still marks the host copy stale, a cached value
   is dropped with its device buffer, a read-only argument is read-only in the simulator,
   explicit intents take the path too, and the pins hold against an eviction that listed its
   candidates before the pin (and make the launch's arguments the most recently used).
"""

from __future__ import annotations

import collections
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import copy_into, counts, inc
from numba import cuda

import smartarray as sa
from smartarray._core import memory as _memory
from smartarray._core.coherence import State
from smartarray._cuda import arguments as _arguments
from smartarray._cuda import launch as _launch

pytestmark = pytest.mark.device

N = 16
PACKAGE = os.path.dirname(sa.__file__) + os.sep
TARGET = 5.0  # Python calls in smartarray per resident argument per launch (was 17.5)


@cuda.jit
def add_into(a, b):  # type: ignore[no-untyped-def]  # writes b, reads a
    i = cuda.grid(1)
    if i < a.size:
        b[i] = a[i] + 1.0


@cuda.jit
def sum_of_four(a, b, c, d, out):  # type: ignore[no-untyped-def]  # writes out, reads the rest
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i] + c[i] + d[i]


def smartarray_calls(run: Callable[[], Any]) -> collections.Counter[str]:
    """Python calls (``'call'`` profile events) whose code lives in the smartarray package,
    made by ``run()`` in this thread, by module and function."""
    calls: collections.Counter[str] = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(PACKAGE):
            calls[f"{os.path.relpath(code.co_filename, PACKAGE)}:{code.co_name}"] += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


def per_argument(calls: collections.Counter[str], launches: int, arguments: int) -> float:
    return sum(calls.values()) / (launches * arguments)


# --- 1. the cost ------------------------------------------------------------------------


def test_a_two_argument_chain_runs_at_most_five_calls_per_argument() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.zeros(N, where="gpu")
    for _ in range(2):  # the first launches upload x and fill the launch values
        add_into[1, N](x, y)
        add_into[1, N](y, x)
    rounds = 10

    def chain() -> None:
        for _ in range(rounds):
            add_into[1, N](x, y)
            add_into[1, N](y, x)

    with sa.track_transfers() as t:
        calls = smartarray_calls(chain)
    assert counts(t) == (0, 0)
    cost = per_argument(calls, 2 * rounds, 2)
    assert cost <= TARGET, calls
    # The steady state: per argument, the hook and one call of the core.
    assert calls["_cuda/arguments.py:bare_kernel_argument"] == 4 * rounds
    assert calls["_core/coherence.py:launch_value"] == 4 * rounds
    assert not [name for name in calls if "kernel_argument" in name and "bare" not in name]
    assert x.location == "gpu" and y.location == "gpu"
    np.testing.assert_array_equal(np.asarray(x), np.arange(N) + 4.0 + 2 * rounds)


@pytest.mark.parametrize("inputs", ["device_only", "made_on_device"])
def test_a_five_argument_launch_runs_at_most_five_calls_per_argument(inputs: str) -> None:
    # Inputs current on the device only (a kernel wrote them), or on both sides (made with
    # where='gpu', never used on the host: only read, they take the path too).
    if inputs == "device_only":
        arrays = [sa.full(N, k - 1.0, where="gpu") for k in range(4)]
        for a in arrays:
            inc[1, N](a)
    else:
        arrays = [sa.full(N, float(k), where="gpu") for k in range(4)]
    out = sa.zeros(N, where="gpu")
    inc[1, N](out)  # device-only, as a kernel chain leaves it
    sum_of_four[1, N](*arrays, out)
    rounds = 10

    def launches() -> None:
        for _ in range(rounds):
            sum_of_four[1, N](*arrays, out)

    with sa.track_transfers() as t:
        calls = smartarray_calls(launches)
    assert counts(t) == (0, 0)
    assert per_argument(calls, rounds, 5) <= TARGET, calls
    assert calls["_core/coherence.py:launch_value"] == 5 * rounds
    where = "gpu" if inputs == "device_only" else "both"
    assert [a.location for a in (*arrays, out)] == [where] * 4 + ["gpu"]
    np.testing.assert_array_equal(np.asarray(out), np.full(N, 6.0))


class CoreStream:
    """A stand-in for the ``cuda.core`` stream numba-cuda hands a launch's arguments on a
    GPU: an object whose ``handle`` is 0 for the default stream."""

    handle = 0


class Dispatcher:
    """The attributes of ``CUDADispatcher`` the GPU launch hook uses."""

    def __init__(self, func: Any) -> None:
        self.py_func = func


class LaunchConfig:
    def __init__(self, stream: Any) -> None:
        self.stream = stream


def numba_cuda_launch(self: Any, args: Any, launch_config: Any) -> list[Any]:
    """What ``CUDADispatcher.call`` leads to once the kernel is chosen: ``_Kernel.launch``
    prepares each argument with ``wrap_arg(value).to_device(retr, stream)`` (a SmartArray is
    its own ``ArgHint``), then runs the ``retr`` callbacks."""
    retr: list[Any] = []
    values = [value.to_device(retr, launch_config.stream) for value in args]
    for callback in retr:
        callback()
    return values


def test_the_gpu_launch_hook_takes_the_same_path() -> None:
    # The hook of the GPU tier, driven in this tier: the launch's stream object is recorded
    # once per launch, so the arguments' streams need no further check.
    hooked = _launch._hooked_call(numba_cuda_launch)
    dispatcher = Dispatcher(add_into.py_func)
    x, y = sa.full(N, 0.0, where="gpu"), sa.zeros(N, where="gpu")
    inc[1, N](x)  # both current on the device only, as a kernel chain leaves them
    inc[1, N](y)
    first = hooked(dispatcher, (x, y), LaunchConfig(CoreStream()))
    rounds = 10

    def chain() -> None:
        for _ in range(rounds):
            hooked(dispatcher, (x, y), LaunchConfig(CoreStream()))

    with sa.track_transfers() as t:
        calls = smartarray_calls(chain)
    assert counts(t) == (0, 0)
    assert per_argument(calls, rounds, 2) <= TARGET, calls
    assert calls["_core/coherence.py:launch_value"] == 2 * rounds
    assert "_core/backend.py:is_default_stream" not in calls
    again = hooked(dispatcher, (x, y), LaunchConfig(CoreStream()))
    assert again[0] is first[0] and again[1] is first[1]  # the cached launch values
    if sa.tier() == "simulator":
        assert not again[0]._ary.flags.writeable  # x only read: a read-only array here
    else:  # what numba.cuda.In(device_array).to_device gives: the strided memory view
        assert again[1] is y._alloc.device._strided_memory_view_shim
    assert not _memory._BUDGET.launches  # every launch's pins released


# --- 2. what the path keeps -----------------------------------------------------------------


def test_a_writing_launch_on_both_copies_still_marks_the_host_copy_stale() -> None:
    a = sa.SmartArray(np.zeros(N))
    a.to_gpu()  # BOTH
    out = sa.zeros(N, where="gpu")
    with sa.track_transfers() as t:
        copy_into[1, N](out, a)  # a only read: BOTH stays, no transfer
        copy_into[1, N](out, a)
    assert counts(t) == (0, 0) and a._alloc.state is State.BOTH
    with sa.track_transfers() as t:
        inc[1, N](a)  # written: the general path (the state machine) marks the host stale
    assert counts(t) == (0, 0)
    assert a._alloc.state is State.DEVICE and not a.is_valid("host")
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(a), np.ones(N))
    assert counts(t) == (0, 1)


def test_the_launch_value_is_dropped_with_the_device_buffer() -> None:
    a = sa.zeros(N, where="gpu")
    inc[1, N](a)
    inc[1, N](a)
    alloc = a._alloc
    key = (a._offset, a._shape, a._strides, a._dtype, True)
    cached = alloc._device_views[key]
    a.free_device()  # one download; the device buffer and its views are gone
    assert key not in alloc._device_views
    with sa.track_transfers() as t:
        inc[1, N](a)  # uploaded again, into a new buffer: a new launch value
        inc[1, N](a)
    assert counts(t) == (1, 0)
    assert alloc._device_views[key] is not cached
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 4.0))


def test_views_of_other_layouts_get_their_own_launch_values() -> None:
    a = sa.SmartArray(np.arange(2 * N, dtype=np.float64))
    inc[1, 2 * N](a)
    for _ in range(2):
        inc[1, N](a[:N])
        inc[1, N](a[N:])
        inc[1, N](a[::2])
    np.testing.assert_array_equal(
        np.asarray(a), np.arange(2 * N) + 1 + 2 + 2 * (np.arange(2 * N) % 2 == 0)
    )
    keys = [key for key in a._alloc._device_views if len(key) == 5]
    assert {(key[0], key[2]) for key in keys} == {(0, (8,)), (8 * N, (8,)), (0, (16,))}


def test_explicit_intents_take_the_path_too() -> None:
    x, out = sa.full(N, 1.0, where="gpu"), sa.zeros(N, where="gpu")
    inc[1, N](x)  # both current on the device only (x: twos)
    inc[1, N](out)
    copy_into[1, N](sa.InOut(out), sa.In(x))
    calls = smartarray_calls(lambda: copy_into[1, N](sa.InOut(out), sa.In(x)))
    assert calls["_core/coherence.py:launch_value"] == 2
    assert "_core/coherence.py:resident_view" not in calls
    if sa.tier() == "simulator":
        with pytest.raises(ValueError, match="read-only"):
            inc[1, N](sa.In(x))  # the cached In value is read-only in the simulator
    np.testing.assert_array_equal(np.asarray(out), np.full(N, 2.0))
    np.testing.assert_array_equal(np.asarray(x), np.full(N, 2.0))


@pytest.mark.usefixtures("empty_budget")
def test_a_pin_taken_after_an_eviction_listed_its_candidates_holds() -> None:
    a = sa.zeros(N, where="gpu")
    inc[1, N](a)
    inc[1, N](a)  # device-only, launch value cached
    alloc = a._alloc
    candidates = _memory._candidates(())  # an eviction in another thread lists a...
    assert any(c is alloc for c in candidates)
    retr: list[Any] = []
    value = _arguments.bare_kernel_argument(a, retr, 0)  # ... then a launch pins it
    assert value is not None and isinstance(retr[-1], _memory.LaunchPins)
    released, _ = _memory._evict(candidates, alloc.nbytes)
    assert released == 0 and alloc.device is not None and alloc.state is State.DEVICE
    for callback in retr:  # the launch was enqueued: the pins are released
        callback()
    with sa.track_transfers() as t:
        released, _ = _memory._evict(_memory._candidates(()), alloc.nbytes)
    assert released == alloc.nbytes and counts(t) == (0, 1)  # spilled
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.0))


@pytest.mark.usefixtures("empty_budget")
def test_a_launch_makes_its_arguments_the_most_recently_used() -> None:
    a, b, c = (sa.zeros(N, where="gpu") for _ in range(3))
    for array in (a, b, c):
        inc[1, N](array)
        inc[1, N](array)
    keys = [x._alloc.key for x in (a, b, c)]

    def order() -> list[int]:
        return [key for key in _memory._BUDGET.entries if key in keys]

    assert order() == keys
    inc[1, N](a)  # the steady state: a is used last
    assert order() == [keys[1], keys[2], keys[0]]
    add_into[1, N](b, c)
    assert order() == [keys[0], keys[1], keys[2]]
