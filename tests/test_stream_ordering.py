"""Cross-stream ordering decisions of the coherence state machine.

On a GPU, device work touching an array is ordered across streams by CUDA events; work on
the default stream records none, so a later non-blocking stream is made to wait for the
default stream instead. The simulator runs everything synchronously, so here (in the
simulator tier) the backend's event functions are replaced: first by recorders, to check
which waits given sequences ask for; then by a happens-before model of CUDA streams, against
which a hypothesis state machine checks random sequences of launches, asynchronous copies,
host and @njit accesses for races. Launches on real streams run in test_gpu.py.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from helpers import inc
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from numba import cuda, njit

import smartarray as sa
from smartarray._core import backend as _backend
from smartarray._cuda.arguments import kernel_argument

pytestmark = pytest.mark.device

N = 8


class EventLog:
    """Stands in for CUDA events: records what would be recorded and waited for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, Any]] = []
        monkeypatch.setattr(_backend, "is_gpu_default_stream", _backend.is_default_stream)
        monkeypatch.setattr(_backend, "record_event", self.record_event)
        monkeypatch.setattr(_backend, "wait_event", self.wait_event)
        monkeypatch.setattr(_backend, "wait_for_default_stream", self.wait_for_default_stream)

    def record_event(self, stream: Any, always: bool = False) -> Any:
        if _backend.is_default_stream(stream) and not always:
            return None
        event = ("event", len(self.calls))
        self.calls.append(("record", event))
        return event

    def wait_event(self, event: Any, stream: Any = None) -> None:
        if event is not None:
            self.calls.append(("wait", event))

    def wait_for_default_stream(self, stream: Any) -> None:
        self.calls.append(("wait for default stream", stream))

    def take(self) -> list[tuple[str, Any]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> EventLog:
    if sa.tier() != "simulator":
        pytest.skip("replaces the event functions of the simulator tier")
    return EventLog(monkeypatch)


def test_non_blocking_stream_waits_for_earlier_default_stream_work(log: EventLog) -> None:
    # (The simulator hands launches' streams to no argument, so streams are given to get().)
    s1, s2 = cuda.stream(), cuda.stream()
    a = sa.SmartArray(np.zeros(N))
    inc[1, N](a)  # upload and kernel on the default stream: no event
    assert log.take() == []
    a.get("host", stream=s1)  # waits for the default stream's kernel, records the download
    first = log.take()
    assert first == [("wait for default stream", s1), ("record", first[1][1])]
    a.get("gpu", stream=s2)  # waits for s1's download only
    assert log.take() == [("wait", first[1][1])]
    inc[1, N](a)  # back on the default stream: waits for s1's event again, records none
    assert log.take() == [("wait", first[1][1])]
    a.get("gpu", stream=s2)
    assert log.take() == [("wait for default stream", s2)]
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.0))


def test_blocking_host_read_needs_no_event_after_default_stream_work(log: EventLog) -> None:
    a = sa.SmartArray(np.zeros(N))
    inc[1, N](a)
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))
    assert log.take() == []  # the synchronous copy back is ordered after the kernel


def test_free_device_forgets_default_stream_work(log: EventLog) -> None:
    s = cuda.stream()
    a = sa.SmartArray(np.zeros(N))
    inc[1, N](a)
    a.free_device()
    log.take()
    a.get("gpu", stream=s)  # a new device buffer: nothing earlier to wait for
    assert log.take() == [("record", ("event", 0))]


def test_device_side_copy_and_adopted_arrays_order_later_streams(log: EventLog) -> None:
    s = cuda.stream()
    source = sa.zeros(N, where="gpu")
    copied = source.copy()  # a device-to-device copy on the default stream
    log.take()
    copied.get("gpu", stream=s)
    assert log.take() == [("wait for default stream", s)]
    source.get("gpu", stream=s)  # the copy read the source on the default stream
    assert log.take() == [("wait for default stream", s)]
    adopted = sa.SmartArray(cuda.to_device(np.ones(N)), copy=False)
    adopted.get("gpu", stream=s)  # its producer's default-stream work may still run
    assert log.take() == [("wait for default stream", s)]


# --- a happens-before model of CUDA streams, driven by random operation sequences ---------
#
# Every copy and kernel smartarray enqueues becomes an operation in a model of CUDA's ordering
# rules, in their weakest form: each stream runs in order; streams other than the default one
# are non-blocking (nothing orders them with the default stream but events); a copy on the
# default stream is synchronous (the host waits for it and for everything before it on that
# stream); the host waits for nothing else unless it waits for an event. After each step the
# model checks that no two operations touching the same device buffer, one of them writing
# it, may run at the same time, and that every host access through a SmartArray happens after
# the asynchronous copies into (or, for host writes, out of) its host buffer.


# Operations that write device memory (a pool's allocation and free count as writes: nothing
# else may touch the memory at the same time).
DEVICE_WRITES = frozenset({"h2d", "kernel write", "fill", "alloc", "free"})


class HappensBefore:
    """Operations on streams and what each is guaranteed to run after."""

    def __init__(self) -> None:
        # op id -> (device memory, host buffer, kind)
        self.ops: dict[int, tuple[Any, Any, str]] = {}
        self.stream_past: dict[Any, set[int]] = {}
        self.host_done: set[int] = set()
        # The device memory an operation touches, from the device array it is given: the
        # array itself (each buffer its own memory); the pooled machine maps arrays to memory.
        self.memory_of: Any = lambda device: device

    @staticmethod
    def _key(stream: Any) -> Any:
        return "default" if _backend.is_default_stream(stream) else id(stream)

    def _past(self, stream: Any) -> set[int]:
        return self.stream_past.setdefault(self._key(stream), set())

    def operation(self, kind: str, device: Any, host: Any, stream: Any) -> None:
        device = self.memory_of(device)
        writes_device = kind in DEVICE_WRITES
        past = self._past(stream)
        for op_id, (other_device, _, other_kind) in self.ops.items():
            if other_device is not device or op_id in past or op_id in self.host_done:
                continue
            if writes_device or other_kind in DEVICE_WRITES:
                raise AssertionError(f"device race: {other_kind} #{op_id} with {kind}")
        op_id = len(self.ops)
        self.ops[op_id] = (device, host, kind)
        past.add(op_id)
        if kind in ("h2d", "d2h") and self._key(stream) == "default":
            self.host_done |= past  # a synchronous copy: the host waited for all of it

    def record(self, stream: Any) -> frozenset[int]:
        return frozenset(self._past(stream))

    def wait(self, event: frozenset[int], stream: Any) -> None:
        (self.host_done if stream is None else self._past(stream)).update(event)

    def wait_for_default_stream(self, stream: Any) -> None:
        self._past(stream).update(self._past(0))

    def wait_for_stream(self, stream: Any, waiter: Any) -> None:
        """``waiter`` waits for the work enqueued so far on ``stream`` (an event between)."""
        self._past(waiter).update(self._past(stream))

    def check_host_access(self, host: Any, writes: bool) -> None:
        for op_id, (_, other_host, kind) in self.ops.items():
            conflicts = kind == "d2h" or (writes and kind == "h2d")
            if conflicts and other_host is host and op_id not in self.host_done:
                raise AssertionError(f"host {'write' if writes else 'read'} races {kind}")

    def device_freed(self, device: Any) -> None:
        # Freeing CUDA memory synchronises the device (numba-cuda's deferred frees too).
        device = self.memory_of(device)
        self.host_done |= {i for i, (d, _, _) in self.ops.items() if d is device}

    def synchronize(self) -> None:
        """The host waited for the whole device."""
        self.host_done |= set(self.ops)


def _install_model(monkeypatch: pytest.MonkeyPatch, model: HappensBefore) -> None:
    copy_h2d, copy_d2h = _backend.copy_h2d, _backend.copy_d2h

    def h2d(host: Any, device: Any, stream: Any = 0) -> None:
        model.operation("h2d", device, host, stream)
        copy_h2d(host, device, stream)

    def d2h(device: Any, host: Any, stream: Any = 0) -> None:
        model.operation("d2h", device, host, stream)
        copy_d2h(device, host, stream)

    def record_event(stream: Any, always: bool = False) -> Any:
        return None if _backend.is_default_stream(stream) and not always else model.record(stream)

    def wait_event(event: Any, stream: Any = None) -> None:
        if event is not None:
            model.wait(event, stream)

    monkeypatch.setattr(_backend, "copy_h2d", h2d)
    monkeypatch.setattr(_backend, "copy_d2h", d2h)
    monkeypatch.setattr(_backend, "record_event", record_event)
    monkeypatch.setattr(_backend, "wait_event", wait_event)
    monkeypatch.setattr(_backend, "wait_for_default_stream", model.wait_for_default_stream)
    monkeypatch.setattr(_backend, "is_gpu_default_stream", _backend.is_default_stream)


# Two threads launch kernels reading the same array, each on its own stream: each prepares
# its argument (kernel_argument; on the default stream the launch fast path), enqueues its
# kernel, then runs the launch's callbacks (which record the read), interleaved as listed.
# Only the last event is kept, so what is recorded must cover both reads: a later writer
# (and the free of a pooled buffer) waits for that alone. "upload" first leaves an event
# pending, which makes the default stream take the general path.
TWO_READERS = {
    "s1 s2, second done first": ("s1", "s2", "0", "p1 e1 p2 e2 d2 d1"),
    "s1 s2, first done first": ("s1", "s2", "0", "p1 e1 p2 e2 d1 d2"),
    "s1 and the fast path, enqueued late": ("s1", "0", "s2", "p1 p2 e2 e1 d1 d2"),
    "s1 and the fast path, done between": ("s1", "0", "s2", "p1 e1 p2 d1 e2 d2"),
    "the fast path pinned first, done first": ("s1", "0", "s2", "p2 p1 e1 e2 d2 d1"),
    "the fast path and s1": ("0", "s1", "s2", "p1 e1 p2 e2 d2 d1"),
    "default (general path) and s1": ("0", "s1", "s2", "upload p1 p2 e1 e2 d1 d2"),
}


@pytest.mark.skipif(sa.tier() != "simulator", reason="replaces the simulator's event functions")
@pytest.mark.parametrize("case", list(TWO_READERS))
def test_reads_on_two_streams_at_once_are_both_waited_for(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    model = HappensBefore()
    _install_model(monkeypatch, model)
    streams = {"0": 0, "s1": cuda.stream(), "s2": cuda.stream(), "s3": cuda.stream()}
    first, second, writer, steps = TWO_READERS[case]
    readers = {"1": streams[first], "2": streams[second]}
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    a.to_gpu()
    retrs: dict[str, list[Any]] = {"1": [], "2": []}
    for step in steps.split():
        if step == "upload":  # (the device copy rewritten on s3: an event pending)
            a[0] = 0.0
            a.to_gpu(streams["s3"])
        elif step[0] == "p":
            kernel_argument(a, "in", retrs[step[1]], readers[step[1]])
        elif step[0] == "e":
            model.operation("kernel read", a._alloc.device, None, readers[step[1]])
        else:
            for callback in retrs[step[1]]:
                callback()
    retr: list[Any] = []
    device = kernel_argument(a, "inout", retr, streams[writer])
    model.operation("kernel write", a._alloc.device, None, streams[writer])  # (races raise)
    device._ary[...] += 1
    for callback in retr:
        callback()
    expected = np.arange(N) + 1.0
    expected[0] = 1.0
    np.testing.assert_array_equal(np.asarray(a), expected)


@njit
def _jit_sum(a):  # type: ignore[no-untyped-def]
    return a.sum()


@njit
def _jit_add_one(a):  # type: ignore[no-untyped-def]
    for i in range(a.shape[0]):
        a[i] += 1


STREAMS = st.sampled_from([0, 1, 2])  # the default stream, two other streams
ARRAYS = st.sampled_from([0, 1])


class StreamOrderingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.monkeypatch = pytest.MonkeyPatch()
        self.model = HappensBefore()
        _install_model(self.monkeypatch, self.model)
        self.streams = [0, cuda.stream(), cuda.stream()]
        self.values = [np.arange(N, dtype=np.float64), np.zeros(N)]
        self.arrays = [sa.SmartArray(v.copy()) for v in self.values]

    def teardown(self) -> None:
        self.monkeypatch.undo()

    def _launch(self, k: int, s: int, intent: str) -> None:
        """What numba-cuda does at a launch: prepare the argument, run, then the callbacks."""
        array, stream, retr = self.arrays[k], self.streams[s], []  # type: ignore[var-annotated]
        device = kernel_argument(array, intent, retr, stream)
        kind = "kernel read" if intent == "in" else "kernel write"
        self.model.operation(kind, array._alloc.device, array._alloc.host, stream)
        if intent == "inout":
            device._ary[...] += 1
            self.values[k] += 1
        elif intent == "out":
            device._ary[...] = 7.0
            self.values[k][...] = 7.0
        for callback in retr:
            callback()

    @rule(k=ARRAYS, s=STREAMS, intent=st.sampled_from(["in", "inout", "out"]))
    def kernel(self, k: int, s: int, intent: str) -> None:
        self._launch(k, s, intent)

    @rule(k=ARRAYS, s=STREAMS)
    def failed_launch(self, k: int, s: int) -> None:
        # The arguments were prepared (maybe uploaded, asynchronously), then the launch
        # failed: numba-cuda runs no callback. The host copy stays the authoritative one.
        kernel_argument(self.arrays[k], "inout", [], self.streams[s])

    @rule(k=ARRAYS, s=STREAMS)
    def upload(self, k: int, s: int) -> None:
        self.arrays[k].to_gpu(self.streams[s])

    @rule(k=ARRAYS, s=STREAMS)
    def enqueue_download(self, k: int, s: int) -> None:
        self.arrays[k].to_host(self.streams[s])  # returns at once on a non-default stream

    @rule(k=ARRAYS)
    def host_read(self, k: int) -> None:
        np.testing.assert_array_equal(np.asarray(self.arrays[k]), self.values[k])
        self.model.check_host_access(self.arrays[k]._alloc.host, writes=False)

    @rule(k=ARRAYS, i=st.integers(0, N - 1))
    def host_write(self, k: int, i: int) -> None:
        self.arrays[k][i] = -1.0
        self.values[k][i] = -1.0
        self.model.check_host_access(self.arrays[k]._alloc.host, writes=True)

    # Host fast paths (smartarray._numpy.fastpath): with an asynchronous copy pending they must wait
    # for it (by taking the full path), never read or write the buffer under it.
    @rule(k=ARRAYS, i=st.integers(0, N - 1), how=st.sampled_from(["item", "operator", "sum"]))
    def host_fast_read(self, k: int, i: int, how: str) -> None:
        array, values = self.arrays[k], self.values[k]
        if how == "item":
            assert array[i] == values[i]
        elif how == "operator":
            np.testing.assert_array_equal((array + 1.0).get("host"), values + 1.0)
        else:
            assert array.sum() == values.sum()
        self.model.check_host_access(array._alloc.host, writes=False)

    @rule(k=ARRAYS, i=st.integers(0, N - 1), how=st.sampled_from(["item", "slice", "operator"]))
    def host_fast_write(self, k: int, i: int, how: str) -> None:
        array, values = self.arrays[k], self.values[k]
        if how == "item":
            array[i] = 2.0
            values[i] = 2.0
        elif how == "slice":
            array[i:] = 3.0
            values[i:] = 3.0
        else:
            array += 1.0
            values += 1.0
        self.model.check_host_access(array._alloc.host, writes=True)

    @rule(k=ARRAYS)
    def njit_read(self, k: int) -> None:
        assert _jit_sum(sa.In(self.arrays[k])) == self.values[k].sum()
        self.model.check_host_access(self.arrays[k]._alloc.host, writes=False)

    @rule(k=ARRAYS)
    def njit_write(self, k: int) -> None:
        _jit_add_one(self.arrays[k])
        self.values[k] += 1
        self.model.check_host_access(self.arrays[k]._alloc.host, writes=True)

    @rule(k=ARRAYS)
    def free_device(self, k: int) -> None:
        device = self.arrays[k]._alloc.device
        self.arrays[k].free_device()
        if device is not None:
            self.model.device_freed(device)

    @invariant()
    def device_copy_is_right_when_current(self) -> None:
        for array, values in zip(self.arrays, self.values, strict=True):
            if array.location in ("gpu", "both"):
                alloc = array._alloc
                if alloc.device is None:  # made filled, its device buffer dropped since: a
                    assert alloc._fill is not None  # new one is made filled with the value
                    np.testing.assert_array_equal(np.full(N, alloc._fill[0]), values)
                else:
                    np.testing.assert_array_equal(alloc.device._ary, values)


StreamOrderingMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None
)


@pytest.mark.skipif(sa.tier() != "simulator", reason="replaces the simulator's event functions")
class TestStreamOrdering(StreamOrderingMachine.TestCase):  # type: ignore[name-defined]
    pass


# --- the same, with device buffers from a stream-ordered pool ------------------------------
#
# On a GPU SmartArrays' device buffers come from the driver's stream-ordered pool: a buffer is
# given back on the stream it was allocated on, and its memory is handed out again. Here a
# stand-in pool does that, in the model: a free is an operation on the buffer's stream, which
# must run after every earlier operation on that memory (on any stream: smartarray makes the
# free wait for them, smartarray._core.device_pool.Block.last_event); an allocation that
# reuses freed memory is ordered after the free (the driver's rule), and is an operation too,
# after which the memory's first users on other streams must be ordered. Arrays are dropped
# and made again (on the host, uploaded on a stream, filled on the device on a stream), and
# device arrays handed out by get('gpu') are read by the caller's own kernels, which
# smartarray never sees.


class ModelledPool:
    """A stand-in stream-ordered pool whose allocations and frees are model operations."""

    def __init__(self, machine: PooledStreamOrderingMachine) -> None:
        self.machine = machine
        self.free: dict[int, list[int]] = {}
        self.next_address = 1 << 20

    def allocate(self, size: int, *, stream: Any) -> Any:
        machine = self.machine
        kept = self.free.get(size)
        if kept:
            address = kept.pop()
            # (the driver orders an allocation reusing freed memory after the free)
            machine.model.wait(machine.freed_after[address], stream)
        else:
            address, self.next_address = self.next_address, self.next_address + size
        machine.model.operation("alloc", machine.memory(address), None, stream)
        return PoolBuffer(address, size)

    def close(self, buffer: PoolBuffer, stream: Any) -> None:
        machine = self.machine
        machine.spans = {k: v for k, v in machine.spans.items() if v != buffer.handle}
        if not machine.closed:
            memory = machine.memory(buffer.handle)
            try:  # (frees run in finalizers, which swallow exceptions: kept for an invariant)
                machine.model.operation("free", memory, None, stream)
            except AssertionError as race:
                machine.races.append(str(race))
            machine.freed_after[buffer.handle] = machine.model.record(stream)
        self.free.setdefault(buffer.size, []).append(buffer.handle)

    def trim(self) -> None:
        self.free.clear()


class PoolBuffer:
    def __init__(self, handle: int, size: int) -> None:
        self.handle, self.size = handle, size


MAKE = st.sampled_from(["host", "uploaded", "filled"])


def _interleavings(a: list[str], b: list[str]) -> list[str]:
    """Every interleaving of the step lists ``a`` and ``b`` (each kept in order)."""
    if not a or not b:
        return [" ".join(a + b)]
    return [
        " ".join([a[0], rest]) for rest in _interleavings(a[1:], b)
    ] + [" ".join([b[0], rest]) for rest in _interleavings(a, b[1:])]


# The 20 ways two launches (prepare, enqueue, callbacks) can interleave.
INTERLEAVINGS = sorted(set(_interleavings(["p1", "e1", "d1"], ["p2", "e2", "d2"])))


class PooledStreamOrderingMachine(StreamOrderingMachine):
    def __init__(self) -> None:
        from smartarray._core import device_pool as _device_pool

        self.closed = False
        self.spans: dict[tuple[int, int], int] = {}  # simulator memory -> pool address
        self.keys: dict[int, object] = {}  # pool address -> the model's memory
        self.freed_after: dict[int, frozenset[int]] = {}
        self.handles: list[Any] = []
        self.races: list[str] = []  # found in frees
        self.pool = _device_pool.memory_resource(ModelledPool(self))
        self.pool.__enter__()
        super().__init__()
        self.model.memory_of = self.memory_of
        pooled_array, device_fill = _backend._pooled_array, _backend.device_fill

        def register(block: Any, shape: Any, dtype: Any, order: str) -> Any:
            array = pooled_array(block, shape, dtype, order)
            start = array._ary.__array_interface__["data"][0]
            self.spans[(start, start + block.nbytes)] = block.address
            return array

        def fill(device: Any, value: Any, stream: Any = 0) -> None:
            self.model.operation("fill", device, None, stream)
            device_fill(device, value, stream)

        patch = self.monkeypatch.setattr
        patch(_backend, "_pooled_array", register)
        patch(_backend, "device_fill", fill)
        patch(_backend, "synchronize_device", self.model.synchronize)
        patch(_device_pool, "_ORDER_FREE", _backend.wait_before_free)  # (as on a GPU)

    def memory(self, address: int) -> object:
        return self.keys.setdefault(address, object())

    def memory_of(self, device: Any) -> Any:
        if not hasattr(device, "_ary"):
            return device  # (the pool's own operations name the memory)
        pointer = device._ary.__array_interface__["data"][0]
        for (lo, hi), address in self.spans.items():
            if lo <= pointer < hi:
                return self.memory(address)
        raise AssertionError("a device array outside the pool's buffers")

    def teardown(self) -> None:
        self.arrays, self.handles = [], []
        gc.collect()  # (the last frees, still checked)
        self.closed = True
        self.pool.__exit__(None, None, None)
        super().teardown()
        assert self.races == []

    @invariant()
    def no_memory_goes_back_under_work_that_uses_it(self) -> None:
        assert self.races == []

    def _make_again(self, k: int, s: int, how: str) -> None:
        values = np.arange(N, dtype=np.float64) * (k + 2)
        self.arrays[k] = None  # type: ignore[call-overload]  # its buffer goes back now
        stream = self.streams[s]
        if how == "host":
            self.arrays[k] = sa.SmartArray(values.copy())
        elif how == "uploaded":
            self.arrays[k] = sa.SmartArray(values.copy(), where="gpu", stream=stream)
        else:
            values = np.full(N, 5.0)
            self.arrays[k] = sa.full(N, 5.0, where="gpu", stream=stream)
        self.values[k] = values

    @rule(k=ARRAYS, s=STREAMS, how=MAKE)
    def make_again(self, k: int, s: int, how: str) -> None:
        self._make_again(k, s, how)

    @rule(k=ARRAYS, streams=st.tuples(STREAMS, STREAMS), steps=st.sampled_from(INTERLEAVINGS))
    def two_reads_at_once(self, k: int, streams: tuple[int, int], steps: str) -> None:
        # Two threads launch a kernel reading the array, each on its stream, interleaved as
        # ``steps`` says (p: prepare the argument, e: enqueue, d: the launch's callbacks);
        # later rules write it, drop it, free its device copy: none may race these reads.
        array = self.arrays[k]
        readers = {"1": self.streams[streams[0]], "2": self.streams[streams[1]]}
        retrs: dict[str, list[Any]] = {"1": [], "2": []}
        for step in steps.split():
            if step[0] == "p":
                kernel_argument(array, "in", retrs[step[1]], readers[step[1]])
            elif step[0] == "e":
                self.model.operation("kernel read", array._alloc.device, None, readers[step[1]])
            else:
                for callback in retrs[step[1]]:
                    callback()

    @rule(k=ARRAYS, s=STREAMS, reader=STREAMS, keep=st.booleans(), how=MAKE)
    def hand_out_read_and_drop(self, k: int, s: int, reader: int, keep: bool, how: str) -> None:
        # The caller's own kernel reads a device array handed out by get('gpu'), on a stream
        # of its choice (ordered after the hand-out, as the caller must order it), and drops
        # the SmartArray without waiting for that kernel (keeping the device array or not).
        stream = self.streams[s]
        handle = self.arrays[k].get("gpu", stream=stream)
        self.model.wait_for_stream(stream, self.streams[reader])
        self.model.operation("kernel read", handle, None, self.streams[reader])
        if keep:
            self.handles.append(handle)
        del handle
        self._make_again(k, s, how)

    @rule()
    def drop_handed_out(self) -> None:
        self.handles.clear()  # (SmartArrays hold no cycles: freed as their last reference goes)

    @rule(k=ARRAYS)
    def free_device(self, k: int) -> None:
        self.arrays[k].free_device()  # (the pool's free is modelled, not cuMemFree)


PooledStreamOrderingMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None
)


@pytest.mark.skipif(sa.tier() != "simulator", reason="replaces the simulator's event functions")
class TestPooledStreamOrdering(PooledStreamOrderingMachine.TestCase):  # type: ignore[name-defined]
    pass
