"""Numba CPU glue: SmartArray's Numba type and ``@jit``/``@njit`` arguments.

``types`` (the Numba type, shared with the CUDA target), ``cpu`` (boxing and unboxing),
``buffers`` (``np.frombuffer`` in compiled code), ``signatures`` (explicit signatures),
``access`` (the IR analysis behind inferred intents) and ``jit_intents`` (its use for ``@jit``
overloads). Registered with Numba and the class when imported.
"""

from . import buffers, cpu  # noqa: F401  (each registers itself)
