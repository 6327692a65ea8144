"""``np.frombuffer`` of a SmartArray inside ``@jit`` code returns a SmartArray view.

Numba types the result of ``np.frombuffer(buffer, ...)`` as a plain ``types.Array`` whatever
the buffer's type, so for a SmartArray argument it boxed as a bare ndarray over the
argument's host memory: writes through it were never seen by the coherence state (a current
device copy kept the old values), and reads through it after a kernel wrote the SmartArray
saw stale host data.

This CPU overload (CPU-specific, so Numba tries it before its own generic one) takes only
SmartArray buffers and types the result as a SmartArray type, so it boxes as a SmartArray
view sharing the argument's coherence state, as ``a.view(dtype)`` does. Everything else,
bounds and errors included, is Numba's own ``np.frombuffer``: its arguments are checked and
its data computed by the same code. Any other buffer (bytes, an ndarray) falls through to
Numba's overload.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.core import errors, types
from numba.extending import overload

from .types import SmartArrayType


def _result_dtype(dtype: Any) -> Any:
    """The Numba dtype ``np.frombuffer`` makes for the ``dtype`` argument's type (as Numba)."""
    from numba.core.typing.npydecl import parse_dtype
    from numba.np.numpy_support import is_nonelike

    if isinstance(dtype, types.UnicodeType):
        raise errors.TypingError("If np.frombuffer dtype is a string it must be a string constant.")
    if (
        dtype is float
        or (isinstance(dtype, types.Function) and dtype.typing_key is float)
        or is_nonelike(dtype)
    ):
        return types.double
    return parse_dtype(dtype)


@overload(np.frombuffer, target="cpu")
def _frombuffer_of_smartarray(buffer, dtype=float, count=-1, offset=0):  # type: ignore[no-untyped-def]
    # (no annotations: Numba compares this signature with impl's, annotations included)
    if not isinstance(buffer, SmartArrayType) or buffer.layout != "C":
        return None  # Numba's own overload (and its errors) for everything else
    from numba.np.arrayobj import np_frombuffer

    nb_dtype = _result_dtype(dtype)
    if nb_dtype is None:
        raise errors.TypingError(
            f"Cannot parse input types to function np.frombuffer({buffer}, {dtype})"
        )
    # Read-only exactly where Numba makes it so: a read-only buffer (In(a)) gives a read-only
    # view; the SmartArray type boxes it as a view of the argument.
    retty = buffer.copy(dtype=nb_dtype, ndim=1, layout="C")

    def impl(buffer, dtype=float, count=-1, offset=0):  # type: ignore[no-untyped-def]
        return np_frombuffer(buffer, dtype, count, offset, retty)

    return impl
