"""Scalar host writes made without the lock (``Allocation._host_token``).

A scalar written into an array current only on the host (state HOST, nothing pending) takes
no lock: the writer reads the allocation's host token before and after numpy's write, and
writes again under the lock if it changed. Every test checks numpy's result on both sides.
The races are made deterministic by a host view whose ``__setitem__`` runs "another
thread's" work just before and just after numpy's write: the two points where CPython may
switch threads around it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import run_in_threads
from inflight import host_current, interleave
from numba import cuda

import smartarray as sa
from smartarray._core import ranges as _ranges

# --- host tier ---------------------------------------------------------------------------


def test_scalar_writes_after_the_first_take_no_lock() -> None:
    a = host_current(16)
    done: list[bool] = []

    def write() -> None:
        a[3] = 7.0  # would wait for the lock, held below, if it took it
        a[4:6] = 2
        done.append(True)

    with a._alloc.lock:
        writer = threading.Thread(target=write)
        writer.start()
        writer.join(10)
        finished_while_locked = not writer.is_alive()
    writer.join()
    assert finished_while_locked and done
    a[np.int64(7)] = np.float32(1.5)  # (a numpy integer key: the locked path)
    expected = np.arange(16.0)
    expected[[0, 3, 4, 5, 7]] = [0.0, 7.0, 2.0, 2.0, 1.5]
    np.testing.assert_array_equal(np.asarray(a), expected)


def test_other_values_and_keys_take_the_locked_path() -> None:
    # Values that are not scalars (text, ndarrays, sequences) and other keys are written
    # under the lock, with numpy's result.
    a = host_current(8)
    ref = np.arange(8.0)
    ref[0] = 0.0
    for key, value in [(1, "2.5"), (2, np.array(4.0)), (slice(3, 5), [1.0, 2.0]), ((6,), 9)]:
        a[key] = value
        ref[key] = value
    np.testing.assert_array_equal(np.asarray(a), ref)
    with pytest.raises(IndexError):
        a[8] = 1.0  # numpy's error, nothing written
    with pytest.raises(ValueError):
        a[1] = "x"
    np.testing.assert_array_equal(np.asarray(a), ref)


def test_a_label_change_drops_the_token() -> None:
    a = host_current(8)
    token = a._alloc._host_token
    a.mark_changed("host")  # (a label change: the token is not kept across it)
    assert a._alloc._host_token is None
    a[1] = 5.0  # under the lock: a new token, never the old one
    assert a._alloc._host_token is not None and a._alloc._host_token is not token


# --- the simulator: uploads, kernels and downloads between the check and the write --------

device = pytest.mark.device


@cuda.jit
def set_at(x, i, v):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        x[i] = v


@cuda.jit
def add_all(x, v):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        for i in range(x.size):
            x[i] += v


def _device_values(a: sa.SmartArray) -> np.ndarray:
    return np.asarray(a.get("gpu").copy_to_host())


@device
@pytest.mark.parametrize("key", [3, slice(2, 5)], ids=["element", "slice"])
def test_an_upload_just_before_the_write(key: Any) -> None:
    # Another thread copies the array to the device after the writer saw the token and
    # before numpy writes: the copy has the old value, and both copies are labelled
    # current. The writer finds the token gone and writes again, labelling its bytes.
    a = host_current(8)
    interleave(a, before=a.to_gpu)
    a[key] = 7.0
    ref = np.arange(8.0)
    ref[0] = 0.0
    ref[key] = 7.0
    np.testing.assert_array_equal(np.asarray(a), ref)
    np.testing.assert_array_equal(_device_values(a), ref)


@device
def test_an_upload_just_after_the_write() -> None:
    a = host_current(8)
    interleave(a, after=a.to_gpu)
    a[3] = 7.0
    ref = np.arange(8.0)
    ref[0], ref[3] = 0.0, 7.0
    np.testing.assert_array_equal(_device_values(a), ref)
    np.testing.assert_array_equal(np.asarray(a), ref)


@device
@pytest.mark.parametrize("gap", [None, 0], ids=["default-gap", "gap-0"])
def test_a_kernel_a_download_and_a_new_token_around_the_write(gap: int | None) -> None:
    # Before the write: a kernel writes element 5 on the device (the whole array is then
    # current there only). numpy writes element 3 into the stale host copy. After it: a read
    # downloads the array (element 3 back to the device's value), the host is declared
    # written, and a locked write makes a new token. The writer's token is not the new one:
    # it writes again, and element 3 keeps its value (numpy: no write is lost).
    before_gap = _ranges.coalesce_bytes()
    if gap is not None:
        sa.set_coalesce_bytes(gap)
    try:
        a = host_current(8)

        def after() -> None:
            assert float(a.sum()) >= 0  # a host read: downloads
            a.mark_changed("host")
            a[6] = 2.0  # under the lock (no token after the label change): a new token

        interleave(a, before=lambda: set_at[1, 1](a, 5, 9.0), after=after)
        a[3] = 7.0
    finally:
        sa.set_coalesce_bytes(before_gap)
    ref = np.arange(8.0)
    ref[0], ref[3], ref[5], ref[6] = 0.0, 7.0, 9.0, 2.0
    np.testing.assert_array_equal(np.asarray(a), ref)
    np.testing.assert_array_equal(_device_values(a), ref)


@device
def test_a_kernel_on_other_elements_while_the_write_lands() -> None:
    # The kernel's launch (upload, then its device write of element 5) happens between
    # the check and the write; nothing reads the host meanwhile. Element 3 is current on
    # the host only afterwards, element 5 on the device only.
    a = host_current(8)
    interleave(a, before=lambda: set_at[1, 1](a, 5, 9.0))
    a[3] = 7.0
    ref = np.arange(8.0)
    ref[0], ref[3], ref[5] = 0.0, 7.0, 9.0
    np.testing.assert_array_equal(_device_values(a), ref)
    np.testing.assert_array_equal(np.asarray(a), ref)


def _kernel_on_odds_or_host_writes_to_evens(a: sa.SmartArray) -> Callable[[int], None]:
    odds = a[1::2]

    def work(k: int) -> None:
        if k == 0:
            add_all[1, 1](odds, 1.0)
        else:
            for i in range(0, a.shape[0], 2):
                a[i] = -1.0

    return work


@device
def test_element_writes_racing_a_kernel_on_the_other_parity() -> None:
    # Real threads: one launches a kernel adding 1 to the odd elements, the other writes the
    # even ones one at a time (lock-free after the first), from a host-current start.
    for trial in range(10):
        a = host_current(200)
        run_in_threads(_kernel_on_odds_or_host_writes_to_evens(a), 2)
        ref = np.arange(200.0)
        ref[0::2] = -1.0
        ref[1::2] += 1.0
        np.testing.assert_array_equal(np.array(a), ref, err_msg=f"trial {trial}")
        np.testing.assert_array_equal(_device_values(a), ref, err_msg=f"trial {trial}")


@device
def test_a_write_landing_while_an_upload_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a GPU the upload's copy runs without the GIL: another thread's write can land
    # after the copy read the element and before the upload labels it current on both
    # sides. The upload drops the token before it copies, so that write waits for the lock
    # (here: the uploading thread gives it 0.2 s, then goes on) and labels its bytes.
    from smartarray._core import transfer

    a = host_current(8)
    copy = transfer.host_to_device
    writer_done = threading.Event()

    def write() -> None:
        a[3] = 7.0
        writer_done.set()

    writer = threading.Thread(target=write)

    def host_to_device(*args: Any, **kwargs: Any) -> Any:
        result = copy(*args, **kwargs)  # (the old value of element 3 is on the device)
        writer.start()
        writer_done.wait(0.2)
        return result

    monkeypatch.setattr(transfer, "host_to_device", host_to_device)
    a.to_gpu()
    monkeypatch.setattr(transfer, "host_to_device", copy)
    writer.join()
    ref = np.arange(8.0)
    ref[0], ref[3] = 0.0, 7.0
    np.testing.assert_array_equal(_device_values(a), ref)
    np.testing.assert_array_equal(np.asarray(a), ref)
