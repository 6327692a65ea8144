import numpy as np

import smartarray as sa

if sa.tier() == "gpu":  # CUDA ufuncs cannot run in Numba's CUDA simulator
    from numba import vectorize

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add_ufunc(x, y):
        return x + y

    x = sa.SmartArray(np.arange(1024, dtype=np.float32))
    y = sa.SmartArray(np.ones(1024, dtype=np.float32))

    # Passed directly: works through __cuda_array_interface__, conservatively.
    out = sa.empty(1024, dtype=np.float32, where="gpu")
    with sa.track_transfers() as t:
        add_ufunc(x, y, out=out)  # x and y uploaded once; out written in place
    assert t.h2d_count == 2 and out.location == "gpu"
    assert x.location == "gpu"  # an input, but now marked written on the device

    # Wrapped: inputs stay current on both sides, results are SmartArrays on the device.
    add = sa.cuda_ufunc(add_ufunc)
    x = sa.SmartArray(np.arange(1024, dtype=np.float32))
    y = sa.SmartArray(np.ones(1024, dtype=np.float32))
    with sa.track_transfers() as t:
        z = add(x, y)  # a new, device-resident SmartArray
        add(z, y, out=z)  # in place, nothing copied
    assert t.h2d_count == 2 and x.location == "both" and z.location == "gpu"
    assert np.array_equal(z, np.arange(1024) + 2.0)
else:
    print(f"tier {sa.tier()}: CUDA ufuncs need a real GPU; nothing to run here")
