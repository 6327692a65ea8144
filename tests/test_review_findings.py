"""Adversarial review findings (review of 2585e33, the launch fast path's write in flight).

Each test is a short user program checked against numpy semantics (a plain ndarray given the
same operations); each failed on the reviewed code and passes since the fixes that followed
(two changed with the fix: ``free_device()`` during a launch is refused with a clear error,
and a segment cap with no room for its copy stays over the cap instead of raising). All run
in Numba's CUDA simulator, where a kernel runs as Python in the launching thread, so a kernel
that waits on an event keeps its launch "in flight" (between ``Allocation.launch_value`` or
``begin_device_write`` and the end of the launch) while another thread works on the same
array: on a GPU the same window is the one between an argument's preparation and the
enqueue of the launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import fill
from inflight import GATE, STARTED, add_then_wait
from inflight import launch_while as _launch_while
from numba import guvectorize, vectorize

import smartarray as sa
from smartarray._core import backend as _backend
from smartarray._core import coherence as _coherence
from smartarray._core import ranges as _ranges
from smartarray._core import transfer as _transfer

pytestmark = [
    pytest.mark.device,
    pytest.mark.skipif(not _backend.is_simulator(), reason="holds a launch in flight"),
]
if not _backend.is_simulator():  # (the CUDA ufuncs below are built at import)
    pytest.skip("holds a launch in flight (simulator only)", allow_module_level=True)

@vectorize(["float64(float64)"], target="cuda")
def plus_one_then_wait(x):  # type: ignore[no-untyped-def]
    STARTED.set()
    GATE.wait(1.0)
    return x + 1.0


@guvectorize(["void(float64[:], float64[:], float64[:])"], "(n)->(n),(n)", target="cuda")
def plus_one_and_two(x, y, z):  # type: ignore[no-untyped-def]
    for i in range(x.shape[0]):
        y[i] = x[i] + 1.0
        z[i] = x[i] + 2.0


def _device_only(n: int, value: float = 1.0) -> sa.SmartArray:
    """An array whose host buffer holds zeros (stale) and whose device copy, the only current
    one, holds ``value`` (state DEVICE: a writing kernel argument takes the launch fast path)."""
    a = sa.SmartArray(np.zeros(n))
    fill[1, 256](a, value)
    assert a.location == "gpu"
    return a


# 1. A host write that stores the bytes the *stale* host copy already holds is lost.
#
# Mechanism: a host write during a launch in flight is recorded by
# Allocation._note_host_write(before=True), which copies the host bytes just before the write;
# when the launch ends (end_resident_write on the fast path, device_written on the general
# path) only the bytes that *differ* from that copy count as written on the host. A write that
# overwrites every byte of its extent (an element, a[i:j] = v) does not download first
# (prepare_host_write(overwrite_all=True)), so the copy is of *stale* host bytes: a new value
# equal to them looks unchanged, and the launch's end relabels it device-only, where the
# device still holds the old value. The fast path makes every such write vulnerable (its
# extent is the whole allocation), the general path those inside a covering range.
# Suggested fix: in _note_host_write(before=True), record bytes that are not current on the
# host (label DEVICE) with no copy (None: the whole overlap counts as written), or download
# the overlap first.


@pytest.mark.parametrize("how", ["element", "slice", "fill"])
def test_host_write_equal_to_stale_host_bytes_during_resident_launch_is_lost(how: str) -> None:
    a = _device_only(20)  # host: 0.0 (stale), device: 1.0
    right = a[10:20]

    def host() -> None:
        if how == "element":
            a[3] = 0.0
        elif how == "slice":
            a[0:10] = 0.0
        else:
            a[0:10].fill(0.0)

    _launch_while(lambda: add_then_wait[1, 256](right, 1.0), host)
    expected = np.ones(20)
    expected[10:] = 2.0
    if how == "element":
        expected[3] = 0.0
    else:
        expected[0:10] = 0.0
    assert not a._alloc._writers
    assert np.array_equal(np.array(a), expected), np.array(a)  # smartarray: a[3] == 1.0


def test_host_write_equal_to_stale_host_bytes_during_general_path_launch_is_lost() -> None:
    rows = 100
    a = _device_only(2 * rows)
    assert a[2 * rows - 1] == 1.0  # (one element downloaded: MIXED, the launch's general path)
    odds = a[1::2]  # (more than 64 rows: its extent is its covering range, a[2] inside it)

    def host() -> None:
        a[2] = 0.0

    _launch_while(lambda: add_then_wait[1, 256](odds, 1.0), host)
    expected = np.ones(2 * rows)
    expected[1::2] = 2.0
    expected[2] = 0.0
    assert not a._alloc._writers
    assert np.array_equal(np.array(a), expected), np.array(a)[:8]


# 2. An np.asarray export taken during a fast-path launch stops being watched.
#
# Mechanism: the export downloads its bytes (BOTH) and takes the snapshot that
# check_host_exports compares with. end_resident_write then relabels every byte the other
# thread did not change device-only, the exported ones included, although the kernel never
# wrote them. check_host_exports compares only bytes labelled BOTH, so a later write through
# the kept export is never found, and the next download (any read) overwrites it.
# Suggested fix: end_resident_write keeps bytes that were downloaded meanwhile as they are when
# host exports are alive (or a snapshot is held), or, better, the fast path records the
# kernel's real extents (the arguments' spans) and relabels only those, as device_written does.


def test_export_taken_during_resident_launch_loses_later_writes() -> None:
    a = _device_only(20)
    right = a[10:20]
    kept: list[np.ndarray] = []

    def host() -> None:
        kept.append(np.asarray(a[0:10]))  # (bytes the kernel does not touch)

    _launch_while(lambda: add_then_wait[1, 256](right, 1.0), host)
    h = kept[0]
    h[0] = 7.0
    expected = np.ones(20)
    expected[10:] = 2.0
    expected[0] = 7.0
    assert not a._alloc._writers
    assert np.array_equal(np.array(a), expected), np.array(a)  # smartarray: a[0] == 1.0


# 3. A raw host hand-out taken during a fast-path launch cannot be declared afterwards.
#
# Mechanism: as in 2, end_resident_write relabels the bytes that get('host') downloaded as
# device-only (the kernel wrote a[10:20] only), so mark_changed('host') on a[0:10] raises
# "host copy is stale" for a program that numpy (and the general path) accept: nothing wrote
# a[0:10] on the device. Suggested fix: as for 2 (relabel only what the kernel's arguments
# cover).


def test_get_host_during_resident_launch_then_mark_changed_raises() -> None:
    a = _device_only(20)
    right, left = a[10:20], a[0:10]
    got: list[np.ndarray] = []

    def host() -> None:
        got.append(left.get("host"))

    _launch_while(lambda: add_then_wait[1, 256](right, 1.0), host)
    got[0][:] = 9.0
    left.mark_changed("host")  # smartarray: RuntimeError, host copy stale
    expected = np.full(20, 9.0)
    expected[10:] = 2.0
    assert np.array_equal(np.array(a), expected), np.array(a)


# 4. free_device() during a launch in flight leaves bytes labelled device-only with no device
# buffer (and the kernel writes a buffer that was let go).
#
# Mechanism: free_device downloads the dirty bytes and drops the device buffer (labels: all
# HOST) although a launch has the buffer pinned and is about to write it (eviction refuses an
# allocation with _writers, free_device does not look). When the launch ends,
# end_resident_write labels the whole allocation DEVICE again: self.device is None, and the
# next read crashes in the download ('NoneType' object has no attribute 'copy_to_host'); the
# kernel's results went to the released buffer. The general path's device_written does the
# same for its extent. Suggested fix: free_device waits for (or refuses, or defers until) the
# launches in flight over the allocation (_writers, and _launch), as eviction does.


def test_free_device_during_resident_launch() -> None:
    # (now refused with a clear error while the launch is in flight: see
    # test_range_regressions.test_free_device_during_another_threads_launch_is_refused)
    a = _device_only(20)
    right = a[10:20]

    def host() -> None:
        with pytest.raises(RuntimeError, match="in flight"):
            a.free_device()

    _launch_while(lambda: add_then_wait[1, 256](right, 1.0), host)
    expected = np.ones(20)
    expected[10:] = 2.0
    assert not a._alloc._writers
    assert np.array_equal(np.array(a), expected), np.array(a)


# 5. A CUDA ufunc's device-resident output is not registered as in flight.
#
# Mechanism: smartarray/_cuda/ufuncs.py _unwrap_output takes the resident path
# (Allocation.resident_view) for an output whose array is device-only, and then skips
# begin_device_write: the output's write is not in Allocation._writers, so another thread's
# host write into the output's extent is not recorded, and device_written labels the whole
# extent device-only. For a strided output of more than 64 rows the extent is its covering
# range, so the other elements written on the host meanwhile are lost: the bug 2585e33 fixed
# for kernel launches, still open for CUDA ufuncs. Suggested fix: register the resident
# output as kernels' fast path now does (begin_device_write(launch, span) or a _writers entry
# ended after the call).


@pytest.mark.parametrize("host_write", ["slice", "element"])
def test_cuda_ufunc_resident_output_loses_another_threads_host_writes(host_write: str) -> None:
    rows = 100
    a = _device_only(2 * rows, 0.0)
    evens, odds = a[0::2], a[1::2]

    def host() -> None:
        if host_write == "slice":
            evens[...] = 5.0
        else:
            a[2] = 5.0  # (inside the covering range of the odds)

    _launch_while(lambda: plus_one_then_wait(odds, out=odds), host)
    expected = np.zeros(2 * rows)
    expected[1::2] = 1.0
    if host_write == "slice":
        expected[0::2] = 5.0
    else:
        expected[2] = 5.0
    assert not a._alloc._writers
    assert np.array_equal(np.array(a), expected), np.array(a)[:8]


# 6. A CUDA ufunc whose device_written raises leaks the other outputs' writes in flight.
#
# Mechanism: SmartUFunc.__call__ calls device_written for each output in a loop with no
# try/except, then launch(). If one raises (here injected where _note_device_work records the
# event: on a GPU, a CudaAPIError from record_event after a faulting kernel), the outputs
# after it keep their begin_device_write entry in Allocation._writers: the array stays MIXED
# (no host fast path), can never be evicted (eviction_cost is None), and every later
# coalesced upload and _cap toward the device avoids its extent, until this thread happens to
# write it on the host or launch on it (_drop_stale_writers). Suggested fix: wrap the loop,
# and on an exception end the remaining outputs' writes (_forget_writes, as LaunchPins.fail
# does) and release the pins.


def test_cuda_ufunc_failed_device_written_leaks_writers(monkeypatch: pytest.MonkeyPatch) -> None:
    x = sa.SmartArray(np.zeros((2, 4)))
    y = sa.SmartArray(np.zeros((2, 4)))
    z = sa.SmartArray(np.zeros((2, 4)))
    original = _coherence.Allocation._note_device_work

    def failing(self: Any, stream: Any) -> Any:
        if self is y._alloc:
            raise RuntimeError("injected driver error")
        return original(self, stream)

    monkeypatch.setattr(_coherence.Allocation, "_note_device_work", failing)
    with pytest.raises(RuntimeError):
        plus_one_and_two(x, y, z)
    monkeypatch.undo()
    assert not y._alloc._writers
    assert not z._alloc._writers  # smartarray: z's entry is left behind


# 7. A host element write whose segment cap cannot allocate its staging buffer leaves the
# element labelled host-current with the stale host value (served from then on).
#
# Mechanism: prepare_host_write(overwrite_all=True) labels the element HOST first
# (_set_state assigns, then _cap_if_over(HOST)); past 64 segments _cap downloads the cheapest
# window through a scratch buffer of the window's whole span
# (transfer.device_to_host_staged: np.empty(hi - lo)). Sparse writes into a large array make
# that span large (writes 1 GiB apart: a window of ~33 segments spans ~32 GiB). When the
# scratch allocation raises MemoryError, the write never happens, but the label stays: a later
# read returns the stale host bytes (0.0) instead of the old value (numpy: 1.0, nothing was
# written) or the new one. Here host memory for staging is limited to 1 KiB to model it at a
# small size. Suggested fix: bound the scratch buffer (stage in pieces, or download the runs
# directly when the span is much larger than the bytes), and label the extent only after the
# cap succeeded (or put the labels back when it raises).


def test_segment_cap_out_of_memory_leaves_stale_host_bytes_labelled_current(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _ranges.coalesce_bytes()
    sa.set_coalesce_bytes(0)
    try:
        a = _device_only(1000)  # host: 0.0 (stale), device: 1.0

        class LimitedNumpy:  # (the transfer module's numpy: scratch buffers over 1 KiB fail)
            def __getattr__(self, name: str) -> Any:
                return getattr(np, name)

            def empty(self, shape: Any, *args: Any, **kwargs: Any) -> np.ndarray:
                if int(np.prod(shape)) > 1024:
                    raise MemoryError("no host memory for a staging buffer")
                return np.empty(shape, *args, **kwargs)

        monkeypatch.setattr(_transfer, "np", LimitedNumpy())
        failed = None
        for i in range(0, 1000, 10):
            try:
                a[i] = 3.0
            except MemoryError:
                failed = i
                break
        monkeypatch.undo()
        # (now the cap gives up on MemoryError and stays over the cap until a later
        # operation: every write happens, none is served stale)
        assert failed is None
        expected = np.zeros(1000)
        expected[:256] = 1.0  # (what fill[1, 256] wrote)
        expected[0::10] = 3.0
        assert np.array_equal(np.array(a), expected)
    finally:
        sa.set_coalesce_bytes(before)
