import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


n = 8
x = sa.SmartArray(np.zeros(n))
sums = []
# --8<-- [start:loop]
h = np.asarray(x)  # a view of x's host copy, kept
with sa.track_transfers() as t:
    for step in range(3):
        add_one[1, n](x)  # writes x's device copy...
        sums.append(h.sum())  # ...and h shows it: 8.0, 16.0, 24.0
print(t)  # 1 upload, 3 downloads: one per writing launch while h lives

del h  # no view of x is kept any more
with sa.track_transfers() as t:
    for step in range(3):
        add_one[1, n](x)  # lazy again: the results stay on the device
print(t, x.location)  # no copy; 'gpu'
# --8<-- [end:loop]
assert sums == [8.0, 16.0, 24.0]
total = sa.transfer_stats()  # (all copies so far: the first loop's)
assert (total.h2d_count, total.d2h_count) == (1, 3)
assert (t.h2d_count, t.d2h_count) == (0, 0) and x.location == "gpu"

# A raw buffer from get('host') is not kept current: ask again after device work.
raw = x.get("host")  # one download
add_one[1, n](x)
assert raw[0] == 6.0  # stale: the kernel's results are on the device only
assert x.get("host")[0] == 7.0  # get('host') copies back; raw shares that memory
assert raw[0] == 7.0
