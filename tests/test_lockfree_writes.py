"""Scalar host writes made without the lock (``Allocation._host_token``).

A scalar written into a contiguous 1-d numeric array current only on the host (state HOST,
nothing pending), as an element or a slice with no step, takes no lock: the writer reads the
allocation's host token before and after numpy's write, and writes again under the lock if
it changed. Every test checks numpy's result on both sides. The races are made deterministic
by a host view whose ``__setitem__`` runs "another thread's" work just before and just after
numpy's write: the two points where CPython may switch threads around it (tests/inflight.py).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import run_in_threads
from hypothesis import given, settings
from hypothesis import strategies as st
from inflight import host_current, interleave
from numba import cuda

import smartarray as sa
from smartarray._core import ranges as _ranges

# --- host tier ---------------------------------------------------------------------------


def _finishes_while_locked(a: sa.SmartArray, write: Callable[[], object]) -> bool:
    """Whether ``write()``, run in another thread while this one holds ``a``'s lock, finishes
    within 0.3 s (it then took no lock); it finishes in any case before this returns."""
    writer = threading.Thread(target=write)
    with a._alloc.lock:
        writer.start()
        writer.join(0.3)
        finished = not writer.is_alive()
    writer.join()
    return finished


@pytest.mark.parametrize(
    ("key", "value", "lock_free"),
    [
        (3, 7.0, True),
        (3, 7, True),
        (3, np.float32(1.5), True),
        (slice(4, 6), 2.0, True),
        (slice(None), 2.0, True),
        (slice(0, 8, 2), 2.0, False),  # (a step: the bytes are not one extent)
        (np.int64(3), 7.0, False),  # (a numpy integer key)
        ((3,), 7.0, False),
        (3, "2.5", False),  # (text: converted by smartarray first)
        (3, np.array(4.0), False),
        (slice(3, 5), [1.0, 2.0], False),
    ],
)
def test_which_writes_take_no_lock(key: Any, value: Any, lock_free: bool) -> None:
    # Each write gives numpy's result; only scalars into an element or a slice with no step
    # go without the lock.
    a = host_current(16)
    ref = np.arange(16.0)
    ref[0] = 0.0
    ref[key] = value

    def write() -> None:
        a[key] = value

    assert _finishes_while_locked(a, write) is lock_free
    np.testing.assert_array_equal(np.asarray(a), ref)


@pytest.mark.parametrize(
    "make",
    [
        lambda: sa.SmartArray(np.arange(16.0))[::2],  # (not contiguous)
        lambda: sa.SmartArray(np.zeros((4, 4))),  # (2-d: a row)
        lambda: sa.SmartArray(np.zeros(16, dtype=[("x", "f8")])),  # (not numeric)
    ],
    ids=["strided", "2-d", "structured"],
)
def test_arrays_whose_element_writes_take_the_lock(make: Callable[[], sa.SmartArray]) -> None:
    a = make()
    a[1] = 1.0
    a[1] = 1.0  # (a token, if the array could have one)
    ref = np.asarray(a).copy()
    ref[2] = 3.0

    def write() -> None:
        a[2] = 3.0

    assert not _finishes_while_locked(a, write)
    np.testing.assert_array_equal(np.asarray(a), ref)


def test_bad_writes_raise_numpys_errors_and_change_nothing() -> None:
    a = host_current(8)
    ref = np.arange(8.0)
    ref[0] = 0.0
    with pytest.raises(IndexError):
        a[8] = 1.0
    with pytest.raises(ValueError):
        a[1] = "x"
    b = sa.SmartArray(np.zeros(4, dtype=np.int8))
    b[0] = 1
    b[0] = 1  # (the token: the next writes are lock-free)
    with pytest.raises(OverflowError):
        b[1] = 1000  # numpy's error, before anything is written
    np.testing.assert_array_equal(np.asarray(a), ref)
    np.testing.assert_array_equal(np.asarray(b), [1, 0, 0, 0])


_ELEMENT_DTYPES = ["<f8", ">f8", "f4", "f2", "i1", "i8", "u1", "c16", "?", "M8[s]", "m8[D]"]
_ELEMENT_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.sampled_from([0.0, -0.0, float("nan"), -float("nan"), 2.0**1023, 5e-324]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**53 + 1, -(2**63) - 1, 2**64, 10**400, -(10**400), 255, 256, -1]),
    st.booleans(),
)


def _outcome(write: Callable[[], object], target: Any) -> tuple[Any, ...]:
    """What ``write()`` did: ``target``'s bytes and the warnings, or the error raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            write()
        except Exception as exc:
            error: tuple[str, str] | None = (type(exc).__name__, str(exc))
        else:
            error = None
    return error, np.asarray(target).tobytes(), [w.category.__name__ for w in caught]


@settings(max_examples=300, deadline=None)
@given(
    dtype=st.sampled_from(_ELEMENT_DTYPES),
    key=st.one_of(st.integers(-10, 9), st.sampled_from([2**63, -(2**70)])),
    value=_ELEMENT_VALUES,
)
def test_lock_free_element_writes_store_what_numpy_stores(dtype: str, key: int, value: Any) -> None:
    # A Python float or int written into an element of a host-current array goes without the
    # lock: for native float64 through a memoryview of the host copy, else through numpy.
    # Either way the bytes written, the error (type and message) and the warnings are
    # numpy's, and a refused write changes nothing.
    start = (np.arange(8) % 2).astype(dtype)  # (datetime64: its first seconds)
    a = sa.SmartArray(start.copy())
    a[1] = 1  # (element 1 is 1 already, in every dtype)
    a[1] = 1  # (the host token: the next element writes are lock-free)
    assert a._alloc._host_token is not None
    if dtype == "<f8":
        assert type(a._host_scalar) is memoryview  # (the path under test)
    ref = start.copy()

    def write_ref() -> None:
        ref[key] = value

    def write_a() -> None:
        a[key] = value

    assert _outcome(write_a, a) == _outcome(write_ref, ref)
    assert a.is_valid("host") and not a.is_valid("gpu")


def test_a_float64_view_at_an_offset_writes_its_own_elements_through_its_memoryview() -> None:
    a = sa.SmartArray(np.zeros(8))
    v = a[2:6]
    v[0] = 1.0
    v[0] = 1.0  # (the token)
    assert type(v._host_scalar) is memoryview
    v[1] = 2.0
    v[-1] = 3
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        v[4] = 9.0
    np.testing.assert_array_equal(np.asarray(a), [0, 0, 1, 2, 0, 3, 0, 0])


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
