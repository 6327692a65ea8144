"""A launch held in flight, for the simulator tier's thread tests.

In Numba's CUDA simulator a kernel runs as Python in the launching thread, so a kernel that
waits on an event keeps its launch *in flight* (between the preparation of its arguments and
the end of the launch) while another thread works on the same arrays. The kernels below set
:data:`STARTED` once they have written, then wait (at most a second) for :data:`GATE`;
:func:`launch_while` runs one in a thread and the host work in another once it waits. A
kernel defined in a test module waits the same way by reading these two events (the
simulator resolves a kernel's globals in its own module: import them there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

STARTED = threading.Event()
GATE = threading.Event()


@cuda.jit
def add_then_wait(x, v):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] += v
    if i == 0:
        STARTED.set()
        GATE.wait(1.0)


@cuda.jit
def fill_then_wait(x, v):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.size:
        x[i] = v
    if i == 0:
        STARTED.set()
        GATE.wait(1.0)


@cuda.jit
def add_all_then_wait(x, v):  # type: ignore[no-untyped-def]
    # One thread writes every element, then holds the launch in flight (deterministic: the
    # kernel's writes are all on the device before the other thread acts).
    for i in range(x.size):
        x[i] += v
    STARTED.set()
    GATE.wait(1.0)


@cuda.jit
def fill_all_then_wait(x, v):  # type: ignore[no-untyped-def]
    for i in range(x.size):
        x[i] = v
    STARTED.set()
    GATE.wait(1.0)


def launch_while(kernel: Callable[[], Any], host: Callable[[], Any]) -> None:
    """Run ``kernel()`` in one thread and, once its kernel has written and waits, ``host()``
    in another; then let the kernel finish. Re-raises here what either thread raised."""
    STARTED.clear()
    GATE.clear()
    errors: list[BaseException] = []

    def run_kernel() -> None:
        try:
            kernel()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def run_host() -> None:
        try:
            assert STARTED.wait(30)
            host()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            GATE.set()

    threads = [threading.Thread(target=run_kernel), threading.Thread(target=run_host)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# --- a lock-free scalar write with another thread's work around it (smartarray._array's
# SmartArray.__setitem__, Allocation._host_token) ------------------------------------------


def in_another_thread(work: Callable[[], object]) -> None:
    """Run ``work()`` in a new thread and wait for it: "another thread's" work for the hooks
    below (where it must not run under this thread's ``no_transfers()``, or must wait for a
    lock this thread holds)."""
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


class Interleaved(np.ndarray):
    """A host view whose next lock-free write runs ``before()`` and ``after()`` around the
    write itself (numpy's, or the memoryview's of :class:`_InterleavedElements`): the two
    points where CPython may switch to another thread around it."""

    before: Callable[[], object] | None = None
    after: Callable[[], object] | None = None
    lock: Any = None  # (the allocation's: writes made under it are plain)

    def around(self, write: Callable[[], object]) -> None:
        """``write()`` between the hooks, if they are still set (once: the write made again
        under the lock is plain) and this thread does not hold the allocation's lock."""
        if self.lock is not None and self.lock._is_owned():
            write()
            return
        before, after = self.before, self.after
        self.before = self.after = None
        if before is not None:
            before()
        write()
        if after is not None:
            after()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.around(lambda: np.ndarray.__setitem__(self, key, value))


class _InterleavedElements:
    """The element writes' side of an :class:`Interleaved` view: ``hooks``' hooks run
    around a write through ``target`` (the array's memoryview or ndarray, as it is, so that
    the write itself is the one smartarray makes)."""

    def __init__(self, target: Any, hooks: Interleaved) -> None:
        self.target, self.hooks = target, hooks

    def __setitem__(self, key: Any, value: Any) -> None:
        def write() -> None:
            self.target[key] = value

        self.hooks.around(write)


def host_current(n: int) -> Any:
    """``SmartArray(np.arange(n) * 1.0)`` with element 0 set to 0, current on the host only,
    holding a host token: its next scalar writes are lock-free."""
    import smartarray as sa

    a = sa.SmartArray(np.arange(n, dtype=np.float64))
    a[0] = 0.0  # (the general path: the cached host views are made)
    a[0] = 0.0  # (the locked fast path, in state HOST: the host token is made)
    return a


def interleave(
    a: Any, before: Callable[[], object] | None = None, after: Callable[[], object] | None = None
) -> Interleaved:
    """Make ``a``'s next lock-free write run ``before()`` and ``after()`` around the write
    itself; returns the hooked view (``.before``/``.after`` are None once it ran)."""
    assert a._alloc._host_token is not None, "the next scalar write would not be lock-free"
    hooked = a._host_rw.view(Interleaved)
    hooked.before, hooked.after, hooked.lock = before, after, a._alloc.lock
    # (what the lock-free writes go through: elements, and slices)
    a._host_scalar = _InterleavedElements(a._host_scalar, hooked)
    a._host_rw = hooked
    return hooked
