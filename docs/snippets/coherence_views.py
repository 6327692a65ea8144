import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


a = sa.SmartArray(np.zeros(16), label="a")
first_half = a[:8]  # a view: same buffers, same coherence state
grid = a.reshape(4, 4)
assert first_half.base is a and first_half.label == grid.label == "a"

with sa.track_transfers() as t:
    increment[1, 32](first_half)  # uploads the view's 64 bytes only, and writes them
assert (t.h2d_count, t.h2d_bytes) == (1, 64)
assert first_half.location == "gpu" and a[8:].location == "host"
assert a.location == grid.location == "mixed"  # the state of a's bytes, seen by every view

with sa.track_transfers() as t:
    assert grid[1, 3] == 1.0 and grid[2, 0] == 0.0  # grid[1, 3]'s 8 bytes copied back
assert (t.d2h_count, t.d2h_bytes) == (1, 8)
grid[3, 3] = 5.0  # a write through any view makes those bytes' device copy stale for all
assert a[15] == 5.0 and a[12:].location == "host"
assert a.location == "mixed"  # a[:7] is still current only on the device

# Numba device arrays cannot have negative strides, so such a view stays on the host.
try:
    increment[1, 32](a[::-1])
except ValueError as err:
    print(err)
else:
    raise AssertionError("expected a ValueError")
increment[1, 32](a[::-1].copy())  # a copy is a new, contiguous SmartArray
