import numpy as np

import smartarray as sa

data = np.arange(6.0)

a = sa.SmartArray(data)  # a copy of data, on the host
b = sa.SmartArray(data, copy=False)  # adopts data: shared memory, data locked read-only
c = sa.SmartArray(data, where="gpu")  # a copy, uploaded at once
d = sa.zeros((2, 3), where="gpu")  # made and filled on the device: nothing to upload
e = sa.empty_like(d)  # where the prototype's data is: the device
f = sa.SmartArray(shape=(2, 3), dtype=np.float32, label="f")  # uninitialised, on the host

print(a.location, b.location, c.location, d.location, e.location, f.location)
assert (a.location, c.location, d.location, e.location) == ("host", "both", "both", "both")
with sa.track_transfers() as t:  # d's host buffer is made, and filled, on the host
    assert d.sum() == 0.0
assert t.count == 0  # zeros are never copied, whichever side made them

b[0] = 42.0  # b shares data's memory
assert data[0] == 42.0 and a[0] == 0.0
try:
    data[1] = 7.0  # a write b could not see: refused while b lives
except ValueError as err:
    print("data is read-only while adopted:", err)
assert sa.asarray(data) is not b  # asarray copies any ndarray
del b  # data is writable again once b is gone (at once in CPython)
data[1] = 7.0
