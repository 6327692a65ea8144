"""The classic add-ufunc progression, ending with SmartArrays.

Numba's CUDA tutorials speed up an ``add_ufunc(x, y)`` in steps:

1. host arrays: every call copies both inputs to the device and the result back;
2. device inputs (``cuda.to_device`` once): every call makes a new device result;
3. device inputs and a preallocated device output (``out=``): no copies at all;
4. here, SmartArrays: the copies of step 3 without writing any of them.

Steps 2 to 4 therefore print the same copy counts (each input up once, the result down once
to check it); what changes is who writes the copies, and step 2's allocation per call.

Every step calls the same ``@vectorize(target='cuda')`` ufunc (in step 4 with SmartArrays
passed straight in: the inputs stay current on both sides, ``out=`` is written on the device).
On a real GPU the steps are timed; in Numba's CUDA simulator (where smartarray makes CUDA
ufuncs work) only transfer counts are shown: simulator timings mean nothing.

Run with a GPU, or anywhere with the CUDA simulator::

    NUMBA_ENABLE_CUDASIM=1 python examples/add_ufunc_progression.py
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
from numba import cuda, vectorize

import smartarray as sa
from smartarray.bench import CopyCounter

ON_GPU = sa.tier() == "gpu"
N = 1 << 20 if ON_GPU else 1024  # the simulator runs every CUDA thread in Python: keep it small
CALLS = 20 if ON_GPU else 3
THREADS = 256
BLOCKS = (N + THREADS - 1) // THREADS


if sa.tier() != "host-only":  # (without CUDA it cannot be built: see the end of the file)

    @vectorize(["float32(float32, float32)"], target="cuda")
    def add_ufunc(x, y):
        return x + y


def seconds_per_call(call: Callable[[], object]) -> float:
    """Mean time of ``call()`` over CALLS calls, device synchronised (after one warm-up).

    In the simulator the calls are made but not timed (0.0 is returned).
    """
    call()
    cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        call()
    cuda.synchronize()
    return (time.perf_counter() - start) / CALLS if ON_GPU else 0.0


def main() -> None:
    sa.reset_transfer_stats()
    x = np.arange(N, dtype=np.float32)
    y = 2 * x
    expected = x + y
    print(f"add_ufunc = @vectorize(['float32(float32, float32)'], target='cuda'), n={N}")
    if not ON_GPU:
        print(f"tier {sa.tier()}: copy counts only, no timings ({CALLS} calls per step)")
    counts: dict[str, str] = {}
    times: dict[str, float] = {}

    # 1. Host arrays: both inputs go up and the result comes down on every call.
    times["1"] = seconds_per_call(lambda: add_ufunc(x, y))
    counts["1"] = "2 inputs up + 1 result down on every call (Numba's automatic copies)"
    assert np.array_equal(add_ufunc(x, y), expected)

    # 2. Device inputs, copied once; each call makes a new result on the device.
    counter = CopyCounter()
    d_x, d_y = counter.to_device(x), counter.to_device(y)
    times["2"] = seconds_per_call(lambda: add_ufunc(d_x, d_y))
    d_result = add_ufunc(d_x, d_y)
    assert np.array_equal(counter.copy_to_host(d_result), expected)  # one copy back, to check
    counts["2"] = str(counter.stats)

    # 3. Device inputs and a preallocated device output.
    counter = CopyCounter()
    d_x, d_y = counter.to_device(x), counter.to_device(y)
    d_out = cuda.device_array_like(x)  # uninitialised, like np.empty
    times["3"] = seconds_per_call(lambda: add_ufunc(d_x, d_y, out=d_out))
    assert np.array_equal(counter.copy_to_host(d_out), expected)
    counts["3"] = str(counter.stats)

    # 4. SmartArrays: the same copies as step 3, made by smartarray when they are needed.
    sx, sy = sa.SmartArray(x, label="x"), sa.SmartArray(y, label="y")
    s_out = sa.empty(N, dtype=np.float32, where="gpu")  # made on the device: nothing to upload
    with sa.track_transfers() as ledger:
        # The code of step 3, with SmartArrays: inputs stay current on both sides.
        times["4"] = seconds_per_call(lambda: add_ufunc(sx, sy, out=s_out))
        assert np.array_equal(s_out, expected)  # the host asks: one copy back
    counts["4"] = str(ledger)
    assert (ledger.h2d_count, ledger.d2h_count) == (2, 1)

    steps = {
        "1": "host arrays",
        "2": "device inputs",
        "3": "device inputs and output",
        "4": "SmartArrays",
    }
    for key, title in steps.items():
        timing = f"  {times[key] * 1e3:8.3f} ms/call" if ON_GPU else ""
        print(f"{key}. {title:<26}{timing}  copies: {counts[key]}")
    print(
        "Steps 2-4 copy the same: each input up once, the result down once (to check it). "
        "Step 2 allocates a new device result on every call, step 3 reuses one output, and "
        "step 4 makes step 3's copies without a line of copying code: smartarray uploads each "
        "input when a launch first needs it and downloads the result when the host reads it."
    )
    if ON_GPU:
        print(f"SmartArrays / device inputs and output: {times['4'] / times['3']:.2f}x")
    print(f"ledger: {sa.transfer_stats()}")
    print("add_ufunc_progression: OK")


if __name__ == "__main__":
    if sa.tier() == "host-only":  # no GPU and no simulator: say how to run it instead
        sys.exit(
            "add_ufunc_progression.py needs a CUDA GPU or Numba's CUDA simulator, and "
            "this machine has no CUDA. Run it in the simulator:\n"
            "    NUMBA_ENABLE_CUDASIM=1 python examples/add_ufunc_progression.py"
        )
    main()
