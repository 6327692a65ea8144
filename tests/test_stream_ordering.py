"""Cross-stream ordering decisions of the coherence state machine.

On a GPU, device work touching an array is ordered across streams by CUDA events; work on
the default stream records none, so a later non-blocking stream is made to wait for the
default stream instead. The simulator runs everything synchronously, so here the backend's
event functions are replaced by recorders (in the simulator tier) and the decisions are
checked: which waits each launch asks for. The same launches run on hardware in test_gpu.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numba import cuda

import smartarray as sa
from smartarray import _backend

pytestmark = pytest.mark.device

N = 8


@cuda.jit
def _inc(a):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


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
    _inc[1, N](a)  # upload and kernel on the default stream: no event
    assert log.take() == []
    a.get("host", stream=s1)  # waits for the default stream's kernel, records the download
    first = log.take()
    assert first == [("wait for default stream", s1), ("record", first[1][1])]
    a.get("gpu", stream=s2)  # waits for s1's download only
    assert log.take() == [("wait", first[1][1])]
    _inc[1, N](a)  # back on the default stream: waits for s1's event again, records none
    assert log.take() == [("wait", first[1][1])]
    a.get("gpu", stream=s2)
    assert log.take() == [("wait for default stream", s2)]
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.0))


def test_blocking_host_read_needs_no_event_after_default_stream_work(log: EventLog) -> None:
    a = sa.SmartArray(np.zeros(N))
    _inc[1, N](a)
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))
    assert log.take() == []  # the synchronous copy back is ordered after the kernel


def test_free_device_forgets_default_stream_work(log: EventLog) -> None:
    s = cuda.stream()
    a = sa.SmartArray(np.zeros(N))
    _inc[1, N](a)
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
