"""Lines mypy --strict must reject: each ``# E: <text>`` names a part of the error expected
on its line (tests/test_typing.py); no other line may have an error."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

import smartarray as sa
from smartarray import In, SmartArray

x = sa.zeros(3)

# A mismatched dtype in an annotated assignment.
a: SmartArray[Any, np.dtype[np.int64]] = sa.zeros(3)  # E: Incompatible types in assignment
b: SmartArray[Any, np.dtype[np.float32]] = x.copy()  # E: Incompatible types in assignment
c: SmartArray[Any, np.dtype[np.float32]] = -x  # E: Incompatible types in assignment
d: np.ndarray[Any, np.dtype[np.int8]] = x.get("host")  # E: Incompatible types in assignment
e: np.dtype[np.int64] = x.dtype  # E: Incompatible types in assignment
f: SmartArray[Any, np.dtype[np.int64]] = x + x  # E: Incompatible types in assignment
g: SmartArray[Any, np.dtype[np.float64]] = x < 1  # E: Incompatible types in assignment
h: SmartArray[tuple[int, int], np.dtype[np.float64]] = x.reshape(6)  # E: Incompatible types

# The first type argument is the shape (a tuple of ints), the second the dtype.
i: SmartArray[np.float64, np.dtype[np.float64]]  # E: must be a subtype of "tuple[int, ...]"
j: SmartArray[Any, np.float64]  # E: must be a subtype of "dtype[Any]"

# Operations numpy refuses.
negated = -sa.full(3, True)  # E: Invalid self argument
inverted = ~x  # E: Invalid self argument
added = x + None  # E: No overload variant of "__add__"
x.resize(4)  # E: has no attribute "resize"
x.setflags(write=False)  # E: has no attribute "setflags"
x.no_such_method()  # E: has no attribute "no_such_method"

# Intents take SmartArrays.
In(np.zeros(3))  # E: Argument 1 to "In" has incompatible type

# The ledger's directions are two literals.
with sa.track_transfers() as t:
    pass
up: Literal["up"] = t.records[0].direction  # E: Incompatible types in assignment
