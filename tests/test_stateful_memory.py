"""Property-based test of the device memory budget: random operations under a small limit.

Four arrays, a random limit of one to four arrays' worth of device memory (plus a few odd
bytes), and random kernel launches, host writes and reads, device reads, free_device calls,
new device-born arrays, limit changes, and the old API's writes through a device array handed
out by ``get('gpu')`` (kept or dropped by the caller, under memory pressure, declared with
``mark_changed('gpu')``). After every step: every copy marked current holds what the model says
(no stale read, no lost write), the usage is at most the limit (and never went above it within
the step), it is exactly the device buffers the arrays hold, and every spill was of an array
whose only current copy was on the device, or whose device copy was handed out and possibly
written since its last state change.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import add_scalar, copy_into
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import smartarray as sa
from smartarray._core import memory as _memory
from smartarray._core import ranges as _ranges

pytestmark = pytest.mark.device

K = 4
N = 8
NBYTES = N * 8

which = st.integers(0, K - 1)
value = st.integers(-100, 100).map(float)


def stale_copies(ranges: list[tuple[int, int, str]], where: str) -> list[tuple[int, int]]:
    """(offset, bytes) of the copies that make the ``where`` side of an array whose
    ``Allocation.ranges()`` are ``ranges`` current: its runs current only on the other side,
    merged across gaps below the coalescing gap that hold no byte current only on ``where``
    (issue 21)."""
    stale = "gpu" if where == "host" else "host"
    merged: list[tuple[int, int]] = []
    for lo, hi, label in ranges:
        if label != stale:
            continue
        if merged and lo - merged[-1][1] < _ranges.coalesce_bytes():
            end = merged[-1][1]
            if not any(w == where and a < lo and b > end for a, b, w in ranges):
                merged[-1] = (merged[-1][0], hi)
                continue
        merged.append((lo, hi))
    return [(lo, hi - lo) for lo, hi in merged]


class BudgetMachine(RuleBasedStateMachine):
    """Model: the true contents of each array."""

    @initialize(slots=st.integers(1, 4), odd=st.integers(0, NBYTES - 1), data=st.data())
    def create(self, slots: int, odd: int, data: st.DataObject) -> None:
        gc.collect()
        # Device copies of earlier tests' arrays that are still alive (a docs snippet's, a
        # traceback's) are evicted now, so that the limit below is the machine's alone and
        # no eviction inside an example takes one of them instead of a machine's array.
        sa.set_device_memory_limit(0)
        sa.set_device_memory_limit(None)
        self.base = sa.device_memory_usage()
        self.set_limit_to(slots, odd)
        self.model = [
            np.array(data.draw(st.lists(value, min_size=N, max_size=N))) for _ in range(K)
        ]
        self.arrays = [sa.SmartArray(m.copy(), label=f"x{k}") for k, m in enumerate(self.model)]
        self.handed_out: set[str] = set()  # labels handed out by get('gpu') since a change

    def set_limit_to(self, slots: int, odd: int) -> None:
        self.slots = slots
        self.limit = self.base + slots * NBYTES + odd
        sa.set_device_memory_limit(self.limit)
        _memory._peak_usage(reset=True)

    def step(self, action):  # type: ignore[no-untyped-def]
        """Run ``action``; check that spills were of bytes current only on the device (or of
        a device copy handed out and possibly written since), and never overwrote bytes
        current only on the host."""
        before = {a.label: a._alloc.ranges() for a in self.arrays}
        with sa.track_transfers() as t:
            result = action()
        for record in t.records:
            # (an array replaced by the machine may live on until a garbage collection: its
            # spill is of no array here)
            if record.spill and record.array in before:
                lo, hi = record.offset, record.offset + record.nbytes
                touched = {where for a, b, where in before[record.array] if a < hi and b > lo}
                assert "host" not in touched, (record, before)
                assert "gpu" in touched or record.array in self.handed_out, (record, before)
        return result, t

    def changed(self, *indices: int) -> None:
        """The arrays at ``indices`` had a state change: their hand-outs are declared."""
        for i in indices:
            self.handed_out.discard(self.arrays[i].label)

    @rule(i=which, v=value)
    def kernel_adds(self, i: int, v: float) -> None:
        array = self.arrays[i]
        uploads = stale_copies(array._alloc.ranges(), "gpu")
        _, t = self.step(lambda: add_scalar[1, N](array, v))
        assert [(r.offset, r.nbytes) for r in t.records if r.direction == "h2d"] == uploads
        self.model[i] += v
        self.changed(i)

    @rule(i=which, j=which)
    def kernel_copies(self, i: int, j: int) -> None:
        if i == j:
            return
        dst, src = self.arrays[j], self.arrays[i]
        locations = (dst.location, src.location)
        if self.slots < 2:  # the two arguments alone do not fit
            with pytest.raises(MemoryError, match="in use by this operation"):
                self.step(lambda: copy_into[1, N](sa.Out(dst), sa.In(src)))
            assert dst.location == locations[0]  # the failed launch's output is untouched
            return
        self.step(lambda: copy_into[1, N](sa.Out(dst), sa.In(src)))
        self.model[j] = self.model[i].copy()
        self.changed(j)

    @rule(i=which, k=st.integers(0, N - 1), v=value)
    def host_writes(self, i: int, k: int, v: float) -> None:
        _, t = self.step(lambda: self.arrays[i].__setitem__(k, v))
        assert t.spill_count == 0 and t.h2d_count == 0
        self.model[i][k] = v
        self.changed(i)

    @rule(i=which)
    def host_reads(self, i: int) -> None:
        downloads = stale_copies(self.arrays[i]._alloc.ranges(), "host")
        got, t = self.step(lambda: np.array(self.arrays[i]))
        assert t.spill_count == 0
        assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [
            ("d2h", offset, nbytes) for offset, nbytes in downloads
        ]
        np.testing.assert_array_equal(got, self.model[i])

    @rule(i=which)
    def device_reads(self, i: int) -> None:
        device, _ = self.step(lambda: self.arrays[i].get("gpu"))
        self.handed_out.add(self.arrays[i].label)
        np.testing.assert_array_equal(device.copy_to_host(), self.model[i])

    @rule(i=which, j=which, v=value, keep=st.booleans())
    def writes_through_get_gpu(self, i: int, j: int, v: float, keep: bool) -> None:
        """The old API: ``d = a.get('gpu')``, a kernel writes ``d``, another array is made
        current on the device (which may evict ``a``'s copy), then ``mark_changed('gpu')``.
        With the caller holding ``d``, ``a``'s copy cannot be evicted (a MemoryError names it
        when nothing else can make room); without, it is spilled, never dropped."""
        a = self.arrays[i]
        device, _ = self.step(lambda: a.get("gpu"))
        self.handed_out.add(a.label)
        add_scalar[1, N](device, v)  # a raw device array: smartarray sees nothing
        self.model[i] += v
        if not keep:
            del device
            gc.collect()
        if j != i:
            try:
                self.step(self.arrays[j].to_gpu)
            except MemoryError as error:
                assert keep and self.slots < 2, error
                assert "handed out by get('gpu')" in str(error)
        self.step(lambda: a.mark_changed("gpu"))
        self.changed(i)

    @rule(i=which)
    def frees_device(self, i: int) -> None:
        _, t = self.step(self.arrays[i].free_device)
        assert t.spill_count == 0 and self.arrays[i]._alloc.device is None
        self.changed(i)

    @rule(i=which, v=value)
    def replaces_with_a_device_born_array(self, i: int, v: float) -> None:
        # (filled on the device now, current on both sides: its host buffer made where used)
        new, _ = self.step(lambda: sa.full(N, v, where="gpu"))
        self.handed_out.discard(self.arrays[i].label)
        self.arrays[i] = new  # the old one dies: its device memory is uncharged
        self.model[i] = np.full(N, v)

    @rule(slots=st.integers(1, 4), odd=st.integers(0, NBYTES - 1))
    def changes_the_limit(self, slots: int, odd: int) -> None:
        self.step(lambda: self.set_limit_to(slots, odd))

    @invariant()
    def every_current_copy_holds_the_model(self) -> None:
        for array, expected in zip(self.arrays, self.model, strict=True):  # no ledger copies
            # Every byte range is current somewhere (issue 21: validity per byte range), and
            # each copy marked current there holds the model's bytes.
            alloc = array._alloc
            want = expected.view(np.uint8)
            # (an array made with no data: a side whose buffer is not made yet holds the fill,
            # made and filled there when first used)
            fill = alloc._fill
            filled = None if fill is None else np.full(N, fill[0]).view(np.uint8)
            host = filled if alloc.host is None else alloc.host.view(np.uint8)
            device = filled if alloc.device is None else alloc.device.copy_to_host().view(np.uint8)
            ranges = alloc.ranges()
            assert ranges[0][0] == 0 and ranges[-1][1] == NBYTES
            for lo, hi, where in ranges:
                assert where in ("host", "gpu", "both"), ranges
                if where != "gpu":
                    assert host is not None
                    np.testing.assert_array_equal(host[lo:hi], want[lo:hi])
                if where != "host":
                    assert device is not None
                    np.testing.assert_array_equal(device[lo:hi], want[lo:hi])

    @invariant()
    def usage_is_within_the_limit_and_exact(self) -> None:
        usage = sa.device_memory_usage()
        assert usage <= self.limit and _memory._peak_usage() <= self.limit
        mine = {a._alloc.key for a in self.arrays}
        held = sum(NBYTES for a in self.arrays if a._alloc._device_owned)
        # Usage is exactly the device buffers live allocations hold: the machine's, and any
        # other still alive (an array the machine replaced, until a garbage collection; one
        # of an earlier test that could not be evicted at create).
        charged = {key: nbytes for key, (ref, nbytes) in _memory._BUDGET.entries.items() if ref()}
        assert {k for k in mine if k in charged} == {
            a._alloc.key for a in self.arrays if a._alloc._device_owned
        }
        others = sum(nbytes for key, nbytes in charged.items() if key not in mine)
        assert usage == held + others

    def teardown(self) -> None:
        sa.set_device_memory_limit(None)
        self.arrays = []  # hypothesis may keep this machine: its arrays must go now


BudgetMachine.TestCase.settings = settings(max_examples=50, stateful_step_count=20, deadline=None)
TestBudget = BudgetMachine.TestCase
