"""numpy's in-place shuffles refuse SmartArrays instead of corrupting them.

``Generator.shuffle`` and the legacy ``np.random.shuffle`` shuffle ndarrays in their buffer,
but any other object through the generic swap ``x[i], x[j] = x[j], x[i]``. For an array
with view semantics (a 2-d SmartArray, like a 2-d ndarray in that swap) ``x[i]`` is a view,
overwritten by the first assignment before the second one reads it: rows get duplicated.
numpy cannot be taught to take its ndarray path for another type (``shuffle`` is not a
NEP-18 function and checks ``isinstance(x, np.ndarray)``), and SmartArray cannot tell the
swap from ordinary view use. But numpy warns before it swaps anything, naming the type:

    UserWarning: you are shuffling a 'SmartArray' object which is not a subclass of
    'Sequence'; `shuffle` is not guaranteed to behave correctly. ...

A warnings filter turns exactly that warning into an exception, so the shuffle stops before
touching the data. ``len()`` (the first thing ``shuffle`` asks) makes sure the filter is the
first one, so that other filters (``simplefilter('ignore')``, the filters pytest sets up for
each test) cannot hide it. The fix for users: ``x[...] = rng.permutation(x)`` (the same
permutation as ``rng.shuffle`` on an ndarray, for the same generator state).
"""

from __future__ import annotations

import warnings
from typing import Any

_MESSAGE = r"you are shuffling a 'SmartArray' object"
_guard: Any = None


def ensure_shuffle_guard() -> None:
    """Make the filter turning numpy's shuffle warning for SmartArrays into an error first."""
    global _guard
    filters = warnings.filters
    if _guard is not None and filters and filters[0] == _guard:
        return
    warnings.filterwarnings("error", message=_MESSAGE, category=UserWarning)
    _guard = warnings.filters[0]
