import numpy as np
from numba import cuda, njit

import smartarray as sa


@cuda.jit
def touch(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 0


@njit
def total(x):
    return x.sum()


@njit
def double(x):
    x *= 2


def on_device() -> sa.SmartArray:
    a = sa.SmartArray(np.arange(8.0))
    touch[1, 8](a)  # a kernel with a bare argument: a write on the device
    assert a.location == "gpu"
    return a


# Host writes: each one leaves only the host copy of the bytes it writes current.
writes = {
    "a[i] = v": lambda a: a.__setitem__(0, 1.0),
    "a += 1": lambda a: a.__iadd__(1),
    "np.add(x, y, out=a)": lambda a: np.add(a, 1, out=a),
    "a.fill(v)": lambda a: a.fill(0.0),
    "@njit f(a) that writes a": lambda a: double(a),
    # Writes through np.asarray(a), found by comparing bytes before the next device use:
    "np.asarray(a)[i] = v": lambda a: np.asarray(a).__setitem__(0, 1.0),
    "@njit f(np.asarray(a)) that writes": lambda a: double(np.asarray(a)),
}
for name, write in writes.items():
    a = on_device()
    write(a)
    if name == "a[i] = v":  # one element written: the others are still current on the device
        assert a.location == "mixed" and a[0:1].location == "host", name
    else:
        assert a.location == "host", name

# Host reads: the host copy is refreshed and both copies stay current.
reads = {
    "a[i]": lambda a: a[0],
    "a.sum()": lambda a: a.sum(),
    "np.asarray(a)": np.asarray,
    "print(a)": print,
    "@njit f(sa.In(a))": lambda a: total(sa.In(a)),
    "@njit f(a) that only reads a": lambda a: total(a),
}
for name, read in reads.items():
    a = on_device()
    read(a)
    if name == "a[i]":  # one element read: the others are still current on the device only
        assert a.location == "gpu" and a[0:1].location == "both", name
    else:
        assert a.location == "both", name

# A read-only SmartArray (a broadcast view, a.diagonal()) gives a read-only np.asarray view.
try:
    np.asarray(on_device().reshape(2, 4).diagonal())[0] = 1.0
except ValueError as err:
    print("np.asarray of a read-only view is read-only:", err)

# get() gives the raw, writable buffer: say what you wrote with mark_changed().
a = sa.SmartArray(np.arange(8.0))
a.to_gpu()
host = a.get("host")
host[0] = 100.0
assert a.location == "both"  # smartarray cannot see raw writes...
a.mark_changed("host")  # ...so declare them
assert a.location == "host"
