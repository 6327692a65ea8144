import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def axpy(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


x = sa.SmartArray(np.arange(256.0))
y = sa.SmartArray(np.ones(256))
out = sa.SmartArray(np.empty(256))

with sa.track_transfers() as t:
    axpy[1, 256](sa.Out(out), 2.0, sa.In(x), sa.In(y))
# In(): uploaded, and the host copies stay current. Out(): nothing uploaded.
assert t.h2d_count == 2 and t.d2h_count == 0
assert (x.location, y.location, out.location) == ("both", "both", "gpu")

with sa.track_transfers() as t:
    axpy[1, 256](out, 2.0, x, y)  # bare arguments: intents inferred from the kernel's code
assert t.count == 0  # every device copy was current already
assert (x.location, y.location, out.location) == ("both", "both", "gpu")

with sa.track_transfers() as t:
    axpy[1, 256](out, 2.0, sa.InOut(x), y)  # an explicit intent always wins
assert (x.location, y.location) == ("gpu", "both")

assert np.array_equal(out, 2.0 * np.arange(256.0) + 1.0)
