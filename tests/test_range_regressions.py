"""The eight ways an outside per-byte fuzzer lost or corrupted data (issue 29), each as a few
lines of user code checked against numpy semantics. All run in the CUDA simulator."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import add_scalar as add
from helpers import fill
from inflight import GATE, add_then_wait, fill_then_wait
from inflight import launch_while as _launch_while
from numba import cuda

import smartarray as sa
from smartarray._core import ranges as _ranges

pytestmark = pytest.mark.device


@pytest.fixture(params=[None, 0], ids=["default-gap", "gap-0"])
def gap(request: pytest.FixtureRequest) -> Iterator[None]:
    before = _ranges.coalesce_bytes()
    if request.param is not None:
        sa.set_coalesce_bytes(request.param)
    try:
        yield
    finally:
        sa.set_coalesce_bytes(before)


def _device_current(n: int) -> sa.SmartArray:
    a = sa.SmartArray(np.zeros(n))
    fill[(n + 127) // 128, 128](a, 1.0)
    assert a.location == "gpu"
    return a


# 1. Writes through kept np.asarray exports are never overwritten by a later download.


def test_export_write_survives_a_coalesced_download(gap: None) -> None:
    a = _device_current(100)
    h = np.asarray(a[4:6])
    h[0] = 7.0
    assert a.sum() == 106.0
    assert h[0] == 7.0


@pytest.mark.parametrize("how", ["free_device", "spill", "mark_changed", "to_host"])
def test_export_write_survives_every_download(how: str, empty_budget: None) -> None:
    a = _device_current(100)
    h = np.asarray(a[4:6])
    h[0] = 7.0
    if how == "free_device":
        a.free_device()
    elif how == "spill":
        sa.set_device_memory_limit(sa.device_memory_usage())
        b = sa.zeros(100)
        fill[1, 128](b, 2.0)  # makes room: a's dirty copy is spilled
        assert a._alloc.device is None
    elif how == "mark_changed":
        a[0:2].mark_changed("gpu")  # (refreshes the kept export)
    else:
        a.to_host()
    assert h[0] == 7.0
    assert np.array(a)[4] == 7.0
    assert a.sum() == 106.0


def test_export_write_survives_the_segment_cap(gap: None) -> None:
    sa.set_coalesce_bytes(0)
    a = _device_current(400)
    h = np.asarray(a[10:11])
    h[0] = 7.0
    for i in range(0, 400, 2):  # element writes past the segment cap
        a[i] = 3.0
    expected = np.ones(400)
    expected[::2] = 3.0
    expected[10] = 3.0  # (a[10] is one of the element writes: after h[0])
    assert np.array_equal(np.array(a), expected)
    b = _device_current(400)
    hb = np.asarray(b[11:12])
    hb[0] = 7.0
    for i in range(0, 400, 2):
        b[i] = 3.0
    expected[10] = 3.0
    expected[11] = 7.0
    assert np.array_equal(np.array(b), expected)


# 2. The segment cap never relabels bytes the operation in progress made current.


def test_cap_keeps_an_inplace_write_of_a_strided_view() -> None:
    a = _device_current(400)
    v = a[0:400:10]
    keep = np.asarray(a[0:200:10])
    v += 1.0
    expected = np.ones(400)
    expected[0:400:10] += 1.0
    assert np.array_equal(np.array(a), expected)
    out = sa.zeros(40)

    @cuda.jit
    def copy(src, dst):  # type: ignore[no-untyped-def]
        i = cuda.grid(1)
        if i < src.size:
            dst[i] = src[i]

    copy[1, 64](v, out)
    assert np.array_equal(np.array(out), expected[0:400:10])
    del keep


def test_cap_keeps_a_device_hand_out_of_a_strided_view() -> None:
    a = _device_current(400)
    v = a[0:400:10]
    keep = np.asarray(a[0:200:10])
    del keep
    d = v.get("gpu")
    assert v.is_valid("gpu")
    add[1, 64](d, 5.0)
    v.mark_changed("gpu")
    expected = np.ones(400)
    expected[0:400:10] += 5.0
    assert np.array_equal(np.array(a), expected)


# 3. Arrays made with no data take mark_changed and free_device.


@pytest.mark.parametrize(
    "make",
    [
        lambda: sa.ones(4),
        lambda: sa.zeros(8)[2:4],
        lambda: sa.full(4, 2.5),
        lambda: sa.zeros_like(np.ones(4)),
        lambda: sa.empty(4),
    ],
    ids=["ones", "zeros-view", "full", "zeros_like", "empty"],
)
@pytest.mark.parametrize("where", ["gpu", "host"])
def test_mark_changed_on_an_array_made_with_no_data(make: object, where: str) -> None:
    reference = np.array(make())  # type: ignore[operator]
    defined = not np.isnan(reference).any() if reference.dtype.kind == "f" else True
    a = make()  # type: ignore[operator]
    a.mark_changed(where)
    got = np.array(a)
    if make is not None and a._alloc is not None and defined and a.size and reference.any():
        assert np.array_equal(got, reference)
    a.free_device()
    again = np.array(a)
    assert np.array_equal(again, got, equal_nan=True)
    b = make()  # type: ignore[operator]
    b.mark_changed(where)
    b.free_device()
    assert np.array(b).shape == reference.shape


def test_mark_changed_gpu_on_ones_keeps_its_values() -> None:
    a = sa.ones(4)
    a.mark_changed("gpu")
    assert np.array_equal(np.array(a), np.ones(4))
    b = sa.full(4, 2.5)
    b.mark_changed("gpu")
    b.free_device()
    assert np.array_equal(np.array(b), np.full(4, 2.5))


# 4. One-sided ranges are capped too: element writes cost the same whatever n.


def test_element_writes_of_a_device_current_array_stay_capped(gap: None) -> None:
    n = 4000
    a = _device_current(n)
    for i in range(0, n, 2):
        a[i] = 3.0
        assert len(a.coherence_ranges()) <= _ranges.MAX_SEGMENTS
    with sa.track_transfers() as t:
        total = a.sum()
    assert total == 3.0 * (n // 2) + 1.0 * (n // 2)
    assert t.d2h_count <= _ranges.MAX_SEGMENTS // 2 + 1


def test_device_writes_are_capped_too() -> None:
    a = sa.SmartArray(np.zeros(4000))
    a.to_gpu()
    for k in range(40):  # exact strided views, 50 rows each
        add[1, 64](a[k * 100 : k * 100 + 100 : 2], 1.0)
        assert len(a.coherence_ranges()) <= _ranges.MAX_SEGMENTS
    expected = np.zeros(4000)
    for k in range(40):
        expected[k * 100 : k * 100 + 100 : 2] += 1.0
    assert np.array_equal(np.array(a), expected)


# 5. A launch on a strided view labels only bytes its argument covers (threads). The kernel
# waits (in the simulator, where kernels run as Python) until the other thread has written,
# or for a second: a launch in flight while the host thread writes.

simulator_only = pytest.mark.skipif(
    sa.tier() != "simulator", reason="the kernel waits on a Python event (simulator only)"
)
@simulator_only
@pytest.mark.parametrize("rows", [64, 65, 200])
def test_launch_on_odds_keeps_another_threads_host_writes_to_evens(rows: int) -> None:
    a = sa.SmartArray(np.zeros(2 * rows))
    a.to_gpu()
    evens, odds = a[0::2], a[1::2]

    def host() -> None:
        evens[...] = 5.0

    _launch_while(lambda: add_then_wait[1, 256](odds, 1.0), host)
    expected = np.zeros(2 * rows)
    expected[0::2] = 5.0
    expected[1::2] = 1.0
    assert np.array_equal(np.array(a), expected)


@simulator_only
@pytest.mark.parametrize("rows", [64, 65, 200])
def test_launch_on_odds_keeps_another_threads_element_writes(rows: int) -> None:
    a = sa.SmartArray(np.zeros(2 * rows))
    a.to_gpu()
    evens, odds = a[0::2], a[1::2]

    def host() -> None:
        for i in range(rows):
            evens[i] = 5.0

    _launch_while(lambda: add_then_wait[1, 256](odds, 1.0), host)
    expected = np.zeros(2 * rows)
    expected[0::2] = 5.0
    expected[1::2] = 1.0
    assert np.array_equal(np.array(a), expected)


@simulator_only
@pytest.mark.parametrize("rows", [64, 65, 200])
@pytest.mark.parametrize("host_write", ["slice", "elements", "read_then_write"])
def test_resident_launch_on_odds_keeps_another_threads_host_writes(
    rows: int, host_write: str
) -> None:
    # The array is current only on the device: the launch takes the launch fast path
    # (Allocation.launch_value), which registers its write as in flight too.
    a = sa.SmartArray(np.zeros(2 * rows))
    evens, odds = a[0::2], a[1::2]
    GATE.set()
    add_then_wait[2, 256](a, 0.0)  # device-only
    for _ in range(2):  # the launch value of ``odds`` cached
        add_then_wait[1, 256](odds, 0.0)
    assert a.location == "gpu"

    def host() -> None:
        if host_write == "slice":
            evens[...] = 5.0
        elif host_write == "elements":
            for i in range(rows):
                evens[i] = 5.0
        else:  # a read downloads the covering range first, then the writes
            assert float(np.asarray(evens).sum()) == 0.0
            evens[...] = 5.0

    _launch_while(lambda: add_then_wait[1, 256](odds, 1.0), host)
    expected = np.zeros(2 * rows)
    expected[0::2] = 5.0
    expected[1::2] = 1.0
    assert np.array_equal(np.array(a), expected)
    add_then_wait[1, 256](odds, 1.0)  # and the device copy holds both writes too
    expected[1::2] = 2.0
    assert np.array_equal(np.array(a), expected)


@simulator_only
def test_resident_launch_then_another_threads_read_leaves_the_kernels_bytes_current() -> None:
    # A read by another thread during a fast-path launch downloads bytes the kernel is
    # writing: once the launch is enqueued they are the device's again, not stale "both".
    a = sa.SmartArray(np.zeros(200))
    odds = a[1::2]
    GATE.set()
    add_then_wait[1, 256](a, 0.0)  # device-only
    for _ in range(2):
        add_then_wait[1, 256](odds, 0.0)

    def host() -> None:
        np.asarray(a[0::2]).sum()  # (the covering range: the odds too)

    _launch_while(lambda: add_then_wait[1, 256](odds, 1.0), host)
    expected = np.zeros(200)
    expected[1::2] = 1.0
    assert np.array_equal(np.array(a), expected)


# 6. A handed-out copy of a device-only array is never evicted while the caller holds it.


def test_hand_out_of_a_device_only_array_is_not_evicted(empty_budget: None) -> None:
    a = _device_current(100)
    d = a.get("gpu")
    sa.set_device_memory_limit(sa.device_memory_usage())
    b = sa.zeros(100)
    with pytest.raises(MemoryError, match="handed out by get"):
        fill[1, 128](b, 2.0)  # no room: a's copy is held by the caller, so not evicted
    add[1, 128](d, 5.0)
    a.mark_changed("gpu")
    assert np.array_equal(np.array(a), np.full(100, 6.0))
    sa.set_device_memory_limit(None)
    fill[1, 128](b, 2.0)
    assert np.array_equal(np.array(b), np.full(100, 2.0))


# 7. An upload never copies over bytes a launch in flight writes (threads).


@simulator_only
@pytest.mark.parametrize("gap_bytes", [None, 64, 0])
def test_upload_does_not_cross_a_launch_in_flight(gap_bytes: int | None) -> None:
    before = _ranges.coalesce_bytes()
    if gap_bytes is not None:
        sa.set_coalesce_bytes(gap_bytes)
    try:
        a = sa.SmartArray(np.zeros(128))
        evens, odds = a[0::2], a[1::2]

        def host() -> None:
            evens[...] = 5.0
            evens.to_gpu()

        _launch_while(lambda: fill_then_wait[1, 128](sa.Out(odds), 9.0), host)
        expected = np.zeros(128)
        expected[0::2] = 5.0
        expected[1::2] = 9.0
        assert np.array_equal(np.array(a), expected)
    finally:
        sa.set_coalesce_bytes(before)


# 8. Arrays made with no data on the device are filled where first used, never copied.


@pytest.mark.parametrize(
    "make",
    [
        lambda n: sa.zeros(n, where="gpu"),
        lambda n: sa.full(n, 2.5, where="gpu"),
        lambda n: sa.ones(n, where="gpu"),
        lambda n: sa.zeros_like(_device_current(n)),
        lambda n: sa.full_like(_device_current(n), 4.0),
    ],
    ids=["zeros", "full", "ones", "zeros_like", "full_like"],
)
def test_device_fills_are_never_downloaded(make: object) -> None:
    a = make(1000)  # type: ignore[operator]
    expected = np.array(a._alloc._fill[0] if a._alloc._fill else np.nan)
    with sa.track_transfers() as t:
        got = np.array(a)
    assert t.count == 0
    assert np.all(got == expected)
    with sa.track_transfers() as t:
        fill[1, 128](a[:10], 1.0)
        a.sum()
    assert t.h2d_count == 0 and t.d2h_bytes == 80


def test_element_writes_bench_row_is_bounded_whatever_n() -> None:
    from smartarray.bench import element_writes

    rows = element_writes.measure((1_000, 20_000), writes=400)
    for row in rows:
        assert row["ranges"] <= _ranges.MAX_SEGMENTS
        assert row["copies_on_read"] <= _ranges.MAX_SEGMENTS // 2 + 1
        # one bounded copy per MAX_SEGMENTS // 2 writes or so, whatever n
        assert row["copies_during"] <= row["writes"] // 8 + 1
    assert rows[0]["copies_during"] == rows[1]["copies_during"]
    assert "| 20000 | 400 |" in element_writes.report(rows)


# Found by the adversarial review of the fixes (each failed on a draft of them).


@cuda.jit
def add_both(y, x):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0
        y[i] += 1.0


def test_a_numpy_call_with_two_outputs_and_a_launch_in_another_thread_finish() -> None:
    n = 32
    a, b = sa.SmartArray(np.zeros(n)), sa.SmartArray(np.zeros(n))
    src = sa.SmartArray(np.arange(n, dtype=float))
    errors: list[BaseException] = []

    def launches() -> None:
        try:
            for _ in range(30):
                add_both[1, n](b, a)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def numpy_calls() -> None:
        try:
            for _ in range(300):
                np.divmod(src, 3.0, out=(a, b))
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=launches, daemon=True),
               threading.Thread(target=numpy_calls, daemon=True)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors
    quotient, remainder = np.divmod(np.arange(n, dtype=float), 3.0)
    np.divmod(src, 3.0, out=(a, b))  # (the last word: every value as numpy computes it)
    assert np.array_equal(np.array(a), quotient) and np.array_equal(np.array(b), remainder)


def test_a_hand_out_past_the_cap_with_an_export_alive_stays_current_on_the_device() -> None:
    a = sa.SmartArray(np.zeros(1000))
    keep = np.asarray(a[900:910])  # an export kept alive (only read)
    a.to_gpu()
    a[0:80] = 1.0
    v = a[0:66:2]  # 33 rows
    d = v.get("gpu")
    assert v.is_valid("gpu")
    add[1, 64](d, 5.0)
    v.mark_changed("gpu")
    expected = np.zeros(1000)
    expected[0:80] = 1.0
    expected[0:66:2] += 5.0
    assert np.array_equal(np.array(a), expected)
    del keep


def test_an_export_write_with_a_hand_out_held_past_the_cap_is_kept() -> None:
    before = _ranges.coalesce_bytes()
    sa.set_coalesce_bytes(0)
    try:
        n = 1000
        a = _device_current(n)
        ref = np.ones(n)
        i = 0
        while len(a.coherence_ranges()) < _ranges.MAX_SEGMENTS - 1:
            a[i] = 3.0
            ref[i] = 3.0
            i += 2
        d = a[900:1000].get("gpu")  # a device hand-out, kept (never written)
        k = i + 21
        h = np.asarray(a[k : k + 1])
        h[0] = 7.0
        ref[k] = 7.0
        assert a.sum() == ref.sum()
        assert h[0] == 7.0 and a[k] == 7.0
        del d
    finally:
        sa.set_coalesce_bytes(before)


def test_writes_through_an_export_of_empty_equal_to_old_bytes_reach_the_device() -> None:
    # Found by the per-byte machine: the export's writes that equal the uninitialised bytes
    # they replace are unseen; the device buffer, made later, must not be called current.
    x = np.arange(16.0) + 100
    a = sa.empty(16)
    h = np.asarray(a)
    h[...] = x
    a._alloc.host[...] = x  # (as if the host buffer had held x before: no change to see)
    a._alloc._host_snapshot = None if a._alloc._host_snapshot is None else x.view(np.uint8).copy()
    a.to_gpu()
    assert np.array_equal(a.get("gpu").copy_to_host(), x)
    assert np.array_equal(np.array(a), x)


# A CUDA ufunc call whose bookkeeping raises after the kernel ran: no output is left in
# flight (a leaked entry in Allocation._writers kept the array MIXED and its launch pinned).


def test_a_ufunc_output_whose_labelling_raises_is_not_left_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from numba import vectorize

    from smartarray._core import coherence as _coherence
    from smartarray._core import memory as _memory

    @vectorize(["float64(float64, float64)"], target="cuda")
    def add2(a, b):  # type: ignore[no-untyped-def]
        return a + b

    x = sa.SmartArray(np.arange(8.0))
    out = sa.SmartArray(np.zeros(8))
    add2(x, x, out=out)  # (compiled; out device-only)
    original = _coherence.Allocation.device_written

    def failing(self: object, *args: object, **kwargs: object) -> None:
        raise RuntimeError("bookkeeping failed")

    monkeypatch.setattr(_coherence.Allocation, "device_written", failing)
    with pytest.raises(RuntimeError, match="bookkeeping failed"):
        add2(x, x, out=out)
    monkeypatch.setattr(_coherence.Allocation, "device_written", original)
    assert out._alloc._writers == []
    assert not [p for p in _memory._BUDGET.launches if out._alloc.key in p.states]
    np.testing.assert_array_equal(np.asarray(x), np.arange(8.0))


# The segment cap's uploads (toward the device) go on the stream of the operation that
# passed the cap, ordered after earlier device work on the array (a kernel on another stream
# may still read the device bytes they replace), not on an unordered stream of their own.


def test_the_caps_uploads_go_on_the_operations_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    from smartarray._core import transfer as _transfer

    a = sa.SmartArray(np.zeros(400))
    s = cuda.stream()
    streams: list[object] = []
    original = _transfer.host_to_device

    def recording(*args: object, **kwargs: object) -> None:
        streams.append(kwargs.get("stream"))
        original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_transfer, "host_to_device", recording)
    expected = np.zeros(400)
    alloc = a._alloc
    # (kernels on ``s`` writing one element each, as a launch on ``s`` records them: the
    # simulator's launches pass no stream to their arguments)
    for k in range(1, 400, 4):
        device = alloc.prepare_device_write(True, s)
        device[k : k + 1].copy_to_device(np.full(1, 2.0), stream=s)
        alloc.device_written(s, ((8 * k, 8 * k + 8),))
        expected[k] = 2.0
    s.synchronize()
    assert streams and all(x is s for x in streams), streams
    assert alloc._segments is None or len(alloc._segments.labels) <= 64
    assert np.array_equal(np.array(a), expected)


@simulator_only
@pytest.mark.parametrize("resident", [False, True])
def test_free_device_during_another_threads_launch_is_refused(resident: bool) -> None:
    # Dropping the device buffer while another thread's kernel writes it would lose the
    # kernel's results: refused with a clear error, data and flags unchanged.
    a = sa.SmartArray(np.zeros(200))
    GATE.set()
    if resident:  # device-only: the launch fast path
        for _ in range(2):
            add_then_wait[1, 256](a, 0.0)
    else:
        a.to_gpu()
    raised: list[BaseException] = []

    def host() -> None:
        try:
            a.free_device()
        except RuntimeError as exc:
            raised.append(exc)

    _launch_while(lambda: add_then_wait[1, 256](a, 1.0), host)
    assert raised and "in flight" in str(raised[0])
    assert a._alloc._writers == []
    assert np.array_equal(np.array(a), np.ones(200))
    a.free_device()  # (once the launch returned)
    assert np.array_equal(np.array(a), np.ones(200))


def test_the_caps_staged_download_scratch_is_bounded_by_the_bytes_copied() -> None:
    from smartarray._core import transfer as _transfer

    n = 3 << 20  # bytes
    device = cuda.to_device(np.arange(n, dtype=np.uint64).view(np.uint8)[:n])
    host = np.zeros(n, dtype=np.uint8)
    expected = host.copy()
    source = device.copy_to_host()
    near = [(0, 8), (64, 72)]  # (one staged copy of the span)
    far = [(0, 8), (n - 8, n)]  # (each run on its own: no 3 MiB scratch for 16 bytes)
    with sa.track_transfers() as t:
        _transfer.device_to_host_staged(device, host, label="x", runs=near)
        _transfer.device_to_host_staged(device, host, label="x", runs=far)
    assert [r.nbytes for r in t.records] == [72, 8, 8]
    for a, b in near + far:
        expected[a:b] = source[a:b]
    assert np.array_equal(host, expected)


def test_an_empty_arrays_host_bytes_are_the_arrays_once_its_host_buffer_exists() -> None:
    # Found by the per-byte machine: after element writes and a write through a kept export
    # that changed all but one byte of an element, that byte stayed labelled current on
    # both sides (never written) though no device buffer held it.
    from raw_state import raw_state

    a = sa.empty(4)
    h = np.asarray(a)
    h.view(np.uint8)[0] ^= 1  # (one byte of element 0 changes: the others equal the old)
    assert {where for _, _, where in raw_state(a).ranges} == {"host"}
    assert np.array_equal(a.get("gpu").copy_to_host(), h)


@simulator_only
def test_a_host_write_of_a_stale_element_equal_to_its_old_host_bytes_is_kept() -> None:
    # Found by the per-byte machine: during another thread's launch, a host write of an
    # element whose host copy is stale (current on the device only) recorded the host
    # bytes before the write to tell later which bytes it changed; writing the value the
    # stale host bytes already held changed no host byte, so the launch's end labelled
    # the element device-current, where the old value was.
    a = sa.SmartArray(np.full(300, 40, dtype=np.int16))
    evens, odds = a[0::2], a[1::2]
    GATE.set()
    add_then_wait[1, 256](evens, -1)  # evens: 39 on the device only (40 on the host)
    a.to_gpu()

    def host() -> None:
        for i in range(0, 150, 2):
            evens[i] = 40  # (the host bytes held 40 already)

    _launch_while(lambda: add_then_wait[1, 256](odds, 11), host)
    expected = np.full(300, 40, dtype=np.int16)
    expected[0::2] = 39
    expected[0::4] = 40
    expected[1::2] = 51
    assert np.array_equal(np.array(a), expected)


@simulator_only
@pytest.mark.parametrize("rows", [64, 65, 200])
def test_another_threads_upload_of_a_covering_range_keeps_a_launchs_results(rows: int) -> None:
    # Found by the per-byte machine: while a kernel wrote the evens (its bytes labelled
    # host-current until the launch is enqueued), another thread's to_gpu() of the odds
    # uploaded their covering range, evens included: old host values over the kernel's.
    a = sa.SmartArray(np.zeros(2 * rows))
    evens, odds = a[0::2], a[1::2]
    a.to_gpu()

    def host() -> None:
        odds[...] = 5.0
        odds.to_gpu()

    _launch_while(lambda: add_then_wait[1, 256](evens, 1.0), host)
    expected = np.zeros(2 * rows)
    expected[0::2] = 1.0
    expected[1::2] = 5.0
    assert np.array_equal(np.array(a), expected)
    GATE.set()
    add_then_wait[1, 256](odds, 1.0)  # (the device's odds are current too)
    expected[1::2] = 6.0
    assert np.array_equal(np.array(a), expected)


def test_an_out_launch_overwrites_bytes_written_earlier_through_an_export() -> None:
    # Found by the per-byte machine: writes through a kept export made before a launch were
    # counted again when a launch writing those bytes (Out, the whole array) ended, so its
    # results were labelled stale.
    a = sa.SmartArray(np.arange(4, dtype=np.int16))
    fill[1, 32](a, 26)
    h = np.asarray(a)
    h[...] = 6  # (found before the next launch: host-current)
    fill[1, 32](sa.Out(a), -3)
    assert np.array_equal(np.asarray(a), np.full(4, -3, dtype=np.int16))
    assert np.array_equal(h, np.full(4, -3, dtype=np.int16))
