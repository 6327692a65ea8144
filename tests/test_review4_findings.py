"""Review 4 findings: programs where a SmartArray departed from numpy semantics at commit
05b6e5b, each reproduced by a test that failed there.

That commit let an element write ``a[i] = v`` with *any* value ``v`` go without the lock
(before, and again now: Python and numpy scalars only). When the host token changed during
such a write, the write was made again under the lock, converting ``v`` a second time. numpy
converts an assigned value once; a value whose conversion runs code (``__float__``, a
SmartArray's ``__array__``) then ran it twice, and the second conversion could need a copy
that ``no_transfers()`` refused after the first write had landed. Fixed: only scalars, whose
conversion runs no code and needs no copy, are written without the lock; any other value
takes the locked path, which converts it once.

The races are made deterministic as in tests/test_lockfree_writes.py (tests/inflight.py): a
host view whose ``__setitem__`` runs "another thread's" work around numpy's write. Had the
write taken the lock-free path, the hook would have run (``hooked.before``/``.after`` are
None once it ran).
"""

from __future__ import annotations

import numpy as np
import pytest
from inflight import host_current, in_another_thread, interleave
from numba import cuda

import smartarray as sa


@cuda.jit
def _add_one(x):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


class _LaunchesOnConversion:
    """A value whose conversion launches ``+1`` on ``target`` (and counts the conversions)."""

    def __init__(self, target: sa.SmartArray) -> None:
        self.target = target
        self.conversions = 0

    def __float__(self) -> float:
        self.conversions += 1
        _add_one[1, 32](self.target)
        return 100.0


@pytest.mark.device
def test_a_value_whose_conversion_launches_a_kernel_is_converted_once() -> None:
    # Got on 05b6e5b: the lock-free write converted the value (one launch, which dropped
    # the host token), saw the token changed, and wrote again under the lock, converting it
    # again: two launches, every element but a[3] one too high on both sides.
    # Expected (numpy): one conversion, then the element written.
    a = host_current(8)
    value = _LaunchesOnConversion(a)
    expected = np.arange(8.0)
    expected[0] = 0.0
    expected += 1
    expected[3] = 100.0
    a[3] = value
    assert value.conversions == 1
    np.testing.assert_array_equal(np.array(a), expected)
    np.testing.assert_array_equal(a.get("gpu").copy_to_host(), expected)


class _OneShot:
    """A value that can be converted once: its conversion uploads ``target``, a second one
    raises."""

    def __init__(self, target: sa.SmartArray) -> None:
        self.target = target
        self.conversions = 0

    def __float__(self) -> float:
        self.conversions += 1
        if self.conversions > 1:
            raise RuntimeError("converted twice")
        self.target.to_gpu()
        return 7.0


@pytest.mark.device
def test_a_value_converted_once_leaves_both_copies_right() -> None:
    # Got on 05b6e5b: RuntimeError from the second conversion after the first write landed:
    # the host held 7.0, the device the old 3.0, and both were labelled current (state
    # BOTH), so a.get('gpu') served the stale 3.0.
    a = host_current(8)
    value = _OneShot(a)
    a[3] = value
    assert value.conversions == 1
    assert np.array(a)[3] == 7.0
    assert a.get("gpu").copy_to_host()[3] == 7.0


@pytest.mark.device
def test_a_smartarray_value_raced_under_no_transfers_is_written_whole_or_not_at_all() -> None:
    # Thread A, under no_transfers(), writes a host-current 0-d SmartArray ``v`` into a
    # host-current ``a``. Thread B uploads ``a`` just before numpy's write (the host token
    # drops) and makes ``v`` device-current just after it (a kernel's write).
    # Got on 05b6e5b: the lock-free write landed (7.0 on the host); the write made again
    # under the lock had to download ``v``, which no_transfers() refused: TransferError, the
    # device still 3.0 and both copies labelled current.
    # Now ``v`` is not a scalar: the write takes the lock, converts ``v`` once (no copy: it
    # is current on the host) and labels the element; the hook never runs.
    a = host_current(8)
    v = sa.SmartArray(np.array(7.0))
    v.to_gpu()  # (current on both sides)
    hooked = interleave(
        a,
        before=lambda: in_another_thread(a.to_gpu),
        after=lambda: in_another_thread(lambda: v.mark_changed("gpu")),
    )
    with sa.no_transfers():
        a[3] = v
    assert hooked.before is not None  # (the lock-free path was not taken)
    assert np.array(a)[3] == 7.0
    assert a.get("gpu").copy_to_host()[3] == 7.0


@cuda.jit
def _read_first(x, out):  # type: ignore[no-untyped-def]
    if cuda.grid(1) == 0:
        out[0] = x[0]


class _SumOf:
    """A value whose conversion reads ``target`` (as a lazily evaluated expression would)."""

    def __init__(self, target: sa.SmartArray) -> None:
        self.target = target

    def __float__(self) -> float:
        return float(np.asarray(self.target).sum())


@pytest.mark.device
def test_a_value_that_reads_the_target_sees_it_as_before_the_write() -> None:
    # Another thread only reads ``a`` in a kernel (an upload) right after the write.
    # Got on 05b6e5b: a[3] = 53.0, the sum converted again after the first write had put
    # 28.0 in a[3]; no order of the write and a read-only kernel gives that.
    # Expected (numpy): the sum of the array before the write, 28.0.
    a = host_current(8)
    out = sa.SmartArray(np.zeros(1))
    hooked = interleave(
        a, after=lambda: in_another_thread(lambda: _read_first[1, 1](sa.In(a), out))
    )
    a[3] = _SumOf(a)
    assert hooked.after is not None  # (the lock-free path was not taken)
    assert np.array(a)[3] == 28.0
    assert a.get("gpu").copy_to_host()[3] == 28.0
