"""The core: one allocation's state machine and everything below it.

``coherence`` (the state machine: which copy is current), ``transfer`` (the only code that
moves bytes between host and device, and the ledger), ``backend`` (everything that touches
``numba.cuda`` memory), ``memory`` (the device memory budget and launch pins),
``pinned_pool`` and ``host_buffers`` (host memory), ``host_exports`` (ndarrays handed out by
``np.asarray``), ``adoption`` (``copy=False``), ``layout`` (view layouts computed without
data) and ``errors``. Nothing here imports the layers above (the class, the numpy face, the
Numba and CUDA glue, interop, benchmarks): ``tests/test_architecture.py`` checks it.
"""
