"""The CUDA target compiles kernels over SmartArrayType (no GPU needed, only NVVM).

``numba.cuda.compile_ptx`` runs the real CUDA compiler pipeline without a device, so this
checks on any machine with the NVVM/NVRTC libraries (the ``ptx`` extra) what the simulator
cannot: that the SmartArray type lowers on the CUDA target, and that a read-only (``In``)
argument makes writes fail to compile.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import smartarray as sa

if sa.tier() == "simulator":
    pytest.skip("compile_ptx is not part of the CUDA simulator", allow_module_level=True)

CC = (9, 0)
NO_COMPILER = (
    "the CUDA compiler libraries (NVVM/NVRTC) are not installed; they come with the [ptx] "
    'extra: pip install -e ".[ptx]"'
)


def _compile(kernel, *argtypes):  # type: ignore[no-untyped-def]
    try:
        return cuda.compile_ptx(kernel, argtypes, cc=CC)
    except Exception as exc:  # NVVM/NVRTC libraries missing: not this test's subject
        if "nvvm" in str(exc).lower() or "nvrtc" in str(exc).lower():
            pytest.skip(f"{NO_COMPILER} ({exc})")
        raise


def test_missing_compiler_libraries_skip_naming_the_ptx_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_nvrtc(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("libnvrtc.so.13: cannot open shared object file")  # as without the extra

    monkeypatch.setattr(cuda, "compile_ptx", no_nvrtc)
    with pytest.raises(pytest.skip.Exception) as skipped:
        _compile(inc, sa.numba_type(np.float32, 1, "C"))
    assert 'the [ptx] extra: pip install -e ".[ptx]"' in str(skipped.value)
    assert "libnvrtc.so.13" in str(skipped.value)


def inc(a):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def views(a, out):  # type: ignore[no-untyped-def]
    i, j = cuda.grid(2)
    t = a.T
    row = a[1]
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = t[j, i] + row[0] + a.shape[0]


@pytest.mark.parametrize("layout", ["C", "F", "A"])
def test_smartarray_type_compiles_for_cuda(layout: str) -> None:
    ptx, restype = _compile(inc, sa.numba_type(np.float32, 1, layout))
    assert ".entry" in ptx or ".visible" in ptx
    assert str(restype) == "none"


def test_views_and_mixed_arguments_compile() -> None:
    from numba import types

    ptx, _ = _compile(views, sa.numba_type(np.float64, 2, "A", readonly=True), types.float64[:, :])
    assert "ld.global" in ptx or "ld." in ptx


def test_read_only_argument_rejects_writes_at_compile_time() -> None:
    from numba.core.errors import TypingError

    with pytest.raises(TypingError, match="readonly"):
        _compile(inc, sa.numba_type(np.float64, 1, "A", readonly=True))


def test_unaligned_views_compile_to_byte_accesses() -> None:
    # A field of a packed structured array: float64 at byte offset 4 with a 12-byte stride.
    packed = sa.SmartArray(np.zeros(4, dtype=[("a", "i4"), ("b", "f8")]))
    from smartarray._numba.types import smartarray_type_of

    field_type = smartarray_type_of(packed["b"], readonly=False)
    assert not field_type.aligned and "unaligned" in field_type.name
    ptx, _ = _compile(inc, field_type)
    assert "st.u8" in ptx and "st.f64" not in ptx  # byte stores: no misaligned 8-byte store
    aligned_ptx, _ = _compile(inc, sa.numba_type(np.float64, 1, "A"))
    assert "st.f64" in aligned_ptx
