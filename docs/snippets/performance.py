import numpy as np
from numba import njit

import smartarray as sa


# --8<-- [start:loop]
@njit
def smooth(u, out):
    for i in range(1, u.shape[0] - 1):
        out[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0


u = sa.SmartArray(np.random.default_rng(0).random(1000))
out = sa.zeros_like(u)

# Slow: a Python loop over elements pays a (small) fixed cost per element access.
for i in range(1, 999):
    out[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0
slow = out.copy()

# Fast: whole-array numpy expressions pay the fixed cost once per operation ...
out[1:-1] = (u[:-2] + u[1:-1] + u[2:]) / 3.0
assert np.allclose(np.asarray(out), np.asarray(slow))

# ... and @njit loops pay it once per call, then run at ndarray speed.
smooth(u, out)
assert np.allclose(np.asarray(out), np.asarray(slow))
# --8<-- [end:loop]
