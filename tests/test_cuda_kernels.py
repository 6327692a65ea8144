"""SmartArrays as @cuda.jit kernel arguments: lazy, minimal transfers, intents, errors.

Runs in the simulator tier and on real GPUs (the same tests), skipped in the host-only tier.
"""

from __future__ import annotations

import weakref

import numpy as np
import pytest
from helpers import copies, counts, inc, run_in_threads
from numba import cuda, njit

import smartarray as sa

pytestmark = pytest.mark.device

N = 16
THREADS = 16


@cuda.jit
def axpy(y, a, x):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += a * x[i]


@cuda.jit
def copy(dst, src):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


@cuda.jit
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


@cuda.jit
def scale_2d(a, k):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] *= k


@cuda.jit
def fails_halfway(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = -1
        if i == 3:
            a[a.size + 100] = 0  # out of bounds: the simulator raises IndexError


@njit
def njit_double(a):
    a *= 2


@pytest.mark.parametrize("length", [2, 5, 10])
def test_chain_costs_one_upload_and_one_download(length: int) -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.zeros(N)
    with sa.track_transfers() as t:
        for _ in range(length):
            axpy[1, THREADS](y, 2.0, sa.In(x))
    # x uploaded once; y was made with no data, so its device buffer is made and filled
    # with zeros on the device where the first kernel uses it: nothing to upload.
    assert counts(t) == (1, 0)
    assert t.h2d_bytes == N * 8
    with sa.track_transfers() as t:
        result = np.array(y)
    assert counts(t) == (0, 1)
    np.testing.assert_array_equal(result, 2.0 * length * np.arange(N))
    # x was only read: its host copy is still valid, nothing to copy back.
    assert x.is_valid("host") and x.is_valid("gpu")


@pytest.mark.parametrize("length", [1, 4])
def test_device_born_arrays_never_upload(length: int) -> None:
    y = sa.zeros(N, where="gpu")
    x = sa.full(N, 3.0, where="gpu")
    with sa.track_transfers() as t:
        for _ in range(length):
            axpy[1, THREADS](y, 1.0, sa.In(x))
        np.testing.assert_array_equal(y.get("host"), 3.0 * length)
    assert counts(t) == (0, 1)
    # x was only read: still current on both sides (filled on each), never copied
    assert x.location == "both"
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(x), 3.0)
    assert counts(t) == (0, 0)


def test_kernel_reading_one_array_writing_another() -> None:
    src = sa.SmartArray(np.linspace(0, 1, N))
    dst = sa.empty(N, where="gpu")
    with sa.track_transfers() as t:
        copy[1, THREADS](sa.Out(dst), sa.In(src))
        copy[1, THREADS](sa.Out(dst), sa.In(src))
    assert counts(t) == (1, 0)
    assert dst.location == "gpu" and src.location == "both"
    np.testing.assert_array_equal(np.asarray(dst), np.linspace(0, 1, N))


def test_out_intent_skips_the_upload() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        fill[1, THREADS](sa.Out(a), 7.0)
    assert counts(t) == (0, 0)
    assert a.location == "gpu"
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 7.0))


def test_out_intent_on_partial_view_uploads_nothing_and_keeps_the_rest() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        fill[1, THREADS](sa.Out(a[4:8]), -1.0)
    # Out overwrites every byte of the view (bytes 32..64): nothing to upload, and the rest
    # of the array stays current on the host only (issue 21: validity per byte range).
    assert copies(t) == []
    assert a.location == "mixed" and a[4:8].location == "gpu" and a[:4].location == "host"
    expected = np.arange(N, dtype=np.float64)
    expected[4:8] = -1.0
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(a), expected)
    assert copies(t) == [("d2h", 32, 32)]  # only the bytes the kernel wrote


def test_in_intent_is_read_only_in_the_kernel() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    with pytest.raises(Exception, match=r"read-only|readonly|Cannot modify"):
        inc[1, THREADS](sa.In(a))
    np.testing.assert_array_equal(np.asarray(a), np.arange(N))
    assert a.is_valid("host")


def test_readonly_method_is_in() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    b = sa.zeros(N, where="gpu")
    copy[1, THREADS](sa.Out(b), a.readonly())
    assert a.location == "both"
    np.testing.assert_array_equal(np.asarray(b), np.arange(N))


def test_kernel_njit_kernel_sequence_counts() -> None:
    a = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        inc[1, THREADS](a)  # upload
        njit_double(a)  # download, device now stale
        inc[1, THREADS](a)  # upload
        njit_double(a)  # download
        inc[1, THREADS](a)  # upload
    assert counts(t) == (3, 2)
    with sa.track_transfers() as t:
        result = np.array(a)
    assert counts(t) == (0, 1)
    np.testing.assert_array_equal(result, np.full(N, 7.0))


def test_views_passed_to_kernels_share_state() -> None:
    a = sa.SmartArray(np.zeros((4, 4)))
    with sa.track_transfers() as t:
        inc[1, 4](a[1])  # a row
        inc[1, 4](a[:, 2])  # a strided column
        scale_2d[(1, 1), (4, 4)](a.T, 10.0)  # a transposed view
    # Each launch uploads only the bytes of its argument still stale on the device (a is
    # 4x4 float64, 128 bytes): row 1; then column 2 less row 1's element (bytes 16..24,
    # and 80..88 with 112..120 in one copy across their stale gap); then all the rest, in
    # five copies, since no copy may cross the bytes the kernels wrote on the device. The gap
    # 88..112 copied along with the column keeps its state (stale on the device), so the
    # transposed view uploads it again.
    assert copies(t) == [
        ("h2d", 32, 32),
        ("h2d", 16, 8),
        ("h2d", 80, 40),
        ("h2d", 0, 16),
        ("h2d", 24, 8),
        ("h2d", 64, 16),
        ("h2d", 88, 24),
        ("h2d", 120, 8),
    ]
    assert a.location == "gpu"
    expected = np.zeros((4, 4))
    expected[1] += 1
    expected[:, 2] += 1
    expected *= 10
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_field_of_a_packed_record_array_is_typed_unaligned() -> None:
    # float64 field at byte offset 4, stride 12: wide loads would fault on a GPU.
    records = sa.SmartArray(np.zeros(4, dtype=[("a", "i4"), ("b", "f8")]))
    field = records["b"]
    assert not field._numba_type_.aligned
    inc[1, 4](field)
    inc[1, 4](records["a"])
    assert np.asarray(records).tolist() == [(1, 1.0)] * 4


def test_view_of_device_born_array() -> None:
    a = sa.zeros((4, 4), where="gpu")
    inc[1, 4](a[2])
    with sa.track_transfers() as t:
        row = a[2]
        assert counts(t) == (0, 0)
        np.testing.assert_array_equal(np.asarray(row), np.ones(4))
    assert counts(t) == (0, 1)


def test_negative_stride_view_is_refused_before_any_copy() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t, pytest.raises(ValueError, match="negative strides"):
        inc[1, THREADS](a[::-1])
    assert counts(t) == (0, 0)
    assert a.location == "host"
    np.testing.assert_array_equal(np.asarray(a[::-1].copy()), np.arange(N)[::-1])
    inc[1, THREADS](a[::-1].copy())  # the suggested fix works


@pytest.mark.skipif(
    sa.tier() != "simulator", reason="only the simulator raises IndexError inside a kernel"
)
def test_failing_kernel_leaves_host_authoritative() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    a.get("gpu")
    assert a.location == "both"
    with pytest.raises(IndexError):
        fails_halfway[1, THREADS](a)
    # The device copy may be half written: it must not be served.
    assert a.location == "host"
    np.testing.assert_array_equal(np.asarray(a), np.arange(N))
    with sa.track_transfers() as t:
        inc[1, THREADS](a)
    assert counts(t) == (1, 0)  # re-uploaded from the authoritative host copy
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)


def test_unsupported_dtype_is_a_clear_error() -> None:
    a = sa.SmartArray(np.array(["a", "b"], dtype=object))
    with pytest.raises(TypeError, match="cannot live on a CUDA device"):
        a.get("gpu")
    with pytest.raises(TypeError):
        inc[1, 2](a)
    assert a.location == "host"
    assert a.tolist() == ["a", "b"]


def test_variable_width_strings_are_refused_with_the_fix() -> None:
    from numpy.dtypes import StringDType

    a = sa.SmartArray(np.array(["a", "bb"], dtype=StringDType()))
    with sa.track_transfers() as t:
        with pytest.raises(TypeError, match=r"variable-width strings.*astype\('U16'\)"):
            a.get("gpu")
        with pytest.raises(TypeError, match="variable-width strings"):
            sa.SmartArray(np.array(["c"], dtype=StringDType()), where="gpu")
    assert t.count == 0
    assert a.location == "host"
    assert a.tolist() == ["a", "bb"]
    fixed = a.astype("U16")  # the suggested fix works
    fixed.get("gpu")
    assert fixed.location == "both"


def test_old_api_idioms_keep_working() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64), where="gpu")
    inc[1, THREADS](x.get("gpu"))
    x.mark_changed("gpu")
    assert not x.is_valid("host")
    np.testing.assert_array_equal(x.get("host"), np.arange(N) + 1)
    host = x.get("host")
    host[:] = 5
    x.mark_changed("host")
    assert not x.is_valid("gpu")
    np.testing.assert_array_equal(x.get("gpu").copy_to_host(), np.full(N, 5.0))


def test_mark_changed_on_a_stale_side_is_refused() -> None:
    a = sa.SmartArray(np.zeros(N))
    with pytest.raises(RuntimeError, match="stale"):
        a.mark_changed("gpu")
    assert a.location == "host"


def test_adopt_numba_device_array_without_copy() -> None:
    d = cuda.to_device(np.arange(N, dtype=np.float32))
    with sa.track_transfers() as t:
        a = sa.SmartArray(d, copy=False, where="gpu")
        assert a.get("gpu") is d
        inc[1, THREADS](a)
    assert counts(t) == (0, 0)
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(N) + 1)
    copied = sa.SmartArray(d)
    inc[1, THREADS](copied)
    np.testing.assert_array_equal(np.asarray(copied), np.arange(N) + 2)
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(N) + 1)


@pytest.mark.parametrize("how", ["made_on_device", "written_by_a_kernel"])
def test_copy_of_device_only_array_stays_on_device(how: str) -> None:
    # made with where='gpu' and not used on the host yet (current on both sides, no host
    # buffer), or current on the device only: copied on the device either way
    if how == "made_on_device":
        a = sa.full(N, 2.0, where="gpu")
        assert a.location == "both"
    else:
        a = sa.full(N, 1.0, where="gpu")
        inc[1, THREADS](a)
        assert a.location == "gpu"
    with sa.track_transfers() as t:
        b = a.copy()
        inc[1, THREADS](b)
    assert counts(t) == (0, 0)
    np.testing.assert_array_equal(np.asarray(b), np.full(N, 3.0))
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.0))


def test_free_device_syncs_then_releases() -> None:
    a = sa.zeros(N, where="gpu")
    inc[1, THREADS](a)
    with sa.track_transfers() as t:
        a.free_device()
    assert counts(t) == (0, 1)
    assert a.location == "host" and not a.is_valid("gpu")
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))
    with sa.track_transfers() as t:
        a.free_device()  # nothing left to free
        inc[1, THREADS](a)
    assert counts(t) == (1, 0)


def test_mapped_memory_never_copies() -> None:
    a = sa.zeros(N, host_memory="mapped")
    assert a.host_memory == "mapped"
    with sa.track_transfers() as t:
        inc[1, THREADS](a)
        np.testing.assert_array_equal(np.asarray(a), np.ones(N))
        a[0] = 10
        inc[1, THREADS](a)
        assert a[0] == 11
    assert counts(t) == (0, 0)
    assert a.location == "both"


def test_pinned_memory_keeps_copy_semantics() -> None:
    a = sa.SmartArray(np.zeros(N), host_memory="pinned")
    assert a.host_memory == "pinned"
    with sa.track_transfers() as t:
        inc[1, THREADS](a)
        np.asarray(a)
    assert counts(t) == (1, 1)


def test_streams_record_asynchronous_copies() -> None:
    stream = cuda.stream()
    a = sa.SmartArray(np.zeros(N))
    with sa.track_transfers() as t:
        inc[1, THREADS, stream](a)
        a.get("host", stream=stream)
        stream.synchronize()
    assert [r.direction for r in t.records] == ["h2d", "d2h"]
    assert t.records[1].asynchronous
    if sa.tier() == "gpu":  # the simulator does not pass the launch stream to arguments
        assert t.records[0].asynchronous
    assert all(r.array == a.label for r in t.records)
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))


def test_no_transfers_guard() -> None:
    a = sa.SmartArray(np.zeros(N))
    with sa.no_transfers(), pytest.raises(sa.TransferError, match="h2d"):
        inc[1, THREADS](a)
    assert a.location == "host"
    inc[1, THREADS](a)
    with sa.no_transfers():
        inc[1, THREADS](a)  # device copy current: allowed
        with pytest.raises(sa.TransferError, match="d2h"):
            np.asarray(a)
    assert a.location == "gpu"
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.0))


def test_ledger_totals_and_reset() -> None:
    sa.reset_transfer_stats()
    a = sa.SmartArray(np.zeros(N, dtype=np.float32))
    inc[1, THREADS](a)
    np.asarray(a)
    stats = sa.transfer_stats()
    assert (stats.h2d_count, stats.h2d_bytes, stats.d2h_count, stats.d2h_bytes) == (
        1,
        N * 4,
        1,
        N * 4,
    )
    sa.reset_transfer_stats()
    assert sa.transfer_stats().count == 0


def test_whole_array_assignment_never_downloads() -> None:
    a = sa.zeros((4, 4), where="gpu")
    with sa.track_transfers() as t:
        a[...] = 2.0
        assert a.location == "host"
        inc[1, 16](a.ravel())
        a[:] = np.arange(4.0)
    assert counts(t) == (1, 0)
    np.testing.assert_array_equal(np.asarray(a), np.tile(np.arange(4.0), (4, 1)))
    with sa.track_transfers() as t:
        inc[1, 16](a.ravel())
        a[1:] = 0.0  # overwrites every byte of rows 1-3: nothing fetched (issue 21)
    assert copies(t) == [("h2d", 0, 128)]
    assert a.location == "mixed" and a[0].location == "gpu" and a[1:].location == "host"
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(a)[0], np.arange(1.0, 5.0))
    assert copies(t) == [("d2h", 0, 32)]  # row 0, the kernel's write that survives


def test_same_allocation_twice_in_one_launch_uploads_once() -> None:
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    x.get("gpu")
    with sa.track_transfers() as t:
        axpy[1, THREADS](x, 1.0, x)  # y += 1 * x with y and x the same array
    assert counts(t) == (0, 0)
    np.testing.assert_array_equal(np.asarray(x), 2 * np.arange(N))
    y = sa.SmartArray(np.ones(2 * N))
    y.get("gpu")
    with sa.no_transfers():
        axpy[1, THREADS](y[:N], 3.0, y[N:])  # two halves of one buffer
    np.testing.assert_array_equal(np.asarray(y), np.concatenate([np.full(N, 4.0), np.ones(N)]))


def test_out_with_a_broadcast_view_still_uploads_the_rest() -> None:
    a = sa.SmartArray(np.arange(N, dtype=np.float64))
    same_size = np.broadcast_to(a[:1], (N,))  # N elements, but all are a[0]
    assert isinstance(same_size, sa.SmartArray)
    # as many bytes as the buffer, but writing its elements does not write every byte
    assert not same_size._overwrites_span()
    for whole in (a, a.reshape(4, -1).T):
        assert whole._span() is None and whole._overwrites_span()


def test_free_device_releases_the_device_buffer() -> None:
    a = sa.SmartArray(np.zeros(N))
    inc[1, THREADS](a)
    inc[1, THREADS](a[2:6])  # a cached view of the device buffer
    buffer = weakref.ref(a._alloc.device)
    a.free_device()
    assert buffer() is None
    np.testing.assert_array_equal(np.asarray(a)[2:6], np.full(4, 2.0))


def test_out_of_device_memory_is_clear_and_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from smartarray._core import backend as _backend

    a = sa.SmartArray(np.arange(N, dtype=np.float64))

    def no_memory(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY (simulated)")

    monkeypatch.setattr(_backend.cuda(), "device_array", no_memory)
    with pytest.raises(MemoryError, match=r"(?i)release device memory held outside SmartArrays"):
        inc[1, THREADS](a)
    with pytest.raises(MemoryError, match="out of device memory"):
        sa.zeros(N, where="gpu")
    assert a.location == "host" and not a.is_valid("gpu")
    np.testing.assert_array_equal(np.asarray(a), np.arange(N))
    monkeypatch.undo()
    inc[1, THREADS](a)
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)


def test_device_born_arrays_allocate_host_memory_lazily() -> None:
    a = sa.empty((4, 4), where="gpu")
    view = a[1:3].T  # views need no host memory either
    inc[1, 16](a.ravel())
    assert a._alloc.host is None and view._alloc is a._alloc
    with sa.track_transfers() as t:
        host = a.get("host")
    assert a._alloc.host is not None and counts(t) == (0, 1)
    assert host.shape == (4, 4)


def test_threads_launching_kernels_on_shared_and_own_arrays() -> None:
    import contextlib
    import threading

    shared = sa.SmartArray(np.arange(8, dtype=np.float64))
    results: list[sa.SmartArray] = [sa.zeros(8, where="gpu") for _ in range(4)]
    # The simulator itself cannot run launches from several host threads at once (it swaps
    # module state per launch); on a GPU the launches really are concurrent.
    launch_lock = threading.Lock() if sa.tier() == "simulator" else contextlib.nullcontext()

    def worker(k: int) -> None:
        for _ in range(3):
            with launch_lock:
                axpy[1, 8](results[k], 1.0, sa.In(shared))
        np.testing.assert_array_equal(np.asarray(results[k]), 3 * np.arange(8))

    run_in_threads(worker, 4)
    assert shared.location == "both"  # only read: uploaded once, still valid on the host


def test_to_device_returns_the_current_device_copy() -> None:
    # issue 31: a.to_device() raised "bare_kernel_argument() missing 1 required positional
    # argument: 'retr'" (numba-cuda's kernel-argument protocol takes the launch's list).
    a = sa.SmartArray(np.arange(N, dtype=np.float64), label="a")
    with sa.track_transfers() as t:
        d = a.to_device()
    assert counts(t) == (1, 0) and a.location == "both"
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(N))
    fill[1, THREADS](d, 7.0)  # it is a's own device copy (not a new copy, unlike cuda.to_device)
    a.mark_changed("gpu")
    np.testing.assert_array_equal(a, np.full(N, 7.0))
    stream = cuda.stream()
    b = sa.SmartArray(np.arange(3.0))
    np.testing.assert_array_equal(b.to_device(stream=stream).copy_to_host(), [0.0, 1.0, 2.0])
    with sa.track_transfers() as t:  # and launches still prepare bare arguments through it
        fill[1, THREADS](a, 2.0)
    assert counts(t) == (0, 0) and a.location == "gpu"


@pytest.mark.parametrize("fits", [True, False], ids=["fits-the-device", "larger-than-the-device"])
def test_out_of_device_memory_says_what_was_requested_held_and_free(
    monkeypatch: pytest.MonkeyPatch, empty_budget: None, fits: bool
) -> None:
    # issue 31: inc[1, 32](sa.zeros(10**13)) blamed an unset limit ("Raise the limit") and said
    # SmartArrays held the 80 TB it had just requested, while device_memory_usage() was 0.
    from smartarray._core import backend as _backend

    held = sa.SmartArray(np.arange(N, dtype=np.float64), label="held")
    device = held.get("gpu")  # handed out (the caller may write it): cannot be evicted
    a = sa.SmartArray(np.zeros(1024), label="big")
    total = 1 << 20 if fits else 4096  # bytes the (stand-in) device has
    monkeypatch.setattr(_backend, "device_memory_info", lambda: (total // 2, total))

    def no_memory(*args: object, **kwargs: object) -> None:
        raise RuntimeError("CUDA_ERROR_OUT_OF_MEMORY (simulated)")

    monkeypatch.setattr(_backend.cuda(), "device_array", no_memory)
    usage = sa.device_memory_usage()
    assert usage >= held.nbytes
    with pytest.raises(MemoryError) as error:
        inc[1, THREADS](a)
    message = str(error.value)
    assert "out of device memory allocating 8192 bytes for big" in message
    assert f"the device has {total // 2} of its {total} bytes free" in message
    assert f"SmartArrays hold {usage} bytes of device memory" in message  # not the request
    assert "handed out by get('gpu') and not yet declared (mark_changed): held" in message
    assert "no smartarray device memory limit is set" in message
    assert "raise the limit" not in message.lower()  # there is none to raise
    if fits:
        assert "release device memory held outside SmartArrays" in message
        assert "Free device copies you no longer need (SmartArray.free_device)" in message
    else:
        assert f"larger than the whole device ({total} bytes)" in message
        assert "free_device" not in message and "release device memory" not in message
    assert sa.device_memory_usage() == usage and a.location == "host"  # nothing changed
    sa.set_device_memory_limit(usage + 4096)  # the budget refuses, before the device
    with pytest.raises(MemoryError) as error:
        inc[1, THREADS](a)
    message = str(error.value)
    assert "cannot allocate 8192 bytes of device memory for big: the device has" in message
    assert f"the smartarray device memory limit is {usage + 4096} bytes" in message
    if fits:
        assert f"larger than the limit: raise the limit to at least {usage + 8192}" in message
    sa.set_device_memory_limit(usage + (1 << 16))  # a limit the device cannot honour
    with pytest.raises(MemoryError) as error:
        inc[1, THREADS](a)
    message = str(error.value)
    assert f"the smartarray device memory limit is {usage + (1 << 16)} bytes" in message
    if fits:
        assert "set the limit below what the device has free" in message
    assert sa.device_memory_usage() == usage and a.location == "host"
    held.mark_changed("gpu")
    del device


def test_mapped_memory_is_never_copied_by_kernels_or_njit_calls() -> None:
    # docs/numba.md (issue 31): mapped host memory is one buffer for both sides.
    @njit
    def double(x):  # type: ignore[no-untyped-def]
        x[:] *= 2.0

    a = sa.SmartArray(np.arange(N, dtype=np.float64), host_memory="mapped")
    with sa.track_transfers() as t:
        inc[1, THREADS](a)
        assert a.location == "both"
        double(a)
        assert a.location == "both"
        fill[1, THREADS](sa.Out(a), 3.0)
        axpy[1, THREADS](a, 2.0, sa.In(a))
        np.testing.assert_array_equal(np.asarray(a), np.full(N, 9.0))
    assert t.count == 0 and a.location == "both"


def test_the_simulator_does_not_check_explicit_kernel_signatures() -> None:
    # docs/testing.md, "What the simulator cannot tell you" (issue 31): a difference from a GPU.
    if sa.tier() != "simulator":
        pytest.skip("the simulator's behaviour (numba-cuda checks signatures on a GPU)")

    @cuda.jit("void(int32[:], int32)")
    def put(x, value):  # type: ignore[no-untyped-def]
        i = cuda.grid(1)
        if i < x.size:
            x[i] = value

    a = sa.SmartArray(np.zeros(N))  # float64, not int32
    put[1, THREADS](a, 2.5)
    np.testing.assert_array_equal(np.asarray(a), np.full(N, 2.5))  # ran on the float64 data
