"""Read-only views as kernel arguments (issue 24, item 8).

A bare read-only SmartArray (``a.diagonal()``, ``np.broadcast_to(a, ...)``) is prepared ``In``
when the kernel reads it, even where another argument of the launch writes the same
allocation, or where the analysis cannot prove that the kernel only reads it
(``t = x[i]; t += 1``): nothing can write through a read-only array, so it is never refused
for that. The written arguments keep the flags right for the whole allocation. Ledger
counts are exact. An explicit ``InOut``/``Out`` of a read-only array is the user asking to
write it: refused with a clear error, nothing changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import copies, copy_into, counts
from numba import cuda

import smartarray as sa
from smartarray._cuda import launch as _launch_intents
from smartarray._numba import access as _access

device = pytest.mark.device

N = 4


@cuda.jit
def copy_plus_one(dst, src):  # type: ignore[no-untyped-def]  # only reads src
    i = cuda.grid(1)
    if i < dst.size:
        t = src[i]
        t += 1  # untyped IR cannot tell an element from a row: counted as a write of src
        dst[i] = t


@cuda.jit
def copy_from_first(src, dst):  # type: ignore[no-untyped-def]  # copy_into, parameters swapped
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@cuda.jit
def store_into(a, src):  # type: ignore[no-untyped-def]  # stores into a
    i = cuda.grid(1)
    if i < a.size:
        a[i] = src[i]


@cuda.jit
def atomic_into(a, src):  # type: ignore[no-untyped-def]  # an atomic on a (numba-cuda allows
    i = cuda.grid(1)  # it on read-only arrays)
    if i < a.size:
        cuda.atomic.add(a, i, src[i])


def _square() -> sa.SmartArray:
    return sa.SmartArray(np.arange(N * N, dtype=np.float64).reshape(N, N))


def _expected_column_from_diagonal() -> np.ndarray:
    expected = np.arange(N * N, dtype=np.float64).reshape(N, N)
    expected[:, 2] = np.diagonal(expected).copy()
    return expected


# --- the read-only view shares its allocation with a written argument ----------------------


@device
@pytest.mark.parametrize("order", ["written first", "read-only view first"])
@pytest.mark.parametrize("start", ["host", "gpu", "both"])
def test_read_only_view_of_a_written_allocation_is_read(order: str, start: str) -> None:
    a = _square()
    if start != "host":
        a.get("gpu")
    if start == "gpu":
        a.mark_changed("gpu")
    diagonal = a.diagonal()
    assert not diagonal.flags.writeable
    with sa.track_transfers() as t:
        if order == "written first":
            copy_into[1, N](a[:, 2], diagonal)
        else:
            copy_from_first[1, N](diagonal, a[:, 2])
    # Nothing is copied when the device copy was current. From the host (a is 4x4 float64,
    # 128 bytes; its column 2 is bytes 16..24, 48..56, 80..88 and 112..120, its diagonal
    # 0..8, 40..48, 80..88 and 120..128), each argument uploads its bytes still stale on the
    # device (issue 21), in one copy across the bytes between them (closer than the
    # coalescing gap, and none newer on the device): the column 16..120, then the diagonal
    # 0..128; or the diagonal first, then the column's elements that were only copied along
    # in its gaps (a coalesced copy changes the state of the requested bytes only).
    if start != "host":
        assert copies(t) == []
    elif order == "written first":
        assert copies(t) == [("h2d", 16, 104), ("h2d", 0, 128)]
    else:
        assert copies(t) == [("h2d", 0, 128), ("h2d", 16, 104)]
    # The written column is current on the device only, the rest where it was current
    # (from the host: the bytes in neither argument on the host only, so a is 'mixed').
    assert a.location == ("mixed" if start == "host" else "gpu")
    assert a[:, 2].location == "gpu"
    with sa.track_transfers() as t:
        result = np.asarray(a)
    # Everything when only the device copy was current; else the column's bytes: in one copy
    # with the gaps between them when those are current on both sides, else one copy each
    # (from the host, the gaps are newer on the host).
    assert copies(t) == {
        "gpu": [("d2h", 0, 128)],
        "both": [("d2h", 16, 104)],
        "host": [("d2h", 16, 8), ("d2h", 48, 8), ("d2h", 80, 8), ("d2h", 112, 8)],
    }[start]
    np.testing.assert_array_equal(result, _expected_column_from_diagonal())


@device
@pytest.mark.parametrize("order", ["Out first", "read-only view first"])
def test_read_only_view_next_to_an_out_of_the_whole_allocation(order: str) -> None:
    # Out(x) of the whole allocation uploads nothing for itself; the read-only view it
    # shares memory with is read, so the old data is uploaded once, before the kernel
    # (a missing upload would leave the simulator's uninitialised device memory in x).
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    view = np.broadcast_to(x, (N,))
    assert isinstance(view, sa.SmartArray) and not view.flags.writeable
    with sa.track_transfers() as t:
        if order == "Out first":
            copy_into[1, N](sa.Out(x), view)
        else:
            copy_from_first[1, N](view, sa.Out(x))
    assert counts(t) == (1, 0) and x.location == "gpu"
    np.testing.assert_array_equal(np.asarray(x), np.arange(N))


@device
def test_read_only_view_that_the_analysis_counts_as_written_is_read() -> None:
    # t = x[i]; t += 1 counts as a write of x (conservative): a read-only x is still In.
    a = _square()
    out = sa.zeros(N)
    with sa.track_transfers() as t:
        copy_plus_one[1, N](out, a.diagonal())
    # a's diagonal, in one copy across the bytes between its elements (out's zeros are made
    # on the device: nothing to upload); only the diagonal's bytes become current on both sides
    assert copies(t) == [("h2d", 0, N * N * 8)]
    assert a.location == "host" and a.diagonal().location == "both" and out.location == "gpu"
    np.testing.assert_array_equal(np.asarray(out), np.diagonal(np.asarray(a)) + 1)
    # and with the written argument in the same allocation
    b = _square()
    with sa.track_transfers() as t:
        copy_plus_one[1, N](b[:, 2], b.diagonal())
    # the column's bytes, then the diagonal's in one copy (as in
    # test_read_only_view_of_a_written_allocation_is_read); the rest stays on the host only
    assert copies(t) == [("h2d", 16, 104), ("h2d", 0, 128)]
    assert b.location == "mixed" and b[:, 2].location == "gpu"
    expected = _expected_column_from_diagonal()
    expected[:, 2] += 1
    np.testing.assert_array_equal(np.asarray(b), expected)


@device
def test_read_only_view_in_a_tuple_argument_is_read() -> None:
    a = _square()
    with sa.track_transfers() as t:
        _copy_first_of_tuple[1, N](a[:, 2], (a.diagonal(),))
    if sa.tier() == "gpu":
        # numba-cuda prepares the tuple's arrays as arguments: the column's bytes, then the
        # diagonal's (as in test_read_only_view_of_a_written_allocation_is_read)
        assert copies(t) == [("h2d", 16, 104), ("h2d", 0, 128)]
        assert a.location == "mixed" and a[:, 2].location == "gpu"
    else:
        # The simulator passes a tuple as it is: the kernel reads the diagonal through the
        # SmartArray, on the host. Only the column goes up; the diagonal's ends (bytes 0..16
        # and 120..128) stay current on the host only (issue 21: per byte range).
        assert copies(t) == [("h2d", 16, 104)]
        assert a.location == "mixed" and a[:, 2].location == "gpu"
    np.testing.assert_array_equal(np.asarray(a), _expected_column_from_diagonal())


@cuda.jit
def _copy_first_of_tuple(dst, sources):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = sources[0][i]


@device
def test_read_only_view_kept_read_only_while_another_view_is_written() -> None:
    # The written argument's device copy of the allocation is marked changed; the
    # read-only view of a different allocation stays valid on both sides.
    a = _square()
    b = sa.SmartArray(np.zeros(N))
    b.get("gpu")
    with sa.track_transfers() as t:
        copy_into[1, N](b, a.diagonal())
        copy_into[1, N](b, a.diagonal())  # the second launch: nothing to copy
    assert counts(t) == (1, 0)
    # (only the diagonal's bytes were read: they are current on both sides, the rest of a
    # on the host only)
    assert a.location == "host" and a.diagonal().location == "both" and b.location == "gpu"


@device
@pytest.mark.parametrize("kernel", [store_into, atomic_into], ids=lambda k: k.__name__)
def test_a_kernel_that_stores_into_a_read_only_view_is_refused(kernel: Any) -> None:
    # A store (or an atomic, which numba-cuda compiles even for a read-only array) in the
    # kernel's own code into the read-only view: refused, as before, nothing changed.
    a = _square()
    with sa.track_transfers() as t, pytest.raises(ValueError, match="read-only"):
        kernel[1, N](a.diagonal(), a[:, 2])
    assert counts(t) == (0, 0) and a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(N * N).reshape(N, N))


def _plain_copy_plus_one(dst, src):  # type: ignore[no-untyped-def]  # copy_plus_one's code
    i = cuda.grid(1)
    if i < dst.size:
        t = src[i]
        t += 1
        dst[i] = t


def _plain_atomic_into(a, src):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(a, i, src[i])


def test_gpu_launch_hook_prepares_read_only_views_as_in() -> None:
    # The launch hook of the GPU tier (CUDADispatcher.call), driven without a GPU: the
    # intent each bare argument's to_device gets.
    seen: list[list[str]] = []

    def original(self: Any, args: Any, launch_config: Any) -> None:
        seen.append([_launch_intents.bare_intent(v) for v in _bare_arrays(args)])

    class Dispatcher:  # the attributes of CUDADispatcher the hook uses
        def __init__(self, func: Any) -> None:
            self.py_func = func

    call = _launch_intents._hooked_call(original)
    copy, atomic = Dispatcher(_plain_copy_plus_one), Dispatcher(_plain_atomic_into)
    a, b = _square(), sa.zeros(N)
    call(copy, (a[:, 2], a.diagonal()), None)  # shares the written allocation
    call(copy, (b, a.diagonal()), None)  # t += 1: may be written, never stored into
    call(copy, (b, (a.diagonal(), a.diagonal())), None)  # in a tuple argument
    call(copy, (a.diagonal(), a[:, 2]), None)  # the kernel stores into the read-only view
    call(atomic, (a.diagonal(), b), None)  # an atomic on it
    call(atomic, (b, a.diagonal()), None)
    assert seen == [
        ["inout", "in"],
        ["inout", "in"],
        ["inout", "in", "in"],
        ["inout", "inout"],  # (the first is refused at launch: nothing is prepared)
        ["inout", "in"],  # (the first refused: b, another allocation, is only read)
        ["inout", "in"],
    ]
    assert _launch_intents.bare_intent(a.diagonal()) == "inout"  # outside a launch
    # explain_intents says the same
    report = sa.explain_intents(_plain_copy_plus_one, a[:, 2], a.diagonal())
    assert report.intents() == ("InOut", "In") and report.arguments[1].source == "read-only array"
    report = sa.explain_intents(_plain_atomic_into, a.diagonal(), b)
    assert report.intents() == ("InOut", "In") and "refused" in report.arguments[0].reasons[0]
    # what the analysis says of them: may write, and stores into
    access = _access.analyse(_plain_copy_plus_one)
    assert _launch_intents.access_mask(access) == ((True, True), True)
    assert _launch_intents.store_mask(access) == ((True, False), True)
    assert _launch_intents.store_mask(_access.analyse(_plain_atomic_into)) == ((True, False), True)


def _bare_arrays(args: Any) -> list[sa.SmartArray]:
    found: list[sa.SmartArray] = []
    for value in args:
        if isinstance(value, sa.SmartArray):
            found.append(value)
        elif isinstance(value, tuple):
            found.extend(_bare_arrays(value))
    return found


# --- explicit writing intents of a read-only array -------------------------------------------


@pytest.mark.parametrize("intent", [sa.InOut, sa.Out])
def test_explicit_writing_intent_of_a_read_only_view_is_refused_clearly(intent: Any) -> None:
    a = _square()
    state = a.location
    with sa.track_transfers() as t, pytest.raises(ValueError) as info:
        intent(a.diagonal())
    message = str(info.value)
    assert f"smartarray.{intent.__name__}" in message
    assert "read-only view" in message and a.label in message
    assert "smartarray.In(" in message and ".copy()" in message  # the fixes
    assert counts(t) == (0, 0) and a.location == state
    np.testing.assert_array_equal(np.asarray(a), np.arange(N * N).reshape(N, N))


@device
@pytest.mark.parametrize("hint", ["InOut", "Out"])
def test_numba_cuda_writing_hint_of_a_read_only_view_is_refused_clearly(hint: str) -> None:
    a = _square()
    a.get("gpu")
    with sa.track_transfers() as t, pytest.raises(ValueError) as info:
        copy_into[1, N](getattr(cuda, hint)(a.diagonal()), a[:, 2])
    message = str(info.value)
    assert f"numba.cuda.{hint}" in message and "read-only view" in message
    assert a.label in message and "smartarray.In(" in message
    assert counts(t) == (0, 0) and a.location == "both"
