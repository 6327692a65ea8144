"""Review 3 findings: programs where a SmartArray departed from numpy semantics (or from
smartarray's own documented contract) at commit 7a10a2c (the lock-free scalar writes), each
reproduced by a test that failed there: a refused write half-made (fixed: only writes of an
exact extent go without the lock) and a structured element that is read-only (now a
documented difference, whose documented alternatives are tested).

The races are made deterministic as in tests/test_lockfree_writes.py: a host view whose
``__setitem__`` runs "another thread's" work just before numpy's write (in a real thread
where the work must not run under this thread's ``no_transfers()``).
"""

from __future__ import annotations

import numpy as np
import pytest
from inflight import Interleaved, host_current, in_another_thread, interleave
from numba import cuda

import smartarray as sa


def _kernel_between_check_and_write(a: sa.SmartArray) -> Interleaved:
    """Thread B's launch of ``set_at`` on the second half of ``a`` (its first element -1),
    run after ``a``'s next lock-free write saw the host token and before numpy writes."""
    half = a[a.shape[0] // 2 :]
    return interleave(a, before=lambda: in_another_thread(lambda: set_at[1, 1](half, 0, -1.0)))


@cuda.jit
def set_at(x, i, v):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        x[i] = v


@pytest.mark.device
def test_a_refused_strided_write_under_no_transfers_changes_nothing() -> None:
    # Thread A: ``with no_transfers(): a[::2] = 7.0`` on a host-current array (its scalar
    # writes are lock-free). Thread B launches a kernel on ``a[n//2:]`` after A saw the host
    # token and before numpy's write. A's write then needs the device bytes of the second
    # half (a strided slice of more than 64 elements is not an exact extent), a download
    # no_transfers() refuses: TransferError.
    # Expected (numpy, and no_transfers()'s contract "the copy is refused before it starts,
    # so data and validity flags are unchanged"): either the write happened (every even
    # element 7.0) or it raised and changed nothing (the array as the kernel left it).
    # Got on 7a10a2c: TransferError, and the even elements of the first half are 7.0 while
    # those of the second half are not: half of a refused write landed (the lock-free
    # write lands first; the redo under the lock, SmartArray.__setitem__'s general path,
    # raises after it).
    # Fixed: only writes whose bytes are an exact extent (an element, or a slice with no
    # step, of a contiguous 1-d numeric array) go without the lock, so that writing again
    # under the lock never needs a copy; ``a[::2]`` takes the lock, and no other thread
    # comes between its check and its write (the hook below is never called).
    n = 400
    a = host_current(n)
    hooked = _kernel_between_check_and_write(a)
    before = np.arange(n, dtype=np.float64)
    before[0] = 0.0
    before[n // 2] = -1.0
    after = before.copy()
    after[::2] = 7.0
    try:
        with sa.no_transfers():
            a[::2] = 7.0
        raised = False
    except sa.TransferError:
        raised = True
    assert hooked.before is not None and not raised  # (the lock-free path was not taken)
    host = np.array(a)
    device = np.asarray(a.get("gpu").copy_to_host())
    np.testing.assert_array_equal(host, device)
    np.testing.assert_array_equal(host, before if raised else after)


@pytest.mark.device
def test_a_contiguous_write_raced_under_no_transfers_is_made_whole() -> None:
    # The same race on a lock-free write (a slice with no step): the kernel's launch comes
    # between the check and numpy's write; the write made again under the lock needs no
    # copy (its bytes are all overwritten), so no_transfers() has nothing to refuse, and the
    # write is whole, after the kernel's (numpy: the later write wins).
    n = 400
    a = host_current(n)
    hooked = _kernel_between_check_and_write(a)
    with sa.no_transfers():
        a[0:n] = 7.0
    assert hooked.before is None  # (the lock-free path was taken, and raced)
    np.testing.assert_array_equal(np.array(a), np.full(n, 7.0))
    np.testing.assert_array_equal(np.asarray(a.get("gpu").copy_to_host()), np.full(n, 7.0))


def test_an_element_of_a_structured_array_is_read_only_and_the_documented_writes_work() -> None:
    # numpy: ``v = a[0]`` of a 1-d structured array is a numpy.void *view* of the element,
    # and ``v['x'] = 5.0`` writes the array. A SmartArray's element is read from the host
    # copy without marking it written, so it is read-only: the write raises numpy's error
    # and changes nothing (found on 7a10a2c, older than it; now a documented difference,
    # docs/ndarray-differences.md "Smaller differences"). The documented ways to write work.
    dtype = np.dtype([("x", "f8"), ("y", "i4")])
    ref = np.zeros(3, dtype=dtype)
    ref["x"][0] = 5.0
    ref[1:2]["x"] = 6.0
    ref[2]["y"] = 7
    a = sa.SmartArray(np.zeros(3, dtype=dtype))
    v = a[0]
    assert isinstance(v, np.void)
    with pytest.raises(ValueError, match="read-only"):
        v["x"] = 5.0
    np.testing.assert_array_equal(np.asarray(a), np.zeros(3, dtype=dtype))
    a["x"][0] = 5.0
    a[1:2]["x"] = 6.0
    np.asarray(a)[2]["y"] = 7  # (a write through the watched host view)
    np.testing.assert_array_equal(np.array(a), ref)
