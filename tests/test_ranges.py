"""Range-granular coherence: only the stale bytes cross the bus (issue 21).

Each test is one everyday idiom, written as a user would, with the exact bytes a careful
hand-written program moves. The coalescing gap is 0 here (``set_coalesce_bytes(0)``): exactly
the stale ranges move, never a gap between them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from helpers import run_python
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from numba import cuda

import smartarray as sa
from smartarray._core import ranges as _ranges
from smartarray._core.ranges import Segments, coalesce, extent_of

N = 16384
NBYTES = N * 8


@pytest.fixture
def exact() -> Iterator[None]:
    before = _ranges.coalesce_bytes()
    sa.set_coalesce_bytes(0)
    try:
        yield
    finally:
        sa.set_coalesce_bytes(before)


# --- the pieces, host-only --------------------------------------------------------------


def test_extent_of_contiguous_strided_and_reversed_views() -> None:
    base = np.zeros((8, 10))
    nbytes = base.nbytes

    def extent(view: np.ndarray) -> tuple[object, bool]:
        offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        return extent_of(offset, view.shape, view.strides, view.itemsize, nbytes)

    assert extent(base) == (None, True)
    assert extent(base[2:4]) == (((160, 320),), True)
    assert extent(base[:, 2:5]) == (tuple((r * 80 + 16, r * 80 + 40) for r in range(8)), True)
    assert extent(base[1, ::-1]) == (((80, 160),), True)
    assert extent(base[::2, 0]) == (tuple((r * 80, r * 80 + 8) for r in range(0, 8, 2)), True)
    assert extent(base[3:3]) == ((), True)
    big = np.zeros((200, 3))
    strided = big[:, 0]  # 200 rows of 8 bytes: more than the cap, so the covering interval
    offset = 0
    got = extent_of(offset, strided.shape, strided.strides, 8, big.nbytes)
    assert got == (((0, 199 * 24 + 8),), False)


def test_segments_set_merge_and_never_stale_on_both_sides_when_coarsening() -> None:
    host, device, both = "host", "gpu", "both"
    segments = Segments(1000, both, both)
    segments.assign(10, 20, host)
    segments.assign(20, 30, host)
    assert segments.items() == [(0, 10, both), (10, 30, host), (30, 1000, both)]
    assert segments.runs(((0, 25),), host) == [(10, 25)]
    segments.assign(0, 1000, device)
    assert segments.uniform() == device
    # The cap's two moves (Allocation._cap decides which): a BOTH segment next to one of
    # ``side`` joins it; the window of ``count`` segments with the smallest span.
    segments = Segments(10_000, both, both)
    for i in range(10):
        segments.assign(i * 100, i * 100 + 10, host if i % 2 else device)
    before = len(segments.labels)
    assert segments.absorb_both(host)
    assert len(segments.labels) < before
    for a, b, label in segments.items():  # no byte is labelled a side it was not on
        assert label in (host, both) or segments.runs(((a, b),), device) == [(a, b)]
    assert not Segments(100, device, both).absorb_both(host)
    window = segments.cheapest_window(3, [])
    assert window is not None and window[1] - window[0] == min(
        segments.bounds[i + 3] - segments.bounds[i] for i in range(len(segments.labels) - 2)
    )
    assert segments.cheapest_window(3, [(0, 10_000)]) is None
    assert segments.cheapest_window(len(segments.labels) + 1, []) is None


def test_coalesce_and_its_setting() -> None:
    assert coalesce([(0, 8), (16, 24), (1000, 1008)], 16) == [(0, 24), (1000, 1008)]
    assert coalesce([(0, 8), (16, 24)], 0) == [(0, 8), (16, 24)]
    assert coalesce([(0, 8), (8, 24)], 0) == [(0, 24)]
    with pytest.raises(ValueError, match="byte count"):
        sa.set_coalesce_bytes(-1)
    with pytest.raises(ValueError, match="byte count"):
        sa.set_coalesce_bytes(1.5)  # type: ignore[arg-type]


def test_the_environment_sets_the_gap_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    script = "import smartarray as sa; print(sa.coalesce_bytes())"
    for value, printed in (("0", "0"), ("4096", "4096"), ("", str(1 << 16))):
        monkeypatch.setenv("SMARTARRAY_COALESCE_BYTES", value)
        proc = run_python(["-c", script], simulator=False, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split()[-1] == printed
    monkeypatch.setenv("SMARTARRAY_COALESCE_BYTES", "lots")
    proc = run_python(["-c", script], simulator=False, timeout=120)
    assert proc.returncode != 0 and "SMARTARRAY_COALESCE_BYTES='lots'" in proc.stderr


def test_new_arrays_are_filled_where_first_used_on_the_host() -> None:
    z = sa.zeros(5)
    assert z.location == "both" and z._alloc.host is None
    z[1] = 3
    np.testing.assert_array_equal(z, [0, 3, 0, 0, 0])
    f = sa.full((2, 3), 7, dtype=np.int32)
    assert f.sum() == 42 and f.dtype == np.int32
    assert sa.ones(3).tolist() == [1.0, 1.0, 1.0]
    e = sa.empty(4)
    e[:] = 2.0
    assert e.tolist() == [2.0] * 4


# --- the idioms, with a device (the simulator tier) ---------------------------------------


@cuda.jit
def double_into(x, out):  # type: ignore[no-untyped-def]
    """``out = 2 * x``: a grid-stride loop (few simulator threads)."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.size, stride):
        out[i] = 2 * x[i]


@cuda.jit
def step(u):  # type: ignore[no-untyped-def]
    """``u += 1``: a grid-stride loop."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, u.size, stride):
        u[i] = u[i] + 1.0


@cuda.jit
def fill5(out):  # type: ignore[no-untyped-def]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = 5.0


GRID = 1, 32


@pytest.mark.device
@pytest.mark.parametrize("make", ["empty_like", "zeros", "ones"])
def test_new_output_is_never_uploaded(exact: None, make: str) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        out = sa.empty_like(x) if make == "empty_like" else getattr(sa, make)(N)
        double_into[GRID](x, out)
        result = np.asarray(out)
    np.testing.assert_array_equal(result, 2 * np.arange(N))
    assert (t.h2d_bytes, t.d2h_bytes) == (NBYTES, NBYTES)  # the input up, the result down


@pytest.mark.device
def test_zeros_read_where_the_kernel_did_not_write_is_zero(exact: None) -> None:
    out = sa.zeros(N)
    with sa.track_transfers() as t:
        fill5[GRID](out[: N // 2])
        result = np.asarray(out)
    expected = np.zeros(N)
    expected[: N // 2] = 5.0
    np.testing.assert_array_equal(result, expected)
    assert (t.h2d_bytes, t.d2h_bytes) == (0, NBYTES // 2)  # the written half only


@pytest.mark.device
def test_boundary_value_loop_moves_the_array_once_then_8_bytes_per_step(exact: None) -> None:
    u = sa.SmartArray(np.zeros(N))
    model = np.zeros(N)
    with sa.track_transfers() as t:
        for k in range(10):
            u[0] = float(k)
            step[GRID](u)
            model[0] = k
            model += 1
    assert (t.h2d_bytes, t.h2d_count, t.d2h_bytes) == (NBYTES + 9 * 8, 10, 0)
    np.testing.assert_array_equal(u, model)


@pytest.mark.device
def test_convergence_check_moves_8_bytes_per_step_then_the_rest_once(exact: None) -> None:
    v = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        for k in range(10):
            step[GRID](v)
            assert v[N // 2] == k + 1
    assert (t.h2d_bytes, t.d2h_bytes, t.d2h_count) == (NBYTES, 80, 10)
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(v, np.full(N, 10.0))
    assert (t.d2h_bytes, t.d2h_count) == (NBYTES - 8, 2)  # both sides of the read element


@pytest.mark.device
def test_halo_write_moves_128_bytes_per_step(exact: None) -> None:
    w = sa.SmartArray(np.zeros(N))
    step[GRID](w)  # resident on the device
    with sa.track_transfers() as t:
        for k in range(10):
            w[:16] = float(k)
            step[GRID](w)
    assert (t.h2d_bytes, t.h2d_count, t.d2h_bytes) == (10 * 128, 10, 0)
    expected = np.full(N, 11.0)
    expected[:16] = 10.0
    np.testing.assert_array_equal(w, expected)


@pytest.mark.device
def test_slice_read_after_a_kernel_moves_the_slice(exact: None) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.zeros(N))
    double_into[GRID](x, y)
    with sa.track_transfers() as t:
        part = np.asarray(y[100:200])
    np.testing.assert_array_equal(part, 2 * np.arange(100, 200))
    assert (t.d2h_bytes, t.d2h_count, t.records[0].offset) == (800, 1, 800)
    assert y[100:200].location == "both" and y.location == "gpu"


@pytest.mark.device
def test_kernel_on_a_view_uploads_the_view(exact: None) -> None:
    z = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        step[GRID](z[1024:2048])
    assert (t.h2d_bytes, t.h2d_count, t.records[0].offset) == (8192, 1, 8192)
    assert z[1024:2048].location == "gpu" and z.location == "mixed"
    assert z.coherence_ranges() == [
        (0, 8192, "host"),
        (8192, 16384, "gpu"),
        (16384, NBYTES, "host"),
    ]
    expected = np.zeros(N)
    expected[1024:2048] = 1.0
    np.testing.assert_array_equal(z, expected)


@pytest.mark.device
def test_coalescing_merges_close_stale_ranges_into_one_copy() -> None:
    before = _ranges.coalesce_bytes()
    try:
        for gap, copies in ((0, 2), (1 << 16, 1)):
            sa.set_coalesce_bytes(gap)
            a = sa.SmartArray(np.zeros(N))
            step[GRID](a)
            np.asarray(a)  # current on both sides
            a[0] = 1.0
            a[10] = 1.0  # two stale ranges on the device, 72 bytes apart
            with sa.track_transfers() as t:
                step[GRID](a)
            assert t.h2d_count == copies
            assert t.h2d_bytes == (16 if gap == 0 else 88)
    finally:
        sa.set_coalesce_bytes(before)


@pytest.mark.device
def test_a_coalesced_download_never_overwrites_newer_host_bytes() -> None:
    before = _ranges.coalesce_bytes()
    sa.set_coalesce_bytes(1 << 16)
    try:
        a = sa.SmartArray(np.zeros(N))
        step[GRID](a)  # device: all ones
        a[5] = 9.0  # host: byte range of a[5] newer than the device's
        result = np.asarray(a)  # stale on the host: [0, 5) and [6, N), 8 bytes apart
        expected = np.ones(N)
        expected[5] = 9.0
        np.testing.assert_array_equal(result, expected)
    finally:
        sa.set_coalesce_bytes(before)


@pytest.mark.device
def test_eviction_spills_only_the_dirty_ranges(exact: None) -> None:
    a = sa.SmartArray(np.zeros(N))
    step[GRID](a[: N // 4])  # a quarter written on the device, the rest current on the host
    with sa.track_transfers() as t:
        a.free_device()
    assert (t.d2h_bytes, t.d2h_count) == (NBYTES // 4, 1)
    expected = np.zeros(N)
    expected[: N // 4] = 1.0
    np.testing.assert_array_equal(a, expected)


@pytest.mark.device
def test_no_transfers_refuses_a_range_copy_and_changes_nothing(exact: None) -> None:
    a = sa.SmartArray(np.zeros(N))
    step[GRID](a)
    a[3] = 2.0
    with sa.no_transfers(), pytest.raises(sa.TransferError):
        step[GRID](a)
    assert a.coherence_ranges() == [(0, 24, "gpu"), (24, 32, "host"), (32, NBYTES, "gpu")]
    step[GRID](a)
    expected = np.full(N, 2.0)
    expected[3] = 3.0
    np.testing.assert_array_equal(a, expected)


@pytest.mark.device
def test_element_writes_to_an_array_current_partly_on_each_side(exact: None) -> None:
    a = sa.SmartArray(np.zeros(64, dtype=np.int8))
    a.to_gpu()
    a[0] = 1  # current partly on each side from here on: the element fast path
    for i in range(1, 10):
        a[i] = i
    a[-1] = 7
    assert a.coherence_ranges() == [(0, 10, "host"), (10, 63, "both"), (63, 64, "host")]
    with pytest.raises(OverflowError):
        a[20] = 1000  # numpy's error, and nothing changed
    assert a.coherence_ranges() == [(0, 10, "host"), (10, 63, "both"), (63, 64, "host")]
    with sa.track_transfers() as t:
        assert (a[5], a[-1], a[30]) == (5, 7, 0)  # current on the host: no copy
    assert t.count == 0
    with sa.track_transfers() as t:
        a.to_gpu()
    assert [(r.offset, r.nbytes) for r in t.records] == [(0, 10), (63, 1)]
    expected = np.zeros(64, dtype=np.int8)
    expected[:10] = [1, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    expected[-1] = 7
    np.testing.assert_array_equal(a, expected)


# --- found by review: each failed before its fix ----------------------------------------


@cuda.jit
def write_then_fail(w, r):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < w.size:
        w[i] = -1.0
    if i == 0:
        w[w.size + 100] = 0  # out of bounds: the simulator raises after the writes


@cuda.jit
def copy_into(src, dst):  # type: ignore[no-untyped-def]
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, src.size, stride):
        dst[i] = src[i]


@pytest.mark.device
def test_a_coalesced_upload_leaves_the_bytes_a_failed_launch_wrote_stale_on_the_device() -> None:
    a = sa.SmartArray(np.arange(100, dtype=np.float64))
    with pytest.raises(IndexError):
        # a[4:6] is written; the read of all of a uploads around it, one coalesced copy
        write_then_fail[1, 32](a[4:6], sa.In(a))
    assert not a[4:6].is_valid("gpu")
    out = sa.zeros(100)
    copy_into[1, 32](sa.In(a), sa.Out(out))
    np.testing.assert_array_equal(out, np.arange(100))


@cuda.jit
def set_value(d, v):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < d.size:
        d[i] = v


@pytest.mark.device
def test_a_coalesced_upload_never_overwrites_a_device_array_handed_out_by_get_gpu() -> None:
    a = sa.SmartArray(np.zeros(300))
    a.to_gpu()
    a[0:10] = 1.0
    a[20:30] = 2.0  # stale on the device: [0, 80) and [160, 240)
    d = a[10:20].get("gpu")
    set_value[1, 32](d, 7.0)  # written through the hand-out, declared below
    a.to_gpu()  # must not upload over [80, 160)
    a[10:20].mark_changed("gpu")
    np.testing.assert_array_equal(np.asarray(a[10:20]), np.full(10, 7.0))
    np.testing.assert_array_equal(np.asarray(a[0:10]), np.ones(10))


@pytest.mark.device
def test_past_the_segment_cap_a_copy_just_made_is_never_merged_away() -> None:
    a = sa.SmartArray(np.zeros(400))
    step[1, 32](a)  # current on the device only
    for i in range(200, 340, 2):
        a[i] = -1.0  # more one-sided segments than the cap
    v = a[100:200]
    host = v.get("host")
    assert v.is_valid("host")
    host[:] = 5.0
    v.mark_changed("host")
    with sa.track_transfers() as t:
        np.asarray(v)
        np.asarray(v)
    assert t.count == 0
    expected = np.ones(400)
    expected[100:200] = 5.0
    expected[200:340:2] = -1.0
    np.testing.assert_array_equal(a, expected)


@pytest.mark.device
def test_exporting_a_view_to_another_library_marks_only_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from smartarray._cuda import arguments

    a = sa.SmartArray(np.arange(100.0))
    a.to_gpu()
    a[50] = -1.0  # the host holds the newest a[50]
    view = a[0:10]
    backend = arguments._backend

    class OnAGpu:  # the export's own tier check sees a GPU; nothing else changes
        def __getattr__(self, name: str) -> object:
            return getattr(backend, name)

        @staticmethod
        def tier() -> str:
            return "gpu"

    monkeypatch.setattr(arguments, "_backend", OnAGpu())
    with pytest.raises(AttributeError, match="__cuda_array_interface__"):
        arguments.export_cuda_array_interface(view)  # (the simulator's arrays have none)
    monkeypatch.undo()
    assert a.coherence_ranges() == [(0, 80, "gpu"), (80, 400, "both"), (400, 408, "host"),
                                    (408, 800, "both")]  # fmt: skip


# --- a range-aware state machine -----------------------------------------------------------

M = 64  # elements of the machine's array (small: many distinct ranges)
bounds = st.tuples(st.integers(0, M), st.integers(0, M)).map(sorted).filter(lambda b: b[0] < b[1])
steps = st.sampled_from([1, 1, 2, 3])


class RangeMachine(RuleBasedStateMachine):
    """Random slices read and written on both sides of one array, against a numpy model.

    Model: the true contents, and for each element which sides hold it (a numpy bool array
    per side). After every step: every byte the state machine calls current on a side holds
    the model's value there (no stale read possible), no byte is stale on both sides, and
    every copy moved only bytes that were stale on its destination (coalescing gap 0), and
    only within the extent the operation needed.
    """

    @initialize(gap=st.sampled_from([0, 0, 16, 1 << 16]))
    def create(self, gap: int) -> None:
        self.before = _ranges.coalesce_bytes()
        sa.set_coalesce_bytes(gap)
        self.gap = gap
        self.model = np.arange(M, dtype=np.float64)
        self.a = sa.SmartArray(self.model.copy())
        self.host_ok = np.ones(M, bool)  # which elements the model says are current where
        self.device_ok = np.zeros(M, bool)
        self.has_device = False

    def check_copies(self, t: sa.TransferStats, lo: int, hi: int, step: int, to: str) -> None:
        """Copies during a read or use of ``[lo:hi:step]`` on side ``to``: only stale bytes
        of that side (within the covering range; a gap may add bytes current on both)."""
        stale = ~(self.host_ok if to == "host" else self.device_ok)
        for record in t.records:
            assert record.direction == ("d2h" if to == "host" else "h2d"), record
            first, last = record.offset // 8, (record.offset + record.nbytes) // 8
            if self.gap == 0:
                assert lo <= first and last <= hi, (record, lo, hi)
                assert stale[first:last].all(), (record, stale)

    @rule(b=bounds, k=steps)
    def host_reads(self, b: tuple[int, int], k: int) -> None:
        lo, hi = b
        with sa.track_transfers() as t:
            got = np.asarray(self.a[lo:hi:k])
        np.testing.assert_array_equal(got, self.model[lo:hi:k])
        self.check_copies(t, lo, hi, k, "host")
        if k == 1 or self.gap == 0:
            self.host_ok[lo:hi:k] = True

    @rule(b=bounds, k=steps, v=st.integers(-9, 9).map(float))
    def host_writes(self, b: tuple[int, int], k: int, v: float) -> None:
        lo, hi = b
        with sa.track_transfers() as t:
            self.a[lo:hi:k] = v
        assert t.h2d_count == 0
        self.check_copies(t, lo, hi, k, "host")
        self.model[lo:hi:k] = v
        self.host_ok[lo:hi:k] = True
        self.device_ok[lo:hi:k] = False

    @rule(i=st.integers(0, M - 1))
    def host_reads_an_element(self, i: int) -> None:
        with sa.track_transfers() as t:
            assert self.a[i] == self.model[i]
        assert t.nbytes <= (8 if self.gap == 0 else M * 8)
        if self.gap == 0:
            assert t.nbytes == (0 if self.host_ok[i] else 8)
        self.host_ok[i] = True

    @rule(b=bounds, k=steps)
    def kernel_writes(self, b: tuple[int, int], k: int) -> None:
        lo, hi = b
        with sa.track_transfers() as t:
            step[1, 8](self.a[lo:hi:k])
        self.check_copies(t, lo, hi, k, "gpu")
        self.model[lo:hi:k] += 1
        self.device_ok[lo:hi:k] = True
        self.host_ok[lo:hi:k] = False
        self.has_device = True

    @rule(b=bounds)
    def kernel_reads(self, b: tuple[int, int]) -> None:
        lo, hi = b
        out = sa.empty(hi - lo)
        with sa.track_transfers() as t:
            double_into[1, 8](self.a[lo:hi], out)
        assert t.d2h_count == 0
        self.device_ok[lo:hi] = True
        self.has_device = True
        np.testing.assert_array_equal(out, 2 * self.model[lo:hi])

    @precondition(lambda self: self.has_device)
    @rule()
    def frees_device(self) -> None:
        with sa.track_transfers() as t:
            self.a.free_device()
        if self.gap == 0:
            assert t.d2h_bytes == 8 * int((~self.host_ok).sum())
        self.host_ok[:] = True
        self.device_ok[:] = False
        self.has_device = False

    @rule(b=bounds)
    def mark_changed_on_a_view(self, b: tuple[int, int]) -> None:
        lo, hi = b
        view = self.a[lo:hi]
        side = "host" if view.is_valid("host") else ("gpu" if view.is_valid("gpu") else None)
        if side is None:
            with pytest.raises(RuntimeError, match="stale"):
                view.mark_changed("host")
            return
        view.mark_changed(side)
        (self.device_ok if side == "host" else self.host_ok)[lo:hi] = False

    @invariant()
    def current_bytes_hold_the_model(self) -> None:
        alloc = self.a._alloc
        host, device = alloc.host, alloc.device
        for start, stop, where in self.a.coherence_ranges():
            lo, hi = start // 8, stop // 8
            assert start % 8 == 0 and stop % 8 == 0
            if where in ("host", "both"):
                assert host is not None
                np.testing.assert_array_equal(host[lo:hi], self.model[lo:hi])
            if where in ("gpu", "both"):
                assert device is not None
                np.testing.assert_array_equal(device.copy_to_host()[lo:hi], self.model[lo:hi])
        # The model's claims are never stronger than the machine's.
        for lo in range(M):
            view = self.a[lo : lo + 1]
            if not self.host_ok[lo]:
                assert not view.is_valid("host") or self.gap or view.is_valid("gpu")

    def teardown(self) -> None:
        sa.set_coalesce_bytes(self.before)


RangeMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
TestRanges = pytest.mark.device(RangeMachine.TestCase)


@pytest.mark.device
def test_the_benchmarks_hand_written_idioms_compute_what_the_smartarray_ones_do() -> None:
    from smartarray.bench import idioms

    for name, run, by_hand, _ in idioms.idioms(2048):
        np.testing.assert_array_equal(
            idioms.as_host(run()), idioms.as_host(by_hand()), err_msg=name
        )
    rows = idioms.timings(2048, 1)  # (the GPU table's code; times mean nothing here)
    assert [r["idiom"] for r in rows] == [i[0] for i in idioms.idioms(2048)]
    assert all(r["ratio"] > 0 for r in rows)


@pytest.mark.device
def test_item_copies_only_its_element_and_bad_indices_copy_nothing(exact: None) -> None:
    reference = np.arange(12.0).reshape(3, 4)
    a = sa.SmartArray(reference.copy())
    step[1, 32](a.reshape(12))  # current on the device only
    reference += 1
    with sa.track_transfers() as t:
        for args in [(5,), ((5,),), ((1, 2),), (1, 2), (np.int64(7),), (-1,)]:
            assert a.item(*args) == reference.item(*args), args
    assert [(r.offset, r.nbytes) for r in t.records] == [(40, 8), (48, 8), (56, 8), (88, 8)]
    for bad in [(12,), (3, 0), ("x",), (1, 2, 3)]:
        with sa.track_transfers() as t, pytest.raises((IndexError, TypeError, ValueError)) as got:
            a.item(*bad)
        assert t.count == 0
        with pytest.raises(got.type, match=str(got.value).replace("(", r"\(")):
            reference.item(*bad)
