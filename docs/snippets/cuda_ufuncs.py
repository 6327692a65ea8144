import numpy as np
from numba import vectorize

import smartarray as sa


@vectorize(["float32(float32, float32)"], target="cuda")
def add(x, y):
    return x + y


x = sa.SmartArray(np.arange(1024, dtype=np.float32))
y = sa.SmartArray(np.ones(1024, dtype=np.float32))
with sa.track_transfers() as t:
    z = add(x, y)  # x and y uploaded once; z is a new SmartArray on the device
    add(z, y, out=z)  # in place on the device, nothing copied
    total = add.reduce(z)  # reads a device-side copy of z
assert t.h2d_count == 2 and t.d2h_count == 0
assert x.location == "both" and z.location == "gpu"
assert np.array_equal(z, np.arange(1024) + 2.0)  # the host asks: one copy back
assert total == (np.arange(1024) + 2.0).sum()

if sa.tier() == "gpu":  # (the simulator has no device pointers to hand out)
    # Another library taking the device pointer may write through it:
    cuda_view = x.__cuda_array_interface__
    assert x.location == "gpu" and cuda_view["shape"] == (1024,)
