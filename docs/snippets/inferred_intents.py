import numba
import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def axpy(a, x, y):  # reads x, reads and writes y
    i = cuda.grid(1)
    if i < y.size:
        y[i] += a * x[i]


@numba.njit
def energy(u):  # reads u only
    return (u * u).sum()


# --8<-- [start:chain]
x = sa.SmartArray(np.arange(256.0))
y = sa.SmartArray(np.ones(256))

with sa.track_transfers() as t:
    for _ in range(10):
        axpy[1, 256](2.0, x, y)  # bare arguments: x is inferred In, y InOut
        energy(y)  # inferred read-only: y's device copy stays valid
    x.sum()  # x's host copy never went stale: no download
# 2 uploads (x and y, once each); one download of y per energy() call, because
# each axpy wrote y on the device and energy reads it on the host.
assert (t.h2d_count, t.d2h_count) == (2, 10)
assert (x.location, y.location) == ("both", "both")
# --8<-- [end:chain]

# --8<-- [start:explain]
report = sa.explain_intents(axpy, 2.0, x, y)
print(report)
# kernel axpy:
#   0: a -> - (not a SmartArray)
#   1: x -> In (inferred)
#   2: y -> InOut (inferred)
#        line 12: an in-place operator (a += ...)
#        line 12: an element store
assert report.intents() == ("-", "In", "InOut")
# --8<-- [end:explain]

# (Numba keeps an @njit function's globals alive: release the device copies now, so that
# snippets run after this one in the same process start with no device memory in use.)
x.free_device()
y.free_device()
