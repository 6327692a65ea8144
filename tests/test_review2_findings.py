"""Adversarial review findings (second review: commits 2585e33..79d9c5d, the writes in flight
with the bytes a launch "holds", `_held_in_flight`, the fast path's exact extents, ``empty``
arrays' host buffers).

Each test is a short program checked against numpy semantics (a plain ndarray given the same
operations); each failed on the reviewed code and passes since the fixes that followed. All
run in Numba's CUDA simulator, where a kernel runs as Python in the launching thread: a
kernel that waits on an event keeps its launch
"in flight" (between the preparation of its arguments and the end of the launch) while another
thread works on the same array. Where a program needs two launches in flight at once, which
the simulator cannot run (one simulated kernel at a time), one of them is prepared as
numba-cuda prepares a launch on a GPU: ``arg.to_device(retr, 0)`` for each argument, then
"the kernel" (a write into the device array the preparation returned), then the callbacks in
``retr`` (as tests/test_launch_fast_path.py and tests/test_gpu_run_fixes.py do). On a GPU a
complete launch of another thread fits between two argument preparations of a launch.

Regressions of the reviewed commits: findings 5 (a47c2e9) and 6 (79d9c5d) passed at 2585e33.
Findings 1-4 and 7 fail at 2585e33 too (older holes in the same machinery).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from inflight import GATE, STARTED, add_all_then_wait, fill_all_then_wait
from inflight import launch_while as _launch_while
from numba import cuda

import smartarray as sa
from smartarray._core import backend as _backend

pytestmark = [
    pytest.mark.device,
    pytest.mark.skipif(not _backend.is_simulator(), reason="holds a launch in flight"),
]

@cuda.jit
def add_all(x, v):  # type: ignore[no-untyped-def]
    for i in range(x.size):
        x[i] += v


def _in_thread(work: Callable[[], Any]) -> None:
    """Run ``work()`` to completion in another thread."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert not errors, errors


ROWS = 100  # > 64 rows: a strided view's extent is its covering range


# 1. A write through a kept np.asarray export, made while another thread's launch is in
#    flight, into bytes of that launch's covering range that its kernel never writes, is lost.
#
# Program: x (both sides current), h = np.asarray(x) kept; thread B: kernel adds 1 to x[0::2]
# (200 elements: its extent is the covering range, odds included); meanwhile thread A:
# h[1::2] = 5. numpy: evens 1, odds 5. smartarray: odds 0.
#
# Mechanism: writes through an export are only found by check_host_exports (host vs.
# snapshot), which returns early while ``Allocation._launch`` is set (B's begin_device_write
# set it; it stays set until B's device_written). Nothing records A's write in B's
# ``_writers`` entry (only _note_host_write does, and only for writes through the SmartArray),
# so device_written labels the whole covering range device-only; the refresh of the kept
# export (after_launch_write) then downloads the device's old odds over h's new ones (by then
# the odds are labelled DEVICE, not BOTH, so _download's check_host_exports does not compare
# them either). Same loss with a bare/InOut argument over the whole array whose kernel only
# writes part of it.
# Suggested fix: while a launch's write is in flight and a host snapshot is held, have
# device_written/end_resident_write compare the host bytes of the launch's extent with the
# snapshot (the snapshot holds the pre-launch bytes of the bytes it held current on both sides)
# and count the differing bytes as host writes made meanwhile (as _host_written_during does for
# recorded ones); and let check_host_exports run for other threads (compare the BOTH bytes)
# even while a launch is being prepared.
#
# The launch fast path loses it the same way ("fast": x device-only when B launches, the
# export taken by A during the launch): end_resident_write relabels the covering range
# device-only (no recorded host write), and the refresh it asks for downloads over h.
@pytest.mark.parametrize("path", ["general", "fast"])
def test_export_write_during_a_launch_in_flight_outside_its_kernels_bytes_is_kept(
    path: str,
) -> None:
    x = sa.SmartArray(np.zeros(2 * ROWS))
    exports: list[np.ndarray] = []
    if path == "general":
        x.to_gpu()
        exports.append(np.asarray(x))  # kept: watched for writes, refreshed after device writes
    else:
        add_all[1, 1](x, 0.0)  # device-only: B's launch takes the fast path
        assert x.location == "gpu"
    evens = x[0::2]

    def host() -> None:
        if not exports:
            exports.append(np.asarray(x))
        exports[0][1::2] = 5.0

    _launch_while(lambda: add_all_then_wait[1, 1](evens, 1.0), host)
    expected = np.zeros(2 * ROWS)
    expected[0::2] = 1.0
    expected[1::2] = 5.0
    np.testing.assert_array_equal(np.array(x), expected)
    np.testing.assert_array_equal(exports[0], expected)


# 2. Another thread's upload overwrites the results of a kernel writing an ``Out`` argument.
#
# Program: x (both current), x[0:4] = 5 (host-only there); thread B: kernel with
# sa.Out(x[0:4]) fills 1.0; meanwhile thread A: x.to_gpu(). numpy: x[0:4] == 1.
# smartarray: 5 (the kernel's results are overwritten by the upload, then labelled current).
#
# Mechanism: an exact ``Out`` argument is not uploaded (prepare_device_write(overwrite_all)),
# so its bytes stay labelled HOST, and begin_device_write records no "standing" bytes for it
# (only bytes that were BOTH). ensure_device then uploads every HOST byte of A's extent less
# _held_in_flight, which holds only other launches' standing bytes: the upload copies the old
# host values over the device bytes B's kernel wrote; B's device_written then labels them
# device-only. Invariant 2 ("an upload never writes ... bytes a launch in flight writes")
# is broken (_mergeable only keeps *gaps* of a coalesced copy off in-flight extents).
# Suggested fix: _held_in_flight should hold, for other threads' launches, every byte of
# their extent that no host write changed since their begin (not just the bytes relabelled
# BOTH -> HOST), or begin_device_write should record the extent's HOST bytes in the 5th field
# as well.
def test_an_upload_during_an_out_launch_keeps_the_kernels_results() -> None:
    x = sa.SmartArray(np.zeros(16))
    x.to_gpu()
    x[0:4] = 5.0

    _launch_while(lambda: fill_all_then_wait[1, 1](sa.Out(x[0:4]), 1.0), x.to_gpu)
    expected = np.zeros(16)
    expected[0:4] = 1.0
    np.testing.assert_array_equal(np.array(x), expected)


# 3. A launch's own second argument re-uploads the bytes its first argument holds, over
#    another thread's kernel results.
#
# Program: thread A launches k(sa.InOut(x[0::2]), sa.In(x[0::2])) (its kernel adds 1 to the
# evens); thread B's kernel adds 1 to the odds x[1::2], in flight between A's two argument
# preparations (on a GPU B's launch may be enqueued and run there). numpy: all ones.
# smartarray: odds 0.
#
# Mechanism: A's first argument (covering range, odds included) is relabelled BOTH -> HOST by
# begin_device_write (A's "standing" bytes); B's ensure_device skips them (held for A), and
# B's begin_device_write sets ``Allocation._launch = B`` (one slot per allocation), dropping
# A's ``_launch_ranges``. A's second argument's ensure_device then no longer subtracts A's
# own ranges, and _held_in_flight skips A's own entry (``owner is launch``) and holds only
# B's standing bytes (the last element): it uploads A's whole covering range, the odds B's
# kernel wrote included; B's device_written labels them device-only with the old values.
# Suggested fix: keep the ranges per launch (e.g. in the launch's _writers entry: the 5th
# field) instead of the single ``_launch``/``_launch_ranges`` slot, and subtract a launch's
# own standing bytes in ensure_device from its entry; and/or hold other launches' whole
# extents (finding 2).
def test_a_launchs_second_argument_keeps_another_threads_kernel_results() -> None:
    x = sa.SmartArray(np.zeros(2 * ROWS))
    x.to_gpu()
    evens, odds = x[0::2], x[1::2]
    retr: list[Any] = []  # thread A's launch, prepared as numba-cuda does on a GPU
    written = sa.InOut(evens).to_device(retr, 0)

    def second_argument() -> None:
        sa.In(evens).to_device(retr, 0)

    _launch_while(lambda: add_all_then_wait[1, 1](odds, 1.0), second_argument)
    written._ary[...] += 1.0  # thread A's kernel
    for callback in retr:
        callback()
    np.testing.assert_array_equal(np.array(x), np.ones(2 * ROWS))


# 4. A launch that fails in preparation gives its covering range its old labels back, over
#    another thread's completed device write.
#
# Program: thread A prepares k(sa.InOut(x[0::2]), numba.cuda.InOut(read_only_view)); between
# the two arguments, thread B's launch adds 1 to the odds and completes; A's second argument
# raises ValueError (read-only), so A's launch is aborted. numpy: odds 1. smartarray: odds 0.
#
# Mechanism: cancel_launch relabels every byte of the launch's extent (here the covering range
# of the evens, odds included) with its label in the snapshot taken when the launch first
# touched the allocation (BOTH), less only recorded host writes. B's device_written had labelled
# the odds device-only since; they are now "current on both sides" with the host's old values,
# and reads serve 0. The docstring's "every other byte keeps its label" does not hold for bytes
# inside the extent that the launch itself never relabelled.
# Suggested fix: give back only the labels the launch itself set: its standing bytes (the 5th
# field of its _writers entry) that are still labelled HOST, and the bytes its uploads made
# BOTH that are still BOTH; leave bytes relabelled by others since alone.
def test_a_failed_launch_keeps_another_threads_device_write_inside_its_extent() -> None:
    x = sa.SmartArray(np.zeros(2 * ROWS))
    x.to_gpu()
    evens, odds = x[0::2], x[1::2]
    retr: list[Any] = []  # thread A's launch, prepared as numba-cuda does on a GPU
    sa.InOut(evens).to_device(retr, 0)
    _in_thread(lambda: add_all[1, 1](odds, 1.0))  # thread B: a whole launch
    with pytest.raises(ValueError):
        cuda.InOut(np.broadcast_to(x, (2, 2 * ROWS))).to_device(retr, 0)  # aborts A's launch
    expected = np.zeros(2 * ROWS)
    expected[1::2] = 1.0
    np.testing.assert_array_equal(np.array(x), expected)


# 5. ``empty`` + get('gpu') + get('host'), written and declared: mark_changed('host') raises.
#
# Program: e = sa.empty(4); e.get('gpu') (handed to a library that only reads it, say);
# h = e.get('host'); h[:] = 1; e.mark_changed('host'). numpy (np.empty, then writes through
# the buffer): [1, 1, 1, 1]. smartarray: RuntimeError "mark_changed('host') on an array
# whose host copy is stale; call get('host') before writing" (it was called).
#
# Mechanism (a47c2e9): get('host') -> ensure_host computes the runs to download (none: the
# state is BOTH, no host buffer yet) *before* _host_buffer() makes the host buffer, which now
# relabels every "both" byte of an UNDEFINED fill DEVICE because a get('gpu') hand-out may
# have been written (_possibly_written). get('host') thus returns a buffer labelled stale, and
# nothing downloads it; the declaration refuses. (A plain read, e[0], after the hand-out
# likewise returns host garbage while the device bytes are labelled current: a second read
# then downloads and returns something else.)
# Suggested fix: make the host buffer before computing the runs in ensure_host (and in
# prepare_host_write), so that the relabelled bytes are downloaded; or relabel to DEVICE only
# when a declared device write is pending, leaving undeclared hand-out writes to the caller
# as for every other array.
def test_get_host_of_an_empty_array_after_a_device_hand_out_can_be_written_and_declared() -> None:
    e = sa.empty(4)
    e.get("gpu")
    h = e.get("host")
    h[:] = 1.0
    e.mark_changed("host")
    np.testing.assert_array_equal(np.array(e), np.ones(4))


# 6. During another thread's launch over a covering range, get('gpu') of bytes its kernel
#    never writes, written and declared: mark_changed('gpu') raises (new in 79d9c5d).
#
# Program: x (both current); thread B: kernel adds 1 to x[0::2] (covering range); meanwhile
# thread A: d = x[101:102].get('gpu'); d[0] = 7; x[101:102].mark_changed('gpu') (an odd
# element: no byte B's kernel writes). numpy: x[101] == 7, evens 1. smartarray:
# RuntimeError "mark_changed('gpu') on an array whose device copy is stale; call get('gpu')
# before writing" (it was called). Before 79d9c5d this program worked.
#
# Mechanism: begin_device_write relabelled B's whole covering range BOTH -> HOST (its
# "standing" bytes); get('gpu') -> ensure_device now leaves those bytes out of the upload
# (_held_in_flight: another thread's launch holds them), so they stay labelled host-only, and
# the hand-out is of a device copy labelled stale; mark_changed('gpu') refuses. The hold is
# an over-approximation (B's kernel writes only the evens), so the caller has no way to
# avoid it but to wait for B.
# Suggested fix: bytes held for another launch are equal on both sides (nothing changed them
# on the host, and the device is the launch's to write): let mark_changed('gpu') (and the
# hand-out) count held bytes as current on the device rather than stale (label them DEVICE,
# the other launch's end labels its extent DEVICE anyway), or record the hand-out's bytes as a
# host "write" in the other launch's entry so that it no longer holds them.
def test_a_device_hand_out_during_another_threads_launch_over_a_covering_range() -> None:
    x = sa.SmartArray(np.zeros(2 * ROWS))
    x.to_gpu()
    evens, one = x[0::2], x[101:102]

    def host() -> None:
        d = one.get("gpu")
        d[0] = 7.0
        one.mark_changed("gpu")

    _launch_while(lambda: add_all_then_wait[1, 1](evens, 1.0), host)
    expected = np.zeros(2 * ROWS)
    expected[0::2] = 1.0
    expected[101] = 7.0
    np.testing.assert_array_equal(np.array(x), expected)


@cuda.jit
def wait_then_fill_then_raise(x, v):  # type: ignore[no-untyped-def]
    STARTED.set()
    GATE.wait(1.0)
    for i in range(x.size):
        x[i] = v
    raise ValueError("the kernel failed after writing")


# 7. A launch-fast-path kernel that fails after writing, while another thread read the array:
#    both copies are labelled current with different values.
#
# Program: x device-only (ones); thread B: a kernel fills x with 2.0, then raises; while it
# is in flight (before it writes) thread A reads np.array(x). Afterwards: np.array(x) gives
# ones, and a kernel that adds 0.0 to x makes it read twos. numpy (a function that writes,
# then raises): twos, and a no-op leaves them. Without A's read, smartarray gives twos too
# (the state stays DEVICE).
#
# Mechanism: A's read downloads the device bytes of the fast path's extent (BOTH: the values
# from before the kernel). The fast path's end_resident_write would relabel them device-only,
# but a failed launch goes through LaunchPins.fail -> end_failed_launch, which only forgets
# the _writers entry: the bytes stay BOTH while the device copy holds the kernel's writes
# (invariant 1: a label names a side that does not hold the byte). The general path has the
# same hole for extent bytes that were device-only at its begin and downloaded meanwhile.
# Suggested fix: in end_failed_launch, relabel the failed launch's extent toward the side
# that is authoritative after a failure, less recorded host writes of other threads: DEVICE
# for a fast-path entry (as end_resident_write does), HOST for the general path's (BOTH bytes
# there may hold the device's old values while the kernel wrote the device).
def test_a_failed_fast_path_launch_with_a_concurrent_read_leaves_one_value() -> None:
    x = sa.SmartArray(np.zeros(8))
    add_all[1, 1](x, 1.0)
    assert x.location == "gpu"

    def kernel() -> None:
        with pytest.raises(ValueError, match="failed after writing"):
            wait_then_fill_then_raise[1, 1](x, 2.0)

    _launch_while(kernel, lambda: np.array(x))
    first = np.array(x)
    add_all[1, 1](x, 0.0)  # reads and writes x on the device: changes no value
    np.testing.assert_array_equal(np.array(x), first)
    np.testing.assert_array_equal(first, np.full(8, 2.0))
