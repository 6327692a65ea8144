import numpy as np
from numba import cuda, guvectorize

import smartarray as sa


@guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")  # target='cpu'
def running_sum(a, out):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i]
        out[i] = total


@cuda.jit
def copy(dst, src):  # reads src only
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]


# --8<-- [start:host]
x = sa.empty(4, where="gpu")
copy[1, 4](sa.Out(x), sa.full(4, 1.0, where="gpu"))  # x: current on the device only
y = sa.zeros(4)

with sa.track_transfers() as t:
    z = np.add(sa.In(x), 1.0)  # reads x: one download, x stays current on both sides
    np.multiply(z, 2.0, out=sa.Out(y))  # writes y on the host
    running_sum(sa.In(x), sa.Out(y))  # a CPU @guvectorize, output passed positionally
    host = np.asarray(sa.In(x))  # np.asarray(x), read-only
assert (t.h2d_count, t.d2h_count) == (0, 1)
assert (x.location, y.location) == ("both", "host")
assert y.tolist() == [1.0, 2.0, 3.0, 4.0] and not host.flags.writeable
# --8<-- [end:host]

# --8<-- [start:readonly]
a = sa.SmartArray(np.arange(9.0).reshape(3, 3))
with sa.track_transfers() as t:
    copy[1, 3](a[:, 2], a.diagonal())  # the diagonal, a read-only view, is read: In
# Each argument uploads its own bytes not yet on the device, in one copy across the bytes
# between them: column 2 (bytes 16..72), then the diagonal's first two elements (0..40; its
# last is column 2's). Only column 2 is written: the rest of `a` stays current on the host.
assert [(r.offset, r.nbytes) for r in t.records] == [(16, 56), (0, 40)]
assert t.d2h_count == 0 and a.location == "mixed" and a[:, 2].location == "gpu"
assert a[:, 2].tolist() == [0.0, 4.0, 8.0]
# --8<-- [end:readonly]

x.free_device()
a.free_device()
