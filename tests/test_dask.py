"""SmartArrays as dask chunks: sizeof, tokens, serialization, dask.array meta, residency.

Needs the ``[dask]`` extra (dask[array], distributed); skipped without it. The cluster test
starts a LocalCluster of two worker processes (they inherit ``NUMBA_ENABLE_CUDASIM``).
"""

from __future__ import annotations

import logging
import sys
import warnings
from typing import Any

import numpy as np
import pytest
from helpers import run_python
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import cuda

import smartarray as sa
from smartarray._interop import dask as _dask

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
from dask.sizeof import sizeof  # noqa: E402
from dask.tokenize import tokenize  # noqa: E402
from distributed.protocol import deserialize, serialize  # noqa: E402

ON_DEVICE = sa.tier() != "host-only"
STATES = ["host", "gpu", "both"] if ON_DEVICE else ["host"]


# --- functions for map_blocks (module level: worker processes import them) -----------------


@cuda.jit
def affine(x, out):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2 * x[i] + 1


def affine_block(block: sa.SmartArray) -> sa.SmartArray:
    """One kernel launch: a new device-resident chunk ``2 * block + 1``."""
    out = sa.empty_like(block, where="gpu")
    affine[max(1, (block.size + 31) // 32), 32](sa.In(block), sa.Out(out))
    return out


SEEN_BLOCKS: list[tuple[str, bool]] = []  # (location, writeable) of blocks read bare


def bare_affine_block(block: sa.SmartArray) -> sa.SmartArray:
    """affine_block with its input passed as it is (no In): the kernel never writes it."""
    out = sa.empty_like(block, where="gpu")
    affine[max(1, (block.size + 31) // 32), 32](block, sa.Out(out))
    SEEN_BLOCKS.append((block.location, bool(block.flags.writeable)))
    return out


def read_only_block(block: sa.SmartArray) -> sa.SmartArray:
    """A read-only view of the chunk."""
    return np.broadcast_to(block, block.shape)  # type: ignore[return-value]


def to_device_block(block: sa.SmartArray) -> sa.SmartArray:
    """A device-current copy of the chunk (one upload)."""
    return sa.SmartArray(block, where="gpu")


def squared_block(block: sa.SmartArray) -> sa.SmartArray:
    return block * block


def in_state(array: sa.SmartArray, state: str) -> sa.SmartArray:
    """Put ``array``'s elements in ``state`` ('host', 'gpu' or 'both')."""
    if state == "both":
        array.to_gpu()
    elif state == "gpu":  # (declared through the writable array a read-only view is of)
        writer = array if array.flags.writeable else array.base
        assert writer is not None and writer.flags.writeable
        writer.to_gpu()  # (only the bytes it covers: those it declares written)
        writer.mark_changed("gpu")
    assert array.location == state
    return array


# --- registration ---------------------------------------------------------------------------


def test_registered_with_every_imported_dask_module() -> None:
    # smartarray was imported first (conftest); dask afterwards: the import hook registered.
    assert {
        "dask.sizeof",
        "dask.tokenize",
        "distributed.protocol.serialize",
        "distributed.protocol.cuda",
        "dask.array.backends",
    } <= _dask.registered()
    _dask.install()  # idempotent
    from distributed.protocol.serialize import dask_serialize

    assert dask_serialize.dispatch(sa.SmartArray) is _dask.dask_serialize


def test_registration_when_distributed_is_imported_first() -> None:
    script = (
        "from distributed.protocol import serialize, deserialize\n"
        "from dask.sizeof import sizeof\n"
        "import numpy as np, smartarray as sa\n"
        "a = sa.SmartArray(np.arange(6.0))\n"
        "header, frames = serialize(a, serializers=['dask', 'pickle'], on_error='raise')\n"
        "assert header['serializer'] == 'dask', header\n"
        "b = deserialize(header, frames)\n"
        "assert type(b) is sa.SmartArray and b.tolist() == a.tolist()\n"
        "assert sizeof(a) == 48\n"
        "print('registered', sorted(sa._dask.registered()))\n"
    )
    proc = run_python(["-c", script], simulator=ON_DEVICE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "distributed.protocol.serialize" in proc.stdout


def test_import_hook_registers_a_module_imported_later(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The mechanism behind every registration, on a module made for the test: it runs once,
    # right after the module's code, with the module itself.
    plugin = "from dask.utils import Dispatch\nd = Dispatch()\n"
    (tmp_path / "fake_dask_plugin.py").write_text(plugin)
    seen: list[Any] = []
    monkeypatch.setitem(_dask.REGISTRATIONS, "fake_dask_plugin", seen.append)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_dask_plugin", raising=False)
    _dask.install()
    assert _dask._FINDER in sys.meta_path
    import fake_dask_plugin  # type: ignore[import-not-found]

    assert seen == [fake_dask_plugin] and hasattr(seen[0], "d")
    assert "fake_dask_plugin" in _dask.registered()
    _dask.install()
    assert seen == [fake_dask_plugin]  # idempotent
    _dask._done.discard("fake_dask_plugin")
    sys.modules.pop("fake_dask_plugin")


def test_a_failing_registration_warns_and_never_breaks_the_import(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(module: Any) -> None:
        raise AttributeError("no such dispatch")

    (tmp_path / "fake_dask_plugin2.py").write_text("VALUE = 1\n")
    monkeypatch.setitem(_dask.REGISTRATIONS, "fake_dask_plugin2", broken)
    monkeypatch.syspath_prepend(str(tmp_path))
    _dask.install()
    with pytest.warns(RuntimeWarning, match="could not register SmartArray with fake_dask_plugin2"):
        import fake_dask_plugin2  # type: ignore[import-not-found]
    assert fake_dask_plugin2.VALUE == 1
    _dask._done.discard("fake_dask_plugin2")
    sys.modules.pop("fake_dask_plugin2")


@pytest.mark.parametrize("state", STATES)
def test_dask_cuda_sees_device_memory_only_when_the_device_copy_is_current(state: str) -> None:
    a = in_state(sa.SmartArray(np.arange(8.0)), state)
    with sa.no_transfers():
        assert _dask.is_device_object(a) == (state != "host")
        assert _dask.device_memory_objects(a) == ([a._alloc.device] if state != "host" else [])
    assert a.location == state


def test_lookups_never_walk_into_numba() -> None:
    # dask's lookup of an unregistered type walks its MRO and runs lazy registrations of the
    # modules it meets: numba's (via ArgHint) fails in the simulator. Exact registrations
    # answer first, for SmartArray and for its views' type alike.
    from dask.array.dispatch import concatenate_lookup
    from distributed.protocol.cuda import cuda_serialize

    for dispatch in (sizeof, cuda_serialize, concatenate_lookup):
        assert sa.SmartArray in dispatch._lookup


# --- sizeof and tokens ----------------------------------------------------------------------


@pytest.mark.parametrize("state", STATES)
def test_sizeof_counts_the_elements_once_without_touching_data(state: str) -> None:
    a = in_state(sa.SmartArray(np.arange(24.0).reshape(4, 6)), state)
    with sa.no_transfers():
        assert sizeof(a) == 24 * 8
        assert sizeof(a[:, ::2]) == 12 * 8  # a view: its own elements, not the buffer
        assert sizeof(a[0:0]) == 0
        assert sizeof(sa.SmartArray(np.float32(1.5))) == 4
    assert a.location == state


def test_sizeof_of_a_broadcast_view_counts_unique_elements() -> None:
    b = np.broadcast_to(sa.SmartArray(np.arange(3.0)), (1000, 3))
    assert type(b) is sa.SmartArray and b.strides == (0, 8)
    assert sizeof(b) == 3 * 8 == sizeof(np.broadcast_to(np.arange(3.0), (1000, 3)))


def test_token_of_host_data_hashes_it_in_place() -> None:
    a = sa.SmartArray(np.arange(10.0))
    same = sa.SmartArray(np.arange(10.0))
    assert tokenize(a) == tokenize(same)
    a[3] = -1.0
    assert tokenize(a) != tokenize(same)
    readonly = np.arange(10.0)
    readonly.flags.writeable = False
    assert tokenize(sa.SmartArray(readonly, copy=False)) != tokenize(same)


@pytest.mark.device
def test_token_of_device_only_data_is_random_and_copies_nothing() -> None:
    a = in_state(sa.SmartArray(np.arange(10.0)), "gpu")
    with sa.no_transfers():
        assert tokenize(a) != tokenize(a)
    assert a.location == "gpu"


# --- serialization --------------------------------------------------------------------------


def _transport(frames: list[Any], as_bytes: bool) -> list[Any]:
    """What the receiving process gets: fresh memory (device frames pass unchanged)."""
    return [
        frame
        if not isinstance(frame, (bytes, bytearray, memoryview))
        else (bytes(frame) if as_bytes else bytearray(frame))
        for frame in frames
    ]


def test_host_chunks_ship_their_host_buffer_without_a_copy() -> None:
    a = sa.SmartArray(np.arange(12.0).reshape(3, 4))
    for chunk in (a, a[1:], a.T):  # C- and F-contiguous layouts
        header, frames = serialize(chunk, serializers=["dask", "pickle"], on_error="raise")
        assert header["serializer"] == "dask"
        (frame,) = frames
        assert isinstance(frame, memoryview)
        assert np.shares_memory(np.asarray(frame), a.get("host"))
        received = deserialize(header, _transport(frames, as_bytes=False))
        # ... and the receiver adopts the frame it got as its host copy.
        assert type(received) is sa.SmartArray and received.location == "host"
        np.testing.assert_array_equal(np.asarray(received), np.asarray(chunk))
        assert received.flags.f_contiguous == chunk.flags.f_contiguous


def test_received_frame_is_adopted_not_copied() -> None:
    a = sa.SmartArray(np.arange(8, dtype=np.int32))
    header, frames = serialize(a, serializers=["dask"], on_error="raise")
    (frame,) = _transport(frames, as_bytes=False)
    received = deserialize(header, [frame])
    assert np.shares_memory(received.get("host"), np.frombuffer(frame, np.uint8))


@pytest.mark.device
def test_device_current_chunk_arrives_with_its_data() -> None:
    a = affine_block(sa.SmartArray(np.arange(16.0)))
    assert a.location == "gpu"
    with sa.track_transfers() as moved:
        header, frames = serialize(a, serializers=["dask", "pickle"], on_error="raise")
    assert (moved.d2h_count, moved.d2h_bytes, moved.h2d_count) == (1, a.nbytes, 0)
    assert a.location == "both"  # the sender's host copy was brought up to date
    received = deserialize(header, _transport(frames, as_bytes=True))
    np.testing.assert_array_equal(np.asarray(received), 2 * np.arange(16.0) + 1)


@pytest.mark.device
def test_cuda_family_ships_the_device_buffer() -> None:
    a = in_state(sa.SmartArray(np.arange(16.0)), "gpu")
    with sa.no_transfers():
        header, frames = serialize(a, serializers=["cuda", "dask", "pickle"], on_error="raise")
        assert header["serializer"] == "cuda"
        received = deserialize(header, frames)
    assert received.location == "gpu"
    np.testing.assert_array_equal(np.asarray(received), np.arange(16.0))
    host_only = sa.SmartArray(np.arange(4.0))  # current on the host: the 'dask' family
    header, _ = serialize(host_only, serializers=["cuda", "dask", "pickle"], on_error="raise")
    assert header["serializer"] == "dask"


def _build(data: Any, order: str, readonly: str, view: str) -> sa.SmartArray:
    host = np.array(data, order=order)  # type: ignore[call-overload]
    if readonly == "memory":  # adopts read-only memory
        host.flags.writeable = False
        base = sa.SmartArray(host, copy=False)
    else:
        base = sa.SmartArray(host)
    views = {
        "whole": lambda a: a,
        "step": lambda a: a[::2],
        "tail": lambda a: a[1:],
        "transpose": lambda a: a.T,
        "reversed": lambda a: a[::-1],
        "column": lambda a: a[:, -1:] if a.ndim == 2 else a,
    }
    array = views[view](base) if base.ndim else base
    if readonly == "view":  # a read-only view of writable memory
        array = np.broadcast_to(array, array.shape)
        assert type(array) is sa.SmartArray and not array.flags.writeable
    return array


STRUCTURED = np.dtype([("n", "<i4"), ("x", "<f8")])


@st.composite
def chunks(draw: st.DrawFn) -> tuple[sa.SmartArray, str]:
    dtype = draw(st.sampled_from([np.float64, np.int16, np.complex128, np.bool_, STRUCTURED]))
    shape = draw(st.sampled_from([(), (0,), (5,), (3, 4), (4, 3), (2, 0)]))
    values = np.arange(int(np.prod(shape)) * 3).reshape((*shape, 3))[..., 0]
    data = values.astype(dtype) if dtype is not STRUCTURED else _structured(values)
    state = draw(st.sampled_from(STATES))
    # Only a kernel or mark_changed('gpu') makes a device copy newer than the host copy, and
    # neither is allowed to write arrays over read-only memory.
    readonly = draw(st.sampled_from([None, "view"] + (["memory"] if state != "gpu" else [])))
    array = _build(
        data,
        order=draw(st.sampled_from("CF")),
        readonly=readonly,
        view=draw(st.sampled_from(["whole", "step", "tail", "transpose", "reversed", "column"])),
    )
    return array, state


def _structured(values: np.ndarray) -> np.ndarray:
    out = np.zeros(values.shape, STRUCTURED)
    out["n"] = values
    out["x"] = values / 4
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunk=chunks(),
    serializers=st.sampled_from(
        [["dask", "pickle"], ["pickle"], ["cuda", "dask", "pickle"]]
        if ON_DEVICE
        else [["dask", "pickle"], ["pickle"]]
    ),
    as_bytes=st.booleans(),
)
def test_round_trip_in_every_coherence_state(
    chunk: tuple[sa.SmartArray, str], serializers: list[str], as_bytes: bool
) -> None:
    array, state = chunk
    expected = np.array(array)
    in_state(array, state)
    alloc_bytes = array._alloc.nbytes
    flags = array.flags
    ships_device = (
        "cuda" in serializers
        and state != "host"
        and (flags.c_contiguous or flags.f_contiguous)
        and min(array.strides, default=0) >= 0
    )
    device_only = [(lo, hi) for lo, hi, where in array.coherence_ranges() if where == "gpu"]
    with sa.track_transfers() as moved:
        header, frames = serialize(array, serializers=serializers, on_error="raise")
    assert header["serializer"] == (
        "cuda" if ships_device else "pickle" if serializers == ["pickle"] else "dask"
    )
    # Only a device-only chunk shipped through host memory is copied: the byte ranges its
    # elements cover (issue 21; a strided view's rows), in one copy across the bytes between
    # two of them only where those bytes too are current only on the device (a copy never
    # overwrites bytes current only on the host).
    span = array._span()
    rows = [(lo, hi) for lo, hi in ([(0, alloc_bytes)] if span is None else span) if hi > lo]
    copied: list[tuple[int, int]] = []
    if state == "gpu" and not ships_device:
        for lo, hi in rows:
            if copied and any(a <= copied[-1][1] and lo <= b for a, b in device_only):
                copied[-1] = (copied[-1][0], hi)
            else:
                copied.append((lo, hi))
    assert (moved.h2d_count, moved.d2h_count) == (0, len(copied))
    assert [(r.offset, r.nbytes) for r in moved.records] == [(lo, hi - lo) for lo, hi in copied]
    assert array.location == ("both" if state == "gpu" and not ships_device else state)
    if header["serializer"] == "dask" and array.size:
        contiguous = flags.c_contiguous or flags.f_contiguous
        shared = np.shares_memory(np.asarray(frames[0]), array._alloc.host)
        assert shared == contiguous  # zero-copy frames for contiguous host data
    received = deserialize(header, _transport(frames, as_bytes))
    assert type(received) is sa.SmartArray
    assert received.shape == array.shape and received.dtype == array.dtype
    assert received.location == ("gpu" if ships_device else "host")
    assert received.flags.writeable == array.flags.writeable  # (pickle keeps it too)
    np.testing.assert_array_equal(np.asarray(received), expected)
    np.testing.assert_array_equal(np.asarray(array), expected)


def test_broadcast_chunk_ships_its_unique_elements_and_stays_read_only() -> None:
    b = np.broadcast_to(sa.SmartArray(np.arange(3.0)), (4, 3))
    header, frames = serialize(b, serializers=["dask"], on_error="raise")
    assert [memoryview(frame).nbytes for frame in frames] == [3 * 8]
    received = deserialize(header, _transport(frames, as_bytes=False))
    assert received.shape == (4, 3) and not received.flags.writeable
    np.testing.assert_array_equal(np.asarray(received), np.broadcast_to(np.arange(3.0), (4, 3)))


@pytest.mark.parametrize(
    "data",
    [
        np.array([1, "x", None], dtype=object),
        np.array(["ab", "c"]),
        np.array(["2020-01-01", "2021-06-30"], dtype="M8[D]"),
    ],
    ids=["object", "text", "datetime"],
)
def test_round_trip_of_host_only_dtypes(data: np.ndarray) -> None:
    a = sa.SmartArray(data)
    header, frames = serialize(a, serializers=["dask", "pickle"], on_error="raise")
    assert header["serializer"] == "dask"
    received = deserialize(header, _transport(frames, as_bytes=True))
    assert type(received) is sa.SmartArray and received.dtype == data.dtype
    assert received.tolist() == data.tolist()


# --- dask.array meta ------------------------------------------------------------------------


def test_dask_arrays_of_smartarrays_keep_smartarray_meta() -> None:
    a = sa.SmartArray(np.arange(24.0).reshape(4, 6))
    x = da.from_array(a, chunks=(2, 3))
    derived = {
        "from_array": x,
        "map_blocks": x.map_blocks(squared_block, meta=a[:0, :0]),
        "elementwise": 2 * x + 1,
        "axis reduction": x.sum(axis=0),
        "concatenate": da.concatenate([x, x], axis=1),
        "transpose": x.T,
        "tensordot": da.tensordot(x, x.T, axes=1),
        "rechunk": x.rechunk((4, 1)),
    }
    with dask.config.set(scheduler="synchronous"):
        for name, array in derived.items():
            assert type(array._meta) is sa.SmartArray, name
            result = array.compute()
            assert type(result) is sa.SmartArray, name
    squares = derived["map_blocks"].compute(scheduler="sync")
    np.testing.assert_array_equal(np.asarray(squares), np.arange(24.0).reshape(4, 6) ** 2)
    # A reduction to one number gives a numpy scalar, as SmartArray.sum() and numpy do.
    assert x.sum().compute(scheduler="sync") == np.arange(24.0).sum()
    q = da.percentile(da.from_array(sa.SmartArray(np.arange(101.0)), chunks=50), [50])
    q_numpy = da.percentile(da.from_array(np.arange(101.0), chunks=50), [50])  # approximate
    np.testing.assert_array_equal(np.asarray(q.compute(scheduler="sync")), q_numpy.compute())
    numpy_backed = x.map_blocks(_dask.to_numpy, meta=np.empty((0, 0)))
    assert type(numpy_backed.compute(scheduler="sync")) is np.ndarray


# --- device residency -----------------------------------------------------------------------


@pytest.mark.device
def test_kernel_chain_with_persist_moves_input_up_once_and_result_down_once() -> None:
    a = sa.SmartArray(np.arange(64.0))
    meta = sa.empty(0)
    with dask.config.set(scheduler="synchronous"), sa.track_transfers() as moved:
        x = da.from_array(a, chunks=16)
        y = x.map_blocks(affine_block, meta=meta).map_blocks(affine_block, meta=meta)
        (y,) = dask.persist(y)
        after_persist = (moved.h2d_count, moved.h2d_bytes, moved.d2h_count)
        z = y.map_blocks(affine_block, meta=meta)
        result = z.compute()
    # The four chunks are views of one allocation: each launch uploads only its chunk's
    # bytes (issue 21), so every byte of the input goes up once, in one copy per chunk.
    assert after_persist == (4, a.nbytes, 0)
    assert (moved.h2d_count, moved.h2d_bytes) == (4, a.nbytes)
    assert (moved.d2h_count, moved.d2h_bytes) == (4, a.nbytes)  # each result chunk, once
    assert type(result) is sa.SmartArray
    np.testing.assert_array_equal(np.asarray(result), ((np.arange(64.0) * 2 + 1) * 2 + 1) * 2 + 1)


@pytest.mark.device
@pytest.mark.parametrize("writeable", [True, False], ids=["writable", "read-only"])
def test_a_block_read_bare_by_a_kernel_stays_valid_on_both_sides(writeable: bool) -> None:
    # docs/dask.md (issue 31): the advice said an argument passed as is counts as written.
    a = sa.SmartArray(np.arange(64.0))
    SEEN_BLOCKS.clear()
    with dask.config.set(scheduler="synchronous"), sa.track_transfers() as moved:
        x = da.from_array(a, chunks=16)
        if not writeable:  # read-only chunks (a broadcast view of each)
            x = x.map_blocks(read_only_block, meta=sa.empty(0))
        result = x.map_blocks(bare_affine_block, meta=sa.empty(0)).compute()
    # Inferred In: each block was uploaded and its host copy stayed valid (no download).
    assert [(loc, w) for loc, w in SEEN_BLOCKS] == [("both", writeable)] * 4
    assert (moved.h2d_count, moved.h2d_bytes) == (4, a.nbytes)
    np.testing.assert_array_equal(np.asarray(result), np.arange(64.0) * 2 + 1)


@pytest.mark.device
def test_benchmark_pipeline_on_an_in_process_worker() -> None:
    from distributed import Client, LocalCluster

    from smartarray.bench import dask as bench_dask

    data = np.linspace(0.0, 1.0, 256)
    with (
        # One thread: the simulator cannot run two kernels at once in one process.
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        run = bench_dask.run_pipeline(client, data, chunk=64, steps=3)
        copied = bench_dask.run_pipeline(client, data, chunk=64, steps=3, copy_first=True)
    (copied_worker,) = copied["workers"].values()
    # Chunks copied first: each has its own allocation and goes up alone.
    assert (copied_worker["h2d_count"], copied_worker["h2d_bytes"]) == (4, data.nbytes)
    (worker,) = run["workers"].values()
    # One allocation behind the four chunk views: each chunk's bytes uploaded once, by its
    # own first launch (issue 21), as when copied first; each result chunk down once.
    assert (worker["h2d_count"], worker["h2d_bytes"]) == (4, data.nbytes)
    assert (worker["d2h_count"], worker["d2h_bytes"]) == (4, data.nbytes)
    assert list(run["chunks_per_worker"].values()) == [4]
    table = bench_dask.table(
        [
            {
                "worker_processes": 1,
                "chunks_as": "views",
                "chunks": 4,
                "chunks_per_worker": [4],
                "seconds": run["seconds"],
                "minimum_bytes": 2 * data.nbytes,
                **worker,
            }
        ]
    )
    assert "| 1  " in table and str(2 * data.nbytes) in table


@pytest.mark.device
def test_from_array_of_device_data_uploads_nothing() -> None:
    a = affine_block(sa.SmartArray(np.arange(32.0)))  # current on the device only
    with dask.config.set(scheduler="synchronous"), sa.track_transfers() as moved:
        x = da.from_array(a, chunks=8)  # dask copies the array (on the device) and names it
        result = x.map_blocks(affine_block, meta=sa.empty(0)).compute()
    assert (moved.h2d_count, moved.d2h_count, moved.d2h_bytes) == (0, 4, a.nbytes)
    assert a.location == "gpu"
    np.testing.assert_array_equal(np.asarray(result), 2 * (2 * np.arange(32.0) + 1) + 1)


# --- a LocalCluster of two worker processes ---------------------------------------------------


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.device
def test_local_cluster_of_two_worker_processes() -> None:
    records = _Records()
    logging.getLogger("distributed").addHandler(records)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _run_on_cluster()
    finally:
        logging.getLogger("distributed").removeHandler(records)
    problems = [m for m in records.messages if "serializ" in m.lower() or "sizeof" in m.lower()]
    assert not problems, problems
    assert not [w for w in caught if "serializ" in str(w.message).lower()], caught


def _run_on_cluster() -> None:
    from distributed import Client, LocalCluster

    a = sa.SmartArray(np.arange(256.0))
    expected = 2 * np.arange(256.0) + 1
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            scheduler_port=0,
        ) as cluster,
        Client(cluster, timeout=60) as client,
    ):
        x = da.from_array(a, chunks=32)
        on_device = x.map_blocks(to_device_block, meta=a[:0])
        y = on_device.map_blocks(affine_block, meta=a[:0])
        (y,) = client.persist([y])
        total = client.compute(y.sum()).result(timeout=120)
        result = client.compute(y).result(timeout=120)
        squares = client.compute(x.map_blocks(squared_block, meta=a[:0])).result(timeout=120)
        stats = client.run(sa.transfer_stats)
        # from_array's chunks as they come (views of the array each worker unpickled), each
        # straight into a kernel: each worker uploads only its chunks' bytes (issue 21; one
        # flag per array uploaded each worker's whole copy, 1.50x on two workers).
        client.run(sa.reset_transfer_stats)
        direct = client.compute(x.map_blocks(affine_block, meta=a[:0])).result(timeout=120)
        direct_stats = client.run(sa.transfer_stats)
        logs = client.get_worker_logs()
    np.testing.assert_array_equal(np.asarray(direct), expected)
    assert sum(s.h2d_bytes for s in direct_stats.values()) == a.nbytes
    assert total == expected.sum()
    assert type(result) is sa.SmartArray
    np.testing.assert_array_equal(np.asarray(result), expected)
    np.testing.assert_array_equal(np.asarray(squares), np.arange(256.0) ** 2)
    assert len(stats) == 2
    # Every chunk went up once, on the worker that made it device-current; the kernel chunks
    # came down once each, for the sum (the second read of them needs no copy).
    assert sum(s.h2d_bytes for s in stats.values()) == a.nbytes
    assert sum(s.d2h_bytes for s in stats.values()) == a.nbytes
    bad = [m for lines in logs.values() for level, m in lines if level in ("WARNING", "ERROR")]
    assert not [m for m in bad if "serializ" in m.lower() or "sizeof" in m.lower()], bad
