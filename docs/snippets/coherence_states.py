import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


a = sa.SmartArray(np.zeros(256))
assert a.location == "host"  # made on the host

with sa.track_transfers() as t:
    a.to_gpu()  # device read: HOST -> BOTH, one copy up
assert a.location == "both" and t.h2d_count == 1

increment[1, 256](a)  # device write: BOTH -> DEVICE, no copy
assert a.location == "gpu"

with sa.track_transfers() as t:
    print(a[:4])  # host read of 4 elements: their 32 bytes DEVICE -> BOTH, one copy back
assert a[:4].location == "both" and (t.d2h_count, t.d2h_bytes) == (1, 32)
assert a.location == "gpu"  # the rest is still current on the device only

a[0] = -1.0  # host write of one element: its bytes BOTH -> HOST, no copy
assert a[0:1].location == "host" and a[1:4].location == "both"
assert a.location == "mixed"  # some bytes current only on the host, others only on the device
assert not a.is_valid("host") and not a.is_valid("gpu")
