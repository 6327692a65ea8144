import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def step(u):
    i = cuda.grid(1)
    if i < u.size:
        u[i] += 1.0


u = sa.SmartArray(np.zeros(1000), label="u")
step[8, 128](u)  # the first launch uploads u (8000 bytes)
with sa.track_transfers() as t:
    for k in range(10):
        u[0] = float(k)  # a boundary value: 8 bytes stale on the device...
        step[8, 128](u)  # ...so each launch uploads those 8 bytes only
assert t.h2d_bytes == 80 and t.d2h_count == 0

with sa.track_transfers() as t:
    assert u[500] == 11.0  # one element read: 8 bytes down
assert t.d2h_bytes == 8
assert u[500:501].location == "both" and u.location == "gpu"
print(u.coherence_ranges())  # [(0, 4000, 'gpu'), (4000, 4008, 'both'), (4008, 8000, 'gpu')]
