"""Regression tests, without a GPU, for what the first real-GPU run found (commit 5477369).

1. The device-resident launch path (``Allocation.launch_value``, from ``_cuda.arguments``):
   taken in a chain of kernels over device-resident arrays, and declined (the general path
   then runs, with the same flags, transfers and errors) whenever a flag, an order or an
   export is at stake.
2. Mapped host buffers: a plain ndarray over numba-cuda's mapped allocation, whose device
   memory ``backend.mapped_memory`` finds through the base chain (fakes with the structure
   of numba-cuda's ``mapped_array``; any tier).
3. ``wait_for_default_stream``: only non-blocking streams wait on the default stream (faked
   CUDA module; any tier).
4. ``check_device_dtype``'s cache of accepted dtypes: rejected dtypes are never cached.
5. No buffer protocol: typing a SmartArray for ``@njit`` never touches its data, and the
   writable and read-only SmartArray types stay distinct.
"""

from __future__ import annotations

import contextlib
import gc
import types
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np
import pytest
from helpers import copy_into, counts
from helpers import inc as increment
from numba import cuda, njit
from numpy_typing_compat import StringDType

import smartarray as sa
from smartarray._core import backend as _backend
from smartarray._core import host_buffers as _host_buffers
from smartarray._core.coherence import Allocation, State
from smartarray._cuda.arguments import kernel_argument
from smartarray._numba.types import SmartArrayType

N = 16
device = pytest.mark.device
simulator_only = pytest.mark.skipif(
    sa.tier() != "simulator",
    reason="simulator semantics (In arrays are read-only ndarrays; a launch's stream is dropped)",
)


@cuda.jit
def accumulate(out, x):  # type: ignore[no-untyped-def]  # writes out, reads x (inferred In)
    i = cuda.grid(1)
    if i < out.size:
        out[i] += x[i]




class ResidentSpy:
    """Wraps ``Allocation.launch_value`` (the device-resident launch path of
    ``_cuda.arguments``): records ``(label, intent, taken)`` once per argument that the
    resident path was tried for, ``taken`` False when it declined (the general launch path
    then ran). The steady state finds the cached launch value in one call (recorded when
    found); otherwise the full check runs (``make`` given; recorded whatever it returns)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, bool]] = []
        original = Allocation.launch_value

        def spy(
            alloc: Allocation,
            key: tuple[Any, ...],
            writes: bool,
            pins: Any,
            work: bool,
            make: Any = None,
        ) -> Any:
            value = original(alloc, key, writes, pins, work, make)
            if value is not None or make is not None:
                self.calls.append((alloc.label, "inout" if writes else "in", value is not None))
            return value

        monkeypatch.setattr(Allocation, "launch_value", spy)

    def take(self) -> list[tuple[str, str, bool]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> ResidentSpy:
    return ResidentSpy(monkeypatch)


@pytest.fixture
def no_limit_after() -> Iterator[None]:
    yield
    sa.set_device_memory_limit(None)



def device_values(a: sa.SmartArray) -> np.ndarray:
    """The device copy's data (a download outside any ledger being asserted)."""
    return np.array(a.get("gpu").copy_to_host())


def assert_spilled_by_a_zero_limit(a: sa.SmartArray, expected: np.ndarray) -> None:
    """``a``'s device copy (the only current one) is not pinned: a zero limit spills it."""
    gc.collect()  # (a failed launch's pins live until its traceback is collected)
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)
    mine = [record for record in t.records if record.array == a.label]
    assert [(r.direction, r.spill, r.nbytes) for r in mine] == [("d2h", True, a.nbytes)]
    assert a._alloc.device is None and a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), expected)


# --- 1. the device-resident launch path ---------------------------------------------------


@device
def test_a_kernel_chain_takes_the_resident_path_for_read_and_written_arguments(
    spy: ResidentSpy,
) -> None:
    out = sa.zeros(N, where="gpu")
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        for _ in range(5):
            accumulate[1, N](out, x)
    assert counts(t) == (1, 0)  # x uploaded once; nothing downloaded
    calls = spy.take()
    # out is current on both sides (made filled) and written: the general path once (no
    # copy); x: an upload
    assert calls[:2] == [(out.label, "inout", False), (x.label, "in", False)]
    assert calls[2:] == [(out.label, "inout", True), (x.label, "in", True)] * 4
    assert out._alloc.state is State.DEVICE and not out.is_valid("host")
    assert x._alloc.state is State.BOTH  # read only: the host copy stays current
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(out), 5 * np.arange(N))
    assert counts(t) == (0, 1)


@device
def test_both_copies_current_and_a_written_argument_take_the_general_path(
    spy: ResidentSpy,
) -> None:
    a = sa.SmartArray(np.ones(N))
    a.to_gpu()
    assert a.location == "both"
    with sa.track_transfers() as t:
        increment[1, N](a)
    assert counts(t) == (0, 0)
    assert spy.take() == [(a.label, "inout", False)]
    assert a.location == "gpu" and not a.is_valid("host") and a.is_valid("gpu")
    with sa.track_transfers() as t:
        increment[1, N](a)  # now device-only: the resident path
    assert counts(t) == (0, 0) and spy.take() == [(a.label, "inout", True)]
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 3.0))


@device
def test_a_kept_host_view_sees_every_write_and_blocks_the_resident_path(
    spy: ResidentSpy,
) -> None:
    a = sa.zeros(N, where="gpu")
    increment[1, N](a)  # current on both sides (made filled), written: the general path
    assert spy.take() == [(a.label, "inout", False)]
    increment[1, N](a)  # device-only now: resident
    assert spy.take() == [(a.label, "inout", True)]
    h = np.asarray(a)  # a kept host export: both copies current from here on
    for step in range(3, 6):
        with sa.track_transfers() as t:
            increment[1, N](a)
        assert counts(t) == (0, 1)  # the download that keeps h current
        assert spy.take() == [(a.label, "inout", False)]
        np.testing.assert_array_equal(h, np.full(N, float(step)))
        assert a.location == "both"
    total = sa.zeros(N, where="gpu")
    increment[1, N](total)  # device-only: resident from the first launch below
    spy.take()
    with sa.track_transfers() as t:
        accumulate[1, N](total, a)  # a only read: nothing to refresh, still not resident
    assert counts(t) == (0, 0)
    assert spy.take() == [(total.label, "inout", True), (a.label, "in", False)]
    del h
    gc.collect()
    with sa.track_transfers() as t:
        accumulate[1, N](total, a)  # the export is gone: a is resident (read, state BOTH)
    assert counts(t) == (0, 0)
    assert spy.take() == [(total.label, "inout", True), (a.label, "in", True)]
    np.testing.assert_array_equal(np.asarray(total), np.full(N, 11.0))


@device
def test_mapped_memory_takes_the_general_path(spy: ResidentSpy) -> None:
    m = sa.zeros(N, where="gpu", host_memory="mapped")
    assert m.location == "both"  # one buffer, current on both sides
    out = sa.zeros(N, where="gpu")
    out.mark_changed("gpu")  # device-only (zeros): resident
    with sa.track_transfers() as t:
        increment[1, N](m)
        accumulate[1, N](out, m)  # read: state BOTH with In, declined for the mapping
    assert counts(t) == (0, 0)
    assert spy.take() == [
        (m.label, "inout", False),
        (out.label, "inout", True),
        (m.label, "in", False),
    ]
    assert m.location == "both"
    np.testing.assert_array_equal(np.asarray(m), np.ones(N))
    np.testing.assert_array_equal(np.asarray(out), np.ones(N))


@device
def test_out_takes_the_general_path(spy: ResidentSpy) -> None:
    src = sa.SmartArray(np.arange(N, dtype=np.float64))
    dst = sa.zeros(N, where="gpu")
    with sa.track_transfers() as t:
        copy_into[1, N](sa.Out(dst), src)
    assert counts(t) == (1, 0)
    assert spy.take() == [(src.label, "in", False)]  # Out(dst) never asks
    assert dst.location == "gpu"
    with sa.track_transfers() as t:
        copy_into[1, N](sa.Out(dst), src)  # src resident now
    assert counts(t) == (0, 0) and spy.take() == [(src.label, "in", True)]
    np.testing.assert_array_equal(np.asarray(dst), np.arange(N))


@device
@simulator_only
def test_a_launch_on_another_stream_takes_the_general_path(spy: ResidentSpy) -> None:
    # The simulator drops a launch's stream (kernel[grid, block, stream] prepares arguments
    # with stream 0), so the argument is prepared here as numba-cuda does on a GPU.
    a = sa.zeros(N, where="gpu")
    retr: list[Any] = []
    with sa.track_transfers() as t:
        value = kernel_argument(a, "inout", retr, cuda.stream())
        value._ary[...] += 1  # the kernel
        for callback in retr:
            callback()
    assert counts(t) == (0, 0)
    assert spy.take() == []  # not even asked
    assert a.location == "gpu"
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))


@pytest.mark.gpu
def test_a_launch_on_a_stream_takes_the_general_path_on_a_gpu(
    spy: ResidentSpy,
) -> None:  # pragma: no cover - tier 3
    a = sa.zeros(N, where="gpu")
    stream = cuda.stream()
    with sa.track_transfers() as t:
        increment[1, N, stream](a)
    assert counts(t) == (0, 0) and spy.take() == []
    assert a.location == "gpu"
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))  # (waits for the stream)


@device
def test_pending_work_on_another_stream_is_waited_for_by_the_general_path(
    spy: ResidentSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device copy with an event pending (work on another stream) is never handed over
    unordered; once the general path has ordered the launch after it, the chain is resident."""
    if sa.tier() != "simulator":
        pytest.skip("replaces the simulator's event functions")
    waits: list[tuple[Any, Any]] = []

    def record_event(stream: Any, always: bool = False) -> Any:
        return None if _backend.is_default_stream(stream) and not always else ("event", stream)

    monkeypatch.setattr(_backend, "record_event", record_event)
    monkeypatch.setattr(
        _backend, "wait_event", lambda event, stream=None: waits.append((event, stream))
    )
    a = sa.zeros(N, where="gpu")
    stream = cuda.stream()
    retr: list[Any] = []
    kernel_argument(a, "inout", retr, stream)._ary[...] += 1
    for callback in retr:
        callback()
    assert a._alloc._device_event == ("event", stream)
    increment[1, N](a)
    assert spy.take() == [(a.label, "inout", False)]
    assert waits == [(("event", stream), 0)]  # the launch waited for the other stream
    assert a._alloc._device_event is None
    increment[1, N](a)
    assert spy.take() == [(a.label, "inout", True)]
    assert waits == [(("event", stream), 0)]
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 3.0))


@device
def test_the_resident_path_still_orders_later_non_blocking_streams(
    spy: ResidentSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resident launch is default-stream work: a later stream that does not synchronise
    with the default stream must wait for it (as the general path records)."""
    if sa.tier() != "simulator":
        pytest.skip("replaces the simulator's stream functions")
    waited: list[Any] = []
    monkeypatch.setattr(_backend, "is_gpu_default_stream", _backend.is_default_stream)
    monkeypatch.setattr(_backend, "wait_for_default_stream", waited.append)
    a = sa.zeros(N, where="gpu")
    s1, s2 = cuda.stream(), cuda.stream()
    retr: list[Any] = []
    kernel_argument(a, "inout", retr, s1)  # last device work on s1: no default-stream work
    for callback in retr:
        callback()
    waited.clear()
    assert a._alloc._default_stream_work is False
    increment[1, N](a)
    assert spy.take() == [(a.label, "inout", True)]
    assert a._alloc._default_stream_work is True
    a.get("gpu", stream=s2)
    assert waited == [s2]


@device
def test_the_same_allocation_twice_with_a_write(spy: ResidentSpy) -> None:
    # Host copy current too: the first argument starts a device write (the host copy stays
    # authoritative until the launch is enqueued), so the second is declined as well.
    x = sa.SmartArray(np.ones(N))
    x.to_gpu()
    with sa.track_transfers() as t:
        accumulate[1, N](x, x)
    assert counts(t) == (0, 0)
    assert spy.take() == [(x.label, "inout", False), (x.label, "inout", False)]
    assert x.location == "gpu"
    np.testing.assert_array_equal(np.asarray(x), np.full(N, 2.0))
    y = sa.SmartArray(np.arange(2 * N, dtype=np.float64))
    y.to_gpu()
    with sa.track_transfers() as t:
        accumulate[1, N](y[:N], y[N:])
    assert counts(t) == (0, 0)
    assert spy.take() == [(y.label, "inout", False), (y.label, "inout", False)]
    assert y.location == "gpu"
    expected = np.arange(2 * N, dtype=np.float64)
    expected[:N] += expected[N:]
    np.testing.assert_array_equal(np.asarray(y), expected)
    # Device copy alone current: no flag to change, both arguments are handed over.
    z = sa.full(2 * N, 0.0, where="gpu")
    increment[2, N](z)  # device-only (ones)
    spy.take()
    with sa.track_transfers() as t:
        accumulate[1, N](z[:N], z[N:])
        accumulate[2, N](z, z)
    assert counts(t) == (0, 0)
    assert spy.take() == [(z.label, "inout", True)] * 4
    assert z.location == "gpu"
    np.testing.assert_array_equal(np.asarray(z), np.r_[np.full(N, 4.0), np.full(N, 2.0)])


@device
@simulator_only
def test_a_read_only_array_given_to_a_writing_kernel_raises_as_before(
    spy: ResidentSpy,
) -> None:
    a = sa.full(N, 1.0, where="gpu")
    increment[1, N](a)  # device-only (twos)
    spy.take()
    data = np.full(N, 3.0)
    data.flags.writeable = False
    adopted = sa.SmartArray(data, copy=False, where="gpu")
    for readonly, owner, location in (
        (np.broadcast_to(a, (N,)), a, "gpu"),
        (np.broadcast_to(a[:4], (4,)), a, "gpu"),
        (adopted, adopted, "both"),
    ):
        assert isinstance(readonly, sa.SmartArray) and not readonly.flags.writeable
        before = device_values(owner)
        with sa.track_transfers() as t, pytest.raises(
            ValueError, match=r"^assignment destination is read-only$"
        ):
            increment[1, N](readonly)
        assert counts(t) == (0, 0)
        assert spy.take() == []  # (a write to a read-only array: not even tried)
        assert owner.location == location
        np.testing.assert_array_equal(device_values(owner), before)
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.0))
    np.testing.assert_array_equal(np.asarray(adopted), np.full(N, 3.0))


@device
@simulator_only
@pytest.mark.usefixtures("no_limit_after")
def test_in_of_a_resident_array_is_resident_and_read_only(spy: ResidentSpy) -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    increment[1, N](a)  # device-only from here
    spy.take()
    out = sa.zeros(N, where="gpu")
    with sa.track_transfers() as t:
        copy_into[1, N](out, sa.In(a))
    assert counts(t) == (0, 0)
    # out: current on both sides (made filled) and written, the general path (no copy)
    assert spy.take() == [(out.label, "inout", False), (a.label, "in", True)]
    assert a.location == "gpu"
    with sa.track_transfers() as t, pytest.raises(ValueError, match="read-only"):
        increment[1, N](sa.In(a))  # the kernel's write hits a read-only array
    assert counts(t) == (0, 0)
    assert spy.take() == [(a.label, "in", True)]
    assert a.location == "gpu" and not a.is_valid("host")
    np.testing.assert_array_equal(device_values(a), np.arange(N) + 1)
    assert_spilled_by_a_zero_limit(a, np.arange(N) + 1.0)
    np.testing.assert_array_equal(np.asarray(out), np.arange(N) + 1)


@device
@simulator_only
@pytest.mark.usefixtures("no_limit_after")
def test_a_failed_launch_after_the_resident_path_changes_nothing(spy: ResidentSpy) -> None:
    b = sa.full(N, 4.0, where="gpu")
    increment[1, N](b)  # device-only (fives): resident
    spy.take()
    for kernel, bad_arguments in (
        (increment, (b, b)),  # one parameter
        (increment, (b, "text")),
        (accumulate, (b, 3.0)),  # 3.0[i]
    ):
        with sa.track_transfers() as t, pytest.raises(TypeError):
            kernel[1, N](*bad_arguments)
        assert counts(t) == (0, 0)
        assert spy.take() == [(b.label, "inout", True)] * (2 if bad_arguments[1] is b else 1)
        assert b._alloc.state is State.DEVICE
        np.testing.assert_array_equal(device_values(b), np.full(N, 5.0))
    increment[1, N](b)  # still usable, still resident
    assert spy.take() == [(b.label, "inout", True)]
    assert_spilled_by_a_zero_limit(b, np.full(N, 6.0))


@device
@pytest.mark.usefixtures("no_limit_after")
def test_a_resident_argument_is_pinned_until_its_launch_is_enqueued(spy: ResidentSpy) -> None:
    gc.collect()
    sa.set_device_memory_limit(0)  # no other test's device copy left to evict
    sa.set_device_memory_limit(None)
    resident = sa.SmartArray(np.full(N, 2.0), label="resident", where="gpu")
    resident.mark_changed("gpu")  # device-only
    x = sa.SmartArray(np.ones(N), label="needs an upload")
    sa.set_device_memory_limit(sa.device_memory_usage())  # no room for x but resident's
    with sa.track_transfers() as t, pytest.raises(MemoryError) as error:
        accumulate[1, N](resident, x)  # x's upload may not evict the resident argument
    assert "in use by this operation: resident" in str(error.value)
    assert counts(t) == (0, 0)
    assert spy.take() == [("resident", "inout", True), ("needs an upload", "in", False)]
    assert resident.location == "gpu" and x.location == "host"
    np.testing.assert_array_equal(device_values(resident), np.full(N, 2.0))
    # The failed preparation released the launch's pins, the resident argument's included.
    assert_spilled_by_a_zero_limit(resident, np.full(N, 2.0))
    np.testing.assert_array_equal(np.asarray(x), np.ones(N))


@device
def test_a_byte_swapped_array_is_refused_with_the_clear_error() -> None:
    """Numba's own error for non-native byte order (``NumbaNotImplementedError``, no
    ``NotImplementedError``) escaped ``check_device_dtype``; found by these tests."""
    a = sa.SmartArray(np.arange(N, dtype=">f8"))
    attempts = [lambda: a.get("gpu"), lambda: sa.SmartArray(np.ones(N, ">f8"), where="gpu")]
    if sa.tier() == "simulator":  # (on a GPU, Numba types the arguments before they are prepared)
        attempts.append(lambda: increment[1, N](a))
    for attempt in attempts:
        with sa.track_transfers() as t, pytest.raises(TypeError, match="cannot live on a CUDA"):
            attempt()
        assert counts(t) == (0, 0)
        assert a.location == "host" and a._alloc.device is None
    np.testing.assert_array_equal(np.asarray(a), np.arange(N))


# --- 2. mapped host buffers -----------------------------------------------------------------


class FakeMappedPointer(bytearray):
    """Stands in for numba-cuda's ``MappedOwnedPointer``: host bytes with a device pointer."""

    device_ctypes_pointer = "device pointer"


class FakeMappedNDArray(np.ndarray):
    """Stands in for numba-cuda's ``MappedNDArray``: an ndarray subclass whose ``view`` and
    ``flags`` are a device array's (numba-cuda's ``DeviceNDArrayBase`` comes first)."""

    gpu_data: Any = None

    def view(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        raise TypeError("a device array's view(dtype) takes no array type")

    @property
    def flags(self) -> Any:  # type: ignore[override]
        return {"C_CONTIGUOUS": True}  # a device array's flags: a dict


def fake_mapped_array(shape: Any, dtype: Any = np.float64, order: str = "C", **_: Any) -> Any:
    """``numba.cuda.mapped_array`` as numba-cuda 0.30 builds it, over a fake allocation."""
    dtype = np.dtype(dtype)
    buffer = FakeMappedPointer(int(np.prod(shape)) * dtype.itemsize)
    npary = np.ndarray(shape=shape, dtype=dtype, order=order, buffer=buffer)
    mapped = np.ndarray.view(npary, type=FakeMappedNDArray)
    mapped.gpu_data = buffer
    return mapped


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda = types.SimpleNamespace(mapped_array=fake_mapped_array)
    monkeypatch.setattr(_backend, "tier", lambda: "gpu")
    monkeypatch.setattr(_backend, "require_device", lambda: None)
    monkeypatch.setattr(_backend, "cuda", lambda: fake_cuda)


@pytest.mark.usefixtures("fake_gpu")
def test_a_mapped_host_buffer_is_a_plain_ndarray_over_the_allocation() -> None:
    host = _host_buffers.host_empty((2, 4), np.dtype(np.float64), "C", "mapped")
    assert type(host) is np.ndarray and host.shape == (2, 4) and host.dtype == np.float64
    assert host.flags.writeable and host.flags.c_contiguous  # ndarray's flags
    plain = host.view(np.ndarray)
    assert type(plain) is np.ndarray
    host.fill(1.5)
    np.testing.assert_array_equal(plain, np.full((2, 4), 1.5))
    allocation = _backend.mapped_memory(host)
    assert isinstance(allocation, FakeMappedPointer)
    assert bytes(allocation) == np.full(8, 1.5).tobytes()  # the buffer itself, not a copy
    assert _backend.mapped_memory(plain) is allocation
    assert _backend.mapped_memory(host[1, ::2]) is allocation  # views of it, too


@pytest.mark.usefixtures("fake_gpu")
def test_mapped_memory_follows_an_uncollapsed_chain_to_gpu_data() -> None:
    buffer = FakeMappedPointer(4 * 8)
    mapped = FakeMappedNDArray(shape=(4,), dtype=np.float64, buffer=buffer)
    mapped.gpu_data = "gpu data of the mapped array"
    host = np.ndarray.view(mapped, np.ndarray)  # base: the subclass (numpy stops collapsing)
    assert host.base is mapped
    assert _backend.mapped_memory(host) == "gpu data of the mapped array"
    collapsed = np.ndarray.view(fake_mapped_array((4,)), np.ndarray)
    assert type(collapsed.base) is np.ndarray and collapsed.base.base is not None
    assert isinstance(_backend.mapped_memory(collapsed), FakeMappedPointer)


@pytest.mark.parametrize(
    "host",
    [
        np.zeros(4),
        np.arange(8.0)[::2],
        np.ndarray((4,), np.float64, buffer=bytearray(32)),
        np.ndarray.view(np.ndarray((4,), np.float64, buffer=bytearray(32)), FakeMappedNDArray),
    ],
    ids=["owner", "view", "foreign-buffer", "subclass-without-gpu-data"],
)
def test_mapped_memory_refuses_other_arrays(host: np.ndarray) -> None:
    view = np.ndarray.view(host, np.ndarray)
    with pytest.raises(ValueError, match="not a view of mapped host memory"):
        _backend.mapped_memory(view)


# --- 3. which streams wait for the default stream ------------------------------------------


class FakeCudaEvents:
    """A fake ``numba.cuda`` module: ``event()`` and ``default_stream()``, logging every call."""

    DEFAULT = types.SimpleNamespace(handle=0, name="default stream")

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def event(self, timing: bool = True) -> Any:
        self.log.append(("event", timing))
        log = self.log
        return types.SimpleNamespace(
            record=lambda stream: log.append(("record", stream)),
            wait=lambda stream: log.append(("wait", stream)),
        )

    def default_stream(self) -> Any:
        return self.DEFAULT


@pytest.fixture
def fake_events(monkeypatch: pytest.MonkeyPatch) -> FakeCudaEvents:
    fake = FakeCudaEvents()
    monkeypatch.setattr(_backend, "tier", lambda: "gpu")
    monkeypatch.setattr(_backend, "cuda", lambda: fake)
    monkeypatch.setattr(
        _backend, "is_non_blocking_stream", lambda stream: not stream.blocking
    )
    return fake


def stream_object(handle: int, blocking: bool) -> Any:
    return types.SimpleNamespace(handle=handle, blocking=blocking)


def test_a_blocking_stream_waits_on_no_event(fake_events: FakeCudaEvents) -> None:
    _backend.wait_for_default_stream(stream_object(7, blocking=True))
    assert fake_events.log == []


def test_a_non_blocking_stream_waits_on_a_default_stream_event(
    fake_events: FakeCudaEvents,
) -> None:
    stream = stream_object(9, blocking=False)
    _backend.wait_for_default_stream(stream)
    assert fake_events.log == [
        ("event", False),
        ("record", FakeCudaEvents.DEFAULT),
        ("wait", stream),
    ]


def test_the_default_stream_and_other_tiers_wait_on_nothing(
    fake_events: FakeCudaEvents, monkeypatch: pytest.MonkeyPatch
) -> None:
    for stream in (None, 0, stream_object(0, blocking=False)):
        _backend.wait_for_default_stream(stream)
    monkeypatch.setattr(_backend, "tier", lambda: "simulator")
    _backend.wait_for_default_stream(stream_object(9, blocking=False))
    assert fake_events.log == []


def test_unreadable_stream_flags_count_as_non_blocking() -> None:
    assert _backend.is_non_blocking_stream(types.SimpleNamespace(handle="not a handle"))
    assert _backend.is_non_blocking_stream(object())


def test_stream_flags_are_read_from_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        from numba.cuda.cudadrv.driver import binding, driver
    except ImportError:
        pytest.skip("the simulator has no CUDA driver bindings")
    non_blocking = int(binding.CUstream_flags.CU_STREAM_NON_BLOCKING)
    asked: list[int] = []

    def flags_of(handle: int) -> int:
        asked.append(handle)
        return non_blocking if handle == 11 else 0

    monkeypatch.setitem(driver.__dict__, "cuStreamGetFlags", flags_of)  # (no driver init)
    assert _backend.is_non_blocking_stream(types.SimpleNamespace(handle=11))
    assert not _backend.is_non_blocking_stream(types.SimpleNamespace(handle=12))
    assert not _backend.is_non_blocking_stream(13)  # a raw handle
    assert asked == [11, 12, 13]

    def broken(handle: int) -> int:
        raise RuntimeError("driver error")

    monkeypatch.setitem(driver.__dict__, "cuStreamGetFlags", broken)
    assert _backend.is_non_blocking_stream(types.SimpleNamespace(handle=11))


# --- 4. the device dtype check and its cache ------------------------------------------------

REFUSED_DTYPES = [
    np.dtype(object),
    StringDType(),
    np.dtype([("x", "f8"), ("o", "O")]),
    np.dtype("V8"),
    np.dtype(">f8"),
    np.dtype([("x", ">i4")]),
]
ACCEPTED_DTYPES = [
    np.dtype(np.float64),
    np.dtype(np.int8),
    np.dtype(np.complex64),
    np.dtype(np.bool_),
    np.dtype("M8[ns]"),
    np.dtype("U4"),
    np.dtype([("x", "f8"), ("n", "i4")]),
]


@pytest.mark.parametrize("dtype", REFUSED_DTYPES, ids=str)
def test_refused_dtypes_raise_every_time_and_are_never_cached(dtype: np.dtype) -> None:
    for _ in range(2):
        with pytest.raises(TypeError, match=r"cannot live on a CUDA device") as raised:
            _backend.check_device_dtype(dtype)
        assert "where='host'" in str(raised.value)
    assert dtype not in _backend._DEVICE_DTYPES


@pytest.mark.parametrize("dtype", ACCEPTED_DTYPES, ids=str)
def test_accepted_dtypes_pass_and_are_cached(dtype: np.dtype) -> None:
    _backend.check_device_dtype(dtype)
    assert dtype in _backend._DEVICE_DTYPES
    _backend.check_device_dtype(dtype)


def test_the_cache_holds_only_dtypes_the_full_check_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for dtype in REFUSED_DTYPES + ACCEPTED_DTYPES:
        with contextlib.suppress(TypeError):
            _backend.check_device_dtype(dtype)
    cached = set(_backend._DEVICE_DTYPES)  # (this test's dtypes and earlier tests' ones)
    assert set(ACCEPTED_DTYPES) <= cached
    assert not any(dtype in cached for dtype in REFUSED_DTYPES)
    monkeypatch.setattr(_backend, "_DEVICE_DTYPES", set())
    for dtype in cached:
        _backend.check_device_dtype(dtype)  # accepted again by the check itself, uncached
    assert cached == _backend._DEVICE_DTYPES


# --- 5. typing SmartArrays for @njit ----------------------------------------------------------


@njit
def total(a):  # type: ignore[no-untyped-def]
    return a.sum()


@njit
def overwrite(a, value):  # type: ignore[no-untyped-def]
    a[:] = value


def test_writable_and_read_only_arrays_type_as_two_smartarray_types() -> None:
    @njit
    def first(a):  # type: ignore[no-untyped-def]
        return a[0]

    a = sa.SmartArray(np.arange(4.0))
    readonly = np.broadcast_to(a, (4,))
    writable_type, readonly_type = numba.typeof(a), numba.typeof(readonly)
    assert isinstance(writable_type, SmartArrayType) and isinstance(readonly_type, SmartArrayType)
    assert writable_type == a._numba_type_ and readonly_type == readonly._numba_type_
    assert writable_type.mutable and not readonly_type.mutable
    assert writable_type != readonly_type and writable_type.dtype == readonly_type.dtype
    assert first(a) == 0.0 and first(readonly) == 0.0
    assert first.signatures == [(writable_type,), (readonly_type,)]


@device
def test_njit_calls_with_a_device_only_argument_copy_only_what_the_function_needs() -> None:
    from numba._dispatcher import compute_fingerprint

    a = sa.full(N, 1.0, where="gpu")
    increment[1, N](a)  # device-only (twos)
    with sa.track_transfers() as t:
        assert numba.typeof(a) == a._numba_type_
        assert total.typeof_pyval(a) == a._numba_type_
        with pytest.raises(NotImplementedError):  # the dispatcher's first probe: no buffer
            compute_fingerprint(a)
    assert counts(t) == (0, 0) and a.location == "gpu"  # typing touched no data
    with sa.track_transfers() as t:
        results = [total(a) for _ in range(20)]
    assert counts(t) == (0, 1) and results == [2.0 * N] * 20
    assert a.location == "both"
    b = sa.full(N, 0.0, where="gpu")
    increment[1, N](b)  # device-only
    with sa.track_transfers() as t:
        for k in range(20):
            overwrite(b, float(k))
    assert counts(t) == (0, 1)  # the first call's download; later calls find it current
    assert b.location == "host"
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 19.0))
    c = sa.full(N, 2.0, where="gpu")
    increment[1, N](c)  # device-only (threes)
    readonly = np.broadcast_to(c, (N,))
    with sa.track_transfers() as t:
        results = [total(readonly) for _ in range(20)]
    assert counts(t) == (0, 1) and results == [3.0 * N] * 20
    assert (a._numba_type_,) in total.signatures
    assert (readonly._numba_type_,) in total.signatures
    assert a._numba_type_ != readonly._numba_type_
