"""Property-based test of coherence: random operation sequences against a plain numpy model.

After every step, every read returns what the model holds, the validity flags match the model's,
and the transfer ledger counted exactly the copies the model says are needed.
"""

from __future__ import annotations

import itertools
import operator
import pickle
import threading

import numpy as np
import pytest
from helpers import add_scalar, copy_into, libc_memset, numba_add_ufunc, numba_ufunc_support
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from numba import cuda, njit

import smartarray as sa
from smartarray._core import ranges as _ranges

N = 8
NBYTES = N * 8

DEVICE = sa.tier() != "host-only"
needs_device = precondition(lambda self: DEVICE)

index = st.integers(0, N - 1)
value = st.integers(-100, 100).map(float)
span = st.integers(0, N - 1).flatmap(lambda lo: st.tuples(st.just(lo), st.integers(lo + 1, N)))


_UFUNC_ADD = numba_add_ufunc()  # numba-cuda's own CUDA ufunc dispatcher (see helpers.py)


@njit
def _jit_add(a, v):
    for i in range(a.shape[0]):
        a[i] += v


@njit
def _jit_sum(a):
    return a.sum()


# Writes the intent analysis must see (issue 24): through the operator module, a positional
# ``out`` of a function it otherwise knows as read-only, a raw pointer handed to C.
_MEMSET = libc_memset()


@njit
def _jit_setitem_through_operator(a, i, v):
    operator.setitem(a, i, v)


@njit
def _jit_iadd_through_operator(a, v):
    operator.iadd(a, v)


@njit
def _jit_clip_into(src, a):
    np.clip(src, -50.0, 50.0, a)


@njit
def _jit_zero_through_pointer(a):
    _MEMSET(a.ctypes.data, 0, a.nbytes)


Copy = tuple[str, int, int]  # (direction, byte offset, bytes) of one copy in the ledger
WHOLE = [(0, NBYTES)]


def _byte_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The maximal runs of True in ``mask``, as (start, stop) pairs in order."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.astype(np.int8), [0]))))
    return [(int(lo), int(hi)) for lo, hi in zip(edges[::2], edges[1::2], strict=True)]


def _elements(lo: int, hi: int) -> list[tuple[int, int]]:
    """The bytes of elements ``lo`` to ``hi`` (excluded)."""
    return [(8 * lo, 8 * hi)]


class ByteModel:
    """Which copy of each byte of the array is current (issue 21: coherence per byte range),
    and the copies the coherence layer makes to bring a side up to date.

    A read makes its bytes current on one side, copying the stale runs among them; runs
    closer than the coalescing gap move in one copy with the bytes between them, unless one
    of those is current only on the destination side (it would be overwritten). Only the
    stale bytes asked for become current: the bytes between them keep their state.
    """

    def __init__(self, host: bool = True, device: bool = False) -> None:
        self.host = np.full(NBYTES, host)
        self.device = np.full(NBYTES, device)

    def copy_to(
        self,
        where: str,
        extent: list[tuple[int, int]],
        also: np.ndarray | None = None,
        coalesce: bool = True,
    ) -> list[Copy]:
        """Make ``where`` ('host' or 'gpu') current over ``extent``; return the copies. The
        bytes of ``extent`` that are stale there are copied, and those marked in ``also``
        (runs merged across the coalescing gap unless ``coalesce`` is false)."""
        dest, source = (self.host, self.device) if where == "host" else (self.device, self.host)
        stale = np.zeros(NBYTES, dtype=bool)
        for lo, hi in extent:
            stale[lo:hi] = ~dest[lo:hi] if also is None else ~dest[lo:hi] | also[lo:hi]
        newer_on_dest = dest & ~source
        gap = _ranges.coalesce_bytes() if coalesce else 0
        merged: list[tuple[int, int]] = []
        for lo, hi in _byte_runs(stale):
            if merged and lo - merged[-1][1] < gap and not newer_on_dest[merged[-1][1] : lo].any():
                merged[-1] = (merged[-1][0], hi)
            else:
                merged.append((lo, hi))
        dest |= stale
        direction = "d2h" if where == "host" else "h2d"
        return [(direction, lo, hi - lo) for lo, hi in merged]

    def all_stale(self, where: str) -> bool:
        """True when no byte is current on ``where`` ('host' or 'gpu')."""
        return not (self.host if where == "host" else self.device).any()

    def written(self, where: str, extent: list[tuple[int, int]]) -> None:
        """The ``where`` copy of ``extent`` was written: the other copy of it is stale."""
        for lo, hi in extent:
            self.host[lo:hi] = where == "host"
            self.device[lo:hi] = where == "gpu"

    def ranges(self) -> list[tuple[int, int, str]]:
        """What ``Allocation.ranges()`` lists: (start, stop, where) of each run of bytes in
        the same state."""
        labels = np.where(self.host & self.device, 2, np.where(self.host, 0, 1))
        names = ("host", "gpu", "both")
        edges = [0, *(np.flatnonzero(np.diff(labels)) + 1).tolist(), NBYTES]
        return [(lo, hi, names[labels[lo]]) for lo, hi in itertools.pairwise(edges)]

    def location(self) -> str:
        host_only = bool((self.host & ~self.device).any())
        device_only = bool((self.device & ~self.host).any())
        if host_only and device_only:
            return "mixed"
        return "host" if host_only else "gpu" if device_only else "both"


class CoherenceMachine(RuleBasedStateMachine):
    """Model: the true contents, and which copy of each byte the model says is current."""

    @initialize(
        data=st.lists(value, min_size=N, max_size=N),
        on_gpu=st.booleans(),
        made=st.sampled_from(["data", "zeros", "full", "empty"]),
    )
    def create(self, data: list[float], on_gpu: bool, made: str) -> None:
        self.add, self.copy = add_scalar, copy_into
        self.model = np.array(data)
        # A device copy handed out by get('gpu') since the last state change counts as
        # possibly written: free_device downloads it first, and uploads are not coalesced.
        self.handed_out = False
        self.export: np.ndarray | None = None  # a kept np.asarray(array)[lo:hi]
        self.export_span = (0, N)
        where = "gpu" if on_gpu and DEVICE else "host"
        # Whether each side's buffer was made yet (an array made with no data has none until
        # a side first uses it; free_device drops only a device buffer that was made).
        self.host_made = made != "zeros" and made != "full"
        self.device_made = where == "gpu"
        if made == "data":
            self.array = sa.SmartArray(self.model.copy())
            self.bytes = ByteModel()
            if where == "gpu":
                self.expect_step(lambda: self.array.get("gpu"), self.to_device(WHOLE))
                self.handed_out = True
        elif made in ("zeros", "full"):
            # Made with no data: current on both sides, each side's buffer made and filled
            # where it is first used (no copy, ever); with where='gpu', on the device at once
            # (current on both sides all the same: the host buffer is filled where made).
            self.model[:] = 0.0 if made == "zeros" else data[0]
            self.array = self.expect_step(
                lambda: (
                    sa.zeros(N, where=where)
                    if made == "zeros"
                    else sa.full(N, data[0], where=where)
                )
            )
            self.bytes = ByteModel(host=True, device=True)
        else:  # empty, then every element assigned on the host: no copy
            self.array = self.expect_step(lambda: sa.empty(N, where=where))
            self.bytes = ByteModel(host=True, device=True)  # (undefined bytes: never copied)
            assert self.array.location == "both"
            self.expect_step(lambda: self.array.__setitem__(slice(None), self.model))
            self.host_written()
        assert self.array.location == self.bytes.location()
        if DEVICE:
            self.scratch = sa.zeros(N, where="gpu")
            self.zeros = sa.zeros(N, where="gpu")

    def expect_step(self, action, copies: list[Copy] | None = None) -> object:  # type: ignore[no-untyped-def]
        """Run ``action``; the ledger must hold exactly ``copies`` (none by default)."""
        with sa.track_transfers() as t:
            result = action()
        assert [(r.direction, r.offset, r.nbytes) for r in t.records] == (copies or []), (
            t.records,
            copies,
        )
        return result

    def to_host(self, extent: list[tuple[int, int]]) -> list[Copy]:
        """The downloads a host read of ``extent`` makes (the model updated)."""
        self.host_made = True
        return self.bytes.copy_to("host", extent)

    def to_device(self, extent: list[tuple[int, int]]) -> list[Copy]:
        """The uploads a device read of ``extent`` makes (the model updated): not coalesced
        while a device copy handed out by get('gpu') may be written (bytes current on both
        sides may be newer on the device); an upload of every byte ends the hand-out (a copy
        of host data: nothing written through it is left)."""
        whole = extent == WHOLE and self.bytes.all_stale("gpu")
        copies = self.bytes.copy_to("gpu", extent, coalesce=not self.handed_out)
        self.device_made = True
        if whole:
            self.handed_out = False
        return copies

    def host_written(self, extent: list[tuple[int, int]] = WHOLE) -> None:
        self.host_made = True
        self.bytes.written("host", extent)
        self.handed_out = False

    def device_written(self, extent: list[tuple[int, int]] = WHOLE) -> list[Copy]:
        """A device write of ``extent``; returns the downloads that refresh a live host export
        (the bytes current only on the device, after every device write)."""
        self.device_made = True
        self.bytes.written("gpu", extent)
        self.handed_out = False
        return [] if self.export is None else self.to_host(WHOLE)

    # --- host writes ---------------------------------------------------------------------

    @rule(i=index, v=value)
    def setitem(self, i: int, v: float) -> None:
        # One element, overwritten: its stale host bytes are never needed (no copy).
        self.expect_step(lambda: self.array.__setitem__(i, v))
        self.model[i] = v
        self.host_written(_elements(i, i + 1))

    @rule(s=span, v=value)
    def write_through_view(self, s: tuple[int, int], v: float) -> None:
        view = self.array[s[0] : s[1]]
        # Assigning every element of the view never needs its stale host data first.
        self.expect_step(lambda: view.__setitem__(slice(None), v))
        self.model[s[0] : s[1]] = v
        self.host_written(_elements(*s))

    @rule(v=value)
    def inplace_operator(self, v: float) -> None:
        def act() -> None:
            self.array += v

        self.expect_step(act, self.to_host(WHOLE))
        self.model += v
        self.host_written()

    @rule(v=value)
    def fill_whole(self, v: float) -> None:
        # Overwrites everything: never copies the stale host data first.
        self.expect_step(lambda: self.array.fill(v))
        self.model[:] = v
        self.host_written()

    @rule(i=index, v=value)
    def write_through_get_host(self, i: int, v: float) -> None:
        host = self.expect_step(lambda: self.array.get("host"), self.to_host(WHOLE))
        host[i] = v
        self.array.mark_changed("host")
        self.model[i] = v
        self.host_written()

    @rule(v=value)
    def njit_writes(self, v: float) -> None:
        self.expect_step(lambda: _jit_add(self.array, v), self.to_host(WHOLE))
        self.model += v
        self.host_written()

    @rule(i=index, v=value)
    def njit_setitem_through_operator(self, i: int, v: float) -> None:
        self.expect_step(
            lambda: _jit_setitem_through_operator(self.array, i, v), self.to_host(WHOLE)
        )
        self.model[i] = v
        self.host_written()

    @rule(v=value)
    def njit_iadd_through_operator(self, v: float) -> None:
        self.expect_step(lambda: _jit_iadd_through_operator(self.array, v), self.to_host(WHOLE))
        self.model += v
        self.host_written()

    @rule(v=value)
    def njit_positional_out(self, v: float) -> None:
        src = (np.arange(N) - N // 2) * v  # whole numbers (sums stay exact); an ndarray
        self.expect_step(lambda: _jit_clip_into(src, self.array), self.to_host(WHOLE))
        self.model[:] = np.clip(src, -50.0, 50.0)
        self.host_written()

    @precondition(lambda self: _MEMSET is not None)
    @rule()
    def njit_pointer_to_c(self) -> None:
        self.expect_step(lambda: _jit_zero_through_pointer(self.array), self.to_host(WHOLE))
        self.model[:] = 0.0
        self.host_written()

    # Host fast paths (smartarray._numpy.fastpath): taken when the host copy is ready, the full path
    # otherwise; both must leave the same flags and make the same copies.
    @rule(s=span, v=value)
    def slice_assign(self, s: tuple[int, int], v: float) -> None:
        def act() -> None:
            self.array[s[0] : s[1]] = v

        self.expect_step(act)  # (overwrites every byte of the slice: no copy)
        self.model[s[0] : s[1]] = v
        self.host_written(_elements(*s))

    @rule(s=span, v=value)
    def slice_assign_ndarray(self, s: tuple[int, int], v: float) -> None:
        values = np.full(s[1] - s[0], v)

        def act() -> None:
            self.array[s[0] : s[1]] = values

        self.expect_step(act)  # (overwrites every byte of the slice: no copy)
        self.model[s[0] : s[1]] = values
        self.host_written(_elements(*s))

    @rule(v=value)
    def inplace_with_smartarray(self, v: float) -> None:
        other = sa.full(N, v)

        def act() -> None:
            self.array *= other
            self.array -= other

        self.expect_step(act, self.to_host(WHOLE))
        self.model *= v
        self.model -= v
        self.host_written()

    @rule(v=value)
    def operators_read(self, v: float) -> None:
        results = self.expect_step(
            lambda: (
                self.array + v,
                v - self.array,
                -self.array,
                self.array * self.array,
                (self.array + v) * self.array,  # a new result as an operand
            ),
            self.to_host(WHOLE),
        )
        expected = (
            self.model + v,
            v - self.model,
            -self.model,
            self.model * self.model,
            (self.model + v) * self.model,
        )
        for got, want in zip(results, expected, strict=True):
            assert isinstance(got, sa.SmartArray) and got.location == "host"
            np.testing.assert_array_equal(np.asarray(got), want)

    @rule(v=value)
    def ndarray_first_operand(self, v: float) -> None:
        plain = np.full(N, v)
        result = self.expect_step(lambda: plain + self.array, self.to_host(WHOLE))
        assert isinstance(result, sa.SmartArray)
        np.testing.assert_array_equal(np.asarray(result), plain + self.model)

    @rule()
    def ufuncs_and_functions_read(self) -> None:
        results = self.expect_step(
            lambda: (
                np.multiply(self.array, 2.0),
                np.add.reduce(self.array),
                np.add.accumulate(self.array),
                np.concatenate([self.array, self.array]),
                np.sort(self.array),
            ),
            self.to_host(WHOLE),
        )
        expected = (
            self.model * 2.0,
            np.add.reduce(self.model),
            np.add.accumulate(self.model),
            np.concatenate([self.model, self.model]),
            np.sort(self.model),
        )
        for got, want in zip(results, expected, strict=True):
            np.testing.assert_array_equal(np.asarray(got), want)

    @rule()
    def reductions_read(self) -> None:
        results = self.expect_step(
            lambda: (self.array.sum(), self.array.max(), np.sum(self.array), self.array.mean()),
            self.to_host(WHOLE),
        )
        model = self.model
        assert results == (model.sum(), model.max(), np.sum(model), model.mean())

    @rule(s=span, i=index, v=value)
    def write_element_of_slice_view(self, s: tuple[int, int], i: int, v: float) -> None:
        view = self.array[s[0] : s[1]]
        k = i % (s[1] - s[0])
        self.expect_step(lambda: view.__setitem__(k, v))  # (one element, overwritten)
        self.model[s[0] + k] = v
        self.host_written(_elements(s[0] + k, s[0] + k + 1))
        # reading an element of the view reads that element's bytes (current on the host)
        assert (
            self.expect_step(lambda: view[k], self.to_host(_elements(s[0] + k, s[0] + k + 1))) == v
        )

    # --- iteration, pickles, threads (issue 24) -------------------------------------------

    @rule(k=st.integers(0, N), v=value)
    def iterate_with_a_device_write_midway(self, k: int, v: float) -> None:
        """``for x in a``: the items after a kernel launched inside the loop are the new ones
        (one download before the first item read while the host copy is stale)."""
        items = iter(self.array)
        first = self.expect_step(
            lambda: [next(items) for _ in range(k)], self.to_host(WHOLE) if k else []
        )
        expected = list(self.model[:k])
        if DEVICE:
            uploads = self.to_device(WHOLE)
            self.expect_step(lambda: self.add[1, N](self.array, v), uploads + self.device_written())
            self.model += v
        rest = self.expect_step(lambda: list(items), self.to_host(WHOLE) if k < N else [])
        assert first + rest == expected + list(self.model[k:])

    @rule(i=index, v=value)
    def pickle_out_of_band_loaded_twice(self, i: int, v: float) -> None:
        """Protocol 5 with out-of-band buffers, loaded twice from the same buffers: two
        independent arrays, neither sharing the caller's buffer nor the original."""
        buffers: list[pickle.PickleBuffer] = []
        data = self.expect_step(
            lambda: pickle.dumps(self.array, protocol=5, buffer_callback=buffers.append),
            self.to_host(WHOLE),
        )
        first = self.expect_step(lambda: pickle.loads(data, buffers=buffers))
        second = self.expect_step(lambda: pickle.loads(data, buffers=buffers))
        first[i] = v
        assert second[i] == self.model[i] and first[i] == v
        np.testing.assert_array_equal(np.asarray(second), self.model)

    @rule()
    def host_read_while_another_thread_refuses_copies(self) -> None:
        """``no_transfers()`` is the calling thread's: another thread inside it meanwhile
        does not refuse this thread's copies."""
        inside, done = threading.Event(), threading.Event()

        def refuse() -> None:
            with sa.no_transfers():
                inside.set()
                done.wait(timeout=60)

        other = threading.Thread(target=refuse)
        other.start()
        try:
            assert inside.wait(timeout=60)
            got = self.expect_step(lambda: np.array(self.array), self.to_host(WHOLE))
        finally:
            done.set()
            other.join()
        np.testing.assert_array_equal(got, self.model)

    # --- device writes -------------------------------------------------------------------
    @needs_device
    @rule(i=index, v=value)
    def write_through_get_gpu(self, i: int, v: float) -> None:
        device = self.expect_step(lambda: self.array.get("gpu"), self.to_device(WHOLE))
        device[i] = v
        self.expect_step(lambda: self.array.mark_changed("gpu"), self.device_written())
        self.model[i] = v

    @needs_device
    @rule(v=value)
    def kernel_writes(self, v: float) -> None:
        uploads = self.to_device(WHOLE)
        self.expect_step(lambda: self.add[1, N](self.array, v), uploads + self.device_written())
        self.model += v

    @needs_device
    @rule(s=span, v=value)
    def kernel_writes_view(self, s: tuple[int, int], v: float) -> None:
        view = self.array[s[0] : s[1]]
        # only the view's bytes go up (those stale on the device), and only they are written
        uploads = self.to_device(_elements(*s))
        self.expect_step(
            lambda: self.add[1, N](view, v), uploads + self.device_written(_elements(*s))
        )
        self.model[s[0] : s[1]] += v

    @needs_device
    @rule(v=value)
    def kernel_overwrites_out(self, v: float) -> None:
        # Out intent: no host-to-device copy at all, whatever the state.
        self.expect_step(
            lambda: self.copy[1, N](sa.Out(self.array), sa.In(self.zeros)), self.device_written()
        )
        self.model[:] = 0.0

    @needs_device
    @rule(v=value)
    def cuda_ufunc_writes_out(self, v: float) -> None:
        # The array is both an input and out=: uploaded if stale, then written on the device.
        addend = sa.full(N, v, where="gpu")
        uploads = self.to_device(WHOLE)
        with numba_ufunc_support():
            self.expect_step(
                lambda: _UFUNC_ADD(self.array, addend, out=self.array),
                uploads + self.device_written(),
            )
        self.model += v

    @needs_device
    @rule(k=st.integers(1, N // 2))
    def kernel_copies_from_read_only_view(self, k: int) -> None:
        # dst = the first k elements, src = a read-only view of the last k: the read-only
        # view of the written allocation is read (never refused); the allocation is written.
        # Each argument uploads its own stale bytes (issue 21), dst first.
        source = np.broadcast_to(self.array[N - k :], (k,))
        assert isinstance(source, sa.SmartArray) and not source.flags.writeable
        uploads = self.to_device(_elements(0, k)) + self.to_device(_elements(N - k, N))
        self.expect_step(
            lambda: self.copy[1, N](self.array[:k], source),
            uploads + self.device_written(_elements(0, k)),
        )
        self.model[:k] = self.model[N - k :].copy()

    @needs_device
    @rule()
    def kernel_reads_read_only_view(self) -> None:
        # A read-only view of the array read by a kernel that writes another array: In, the
        # host copy stays valid. The diagonal of the 2x4 reshape is elements 0 and 5: its
        # bytes 0..8 and 40..48 go up (in one copy, unless the bytes between are newer there).
        source = self.array.reshape(2, N // 2).diagonal()
        self.expect_step(
            lambda: self.copy[1, N](self.scratch[:2], source),
            self.to_device([(0, 8), (40, 48)]),
        )
        np.testing.assert_array_equal(
            self.scratch.get("gpu").copy_to_host()[:2], [self.model[0], self.model[N // 2 + 1]]
        )

    @needs_device
    @rule()
    def launch_fails_while_prepared(self) -> None:
        # The array, then a view of it the device cannot represent: refused after the array
        # was prepared (uploaded if stale, an upload then forgotten); every flag goes back.
        def act() -> None:
            with pytest.raises(ValueError, match="negative strides"):
                self.copy[1, N](self.array, self.array[::-1])

        host, device = self.bytes.host.copy(), self.bytes.device.copy()
        self.expect_step(act, self.to_device(WHOLE))
        self.bytes.host, self.bytes.device = host, device

    # --- reads ---------------------------------------------------------------------------
    @needs_device
    @rule()
    def cuda_ufunc_reads(self) -> None:
        with numba_ufunc_support():
            result = self.expect_step(
                lambda: _UFUNC_ADD(self.array, self.zeros), self.to_device(WHOLE)
            )
            total = self.expect_step(lambda: _UFUNC_ADD.reduce(self.array))
            # (the same reduction of the model on a plain device array: numpy's pairwise sum of
            # values past 2**53 can round differently from the CUDA reduction's order)
            expected_total = _UFUNC_ADD.reduce(cuda.to_device(self.model.copy()))
        assert result.location == "gpu"
        np.testing.assert_array_equal(np.asarray(result), self.model)
        assert total == expected_total

    @needs_device
    @rule()
    def kernel_reads_in(self) -> None:
        self.expect_step(
            lambda: self.copy[1, N](sa.Out(self.scratch), sa.In(self.array)),
            self.to_device(WHOLE),
        )

    @needs_device
    @rule()
    def kernel_reads_bare(self) -> None:
        # Inferred intents: copy_into only reads ``src``: the bare array is In (host stays valid).
        self.expect_step(lambda: self.copy[1, N](self.scratch, self.array), self.to_device(WHOLE))
        np.testing.assert_array_equal(self.scratch.get("gpu").copy_to_host(), self.model)

    @rule()
    def njit_reads_bare(self) -> None:
        # Inferred: _jit_sum never writes its argument, so the device copy stays valid.
        total = self.expect_step(lambda: _jit_sum(self.array), self.to_host(WHOLE))
        # (the same compiled sum of the model: numpy's pairwise sum of large values can round
        # differently from Numba's sequential one)
        assert total == _jit_sum(self.model.copy())

    @rule()
    def njit_reads_in(self) -> None:
        total = self.expect_step(lambda: _jit_sum(sa.In(self.array)), self.to_host(WHOLE))
        assert total == _jit_sum(self.model.copy())  # (the same compiled sum: see above)

    @rule()
    def read_host(self) -> None:
        host = self.expect_step(lambda: np.array(self.array), self.to_host(WHOLE))
        np.testing.assert_array_equal(host, self.model)

    @rule(i=index)
    def read_scalar(self, i: int) -> None:
        # a[i] reads that element's bytes only (issue 21)
        got = self.expect_step(lambda: self.array[i], self.to_host(_elements(i, i + 1)))
        assert got == self.model[i]

    @needs_device
    @rule()
    def read_device(self) -> None:
        device = self.expect_step(lambda: self.array.get("gpu"), self.to_device(WHOLE))
        np.testing.assert_array_equal(device.copy_to_host(), self.model)
        self.handed_out = True

    @rule(s=span)
    def make_views_only(self, s: tuple[int, int]) -> None:
        # Views are layout only: no copy, whatever is stale.
        self.expect_step(lambda: (self.array[s[0] : s[1]], self.array.reshape(2, -1).T))

    @precondition(lambda self: not DEVICE)
    @rule(where=st.sampled_from(["gpu", "device"]))
    def device_request_without_cuda(self, where: str) -> None:
        state = self.array.location
        with pytest.raises(sa.DeviceUnavailableError, match="NUMBA_ENABLE_CUDASIM"):
            self.array.get(where)
        assert self.array.location == state
        np.testing.assert_array_equal(np.asarray(self.array), self.model)

    @rule(s=span)
    def keep_host_export(self, s: tuple[int, int]) -> None:
        # A view derived from np.asarray(array), kept: every later device write refreshes it.
        self.export = self.expect_step(
            lambda: np.asarray(self.array)[s[0] : s[1]], self.to_host(WHOLE)
        )
        self.export_span = s

    @precondition(lambda self: self.export is not None)
    @rule()
    def release_host_export(self) -> None:
        def act() -> None:
            self.export = None

        self.expect_step(act)  # costs nothing, changes no flag

    def written_through_export(self, new: np.ndarray) -> None:
        """The model after a write through a host export, which the coherence layer finds by
        comparing the host bytes current on both sides with a snapshot: in each run of such
        bytes, the runs of changed bytes (merged across gaps below the coalescing gap; past
        32 of them, their covering range) become stale on the device."""
        differs = self.model.view(np.uint8) != new.view(np.uint8)
        for lo, hi in _byte_runs(self.bytes.host & self.bytes.device):
            changed = [(lo + a, lo + b) for a, b in _byte_runs(differs[lo:hi])]
            changed = _ranges.coalesce(changed)
            if len(changed) > 32:
                changed = [(changed[0][0], changed[-1][1])]
            if changed:
                self.bytes.written("host", changed)
                self.handed_out = False
        self.model = new

    @precondition(lambda self: self.export is not None)
    @rule(i=index, v=value)
    def write_through_kept_export(self, i: int, v: float) -> None:
        lo, hi = self.export_span
        assert self.export is not None
        j = i % (hi - lo)
        self.expect_step(lambda: self.export.__setitem__(j, v))  # (a plain ndarray write)
        new = self.model.copy()
        new[lo + j] = v
        self.written_through_export(new)

    @rule(v=value)
    def helper_writes_through_asarray(self, v: float) -> None:
        def act() -> None:
            x = np.asarray(self.array)
            x += v  # the view dies here

        self.expect_step(act, self.to_host(WHOLE))
        self.written_through_export(self.model + v)

    @rule(v=value)
    def njit_writes_through_asarray(self, v: float) -> None:
        self.expect_step(lambda: _jit_add(np.asarray(self.array), v), self.to_host(WHOLE))
        self.written_through_export(self.model + v)

    @rule()
    def free_device(self) -> None:
        # Downloads the bytes current only on the device, and (while a copy handed out by
        # get('gpu') since the last change may have been written) those current on both.
        # Every byte is then current on the host only; but a device buffer never made is
        # not there to drop, and with a host buffer never made either (no copy needed) every
        # byte keeps its fill on both sides.
        if not self.device_made:
            self.expect_step(self.array.free_device)
            return
        model = self.bytes
        copies = model.copy_to("host", WHOLE, also=model.device if self.handed_out else None)
        self.expect_step(self.array.free_device, copies)
        if copies:
            self.host_made = True
        if self.host_made:
            model.device[:] = False
        self.device_made = False
        self.handed_out = False

    @invariant()
    def host_export_is_current(self) -> None:
        if getattr(self, "export", None) is not None:
            lo, hi = self.export_span
            np.testing.assert_array_equal(self.export, self.model[lo:hi])

    @invariant()
    def flags_match_model(self) -> None:
        if hasattr(self, "array"):
            assert self.array.is_valid("host") == bool(self.bytes.host.all())
            assert self.array.is_valid("gpu") == bool(self.bytes.device.all())
            assert self.array.location == self.bytes.location()
            assert self.array._alloc.ranges() == self.bytes.ranges()


CoherenceMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=30, deadline=None
)
TestCoherence = CoherenceMachine.TestCase
