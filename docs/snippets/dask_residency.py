import dask
import dask.array as da
import numpy as np
from numba import cuda

import smartarray as sa


@cuda.jit
def affine(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2 * x[i] + 1


def affine_block(block):
    """A map_blocks task: one launch, a new chunk that stays on the device."""
    out = sa.empty_like(block, where="gpu")
    affine[(block.size + 31) // 32, 32](sa.In(block), sa.Out(out))
    return out


a = sa.SmartArray(np.arange(64.0))
meta = sa.empty(0)  # the chunk type, so that dask does not call affine_block to find it
with dask.config.set(scheduler="synchronous"), sa.track_transfers() as t:
    x = da.from_array(a, chunks=16)
    y = x.map_blocks(affine_block, meta=meta).map_blocks(affine_block, meta=meta)
    (y,) = dask.persist(y)  # four device-resident chunks
    z = y.map_blocks(affine_block, meta=meta).compute()  # a SmartArray
assert type(z) is sa.SmartArray
assert (t.h2d_count, t.h2d_bytes) == (4, a.nbytes)  # each input chunk went up once
assert (t.d2h_count, t.d2h_bytes) == (4, a.nbytes)  # each result chunk came down once
