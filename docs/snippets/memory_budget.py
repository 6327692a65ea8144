import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


# --8<-- [start:limit]
sa.set_device_memory_limit("4GB")  # bytes, or a size: "512MiB", "1.5G"; None: no limit
assert sa.device_memory_limit() == 4_000_000_000
in_use = sa.device_memory_usage()  # bytes held by SmartArrays on the device now
# --8<-- [end:limit]
more = sa.zeros(1000, where="gpu")
assert sa.device_memory_usage() == in_use + more.nbytes
del more
assert sa.device_memory_usage() == in_use
sa.set_device_memory_limit(None)

# --8<-- [start:budget]
# Six arrays of 2 KiB each, and room on the device for three of them.
arrays = [sa.SmartArray(np.full(256, float(k)), label=f"x{k}") for k in range(6)]
sa.set_device_memory_limit(sa.device_memory_usage() + 3 * 2048)  # or "6KiB" on its own

with sa.track_transfers() as t:
    for x in arrays:  # each launch uploads its array; from the fourth on, the least
        increment[1, 256](x)  # recently used device copy (dirty) is spilled to make room

print(t)  # host->device: 6 copies, 12288 bytes; device->host: 3 copies, 6144 bytes
# (of which spills: 3 copies, 6144 bytes)
print([r.array for r in t.records if r.spill])  # ['x0', 'x1', 'x2']
print([x.location for x in arrays])  # ['host', 'host', 'host', 'gpu', 'gpu', 'gpu']

with sa.track_transfers() as t:  # a spilled array is current on the host: no copy
    assert arrays[0].sum() == 256.0
assert t.count == 0

# Clean copies go first, at no cost: x3's device copy is made equal to its host copy.
arrays[3].get("host")
with sa.track_transfers() as t:
    fresh = sa.empty(256, where="gpu")  # room for it: x3's clean copy is dropped
assert t.count == 0 and arrays[3].location == "host"
# --8<-- [end:budget]
assert (t.h2d_count, t.d2h_count, t.spill_count) == (0, 0, 0)
assert [x.location for x in arrays] == ["host"] * 4 + ["gpu"] * 2 and fresh.location == "both"

# --8<-- [start:too-big]
# A launch whose arguments alone do not fit: MemoryError, and nothing is lost.
try:
    increment[1, 256](sa.SmartArray(np.zeros(4096)))  # 32 KiB, over the 6 KiB limit
except MemoryError as error:
    print(error)  # cannot allocate 32768 bytes of device memory for SmartArray#...: the
    # smartarray device memory limit is 6144 bytes, and SmartArrays hold 6144 bytes ...
sa.set_device_memory_limit(None)  # no limit (the default)
# --8<-- [end:too-big]
assert sa.device_memory_limit() is None
