"""CUDA glue: kernel arguments, launch hooks and intents, the launch guard, CUDA ufuncs.

``arguments`` (what a launch gets for a SmartArray, and ``__cuda_array_interface__``),
``launch`` (the launch hooks that infer bare arguments' intents), ``launch_guard`` (launches
without CUDA), ``ufuncs`` (CUDA ufuncs and gufuncs), ``simulator_ufuncs`` (what numba-cuda's
CUDA ufuncs lack in the simulator) and ``explain`` (``explain_intents``, which
reads both this layer's and the ``@jit`` analysis). Registered when imported; numba-cuda's
entry points are wrapped by the ``install_*`` functions that ``import smartarray`` calls.
"""

from . import arguments, explain, launch, launch_guard, simulator_ufuncs, ufuncs  # noqa: F401
