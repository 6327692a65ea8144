"""Interoperability: DLPack (``dlpack``) and dask chunks and serialization (``dask``)."""

from . import dask, dlpack  # noqa: F401  (each registers itself)
