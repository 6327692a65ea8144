# --8<-- [start:test]
import numpy as np
import pytest
from numba import cuda

import smartarray as sa


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


@pytest.mark.device  # skipped when neither a GPU nor the simulator is available
def test_chain_copies_once():
    x = sa.SmartArray(np.zeros(64))
    with sa.track_transfers() as t:
        increment[1, 64](x)
        with sa.no_transfers():  # any copy in here raises smartarray.TransferError
            for _ in range(4):
                increment[1, 64](x)
        assert x[0] == 5.0
    assert (t.h2d_count, t.d2h_count) == (1, 1)
    assert t.h2d_bytes == x.nbytes


# --8<-- [end:test]


test_chain_copies_once()
