"""Read what a SmartArray's buffers hold, per byte, without moving any data.

For tests whose reference model is per byte (``tests/test_per_byte.py``): they compare the
raw buffers with a numpy reference, byte by byte, wherever smartarray says a side is
current. This module is the one place such tests look inside a SmartArray; it copies
nothing through smartarray's transfer layer (the ledger is unchanged) and changes no state
except that writes made through live or dead ``np.asarray`` exports are looked for first,
as every smartarray operation does before it trusts the labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class RawState:
    """What the base buffer of a SmartArray holds now.

    Attributes
    ----------
    nbytes : int
        Size of the base buffer (every view of one base shares it).
    host : numpy.ndarray of uint8, or None
        The host buffer's bytes in memory order (a copy), or None if no host buffer was
        made yet (then its bytes are ``fill``).
    device : numpy.ndarray of uint8, or None
        The device buffer's bytes in memory order (a copy read directly, not counted), or
        None if no device buffer was made yet (then its bytes are ``fill``).
    fill : tuple or None
        For an array made with no data (``zeros``, ``full``, ``empty``...) whose buffers are
        not both made: ``(value,)`` the value every byte of a buffer not made yet holds, or
        ``(None,)`` for ``empty`` (undefined bytes). None otherwise.
    ranges : list of (start, stop, where)
        Byte ranges ``[start, stop)`` of the base buffer, covering it all, each with the
        side(s) smartarray calls current: ``'host'``, ``'gpu'`` or ``'both'``.
    """

    nbytes: int
    host: np.ndarray | None
    device: np.ndarray | None
    fill: tuple[Any] | None
    ranges: list[tuple[int, int, str]]

    def side_bytes(
        self, side: str, dtype: np.dtype, shape: tuple[int, ...], order: str
    ) -> np.ndarray | None:
        """The bytes of ``side`` (``'host'`` or ``'gpu'``) as a uint8 array of ``nbytes``,
        the fill materialised for a buffer not made yet; None for undefined (``empty``)."""
        raw = self.host if side == "host" else self.device
        if raw is not None:
            return raw
        if self.fill is None or self.fill[0] is None:
            return None
        filled = np.full(shape, self.fill[0], dtype=dtype, order=order)  # type: ignore[call-overload]
        return filled.reshape(-1, order="A").view(np.uint8)


def _flat_bytes(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array.reshape(-1, order="A")).view(np.uint8).copy()


def raw_state(a: Any) -> RawState:
    """The :class:`RawState` of SmartArray ``a``'s base buffer."""
    from smartarray._core.coherence import UNDEFINED

    alloc = a._alloc
    with alloc.lock:
        alloc.current_state()  # (writes through np.asarray exports are looked for first)
        alloc.wait_host()
        host = None if alloc.host is None else _flat_bytes(alloc.host)
        device = None
        if alloc.device is not None:
            if alloc.host_memory == "mapped":
                device = host
            else:
                device = _flat_bytes(alloc.device.copy_to_host())
        fill = alloc._fill
        if fill is not None:
            fill = (None,) if fill[0] is UNDEFINED else (fill[0],)
        ranges = list(alloc.ranges())
        return RawState(alloc.nbytes, host, device, fill, ranges)


def base_layout(a: Any) -> tuple[tuple[int, ...], np.dtype, str]:
    """Shape, dtype and memory order ('C' or 'F') of ``a``'s base buffer."""
    alloc = a._alloc
    return alloc.shape, alloc.dtype, alloc.order
