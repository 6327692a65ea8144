"""Property-based test of coherence: random operation sequences against a plain numpy model.

After every step, every read returns what the model holds, the validity flags match the model's,
and the transfer ledger counted exactly the copies the model says are needed.
"""

from __future__ import annotations

import operator
import pickle
import threading

import numpy as np
import pytest
from helpers import add_scalar, copy_into, libc_memset, numba_add_ufunc, numba_ufunc_support
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from numba import njit

import smartarray as sa

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


class CoherenceMachine(RuleBasedStateMachine):
    """Model: the true contents, and which copies the model says are current."""

    @initialize(data=st.lists(value, min_size=N, max_size=N), on_gpu=st.booleans())
    def create(self, data: list[float], on_gpu: bool) -> None:
        self.add, self.copy = add_scalar, copy_into
        self.model = np.array(data)
        self.array = sa.SmartArray(self.model.copy())
        self.host_valid, self.device_valid = True, False
        # A device copy handed out by get('gpu') since the last state change counts as
        # possibly written: free_device downloads it first.
        self.handed_out = False
        self.export: np.ndarray | None = None  # a kept np.asarray(array)[lo:hi]
        self.export_span = (0, N)
        if on_gpu and DEVICE:
            self.expect_step(lambda: self.array.get("gpu"), h2d=1)
            self.device_valid = self.handed_out = True
        if DEVICE:
            self.scratch = sa.zeros(N, where="gpu")
            self.zeros = sa.zeros(N, where="gpu")

    def expect_step(self, action, h2d: int = 0, d2h: int = 0) -> object:  # type: ignore[no-untyped-def]
        with sa.track_transfers() as t:
            result = action()
        assert (t.h2d_count, t.d2h_count) == (h2d, d2h), (t, h2d, d2h)
        assert t.h2d_bytes == h2d * NBYTES and t.d2h_bytes == d2h * NBYTES
        return result

    def host_needs(self) -> int:
        return 0 if self.host_valid else 1

    def device_needs(self) -> int:
        return 0 if self.device_valid else 1

    def host_written(self) -> None:
        self.host_valid, self.device_valid = True, False
        self.handed_out = False

    def device_written(self) -> None:
        # A live host export is refreshed by every device write: both copies stay current.
        self.host_valid, self.device_valid = self.export is not None, True
        self.handed_out = False

    def refreshes(self) -> int:
        """Downloads a device write makes: one while a host export is alive."""
        return 0 if self.export is None else 1

    # --- host writes ---------------------------------------------------------------------

    @rule(i=index, v=value)
    def setitem(self, i: int, v: float) -> None:
        self.expect_step(lambda: self.array.__setitem__(i, v), d2h=self.host_needs())
        self.model[i] = v
        self.host_written()

    @rule(s=span, v=value)
    def write_through_view(self, s: tuple[int, int], v: float) -> None:
        view = self.array[s[0] : s[1]]
        # Assigning every element never needs the stale host data first.
        needs = 0 if s == (0, N) else self.host_needs()
        self.expect_step(lambda: view.__setitem__(slice(None), v), d2h=needs)
        self.model[s[0] : s[1]] = v
        self.host_written()

    @rule(v=value)
    def inplace_operator(self, v: float) -> None:
        def act() -> None:
            self.array += v

        self.expect_step(act, d2h=self.host_needs())
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
        host = self.expect_step(lambda: self.array.get("host"), d2h=self.host_needs())
        host[i] = v
        self.array.mark_changed("host")
        self.model[i] = v
        self.host_written()

    @rule(v=value)
    def njit_writes(self, v: float) -> None:
        self.expect_step(lambda: _jit_add(self.array, v), d2h=self.host_needs())
        self.model += v
        self.host_written()

    @rule(i=index, v=value)
    def njit_setitem_through_operator(self, i: int, v: float) -> None:
        self.expect_step(
            lambda: _jit_setitem_through_operator(self.array, i, v), d2h=self.host_needs()
        )
        self.model[i] = v
        self.host_written()

    @rule(v=value)
    def njit_iadd_through_operator(self, v: float) -> None:
        self.expect_step(lambda: _jit_iadd_through_operator(self.array, v), d2h=self.host_needs())
        self.model += v
        self.host_written()

    @rule(v=value)
    def njit_positional_out(self, v: float) -> None:
        src = (np.arange(N) - N // 2) * v  # whole numbers (sums stay exact); an ndarray
        self.expect_step(lambda: _jit_clip_into(src, self.array), d2h=self.host_needs())
        self.model[:] = np.clip(src, -50.0, 50.0)
        self.host_written()

    @precondition(lambda self: _MEMSET is not None)
    @rule()
    def njit_pointer_to_c(self) -> None:
        self.expect_step(lambda: _jit_zero_through_pointer(self.array), d2h=self.host_needs())
        self.model[:] = 0.0
        self.host_written()

    # Host fast paths (smartarray._numpy.fastpath): taken when the host copy is ready, the full path
    # otherwise; both must leave the same flags and make the same copies.
    @rule(s=span, v=value)
    def slice_assign(self, s: tuple[int, int], v: float) -> None:
        def act() -> None:
            self.array[s[0] : s[1]] = v

        needs = 0 if s == (0, N) else self.host_needs()
        self.expect_step(act, d2h=needs)
        self.model[s[0] : s[1]] = v
        self.host_written()

    @rule(s=span, v=value)
    def slice_assign_ndarray(self, s: tuple[int, int], v: float) -> None:
        values = np.full(s[1] - s[0], v)

        def act() -> None:
            self.array[s[0] : s[1]] = values

        needs = 0 if s == (0, N) else self.host_needs()
        self.expect_step(act, d2h=needs)
        self.model[s[0] : s[1]] = values
        self.host_written()

    @rule(v=value)
    def inplace_with_smartarray(self, v: float) -> None:
        other = sa.full(N, v)

        def act() -> None:
            self.array *= other
            self.array -= other

        self.expect_step(act, d2h=self.host_needs())
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
            d2h=self.host_needs(),
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
        self.host_valid = True

    @rule(v=value)
    def ndarray_first_operand(self, v: float) -> None:
        plain = np.full(N, v)
        result = self.expect_step(lambda: plain + self.array, d2h=self.host_needs())
        assert isinstance(result, sa.SmartArray)
        np.testing.assert_array_equal(np.asarray(result), plain + self.model)
        self.host_valid = True

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
            d2h=self.host_needs(),
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
        self.host_valid = True

    @rule()
    def reductions_read(self) -> None:
        results = self.expect_step(
            lambda: (self.array.sum(), self.array.max(), np.sum(self.array), self.array.mean()),
            d2h=self.host_needs(),
        )
        model = self.model
        assert results == (model.sum(), model.max(), np.sum(model), model.mean())
        self.host_valid = True

    @rule(s=span, i=index, v=value)
    def write_element_of_slice_view(self, s: tuple[int, int], i: int, v: float) -> None:
        view = self.array[s[0] : s[1]]
        k = i % (s[1] - s[0])
        self.expect_step(lambda: view.__setitem__(k, v), d2h=self.host_needs())
        assert self.expect_step(lambda: view[k]) == v
        self.model[s[0] + k] = v
        self.host_written()

    # --- iteration, pickles, threads (issue 24) -------------------------------------------

    @rule(k=st.integers(0, N), v=value)
    def iterate_with_a_device_write_midway(self, k: int, v: float) -> None:
        """``for x in a``: the items after a kernel launched inside the loop are the new ones
        (one download before the first item read while the host copy is stale)."""
        items = iter(self.array)
        first = self.expect_step(
            lambda: [next(items) for _ in range(k)], d2h=self.host_needs() if k else 0
        )
        expected = list(self.model[:k])
        if k:
            self.host_valid = True
        if DEVICE:
            self.expect_step(
                lambda: self.add[1, N](self.array, v), h2d=self.device_needs(), d2h=self.refreshes()
            )
            self.model += v
            self.device_written()
        rest = self.expect_step(lambda: list(items), d2h=self.host_needs() if k < N else 0)
        if k < N:
            self.host_valid = True
        assert first + rest == expected + list(self.model[k:])

    @rule(i=index, v=value)
    def pickle_out_of_band_loaded_twice(self, i: int, v: float) -> None:
        """Protocol 5 with out-of-band buffers, loaded twice from the same buffers: two
        independent arrays, neither sharing the caller's buffer nor the original."""
        buffers: list[pickle.PickleBuffer] = []
        data = self.expect_step(
            lambda: pickle.dumps(self.array, protocol=5, buffer_callback=buffers.append),
            d2h=self.host_needs(),
        )
        self.host_valid = True
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
            got = self.expect_step(lambda: np.array(self.array), d2h=self.host_needs())
        finally:
            done.set()
            other.join()
        self.host_valid = True
        np.testing.assert_array_equal(got, self.model)

    # --- device writes -------------------------------------------------------------------
    @needs_device
    @rule(i=index, v=value)
    def write_through_get_gpu(self, i: int, v: float) -> None:
        device = self.expect_step(lambda: self.array.get("gpu"), h2d=self.device_needs())
        device[i] = v
        self.expect_step(lambda: self.array.mark_changed("gpu"), d2h=self.refreshes())
        self.model[i] = v
        self.device_written()

    @needs_device
    @rule(v=value)
    def kernel_writes(self, v: float) -> None:
        self.expect_step(
            lambda: self.add[1, N](self.array, v), h2d=self.device_needs(), d2h=self.refreshes()
        )
        self.model += v
        self.device_written()

    @needs_device
    @rule(s=span, v=value)
    def kernel_writes_view(self, s: tuple[int, int], v: float) -> None:
        view = self.array[s[0] : s[1]]
        self.expect_step(
            lambda: self.add[1, N](view, v), h2d=self.device_needs(), d2h=self.refreshes()
        )
        self.model[s[0] : s[1]] += v
        self.device_written()

    @needs_device
    @rule(v=value)
    def kernel_overwrites_out(self, v: float) -> None:
        # Out intent: no host-to-device copy at all, whatever the state.
        self.expect_step(
            lambda: self.copy[1, N](sa.Out(self.array), sa.In(self.zeros)), d2h=self.refreshes()
        )
        self.model[:] = 0.0
        self.device_written()

    @needs_device
    @rule(v=value)
    def cuda_ufunc_writes_out(self, v: float) -> None:
        # The array is both an input and out=: uploaded if stale, then written on the device.
        addend = sa.full(N, v, where="gpu")
        with numba_ufunc_support():
            self.expect_step(
                lambda: _UFUNC_ADD(self.array, addend, out=self.array),
                h2d=self.device_needs(),
                d2h=self.refreshes(),
            )
        self.model += v
        self.device_written()

    @needs_device
    @rule(k=st.integers(1, N // 2))
    def kernel_copies_from_read_only_view(self, k: int) -> None:
        # dst = the first k elements, src = a read-only view of the last k: the read-only
        # view of the written allocation is read (never refused); the allocation is written.
        source = np.broadcast_to(self.array[N - k :], (k,))
        assert isinstance(source, sa.SmartArray) and not source.flags.writeable
        self.expect_step(
            lambda: self.copy[1, N](self.array[:k], source),
            h2d=self.device_needs(),
            d2h=self.refreshes(),
        )
        self.model[:k] = self.model[N - k :].copy()
        self.device_written()

    @needs_device
    @rule()
    def kernel_reads_read_only_view(self) -> None:
        # A read-only view of the array read by a kernel that writes another array: In, the
        # host copy stays valid.
        source = self.array.reshape(2, N // 2).diagonal()
        self.expect_step(lambda: self.copy[1, N](self.scratch[:2], source), h2d=self.device_needs())
        np.testing.assert_array_equal(
            self.scratch.get("gpu").copy_to_host()[:2], [self.model[0], self.model[N // 2 + 1]]
        )
        self.device_valid = True

    @needs_device
    @rule()
    def launch_fails_while_prepared(self) -> None:
        # The array, then a view of it the device cannot represent: refused after the array
        # was prepared (uploaded if stale, an upload then forgotten); every flag goes back.
        def act() -> None:
            with pytest.raises(ValueError, match="negative strides"):
                self.copy[1, N](self.array, self.array[::-1])

        self.expect_step(act, h2d=self.device_needs())

    # --- reads ---------------------------------------------------------------------------
    @needs_device
    @rule()
    def cuda_ufunc_reads(self) -> None:
        with numba_ufunc_support():
            result = self.expect_step(
                lambda: _UFUNC_ADD(self.array, self.zeros), h2d=self.device_needs()
            )
            total = self.expect_step(lambda: _UFUNC_ADD.reduce(self.array))
        assert result.location == "gpu"
        np.testing.assert_array_equal(np.asarray(result), self.model)
        assert total == self.model.sum()
        self.device_valid = True

    @needs_device
    @rule()
    def kernel_reads_in(self) -> None:
        self.expect_step(
            lambda: self.copy[1, N](sa.Out(self.scratch), sa.In(self.array)),
            h2d=self.device_needs(),
        )
        self.device_valid = True

    @needs_device
    @rule()
    def kernel_reads_bare(self) -> None:
        # Inferred intents: copy_into only reads ``src``: the bare array is In (host stays valid).
        self.expect_step(lambda: self.copy[1, N](self.scratch, self.array), h2d=self.device_needs())
        np.testing.assert_array_equal(self.scratch.get("gpu").copy_to_host(), self.model)
        self.device_valid = True

    @rule()
    def njit_reads_bare(self) -> None:
        # Inferred: _jit_sum never writes its argument, so the device copy stays valid.
        total = self.expect_step(lambda: _jit_sum(self.array), d2h=self.host_needs())
        # (the same compiled sum of the model: numpy's pairwise sum of large values can round
        # differently from Numba's sequential one)
        assert total == _jit_sum(self.model.copy())
        self.host_valid = True

    @rule()
    def njit_reads_in(self) -> None:
        total = self.expect_step(lambda: _jit_sum(sa.In(self.array)), d2h=self.host_needs())
        assert total == _jit_sum(self.model.copy())  # (the same compiled sum: see above)
        self.host_valid = True

    @rule()
    def read_host(self) -> None:
        host = self.expect_step(lambda: np.array(self.array), d2h=self.host_needs())
        np.testing.assert_array_equal(host, self.model)
        self.host_valid = True

    @rule(i=index)
    def read_scalar(self, i: int) -> None:
        got = self.expect_step(lambda: self.array[i], d2h=self.host_needs())
        assert got == self.model[i]
        self.host_valid = True

    @needs_device
    @rule()
    def read_device(self) -> None:
        device = self.expect_step(lambda: self.array.get("gpu"), h2d=self.device_needs())
        np.testing.assert_array_equal(device.copy_to_host(), self.model)
        self.device_valid = self.handed_out = True

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
            lambda: np.asarray(self.array)[s[0] : s[1]], d2h=self.host_needs()
        )
        self.export_span = s
        self.host_valid = True

    @precondition(lambda self: self.export is not None)
    @rule()
    def release_host_export(self) -> None:
        def act() -> None:
            self.export = None

        self.expect_step(act)  # costs nothing, changes no flag

    def written_through_export(self, new: np.ndarray) -> None:
        """The model after a write through a host export: the device copy goes stale only if
        the host bytes changed (writes the coherence layer finds by comparing bytes)."""
        if new.tobytes() != self.model.tobytes():
            self.host_written()
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

        self.expect_step(act, d2h=self.host_needs())
        self.host_valid = True
        self.written_through_export(self.model + v)

    @rule(v=value)
    def njit_writes_through_asarray(self, v: float) -> None:
        self.expect_step(lambda: _jit_add(np.asarray(self.array), v), d2h=self.host_needs())
        self.host_valid = True
        self.written_through_export(self.model + v)

    @rule()
    def free_device(self) -> None:
        # (a copy handed out by get('gpu') since the last change may have been written)
        possibly_written = self.handed_out and self.host_valid and self.device_valid
        self.expect_step(self.array.free_device, d2h=1 if possibly_written else self.host_needs())
        self.host_valid, self.device_valid = True, False
        self.handed_out = False

    @invariant()
    def host_export_is_current(self) -> None:
        if getattr(self, "export", None) is not None:
            lo, hi = self.export_span
            np.testing.assert_array_equal(self.export, self.model[lo:hi])

    @invariant()
    def flags_match_model(self) -> None:
        if hasattr(self, "array"):
            assert self.array.is_valid("host") == self.host_valid
            assert self.array.is_valid("gpu") == self.device_valid


CoherenceMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=30, deadline=None
)
TestCoherence = CoherenceMachine.TestCase
