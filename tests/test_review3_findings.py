"""Review 3 findings: programs where a SmartArray departs from numpy semantics (or from
smartarray's own documented contract) at commit 7a10a2c, each reproduced by a test that
fails there.

The races are made deterministic as in tests/test_lockfree_writes.py: a host view whose
``__setitem__`` runs "another thread's" work just before numpy's write (in a real thread
where the work must not run under this thread's ``no_transfers()``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numba import cuda

import smartarray as sa


class _Interleaved(np.ndarray):
    """A host view whose next write runs ``before()`` and ``after()`` around numpy's."""

    before: Callable[[], object] | None = None
    after: Callable[[], object] | None = None

    def __setitem__(self, key: Any, value: Any) -> None:
        before, after = self.before, self.after
        self.before = self.after = None
        if before is not None:
            before()
        super().__setitem__(key, value)
        if after is not None:
            after()


def _interleave(
    a: sa.SmartArray,
    before: Callable[[], object] | None = None,
    after: Callable[[], object] | None = None,
) -> None:
    assert a._alloc._host_token is not None, "the next scalar write would not be lock-free"
    hooked = a._host_rw.view(_Interleaved)  # type: ignore[union-attr]
    hooked.before, hooked.after = before, after
    a._host_rw = hooked


def _in_another_thread(work: Callable[[], object]) -> None:
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def _host_current(n: int) -> sa.SmartArray:
    a = sa.SmartArray(np.arange(n, dtype=np.float64))
    a[0] = 0.0  # (the general path: the cached host view is made)
    a[0] = 0.0  # (the locked fast path, in state HOST: the host token is made)
    return a


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
    n = 400
    a = _host_current(n)
    _interleave(a, before=lambda: _in_another_thread(lambda: set_at[1, 1](a[n // 2 :], 0, -1.0)))
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
    host = np.array(a)
    device = np.asarray(a.get("gpu").copy_to_host())
    np.testing.assert_array_equal(host, device)
    np.testing.assert_array_equal(host, before if raised else after)


def test_an_element_of_a_structured_array_is_a_writable_view_as_in_numpy() -> None:
    # numpy: ``v = a[0]`` of a 1-d structured array is a numpy.void *view* of the element;
    # ``v['x'] = 5.0`` writes the array (a becomes [(5.0, 0), (0.0, 0), (0.0, 0)]).
    # Got on 7a10a2c (and before: not from the recent changes): ValueError "assignment
    # destination is read-only", because every element read (the fast paths of
    # SmartArray.__getitem__, smartarray/_array.py:944-971, and the general path,
    # _array.py:1037-1042) indexes the cached read-only host view (_host_1d / _host_ro).
    # docs/ndarray-differences.md does not list this difference.
    dtype = np.dtype([("x", "f8"), ("y", "i4")])
    ref = np.zeros(3, dtype=dtype)
    ref[0]["x"] = 5.0
    a = sa.SmartArray(np.zeros(3, dtype=dtype))
    v = a[0]
    v["x"] = 5.0
    np.testing.assert_array_equal(np.asarray(a), ref)
