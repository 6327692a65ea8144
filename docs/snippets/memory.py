import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


# Host buffers: pinned (page-locked) by default on a GPU for arrays smartarray allocates,
# pageable for adopted ndarrays; ask for a kind with host_memory=.
adopted = sa.SmartArray(np.zeros(256), copy=False)
pinned = sa.zeros(256, host_memory="pinned")
mapped = sa.zeros(256, host_memory="mapped")
assert (adopted.host_memory, pinned.host_memory) == ("pageable", "pinned")

with sa.track_transfers() as t:
    increment[1, 256](mapped)  # the device works on mapped host memory in place
    assert mapped.sum() == 256.0
assert t.count == 0 and mapped.location == "both"

# free_device(): drop the device copy, first copying it back if it is the only current one.
a = sa.SmartArray(np.zeros(256))
increment[1, 256](a)
with sa.track_transfers() as t:
    a.free_device()
assert t.d2h_count == 1 and a.location == "host"

# Freed device memory goes to numba-cuda's deallocation queue; defer_cleanup() holds the
# queue back (e.g. around asynchronous work) and lets it drain afterwards.
with cuda.defer_cleanup():
    b = sa.SmartArray(np.zeros(256))
    increment[1, 256](b)
    b.free_device()
assert b.sum() == 256.0
