import numba
import numpy as np
from numba import cuda, njit

import smartarray as sa


@njit
def normalise(x):
    x /= x.max()
    return x


@njit
def mean(x):
    return x.mean()


@cuda.jit
def square(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= x[i]


a = sa.SmartArray(np.arange(1.0, 9.0))
assert normalise(a) is a  # returning an argument gives back the same SmartArray
head = njit(lambda x: x[:4])(a)
assert isinstance(head, sa.SmartArray) and head.base is not None  # a view of a

square[1, 8](a)  # now only the device copy is current
with sa.track_transfers() as t:
    m = mean(sa.In(a))  # one copy back; In(): the device copy stays current
assert t.d2h_count == 1 and a.location == "both"
with sa.track_transfers() as t:
    square[1, 8](a)  # so the next kernel needs no upload
assert t.h2d_count == 0

# Explicit signatures written for ndarrays take SmartArrays too (through a SmartArray twin,
# compiled on the first SmartArray call); smartarray.numba_type() declares one directly.
@njit("float64(float64[:])")
def first(x):
    return x[0]


@njit(numba.float64(sa.numba_type(np.float64, 1)))
def last(x):
    return x[-1]


assert first(a) == (1 / 8) ** 4 and last(a) == 1.0
assert first(np.ones(2)) == 1.0  # ndarrays still take the plain signature
