"""numpy functions that return views of their argument, answered as numpy answers them.

Each returns a SmartArray view of its argument exactly when numpy returns a view, writable
exactly when numpy's is (numpy would otherwise only see the read-only host view that
:mod:`smartarray._numpy.protocols` passes it, and return read-only views). Most are made on the
array's layout alone, without reading data (no copy even for data only on the device);
registered with :func:`smartarray._numpy.protocols.register_functions` when imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import SmartArray
from . import protocols

# Returned by an implementation that cannot handle its arguments: numpy's ordinary path.
FALLBACK = protocols._FALLBACK


def _template_function(func: Callable[..., Any]) -> Callable[..., Any]:
    """A numpy function that only ever returns a view of its first argument (``np.rot90``,
    ``np.linalg.matrix_transpose``, ``sliding_window_view``…), run on the layout: no data is
    read, and the view is writable exactly when numpy's would be."""

    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        return array._apply_view(lambda template: func(template, *args, **kwargs))

    return apply


def _writable_as_numpy(func: Callable[..., Any], *, may_return_input: bool) -> Callable[..., Any]:
    """A numpy function that reads data and returns a basic view of its first argument
    (``np.trim_zeros``, ``np.real_if_close``): run on the host copy, its view made writable
    when the argument is, as numpy's is (numpy was given the read-only host view).

    With ``may_return_input``, a result with the argument's own layout is the argument
    itself, as numpy returns its argument unchanged (``np.real_if_close`` of real data).
    """

    def apply(array: SmartArray, *args: Any, **kwargs: Any) -> Any:
        result = protocols.call_on_host(func, (array, *args), kwargs)
        if not isinstance(result, SmartArray) or result._alloc is not array._alloc:
            return result
        layout = (result._offset, result._shape, result._strides, result._dtype)
        if may_return_input and layout == (
            array._offset,
            array._shape,
            array._strides,
            array._dtype,
        ):
            return array
        if array._writeable and not result._writeable:
            return SmartArray._view(array._alloc, *layout, True, result._base)
        return result

    return apply


def _broadcast_arrays(*arrays: Any, subok: bool = False) -> Any:
    """``np.broadcast_arrays`` of SmartArrays, on their layouts (no data read): like numpy,
    an array that already has the broadcast shape is returned itself; the others become
    **read-only** broadcast views (numpy's are writable with a ``FutureWarning`` on write:
    elements shared along a broadcast axis cannot be written independently)."""
    if not all(type(array) is SmartArray for array in arrays):
        return FALLBACK
    shape = np.broadcast_shapes(*(array.shape for array in arrays))
    return tuple(
        array
        if array.shape == shape
        else array._apply_view(lambda template: np.broadcast_to(template, shape))
        for array in arrays
    )


def _einsum(*operands: Any, **kwargs: Any) -> Any:
    """``np.einsum`` of one operand that numpy answers with a view (``'ii->i'``, ``'ij->ji'``):
    the view, made on the layout (writable when the operand is, like numpy's); anything else
    runs on the host copy.

    numpy returns a view for a single operand without ``out=`` exactly when every subscript
    of the operand is in the output, a decision made on the subscripts alone, before any data
    is read. It is asked first on a stand-in of at most one element with the operand's
    dtype and number of dimensions; only if that gives a view of the stand-in is the real
    call made, on the layout template (which numpy then never reads).
    """
    if kwargs.get("out") is not None:
        return FALLBACK
    if isinstance(operands[0], str):  # einsum('ii->i', a)
        if len(operands) != 2:
            return FALLBACK
        array = operands[1]
    else:  # einsum(a, [0, 0], [0])
        if len(operands) not in (2, 3) or not all(type(s) is list for s in operands[1:]):
            return FALLBACK
        array = operands[0]
    if not isinstance(array, SmartArray) or array.dtype.names is not None:
        return FALLBACK
    stand_in: np.ndarray = np.zeros(tuple(min(length, 1) for length in array.shape), array.dtype)
    try:
        probe = np.einsum(*(stand_in if x is array else x for x in operands), **kwargs)
    except Exception:  # numpy's own error comes from the ordinary path
        return FALLBACK
    if not isinstance(probe, np.ndarray) or probe.base is not stand_in:
        return FALLBACK  # numpy computes a new array: it reads the data
    template = array._template()
    return array._from_template(
        np.einsum(*(template if x is array else x for x in operands), **kwargs)
    )


protocols.register_functions(
    {
        np.rot90: _template_function(np.rot90),
        np.linalg.matrix_transpose: _template_function(np.linalg.matrix_transpose),
        np.linalg.diagonal: _template_function(np.linalg.diagonal),
        np.lib.stride_tricks.sliding_window_view: _template_function(
            np.lib.stride_tricks.sliding_window_view
        ),
        np.einsum: _einsum,
        np.broadcast_arrays: _broadcast_arrays,
        np.trim_zeros: _writable_as_numpy(np.trim_zeros, may_return_input=False),
        np.real_if_close: _writable_as_numpy(np.real_if_close, may_return_input=True),
    }
)
