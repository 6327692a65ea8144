"""Exceptions raised by smartarray and the argument checks that raise them."""

from __future__ import annotations

from typing import Literal

Where = Literal["host", "gpu"]
HostMemory = Literal["pinned", "pageable", "mapped"]

_WHERE_ALIASES = {"host": "host", "gpu": "gpu", "device": "gpu"}
_HOST_MEMORY_KINDS = ("pinned", "pageable", "mapped")


class DeviceUnavailableError(RuntimeError):
    """A device copy was requested but neither a CUDA GPU nor the CUDA simulator is available."""

    __module__ = "smartarray"  # its public name (tracebacks, reprs, pickles)


class TransferError(RuntimeError):
    """A host<->device copy happened inside a :func:`smartarray.no_transfers` block."""

    __module__ = "smartarray"


class SmartArrayKeptError(TypeError):
    """An ``@njit`` function may keep a SmartArray argument in a typed container (typed
    ``List``/``Dict``, jitclass) that outlives the call, where compiled code could later
    read and write its host memory without smartarray knowing."""

    __module__ = "smartarray"


def normalize_where(where: object) -> Where:
    """Return ``'host'`` or ``'gpu'`` for a user-given ``where`` (``'device'`` is an alias).

    Raises
    ------
    ValueError
        If ``where`` is anything else; the message lists the allowed values.
    """
    if isinstance(where, str) and where in _WHERE_ALIASES:
        return _WHERE_ALIASES[where]  # type: ignore[return-value]
    raise ValueError(f"where must be one of 'host', 'gpu' (or its alias 'device'); got {where!r}")


def normalize_host_memory(kind: object) -> HostMemory:
    """Check a ``host_memory=`` argument.

    Raises
    ------
    ValueError
        If ``kind`` is not one of ``'pinned'``, ``'pageable'``, ``'mapped'``.
    """
    if isinstance(kind, str) and kind in _HOST_MEMORY_KINDS:
        return kind  # type: ignore[return-value]
    raise ValueError(f"host_memory must be one of 'pinned', 'pageable', 'mapped'; got {kind!r}")
