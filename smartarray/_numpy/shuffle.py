"""numpy's in-place shuffles on SmartArrays: the same order as on an ndarray, no duplicated rows.

``Generator.shuffle(x)``, ``RandomState.shuffle(x)`` and ``np.random.shuffle(x)`` shuffle an
ndarray in its buffer. Any other object (a SmartArray is not an ndarray subclass, and
``shuffle`` is neither a ufunc nor a NEP-18 function, so it cannot be redirected) takes
numpy's generic path, compiled Cython that runs no Python frame of its own::

    n = len(x)
    warnings.warn("you are shuffling a 'SmartArray' object which is not a subclass of "
                  "'Sequence'; ...", UserWarning)   # (Generator: before checking axis == 0)
    for i in reversed(range(1, n)):                   # under the generator's lock
        j = random_interval(bitgen, i)
        x[i], x[j] = x[j], x[i]

For a 1-d numeric array ``x[j]`` is a scalar and the swap is right. For an n-d array ``x[j]``
is a view of row ``j``, overwritten by the first assignment before the second one reads it:
rows get duplicated (a 2-d ndarray given to ``random.shuffle`` is corrupted the same way). A
1-d structured array has the same problem: its elements (``numpy.void``) are views too.

How this module makes the swap correct, without changing ordinary indexing:

1. **Learning that a shuffle starts.** A filter at the front of ``warnings.filters`` has as its
   *message* an object with a ``match(text)`` method: CPython's ``_warnings.c``
   (``check_matched``; tested on 3.11, the same rule in the sources up to 3.14) calls
   ``message.match(text)`` for any filter message that is not a plain ``str`` (compiled regexes
   are just the usual case), and so does the pure-Python ``warnings`` fallback. (Not covered:
   3.14's context-aware warnings, on by default only in free-threaded builds, where
   ``catch_warnings`` keeps its filters in a context variable that ``warnings.filters`` does not
   reach.) For numpy's text about the SmartArray whose ``len()`` was taken last in this thread,
   ``match`` starts the shuffle mode and returns True: the filter's action, ``"ignore"``,
   handles the warning (the user sees nothing; an ``"ignore"`` action records nothing in
   ``__warningregistry__``, so every later shuffle reaches the filter again). Any other text
   returns False and the next filters apply. ``SmartArray.__len__`` (numpy's first call) puts
   the filter back at the front whenever something got in front of it (``catch_warnings``,
   ``simplefilter('error')``, pytest's per-test filters), and records its array in a
   thread-local slot (a weak reference, only for arrays that need the mode).
2. **The shuffle mode.** It lives on the array being shuffled (``array._shuffle``) and is tied to
   the exact in-progress call: the thread, the Python frame that called ``shuffle`` (compiled
   code pushes no frame, so that is also the caller ``__getitem__`` sees) with its current
   instruction (``f_lasti``), and the number of reads numpy's loop makes, ``2 * (n - 1)``.
   While it holds, ``array[i]`` (an integer key, from that frame at that instruction) returns a
   copy of row ``i`` as an ndarray; numpy then writes it back with ``array[i] = row``, the
   ordinary ``__setitem__``, which keeps the validity flags right (the host copy is made current
   once, by the first read, and marked written). After the last read the mode ends; a read from
   any other frame or instruction of the same thread (the shuffle stopped with an exception)
   ends it too and is served as usual, a view. Reads from other threads are served as usual
   and leave the mode alone.
3. **What takes no mode.** 1-d numeric arrays (numpy's swap of scalars is right). Read-only
   arrays are refused when the warning is matched, before numpy reads or writes anything, with
   numpy's ``ValueError: array is read-only`` (raised from ``match``, it propagates out of
   numpy's ``shuffle``): numpy's first ``x[i] = ...`` would refuse an array of two items or
   more, but one of 0 or 1 items is never written, and numpy refuses a read-only ndarray of
   any length.

The cost when no shuffle runs: ``len()`` checks the front filter and stores a reference in a
thread-local slot; integer reads of n-d arrays (never on the element fast path) test one
attribute; the 1-d element fast path is untouched (for a 1-d structured array the mode clears
the cached host view the fast path needs, so reads take the slower path while shuffling).

Why not patch numpy's functions instead: ``np.random.shuffle`` is a bound method of a hidden
global ``RandomState`` and every ``Generator`` and ``RandomState`` has its own method, all
compiled; wrapping them would replace numpy's objects for everybody.
"""

from __future__ import annotations

import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

import numpy as np

from .. import _hooks
from .._array import SmartArray
from .fastpath import readable_host

_TEXT_PREFIX = "you are shuffling a '"
_TEXT_SUFFIX = "' object which is not a subclass of 'Sequence'"

NOT_SHUFFLING = _hooks.NOT_SHUFFLING  # returned by shuffled_read for an ordinary read


class _LastLength(threading.local):
    """Per thread: the SmartArray whose ``len()`` was taken last (a weak reference), or its
    class when it needs no shuffle mode."""

    entry: Any = None


last_length = _LastLength()
_weak_reference = weakref.ref


class ShuffleCall:
    """The shuffle mode of one array: which call of numpy's generic shuffle is running."""

    __slots__ = ("frame", "instruction", "reads_left", "thread")

    def __init__(self, frame: FrameType, thread: int, reads_left: int) -> None:
        self.frame = frame
        self.instruction = frame.f_lasti
        self.thread = thread
        self.reads_left = reads_left


class _ShuffleWarningMatcher:
    """The *message* of the filter: ``match(text)`` recognises numpy's shuffle warning about
    the SmartArray whose ``len()`` was just taken, and starts that array's shuffle mode."""

    def match(self, text: str) -> bool:
        if not text.startswith(_TEXT_PREFIX):
            return False
        entry = last_length.entry
        if entry is None:
            return False
        last_length.entry = None  # one warning per len(): a stale entry never matches twice
        array = entry if isinstance(entry, type) else entry()
        if array is None:
            return False
        cls = array if isinstance(array, type) else type(array)
        if not text.startswith(f"{_TEXT_PREFIX}{cls.__name__}{_TEXT_SUFFIX}"):
            return False
        if not isinstance(array, type):
            if not array._writeable:  # (numpy refuses a read-only ndarray of any length)
                raise ValueError(
                    f"array is read-only: {array._alloc.label} cannot be shuffled in place "
                    "(nothing was changed); shuffle a writable copy, a.copy(), or use "
                    "rng.permutation(a), which returns a shuffled copy"
                )
            _start(array, _caller_frame())
        return True

    def __repr__(self) -> str:
        return "<smartarray: numpy's shuffle warning for a SmartArray (shuffled correctly)>"


def _caller_frame() -> FrameType:
    """The frame that called numpy's ``shuffle``: the first one outside this module and the
    pure-Python ``warnings`` module (CPython's C ``_warnings`` pushes none)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") in ("warnings", __name__):
        frame = frame.f_back
    return frame


def _start(array: SmartArray, frame: FrameType) -> None:
    """Put ``array`` in the shuffle mode for the call running in ``frame``."""
    reads = 2 * (array._shape[0] - 1)
    if reads <= 0:
        array._shuffle = None
        return
    array._shuffle = ShuffleCall(frame, threading.get_ident(), reads)
    if len(array._shape) == 1:  # structured: the element fast paths need these cached
        array._host_ro = array._host_1d = None  # views, and would hand out numpy.void views


def shuffled_read(array: SmartArray, key: int, caller: FrameType) -> Any:
    """``array[key]`` while ``array`` is in the shuffle mode: a copy of the item if ``caller``
    (the frame calling ``__getitem__``) is running the shuffle call, else
    :data:`NOT_SHUFFLING` (the mode ends if the read comes from the shuffling thread)."""
    call = array._shuffle
    if call is None or call.thread != threading.get_ident():
        return NOT_SHUFFLING
    if caller is not call.frame or caller.f_lasti != call.instruction:
        array._shuffle = None
        return NOT_SHUFFLING
    host = readable_host(array)  # the host copy, if it is current: no lock needed to read
    if host is None:
        with array._alloc.lock:
            host = array._host_view(write=False)  # made current (downloaded) once
    item = host[key]  # numpy's IndexError for a bad key
    # A row is copied; a numpy.void (1-d structured) is read from a fancy-indexed copy:
    # ``void.copy()`` and ``np.array(void)`` would still share memory with the array.
    item = item.copy() if isinstance(item, np.ndarray) else host[[key]][0]
    call.reads_left -= 1
    if not call.reads_left:
        array._shuffle = None
    elif len(array._shape) == 1:
        array._host_ro = array._host_1d = None  # keep the element fast paths (1-d) off
    return item


def _arm() -> None:
    """Put the filter at the front of ``warnings.filters`` (once, without duplicates)."""
    filters: list[Any] = warnings.filters  # type: ignore[assignment]  # (a list at run time)
    while SHUFFLE_FILTER in filters:
        filters.remove(SHUFFLE_FILTER)
    filters.insert(0, SHUFFLE_FILTER)
    mutated: Callable[[], None] | None = getattr(warnings, "_filters_mutated", None)
    if mutated is None:  # Python 3.13+
        mutated = getattr(warnings, "_filters_mutated_lock_held", None)
    if mutated is not None:
        mutated()


def note_length(array: SmartArray) -> None:
    """Called by ``len(array)``: keep the filter first and remember ``array`` (this thread)."""
    filters = warnings.filters
    if not filters or filters[0] is not SHUFFLE_FILTER:
        _arm()
    # Only writable arrays whose items are views (n-d, or 1-d structured) need the mode:
    # numpy's swap of scalars is right. A read-only array is refused by the matcher.
    if not array._writeable or len(array._shape) > 1 or array._dtype.kind == "V":
        last_length.entry = _weak_reference(array)
    else:
        last_length.entry = type(array)


SHUFFLE_FILTER: tuple[str, Any, type[Warning], None, int] = (
    "ignore",
    _ShuffleWarningMatcher(),
    UserWarning,
    None,
    0,
)

_hooks.note_length = note_length
_hooks.shuffled_read = shuffled_read
