"""Tier 3: real-GPU-only behaviour (CUDA ufuncs, the CUDA Array Interface, streams, pinned
and mapped memory, CuPy/PyTorch interop). Skipped unless a CUDA GPU is present.

The kernel-chain tests in test_cuda_kernels.py and test_stateful.py also run here unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import inc, vectorized_add
from numba import cuda, guvectorize, vectorize

import smartarray as sa

pytestmark = pytest.mark.gpu

N = 1 << 16


@cuda.jit
def spin_add(a, value, rounds):
    i = cuda.grid(1)
    if i < a.size:
        acc = a[i]
        for _ in range(rounds):
            acc += value / rounds
        a[i] = acc


def _add(a, b):
    return a + b


def _row_sum(a, out):
    total = 0.0
    for j in range(a.shape[0]):
        total += a[j]
    out[0] = total


@pytest.fixture(scope="module")
def add_ufunc():  # type: ignore[no-untyped-def]
    return vectorize(["float64(float64, float64)"], target="cuda")(_add)


@pytest.fixture(scope="module")
def row_sum_gufunc():  # type: ignore[no-untyped-def]
    return guvectorize(["void(float64[:], float64[:])"], "(n)->()", target="cuda")(_row_sum)


def test_default_host_memory_is_pinned() -> None:
    assert sa.zeros(4).host_memory == "pinned"
    assert sa.SmartArray(np.zeros(4), copy=False).host_memory == "pageable"


def test_zeros_and_full_on_the_device() -> None:
    z = sa.zeros(N, where="gpu")
    f = sa.full(N, 2.5, dtype=np.float32, where="gpu")
    # filled on the device now (a memset, a fill kernel), on the host where first used
    assert z.location == "both" and f.location == "both"
    assert z._alloc.device is not None and f._alloc.device is not None
    np.testing.assert_array_equal(z.get("gpu").copy_to_host(), np.zeros(N))
    np.testing.assert_array_equal(f.get("gpu").copy_to_host(), np.full(N, 2.5, np.float32))
    # (a DLPack consumer gets the device copy: the host never used these arrays)
    from smartarray._interop import dlpack

    assert sa.zeros(4, where="gpu").__dlpack_device__()[0] == dlpack.KDL_CUDA
    z, f = sa.zeros(N, where="gpu"), sa.full(N, 2.5, dtype=np.float32, where="gpu")
    with sa.track_transfers() as t:
        np.testing.assert_array_equal(np.asarray(z), np.zeros(N))
        np.testing.assert_array_equal(np.asarray(f), np.full(N, 2.5, np.float32))
    assert t.count == 0
    assert z.__dlpack_device__()[0] == dlpack.KDL_CPU  # (current on both: the host's)


def test_plain_cuda_ufunc_keeps_smartarrays_on_the_device(add_ufunc) -> None:  # type: ignore[no-untyped-def]
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    out = sa.zeros(N, where="gpu")
    with sa.track_transfers() as t:
        assert add_ufunc(x, y, out=out) is out
        z = add_ufunc(out, x)
    assert t.h2d_count == 2 and t.d2h_count == 0
    assert out.location == "gpu" and x.location == "both" and y.location == "both"
    assert isinstance(z, sa.SmartArray) and z.location == "gpu"
    np.testing.assert_array_equal(np.asarray(out), np.arange(N) + 1)
    np.testing.assert_array_equal(np.asarray(z), 2 * np.arange(N) + 1)


def test_plain_cuda_ufunc_reduce_leaves_the_array_intact(add_ufunc) -> None:  # type: ignore[no-untyped-def]
    x = sa.SmartArray(np.arange(1000, dtype=np.float64))
    assert add_ufunc.reduce(x) == np.arange(1000).sum()
    x.mark_changed("gpu")
    np.testing.assert_array_equal(np.asarray(x), np.arange(1000))


def test_plain_gufunc_on_smartarrays(row_sum_gufunc) -> None:  # type: ignore[no-untyped-def]
    a = sa.SmartArray(np.ones((64, 32)))
    with sa.track_transfers() as t:
        sums = row_sum_gufunc(a)
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    assert isinstance(sums, sa.SmartArray) and sums.location == "gpu"
    np.testing.assert_array_equal(np.asarray(sums), np.full(64, 32.0))


def test_cuda_array_interface_consumer_marks_the_device_copy_changed(add_ufunc) -> None:  # type: ignore[no-untyped-def]
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    out = cuda.device_array(N)
    add_ufunc(cuda.as_cuda_array(x), cuda.as_cuda_array(x), out=out)
    assert x.location == "gpu"  # an interface reader may write: conservatively changed
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(N))


def test_wrapped_cuda_ufunc_keeps_inputs_valid(add_ufunc) -> None:  # type: ignore[no-untyped-def]
    add = sa.cuda_ufunc(add_ufunc)
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    with sa.track_transfers() as t:
        z = add(x, x)
        z = add(z, x)
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    assert isinstance(z, sa.SmartArray) and z.location == "gpu" and x.location == "both"
    np.testing.assert_array_equal(np.asarray(z), 3 * np.arange(N))


def test_wrapped_gufunc_with_out(row_sum_gufunc) -> None:  # type: ignore[no-untyped-def]
    gu = sa.cuda_ufunc(row_sum_gufunc)
    a = sa.SmartArray(np.ones((64, 32)))
    out = sa.empty(64, where="gpu")
    gu(a, out=out)
    assert out.location == "gpu"
    np.testing.assert_array_equal(np.asarray(out), np.full(64, 32.0))


def test_cuda_array_interface_export() -> None:
    a = sa.SmartArray(np.arange(8, dtype=np.float32))
    interface = a.__cuda_array_interface__
    assert interface["version"] == 3 and interface["shape"] == (8,)
    assert interface["typestr"] == np.dtype(np.float32).str
    assert not a.is_valid("host")  # the exporter may write: device marked changed
    view = cuda.as_cuda_array(a)
    inc[1, 8](view)
    np.testing.assert_array_equal(np.asarray(a), np.arange(8) + 1)


def test_adopt_foreign_device_array_without_copy() -> None:
    d = cuda.to_device(np.arange(16.0))
    foreign = cuda.as_cuda_array(d)  # any CUDA-array-interface object
    a = sa.SmartArray(foreign, copy=False, where="gpu")
    inc[1, 16](a)
    np.testing.assert_array_equal(d.copy_to_host(), np.arange(16.0) + 1)


def test_streams_overlap_and_wait_only_for_their_array() -> None:
    s1, s2 = cuda.stream(), cuda.stream()
    a = sa.zeros(N, where="gpu")
    b = sa.zeros(N, where="gpu")
    blocks = (N + 255) // 256
    with sa.track_transfers() as t:
        spin_add[blocks, 256, s1](a, 1.0, 50_000_000)  # ~0.1 s on an H100
        spin_add[blocks, 256, s2](b, 2.0, 10)  # microseconds, beside it
        a.get("host", stream=s1)
        b.get("host", stream=s2)
        np.testing.assert_allclose(np.asarray(b), np.full(N, 2.0))
        # Reading b waited for b's work only: a's kernel is still running.
        assert not a._alloc._device_event.query()
        np.testing.assert_allclose(np.asarray(a), np.full(N, 1.0))
    assert t.d2h_count == 2 and all(r.asynchronous for r in t.records)


def test_pinned_async_round_trip() -> None:
    stream = cuda.stream()
    a = sa.SmartArray(np.arange(N, dtype=np.float64), host_memory="pinned")
    inc[(N + 255) // 256, 256, stream](a)
    a.to_host(stream=stream)
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)


def test_mapped_memory_on_hardware() -> None:
    a = sa.zeros(1024, host_memory="mapped")
    with sa.track_transfers() as t:
        inc[4, 256](a)
        np.testing.assert_array_equal(np.asarray(a), np.ones(1024))
    assert t.count == 0


def test_cupy_interop() -> None:
    cp = pytest.importorskip("cupy")
    a = sa.SmartArray(np.arange(32, dtype=np.float32))
    view = cp.asarray(a)  # zero copy through __cuda_array_interface__
    view += 1
    np.testing.assert_array_equal(np.asarray(a), np.arange(32) + 1)
    c = cp.arange(8, dtype=cp.float64)
    adopted = sa.SmartArray(c, copy=False, where="gpu")
    inc[1, 8](adopted)
    np.testing.assert_array_equal(cp.asnumpy(c), np.arange(8) + 1)


def test_torch_interop() -> None:
    torch = pytest.importorskip("torch")
    a = sa.SmartArray(np.arange(16, dtype=np.float32))
    tensor = torch.as_tensor(a, device="cuda")
    tensor.mul_(2)
    np.testing.assert_array_equal(np.asarray(a), 2 * np.arange(16))


def test_launch_then_host_read_waits_for_the_kernel() -> None:
    a = sa.SmartArray(np.zeros(N))
    inc[(N + 255) // 256, 256](a)
    np.testing.assert_array_equal(np.asarray(a), np.ones(N))


def test_host_write_after_an_in_launch_does_not_race_the_upload() -> None:
    src = sa.SmartArray(np.zeros(N))
    dst = sa.empty(N, where="gpu")

    @cuda.jit
    def copy(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]

    stream = cuda.stream()  # an asynchronous upload: the host write must wait for it
    copy[(N + 255) // 256, 256, stream](sa.Out(dst), sa.In(src))
    src[:] = 7.0  # must not reach the kernel launched before
    np.testing.assert_array_equal(np.asarray(dst), np.zeros(N))


def test_to_host_on_the_default_stream_object() -> None:
    b = sa.SmartArray(np.full(N, -1.0))
    inc[(N + 255) // 256, 256](b)
    b.to_host(cuda.default_stream())
    np.testing.assert_array_equal(np.asarray(b), np.zeros(N))


def test_cuda_array_interface_after_a_launch() -> None:
    a = sa.SmartArray(np.zeros(16, dtype=np.float32))
    inc[1, 16](a)
    interface = a.__cuda_array_interface__
    assert interface["shape"] == (16,)


def test_free_device_returns_memory() -> None:
    """Freed device copies go back to Numba's allocator. (Not measured as free memory right
    after one free: numba-cuda 0.30's allocator keeps freed memory reserved for reuse, so
    ``get_memory_info`` did not rise even for a plain ``device_array`` deleted on an H100. A
    leak shows instead as free memory falling by 64 MiB per round.)"""
    context = cuda.current_context()

    def one_round() -> None:
        # 64 MiB; pageable host memory, which never counts as device memory (unified memory)
        a = sa.zeros(1 << 26, dtype=np.uint8, where="gpu", host_memory="pageable")
        inc[(1 << 26) // 256, 256](a)
        a.free_device()
        assert a._alloc.device is None and int(np.asarray(a)[-1]) == 1
        context.deallocations.clear()

    one_round()
    free_before, _ = context.get_memory_info()
    for _ in range(16):
        one_round()
    free_after, _ = context.get_memory_info()
    assert free_after > free_before - (1 << 27)  # a leak would have taken 1 GiB


def test_kernels_on_two_streams_are_ordered_per_array() -> None:
    s1, s2 = cuda.stream(), cuda.stream()
    a = sa.zeros(N, where="gpu")
    blocks = (N + 255) // 256
    spin_add[blocks, 256, s1](a, 3.0, 2000)
    spin_add[blocks, 256, s2](a, 1.0, 10)  # must see the 3s written on s1
    np.testing.assert_allclose(np.asarray(a), np.full(N, 4.0))


def test_device_zeros_of_text_dtype_and_refused_fill() -> None:
    z = sa.zeros(8, dtype="S3", where="gpu")
    assert np.asarray(z).tolist() == [b""] * 8
    with pytest.raises(TypeError, match="on the host"):
        sa.full(8, b"abc", dtype="S3", where="gpu")


def test_empty_arrays_with_pinned_and_mapped_memory() -> None:
    for kind in ("pinned", "mapped"):
        e = sa.SmartArray(np.empty(0), host_memory=kind)
        inc[1, 1](e)
        assert np.asarray(e).shape == (0,)


def _non_blocking_stream():  # type: ignore[no-untyped-def]
    from cuda.bindings import driver

    flags = driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value
    err, handle = driver.cuStreamCreate(flags)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return cuda.external_stream(int(handle)), handle


def test_non_blocking_stream_waits_for_default_stream_work() -> None:
    from cuda.bindings import driver

    stream, handle = _non_blocking_stream()
    try:
        a = sa.zeros(N, where="gpu")
        blocks = (N + 255) // 256
        spin_add[blocks, 256](a, 3.0, 20000)  # long, on the default stream: no event
        spin_add[blocks, 256, stream](a, 1.0, 10)  # must still see the 3s
        np.testing.assert_allclose(np.asarray(a), np.full(N, 4.0))
    finally:
        cuda.synchronize()
        driver.cuStreamDestroy(handle)


def test_copy_of_a_device_array_on_a_stream_is_ordered() -> None:
    s1, s2 = cuda.stream(), cuda.stream()
    source = cuda.to_device(np.arange(N, dtype=np.float64))
    a = sa.SmartArray(source, stream=s1)  # device-to-device copy enqueued on s1
    inc[(N + 255) // 256, 256, s2](a)  # on s2: must wait for the copy
    np.testing.assert_array_equal(np.asarray(a), np.arange(N) + 1)


def test_exported_buffer_outlives_free_device() -> None:
    cp = pytest.importorskip("cupy")
    a = sa.SmartArray(np.arange(1 << 20, dtype=np.float32))
    view = cp.asarray(a)
    a.free_device()  # the buffer CuPy points at must stay allocated
    filler = [cuda.device_array(1 << 20, dtype=np.float32) for _ in range(8)]
    for f in filler:
        f.copy_to_device(np.full(1 << 20, -1.0, dtype=np.float32))
    np.testing.assert_array_equal(cp.asnumpy(view), np.arange(1 << 20))
    np.testing.assert_array_equal(np.asarray(a), np.arange(1 << 20))


def test_unaligned_field_view_in_a_kernel() -> None:
    records = sa.SmartArray(np.zeros(64, dtype=[("a", "i4"), ("b", "f8")]))
    inc[1, 64](records["b"])  # float64 at offset 4, stride 12: byte accesses, no fault
    assert np.asarray(records)["b"].tolist() == [1.0] * 64


# --- device memory budget, pinned pool, RMM ---------------------------------------------------


@pytest.fixture
def no_limit_after():  # type: ignore[no-untyped-def]
    yield
    sa.set_device_memory_limit(None)


@pytest.mark.usefixtures("no_limit_after")
def test_spill_waits_for_a_kernel_on_another_stream() -> None:
    stream = cuda.stream()
    a = sa.SmartArray(np.zeros(N), label="in flight")
    blocks = (N + 255) // 256
    spin_add[blocks, 256, stream](a, 3.0, 20000)  # long: likely in flight when evicted
    with sa.track_transfers() as t:
        sa.set_device_memory_limit(0)  # evicts everything; a's spill waits for its kernel
    assert "in flight" in [r.array for r in t.records if r.spill]
    assert a._alloc.device is None and a.location == "host"
    with sa.track_transfers() as t:
        np.testing.assert_allclose(np.asarray(a), np.full(N, 3.0))
    assert (t.h2d_count, t.d2h_count) == (0, 0)


@pytest.mark.usefixtures("no_limit_after")
def test_an_array_exported_to_cupy_is_never_evicted() -> None:
    cp = pytest.importorskip("cupy")
    a = sa.SmartArray(np.arange(1 << 20, dtype=np.float32), label="exported")
    view = cp.asarray(a)
    b = sa.SmartArray(np.zeros(1 << 20, dtype=np.float32))
    sa.set_device_memory_limit(a.nbytes)  # everything else is evicted
    with pytest.raises(MemoryError, match=r"exported through __cuda_array_interface__: exported"):
        b.to_gpu()
    view += 1  # CuPy writes the buffer: still smartarray's device copy
    np.testing.assert_array_equal(np.asarray(a), np.arange(1 << 20) + 1)


def test_pinned_pool_buffers_are_reused_and_page_locked() -> None:
    sa.release_pinned_pool()
    a = sa.zeros(1 << 20)
    address = a._alloc.host.ctypes.data
    inc[(1 << 20) // 256, 256](a)
    del a
    b = sa.empty(1 << 20)
    assert b._alloc.host.ctypes.data == address
    b.fill(1.0)
    stream = cuda.stream()
    b.to_gpu(stream)  # an asynchronous upload (needs page-locked memory to be one)
    stream.synchronize()
    assert b.location == "both"
    np.testing.assert_array_equal(b.get("gpu").copy_to_host(), np.ones(1 << 20))
    del b
    assert sa.release_pinned_pool() >= 8 << 20


def test_a_pinned_buffer_is_reused_only_after_its_async_download() -> None:
    # A download in flight into an array that dies must not land in the next array that gets
    # the pooled buffer (64 MiB: the copy outlasts the new array's fill without the fence).
    sa.release_pinned_pool()
    n = 1 << 23
    stream = cuda.stream()
    a = sa.full(n, 0.0, where="gpu")
    inc[(n + 255) // 256, 256](a)  # current on the device only (ones)
    a.to_host(stream)
    address = a._alloc.host.ctypes.data
    del a
    b = sa.zeros(n)
    assert b._alloc.host.ctypes.data == address
    stream.synchronize()
    assert not np.asarray(b).any()


_RMM_SCRIPT = """
import numpy as np, rmm
rmm.reinitialize(pool_allocator=True, initial_pool_size=2**24, maximum_pool_size=2**24)
import smartarray as sa
from numba import cuda
from helpers import inc
manager = cuda.current_context().memory_manager
assert type(manager).__module__.startswith("rmm"), type(manager)
n = 1 << 20  # 8 MiB each; the 16 MiB pool holds one (RMM's own overhead aside)
xs = [sa.SmartArray(np.arange(n, dtype=np.float64) + k) for k in range(4)]
for _ in range(2):  # no smartarray limit: RMM runs out, smartarray evicts and retries
    for x in xs:
        inc[n // 256, 256](x)
for k, x in enumerate(xs):
    np.testing.assert_array_equal(np.asarray(x), np.arange(n) + k + 2)
assert not sa.device_pool_info()["enabled"]  # Numba's manager (RMM) allocates SmartArrays too
print("spills", sa.transfer_stats().spill_count)
"""


def test_smartarrays_work_with_rmm_as_numbas_memory_manager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("rmm")
    from helpers import run_python

    monkeypatch.setenv("NUMBA_CUDA_MEMORY_MANAGER", "rmm.allocators.numba")
    script = "import sys; sys.path.insert(0, 'tests')\n" + _RMM_SCRIPT
    proc = run_python(["-c", script], simulator=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert int(proc.stdout.split()[-1]) > 0


def test_dask_cuda_family_ships_the_device_buffer_without_copies() -> None:
    pytest.importorskip("distributed")
    from distributed.protocol import deserialize, serialize

    a = sa.SmartArray(np.arange(N, dtype=np.float32))
    inc[(N + 255) // 256, 256](a)  # current on the device only
    device_pointer = a.get("gpu").device_ctypes_pointer.value
    with sa.no_transfers():
        header, frames = serialize(a, serializers=["cuda", "dask", "pickle"], on_error="raise")
    assert header["serializer"] == "cuda"
    (frame,) = frames
    assert frame.__cuda_array_interface__["data"][0] == device_pointer  # the buffer itself
    # What UCX hands the receiver: its own device memory holding the bytes.
    received_frame = cuda.device_array(frame.shape, dtype=frame.dtype)
    received_frame.copy_to_device(frame)
    with sa.no_transfers():
        received = deserialize(header, [received_frame])
    assert received.location == "gpu"
    np.testing.assert_array_equal(np.asarray(received), np.arange(N, dtype=np.float32) + 1)
    # The 'dask' family (TCP) syncs the host copy once instead.
    with sa.track_transfers() as moved:
        header, _ = serialize(a, serializers=["dask", "pickle"], on_error="raise")
    assert header["serializer"] == "dask"
    assert (moved.d2h_count, moved.d2h_bytes) == (1, a.nbytes)


# --- DLPack, device side (issue #11, item 9; host side in test_dlpack.py) ---------------------


class _Capsule:
    """Hands a capsule made by ``__dlpack__`` to a consumer that wants an object."""

    def __init__(self, capsule: object, device: tuple[int, int]) -> None:
        self.capsule = capsule
        self.device = device

    def __dlpack__(self, **kwargs: object) -> object:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def _device_pointer(a: sa.SmartArray) -> int:
    return int(a.get("gpu").__cuda_array_interface__["data"][0])


def test_dlpack_device_export_of_a_device_only_array() -> None:
    from cuda.core.utils import StridedMemoryView

    a = sa.zeros(64)
    inc[1, 64](a)  # only the device copy is current: exports default to it
    device = (2, cuda.get_current_device().id)
    assert a.__dlpack_device__() == device
    with sa.track_transfers() as t:
        view = StridedMemoryView.from_dlpack(a, stream_ptr=-1)
    assert t.count == 0
    assert view.is_device_accessible and view.ptr == _device_pointer(a)
    assert a.location == "gpu"
    inc[1, 64](view)  # the consumer writes through the exported pointer
    np.testing.assert_array_equal(np.asarray(a), np.full(64, 2.0))


def test_dlpack_device_export_on_request_marks_the_device_copy_changed() -> None:
    from cuda.core.utils import StridedMemoryView

    a = sa.SmartArray(np.arange(32.0))
    device = (2, cuda.get_current_device().id)
    assert a.__dlpack_device__() == (1, 0)  # host copy current: host by default
    with sa.track_transfers() as t:
        capsule = a.__dlpack__(dl_device=device, max_version=(1, 0))
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    assert a.location == "gpu"  # exactly as __cuda_array_interface__ does
    view = StridedMemoryView.from_dlpack(_Capsule(capsule, device), stream_ptr=-1)
    assert view.ptr == _device_pointer(a) and not view.readonly
    inc[1, 32](view)
    np.testing.assert_array_equal(np.asarray(a), np.arange(32.0) + 1)


def test_dlpack_device_snapshot_and_read_only_exports_change_nothing() -> None:
    from cuda.core.utils import StridedMemoryView

    a = sa.SmartArray(np.arange(16.0)).to_gpu()
    device = (2, cuda.get_current_device().id)
    snapshot = a.__dlpack__(dl_device=device, max_version=(1, 0), copy=True)
    view = StridedMemoryView.from_dlpack(_Capsule(snapshot, device), stream_ptr=-1)
    assert view.ptr != _device_pointer(a)
    diagonal = a.reshape(4, 4).diagonal()
    readonly = diagonal.__dlpack__(dl_device=device, max_version=(1, 0))
    assert StridedMemoryView.from_dlpack(_Capsule(readonly, device), stream_ptr=-1).readonly
    assert a.location == "both"


def test_smartarray_from_a_device_dlpack_producer() -> None:
    from cuda.core.utils import StridedMemoryView

    d = cuda.to_device(np.arange(8.0))
    producer = StridedMemoryView.from_cuda_array_interface(d, stream_ptr=-1)
    with sa.track_transfers() as t:
        copied = sa.SmartArray(producer)
        adopted = sa.SmartArray(producer, copy=False)
    assert t.count == 0
    assert copied.location == adopted.location == "gpu"
    inc[1, 8](d)
    np.testing.assert_array_equal(np.asarray(adopted), np.arange(8.0) + 1)
    np.testing.assert_array_equal(np.asarray(copied), np.arange(8.0))


def test_numba_cuda_in_around_a_host_current_smartarray() -> None:
    # numba-cuda would read a SmartArray inside its own In() through DLPack, which exports
    # the host copy while it is current: smartarray's hook prepares it as an intent instead.
    x = sa.SmartArray(np.arange(64.0))
    out = sa.zeros(64)
    with sa.track_transfers() as t:
        vectorized_add[1, 64](cuda.In(x), cuda.In(x), cuda.Out(out))
    assert (t.h2d_count, t.d2h_count) == (1, 0)
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(64.0))


# --- inferred intents on the real launch path (numba-cuda's CUDADispatcher.call) ----------


@cuda.jit
def _axpy(a, x, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] += a * x[i]


def test_bare_kernel_arguments_get_inferred_intents_on_hardware() -> None:
    from numba.cuda.dispatcher import CUDADispatcher

    assert getattr(CUDADispatcher.call, "__smartarray_launch_hook__", False)
    x = sa.SmartArray(np.arange(N, dtype=np.float64))
    y = sa.SmartArray(np.ones(N))
    with sa.track_transfers() as t:
        for _ in range(10):
            _axpy[N // 256, 256](2.0, x, y)
        x.sum()  # a read-only input: its host copy stayed valid
        result = np.asarray(y)
    assert (t.h2d_count, t.d2h_count) == (2, 1)
    assert x.location == "both"
    np.testing.assert_array_equal(result, 1 + 20.0 * np.arange(N))


def test_gufunc_reading_its_output_on_hardware() -> None:
    @guvectorize(["void(float64[:], float64[:])"], "()->()", target="cuda")
    def multiply(val, out):
        out[0] *= val[0]

    x = sa.SmartArray(np.arange(1.0, 9.0))
    for out in ("plain", "inout"):
        y = sa.SmartArray(np.full(8, 3.0))
        with sa.track_transfers() as t:
            multiply(x, out=y if out == "plain" else sa.InOut(y))
            result = np.asarray(y)
        assert t.h2d_count == (2 if out == "plain" else 1) and t.d2h_count == 1
        np.testing.assert_array_equal(result, 3.0 * np.arange(1.0, 9.0))


def test_a_kept_host_view_is_current_when_a_launch_on_a_stream_returns(add_ufunc) -> None:  # type: ignore[no-untyped-def]
    stream = cuda.stream()
    x = sa.SmartArray(np.zeros(N), label="kept")
    h = np.asarray(x)
    blocks = (N + 255) // 256
    with sa.track_transfers() as t:
        spin_add[blocks, 256, stream](x, 2.0, 20000)  # long: still running when launched
        # No synchronisation by the caller: the download after the kernel was waited for.
        np.testing.assert_allclose(h, np.full(N, 2.0))
        add_ufunc(x, x, out=x, stream=stream)
        np.testing.assert_allclose(h, np.full(N, 4.0))
    assert (t.h2d_count, t.d2h_count) == (1, 2) and x.location == "both"
    assert all(r.asynchronous for r in t.records if r.direction == "d2h")


def test_a_kept_host_view_of_mapped_memory_waits_for_the_kernel() -> None:
    a = sa.zeros(N, host_memory="mapped")
    h = np.asarray(a)
    with sa.track_transfers() as t:
        spin_add[(N + 255) // 256, 256](a, 1.0, 20000)
        np.testing.assert_allclose(h, np.ones(N))
    assert t.count == 0
