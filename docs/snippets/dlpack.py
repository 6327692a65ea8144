import numpy as np

import smartarray as sa

a = sa.SmartArray(np.arange(6.0))
assert a.__dlpack_device__() == (1, 0)  # kDLCPU: the host copy is current
x = np.from_dlpack(a)  # zero copy: a view of a's host buffer
x[0] = 10.0  # the consumer may write: exporting marked the host copy changed
assert a[0] == 10.0

snapshot = np.from_dlpack(a, copy=True)  # a copy; no flags change
frozen = np.from_dlpack(a.reshape(2, 3).diagonal())  # read-only views export read-only
assert not frozen.flags.writeable

b = sa.SmartArray(snapshot)  # any DLPack producer (copy=False adopts its memory)
assert b[0] == 10.0
