import numpy as np

import smartarray

rng = np.random.default_rng(7)
# --8<-- [start:shuffle]
x = smartarray.asarray(np.arange(12.0).reshape(6, 2))
rng.shuffle(x)  # the rows of x, permuted; the host copy is written, the device copy stale
# --8<-- [end:shuffle]
rows = np.arange(12.0).reshape(6, 2)
np.random.default_rng(7).shuffle(rows)  # the order an ndarray gets from the same state
assert np.array_equal(x, rows)

on_device = smartarray.asarray(np.arange(12.0).reshape(6, 2))
on_device.get("gpu")  # current on both sides
rng.shuffle(on_device)
assert on_device.location == "host"  # the device copy is stale
assert sorted(map(tuple, np.asarray(on_device))) == sorted(map(tuple, rows))


# --8<-- [start:center]
def center(x):
    x = np.asarray(x)
    x -= x.mean()  # writes the caller's array: an ndarray or a SmartArray


# --8<-- [end:center]


values = np.arange(4.0)
center(values)
a = smartarray.asarray(np.arange(4.0))
a.get("gpu")  # current on both sides
center(a)
assert np.array_equal(a, values) and np.array_equal(values, np.arange(4.0) - 1.5)
assert a.location == "host"  # the write was seen: the device copy is stale
