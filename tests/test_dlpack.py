"""DLPack (issue #11, item 9): ``__dlpack__`` / ``__dlpack_device__`` and DLPack producers.

Host exports run in every tier; tests marked ``device`` check the flags and the ledger with
a device copy (simulator or GPU). Device-side (kDLCUDA) exports are in test_gpu.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import inc, vectorized_add
from numba import cuda
from numba.cuda.typing.typeof import Purpose
from numba.cuda.typing.typeof import typeof as cuda_typeof

import smartarray
from smartarray import SmartArray
from smartarray._interop import dlpack as dlpack

TIER = smartarray.tier()


class Producer:
    """A DLPack producer that is nothing else (no __array__, no buffer protocol)."""

    def __init__(self, data: np.ndarray, device: tuple[int, int] = (dlpack.KDL_CPU, 0)) -> None:
        self.data = data
        self.device = device

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def read_only(data: np.ndarray) -> np.ndarray:
    data = data.copy()
    data.flags.writeable = False
    return data


# --- host export -----------------------------------------------------------------------------


def test_from_dlpack_shares_the_host_copy() -> None:
    a = smartarray.asarray(np.arange(6.0))
    assert a.__dlpack_device__() == (dlpack.KDL_CPU, 0)
    x = np.from_dlpack(a)
    assert x.flags.writeable
    np.testing.assert_array_equal(x, np.arange(6.0))
    x[0] = 7.0  # zero-copy: the consumer writes the SmartArray's host copy
    assert a[0] == 7.0


def test_views_export_their_strides() -> None:
    m = smartarray.asarray(np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(np.from_dlpack(m.T), np.arange(12.0).reshape(3, 4).T)
    np.testing.assert_array_equal(np.from_dlpack(m[:, ::2]), np.arange(12.0).reshape(3, 4)[:, ::2])


def test_read_only_array_exports_read_only() -> None:
    r = SmartArray(read_only(np.arange(3.0)), copy=False)
    y = np.from_dlpack(r)  # asks for DLPack 1.0: the read-only flag is set
    assert not y.flags.writeable
    np.testing.assert_array_equal(y, [0.0, 1.0, 2.0])
    with pytest.raises(BufferError, match=r"max_version=\(1, 0\)"):
        r.__dlpack__()  # DLPack 0.x cannot say read-only
    writable = np.from_dlpack(r, copy=True)
    writable[0] = 5.0
    assert r[0] == 0.0


def test_copy_true_exports_a_snapshot() -> None:
    a = smartarray.asarray(np.arange(4.0))
    z = np.from_dlpack(a, copy=True)
    z[1] = 100.0
    assert a[1] == 1.0
    assert np.from_dlpack(a, copy=False)[1] == 1.0  # the array's own host buffer


def test_explicit_cpu_device() -> None:
    a = smartarray.asarray(np.arange(3.0))
    capsule = a.__dlpack__(dl_device=(dlpack.KDL_CPU, 0), max_version=(1, 0))
    assert "dltensor_versioned" in repr(capsule)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dl_device": (7, 0)}, BufferError, "kDLCPU"),
        ({"dl_device": 5}, TypeError, "dl_device must be"),
        ({"stream": 1}, ValueError, "stream=None"),
        ({"copy": 1}, TypeError, "copy must be"),
        ({"max_version": 1}, TypeError, "max_version must be"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    a = smartarray.asarray(np.arange(3.0))
    with pytest.raises(error, match=message):
        a.__dlpack__(**kwargs)
    np.testing.assert_array_equal(a.get("host"), [0.0, 1.0, 2.0])
    assert a.location == "host"


@pytest.mark.skipif(TIER == "gpu", reason="asks for a CUDA export where there is no GPU")
def test_cuda_export_needs_a_gpu() -> None:
    a = smartarray.asarray(np.arange(3.0))
    with pytest.raises(BufferError, match="no GPU"):
        a.__dlpack__(dl_device=(dlpack.KDL_CUDA, 0))


# --- adopting DLPack producers ---------------------------------------------------------------


def test_smartarray_from_a_host_producer() -> None:
    base = np.arange(5.0)
    copied = SmartArray(Producer(base))
    adopted = SmartArray(Producer(base), copy=False)
    base[0] = 9.0
    assert copied[0] == 0.0  # copy=True (the default) copies
    assert adopted[0] == 9.0  # copy=False adopts the producer's memory
    assert isinstance(copied, SmartArray) and copied.location == "host"


def test_read_only_producer_gives_a_read_only_array() -> None:
    adopted = SmartArray(Producer(read_only(np.arange(3.0))), copy=False)
    with pytest.raises(ValueError, match="read-only"):
        adopted[0] = 1.0
    assert SmartArray(Producer(read_only(np.arange(3.0))))[2] == 2.0


def test_smartarray_round_trip_through_dlpack() -> None:
    a = smartarray.asarray(np.arange(4.0))
    b = SmartArray(np.from_dlpack(a))
    np.testing.assert_array_equal(b.get("host"), a.get("host"))


def test_unsupported_producer_devices() -> None:
    with pytest.raises(BufferError, match="device type 7"):
        SmartArray(Producer(np.zeros(2), device=(7, 0)))
    if TIER != "gpu":
        with pytest.raises(BufferError, match="no GPU"):
            SmartArray(Producer(np.zeros(2), device=(dlpack.KDL_CUDA, 0)))


# --- typing and launches are unchanged (no DLPack export on the way) -------------------------


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every DLPack export."""
    calls: list[Any] = []
    original = dlpack.export

    def counting(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(dlpack, "export", counting)
    return calls


def test_typing_reads_numba_type_not_dlpack(exports: list[Any]) -> None:
    a = smartarray.asarray(np.arange(3.0))
    assert cuda_typeof(a, Purpose.argument) == a._numba_type_
    assert exports == []


@pytest.mark.device
def test_kernel_launch_costs_the_same(exports: list[Any]) -> None:
    a = smartarray.zeros(16)
    with smartarray.track_transfers() as t:
        inc[1, 32](a)
        inc[1, 32](a)
        np.testing.assert_array_equal(a.get("host"), np.full(16, 2.0))
    # zeros are made on the device where the kernel first uses them: only the result moves.
    assert (t.h2d_count, t.d2h_count) == (0, 1)
    assert exports == []


@pytest.mark.device
def test_numba_cuda_hints_around_smartarrays_act_as_intents(exports: list[Any]) -> None:
    x = smartarray.asarray(np.arange(8.0))
    y = smartarray.asarray(np.ones(8))  # (from data, so that In(y) has something to upload)
    out = smartarray.zeros(8)
    with smartarray.track_transfers() as t:
        vectorized_add[1, 8](cuda.In(x), cuda.In(y), cuda.Out(out))
        assert (x.location, y.location, out.location) == ("both", "both", "gpu")
        inc[1, 8](cuda.InOut(out))
        np.testing.assert_array_equal(out.get("host"), np.arange(8.0) + 2.0)
    assert (t.h2d_count, t.d2h_count) == (2, 1)  # x and y up, out down once
    assert exports == []


# --- flags and ledger with a device copy -----------------------------------------------------


def to_numpy(array: SmartArray, copy: bool | None = None) -> np.ndarray:
    """``np.from_dlpack`` asking for the host copy (on a GPU, a device-only array would
    otherwise export its device copy, which numpy cannot take)."""
    return np.from_dlpack(array, device="cpu", copy=copy)


@pytest.mark.device
def test_host_export_of_a_device_current_array() -> None:
    a = smartarray.zeros(8)
    inc[1, 32](a)  # only the device copy is current
    with smartarray.track_transfers() as t:
        x = to_numpy(a)
    assert (t.h2d_count, t.d2h_count) == (0, 1)
    np.testing.assert_array_equal(x, np.ones(8))
    assert a.location == "host"  # the consumer may write: the device copy is stale


@pytest.mark.device
def test_read_only_and_snapshot_exports_keep_the_device_copy() -> None:
    a = smartarray.zeros(16)
    inc[1, 32](a)
    diagonal = a.reshape(4, 4).diagonal()  # a read-only view
    with smartarray.track_transfers() as t:
        y = to_numpy(diagonal)
        z = to_numpy(a, copy=True)
    assert not y.flags.writeable
    np.testing.assert_array_equal(y, np.ones(4))
    np.testing.assert_array_equal(z, np.ones(16))
    # The diagonal reads its four elements' bytes in one copy across the device-only bytes
    # between them (0..128); those bytes keep their state, so the whole-array export reads
    # them again (8..120).
    assert [(r.direction, r.offset, r.nbytes) for r in t.records] == [
        ("d2h", 0, 128),
        ("d2h", 8, 112),
    ]
    assert a.location == "both"
    with smartarray.track_transfers() as t:
        inc[1, 32](a)  # the device copy is still current: no upload
    assert t.h2d_count == 0
