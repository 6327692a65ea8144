import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def scale(x, k):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= k


x = sa.SmartArray(np.arange(1000.0))
with sa.track_transfers() as t:
    for _ in range(10):
        scale[4, 256](x, 1.5)  # the first launch copies x to the device; the rest copy nothing
    total = x.sum()  # the host asks for the data: one copy back
print(total, t)
assert (t.h2d_count, t.d2h_count) == (1, 1)
assert np.isclose(total, np.arange(1000.0).sum() * 1.5**10)
