"""A chain of kernels with @njit pre- and post-processing: data crosses the bus twice.

A 1-D heat-diffusion stencil runs for many steps on the device. The input is prepared on the
host by an ``@njit`` function, the result is summarised on the host by another one, and the
kernel loop in between runs inside ``smartarray.no_transfers()``, which would raise if any
step copied anything. The ledger at the end shows the two copies the whole run needed.

Run with a GPU, or anywhere with the CUDA simulator::

    NUMBA_ENABLE_CUDASIM=1 python examples/heat_chain.py
"""

from __future__ import annotations

import sys

import numpy as np
from numba import cuda, njit

import smartarray as sa

ON_GPU = sa.tier() == "gpu"
N = 1 << 20 if ON_GPU else 256  # the simulator runs every CUDA thread in Python
STEPS = 500 if ON_GPU else 30
ALPHA = 0.2  # stable for ALPHA <= 0.5
THREADS = 256
BLOCKS = (N + THREADS - 1) // THREADS


@njit
def normalise(raw):
    """Host pre-processing, in place: rescale the readings to [0, 1]."""
    lo, hi = raw.min(), raw.max()
    for i in range(raw.size):
        raw[i] = (raw[i] - lo) / (hi - lo)


@cuda.jit
def diffuse(u, out, alpha):
    """One explicit step of du/dt = d2u/dx2 with insulated ends."""
    i = cuda.grid(1)
    n = u.size
    if i < n:
        left = u[i - 1] if i > 0 else u[i]
        right = u[i + 1] if i < n - 1 else u[i]
        out[i] = u[i] + alpha * (left - 2.0 * u[i] + right)


@njit
def summary(u):
    """Host post-processing: mean and peak temperature."""
    return u.mean(), u.max()


def reference(u0: np.ndarray, steps: int) -> np.ndarray:
    u = u0.copy()
    for _ in range(steps):
        padded = np.concatenate(([u[0]], u, [u[-1]]))
        u = u + ALPHA * (padded[:-2] - 2.0 * u + padded[2:])
    return u


def show(step: str, u: sa.SmartArray, copies: object) -> None:
    """One line per step, in aligned columns: where u is current and what was copied."""
    print(f"{step + ':':<26}location={u.location:<6}({copies})")


def main() -> None:
    sa.reset_transfer_stats()
    readings = np.random.default_rng(7).normal(20.0, 5.0, N)
    readings[N // 3 : N // 3 + N // 16] += 40.0  # a hot spot

    u = sa.SmartArray(readings, label="u")
    v = sa.empty_like(u, where="gpu")  # scratch made on the device: never copied
    with sa.track_transfers() as t:
        normalise(u)  # @njit on the host copy: no copy
    show("@njit normalise", u, t)
    assert t.count == 0
    u0 = np.array(u)  # keep the input for the check at the end

    with sa.track_transfers() as t:
        u.to_gpu()  # the one upload; kernels would do it on first use anyway
    show("upload", u, t)

    # --8<-- [start:chain]
    with sa.no_transfers():  # any copy in here raises smartarray.TransferError
        for _ in range(STEPS):
            diffuse[BLOCKS, THREADS](sa.In(u), sa.Out(v), ALPHA)
            u, v = v, u
    # --8<-- [end:chain]
    show(f"{STEPS} diffusion kernels", u, "no copies")

    with sa.track_transfers() as t:
        mean, peak = summary(sa.In(u))  # @njit on the host: one copy back
    show("@njit summary", u, t)
    print(f"mean {mean:.4f}, peak {peak:.4f}")
    assert t.d2h_count == 1 and u.location == "both"

    expected = reference(u0, STEPS)
    assert np.allclose(u, expected)
    assert np.isclose(mean, expected.mean()) and np.isclose(peak, expected.max())

    # In() left both copies current: the chain can go on without another upload.
    with sa.no_transfers():
        diffuse[BLOCKS, THREADS](sa.In(u), sa.Out(v), ALPHA)

    total = sa.transfer_stats()
    print(f"ledger: {total}")
    assert (total.h2d_count, total.d2h_count) == (1, 1)
    print("heat_chain: OK")


if __name__ == "__main__":
    if sa.tier() == "host-only":  # no GPU and no simulator: say how to run it instead
        sys.exit(
            "heat_chain.py needs a CUDA GPU or Numba's CUDA simulator, and "
            "this machine has no CUDA. Run it in the simulator:\n"
            "    NUMBA_ENABLE_CUDASIM=1 python examples/heat_chain.py"
        )
    main()
