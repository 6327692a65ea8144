"""SmartArrays in ``@jit``/``@njit`` functions (issue #3): typing, boxing, coherence, options.

Jitted functions are defined once at module level: Numba's compile time dominates this file.
Tests marked ``device`` need the CUDA simulator or a GPU (tier 2/3).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pytest
from helpers import ROOT, inc
from numba import njit, prange
from numba.core import types
from numba.core.dispatcher import Dispatcher
from numba.core.errors import TypingError

import smartarray
from smartarray import In, InOut, Out, SmartArray, SmartArrayType
from smartarray._numba import cpu as numba_cpu
from smartarray._numba import signatures as numba_signatures
from smartarray._numba.types import BOXING_VERSION
from smartarray.bench.njit import measure_njit_overhead

# --- jitted functions (compiled once per process) -------------------------------------------


@njit
def ident(a: Any) -> Any:
    return a


@njit
def length(a: Any) -> int:
    return len(a)


@njit
def shape_of(a: Any) -> Any:
    return a.shape, a.ndim, a.size


@njit
def item(a: Any, i: int) -> Any:
    return a[i]


@njit
def middle(a: Any) -> Any:
    return a[1:3]


@njit
def ufunc_chain(a: Any) -> Any:
    return np.sqrt(a * 2.0 + 1.0) - a


@njit
def as_int32(a: Any) -> Any:
    return a.astype(np.int32)


@njit
def scale(a: Any, k: float) -> None:
    for i in range(a.shape[0]):
        a[i] *= k


@njit
def total(a: Any) -> float:
    return a.sum()


@njit
def iterate(a: Any) -> float:
    s = 0.0
    for v in a:
        s += v
    return s


@njit
def write_first(a: Any) -> None:
    a[0] = 1.0


@njit
def pick(c: bool, u: Any, v: Any) -> Any:
    return u if c else v


@njit
def tuple_sum(t: Any) -> Any:
    return t[0].sum() + t[1].sum(), t


@njit
def add(u: Any, v: Any) -> Any:
    return u + v


@njit(parallel=True)
def parallel_square(a: Any) -> float:
    for i in prange(a.shape[0]):
        a[i] = a[i] * a[i]
    s = 0.0
    for i in prange(a.shape[0]):
        s += a[i]
    return s


@njit(fastmath=True, nogil=True)
def fast_norm(a: Any) -> float:
    return np.sqrt((a * a).sum())


@njit
def inner(a: Any) -> Any:
    return a * 2.0


@njit
def outer(a: Any) -> Any:
    b = inner(a)
    return b + 1.0


@njit("float64(float64[:])")
def explicit_plain(a: Any) -> float:
    return a.sum()


@njit
def calls_explicit_plain(a: Any) -> float:
    return explicit_plain(a)


@njit(numba.float64(smartarray.numba_type(np.float64, 1)))
def explicit_smart(a: Any) -> float:
    a[0] = 7.0
    return a.sum()


@njit(numba.float64(smartarray.numba_type(np.float64, 1, "A", readonly=True)))
def explicit_smart_readonly(a: Any) -> float:
    return a.sum()


@njit
def calls_explicit_smart(a: Any) -> float:
    return explicit_smart(a)


@numba.jit(forceobj=True)
def object_mode(a: Any) -> Any:
    return type(a).__name__, float(np.sum(a)), a[1], len(a), a + 1


@njit
def through_objmode(a: Any) -> Any:
    with numba.objmode(name="unicode_type", s="float64"):
        name = type(a).__name__
        s = float(np.sum(a))
    return name, s


def arange(n: int = 10) -> SmartArray:
    return smartarray.asarray(np.arange(float(n)))


# --- registration and typing ----------------------------------------------------------------


def test_registration_is_idempotent() -> None:
    wrapped = (types.Array.unify, types.Array.can_convert_to)
    hooks = (Dispatcher._search_new_conversions, Dispatcher.get_call_template)
    can_compile = Dispatcher.__dict__["_can_compile"]
    numba_cpu._init_extension()
    numba_cpu._teach_plain_array()
    numba_cpu._teach_plain_array()
    numba_signatures.install_dispatcher_hooks()
    assert (types.Array.unify, types.Array.can_convert_to) == wrapped  # not wrapped twice
    assert (Dispatcher._search_new_conversions, Dispatcher.get_call_template) == hooks
    assert Dispatcher.__dict__["_can_compile"] is can_compile
    assert ident(arange()) is not None


def test_numba_program_without_smartarray_never_loads_it(tmp_path: Path) -> None:
    # An install of this checkout, as far as importlib.metadata can tell: its dist-info
    # (entry points from pyproject.toml) first on sys.path, ahead of any installed one.
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dist_info = tmp_path / f"smartarray-{project['version']}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: smartarray\nVersion: {project['version']}\n"
    )
    (dist_info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
            for group, points in project.get("entry-points", {}).items()
        )
    )
    code = textwrap.dedent(
        """
        import importlib.metadata, sys
        import numba
        import numpy as np

        declared = importlib.metadata.distribution("smartarray").read_text("entry_points.txt")
        assert declared == open(sys.argv[1]).read(), declared  # this checkout's metadata
        assert numba.njit(lambda x: x + 1)(1) == 2  # the first compilation loads extensions
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("smartarray", "numba_cuda")
                        or m.startswith("numba.cuda"))
        print(loaded)
        import smartarray  # registers everything
        a = smartarray.asarray(np.arange(3.0))
        assert numba.njit(lambda x: x)(a) is a
        """
    )
    path = os.pathsep.join([str(tmp_path), str(ROOT)])
    out = subprocess.run(
        [sys.executable, "-c", code, str(dist_info / "entry_points.txt")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_argument_types() -> None:
    a = arange()
    assert a._numba_type_ == SmartArrayType(types.float64, 1, "C")
    assert numba.typeof(a) == a._numba_type_
    assert In(a)._numba_type_.mutable is False
    assert a.readonly()._numba_type_ == In(a)._numba_type_
    assert InOut(a)._numba_type_ == a._numba_type_
    assert arange()[::2]._numba_type_.layout == "A"
    fortran = smartarray.asarray(np.asfortranarray(np.ones((2, 3))))
    assert fortran._numba_type_ == smartarray.numba_type(np.float64, 2, "F")
    assert "array(float64, 1d, C) (SmartArray)" in str(a._numba_type_)
    ident(a)
    assert (a._numba_type_,) in ident.signatures


def test_type_key_carries_boxing_version() -> None:
    t = smartarray.numba_type(np.float64, 1)
    assert t.boxing_version == BOXING_VERSION
    assert BOXING_VERSION in t.key
    assert t != types.Array(types.float64, 1, "A")
    assert pickle.loads(pickle.dumps(t)) is t


# --- boxing: identity, views, new arrays -----------------------------------------------------


def test_identity_round_trip() -> None:
    a = arange()
    assert ident(a) is a
    assert ident(a) is a  # the compiled fast path too
    assert ident(In(a)) is a
    view = a[2:7]
    assert ident(view) is view


def test_len_shape_and_getitem() -> None:
    a = arange(10)
    assert length(a) == 10
    assert shape_of(a) == ((10,), 1, 10)
    m = smartarray.asarray(np.ones((3, 4)))
    assert shape_of(m) == ((3, 4), 2, 12)
    assert item(a, 3) == 3.0
    assert item(a, -1) == 9.0
    assert iterate(a) == 45.0
    assert total(a) == 45.0


def test_slice_is_a_view_sharing_coherence_state() -> None:
    a = arange(10)
    s = middle(a)
    assert isinstance(s, SmartArray)
    assert s.base is a
    assert s._alloc is a._alloc
    np.testing.assert_array_equal(s, [1.0, 2.0])
    s[0] = 100.0
    assert a[1] == 100.0
    r = middle(In(a))
    assert isinstance(r, SmartArray) and r._alloc is a._alloc
    assert not r.flags.writeable  # a view of a read-only argument is read-only


def test_ufunc_chain_returns_new_smartarray() -> None:
    a = arange(5)
    r = ufunc_chain(a)
    assert isinstance(r, SmartArray)
    assert r._alloc is not a._alloc
    expected = np.sqrt(np.arange(5.0) * 2 + 1) - np.arange(5.0)
    np.testing.assert_allclose(r.get("host"), expected)
    mixed = add(a, np.ones(5))  # SmartArray wins over ndarray, either order
    assert isinstance(mixed, SmartArray)
    assert isinstance(add(np.ones(5), a), SmartArray)
    assert type(add(np.ones(5), np.ones(5))) is np.ndarray


def test_astype() -> None:
    r = as_int32(arange(4))
    assert isinstance(r, SmartArray)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r.get("host"), [0, 1, 2, 3])


def test_in_place_writes_visible_on_host() -> None:
    a = arange(4)
    scale(a, 3.0)
    np.testing.assert_array_equal(a.get("host"), [0.0, 3.0, 6.0, 9.0])
    scale(a[::2], -1.0)  # through a strided view
    np.testing.assert_array_equal(a.get("host"), [-0.0, 3.0, -6.0, 9.0])
    assert a.is_valid("host")


def test_other_dtypes_and_layouts() -> None:
    for data in (
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.asfortranarray(np.ones((2, 3), dtype=np.complex64)),
        np.zeros(3, dtype=[("x", np.float64), ("y", np.int32)]),
        np.array(3.5),
        np.zeros(0),
        np.array([True, False]),
    ):
        a = smartarray.asarray(data)
        assert ident(a) is a


# --- read-only intent ------------------------------------------------------------------------


def test_readonly_intent_rejects_writes_at_compile_time() -> None:
    a = arange()
    with pytest.raises(TypingError, match="Cannot modify readonly array"):
        write_first(In(a))
    with pytest.raises(TypingError, match="readonly"):
        write_first(a.readonly())
    assert a[0] == 0.0


def test_readonly_smartarray_view_is_typed_readonly() -> None:
    m = smartarray.asarray(np.ones((3, 3)))
    diagonal = m.diagonal()
    assert not diagonal.flags.writeable
    assert total(diagonal) == 3.0
    with pytest.raises(TypingError, match="readonly"):
        write_first(diagonal)


def test_out_and_inout_behave_like_a_bare_argument_on_the_cpu() -> None:
    a = arange(3)
    scale(Out(a), 2.0)
    scale(InOut(a), 2.0)
    np.testing.assert_array_equal(a.get("host"), [0.0, 4.0, 8.0])
    assert ident(Out(a)) is a


# --- mixing, tuples, options -----------------------------------------------------------------


def test_conditional_mixing_smartarray_and_ndarray() -> None:
    a = arange(4)
    x = np.zeros(4)
    assert pick(True, a, x) is a
    assert pick(False, x, a) is a  # ndarray first in the unification
    other = pick(False, a, x)
    assert isinstance(other, SmartArray)
    np.testing.assert_array_equal(other.get("host"), x)
    assert pick(True, a, a[::2]) is a  # two SmartArray layouts
    strided = pick(False, a, a[::2])
    assert strided.base is a and strided.shape == (2,)
    assert pick(True, x, x) is x


def test_smartarrays_inside_tuples() -> None:
    a = arange(4)
    x = np.ones(4)
    s, (r0, r1) = tuple_sum((a, x))
    assert s == 10.0
    assert r0 is a
    assert r1 is x
    s, (r0, r1) = tuple_sum((In(a), a))
    assert s == 12.0 and r0 is a and r1 is a


def test_mixed_argument_specialisations() -> None:
    @njit
    def combine(u: Any, v: Any) -> float:
        return u.sum() - 2 * v.sum()

    a, x = arange(3), np.arange(3.0)
    assert [combine(x, x), combine(a, x), combine(x, a), combine(a, a)] == [-3.0] * 4
    assert combine(In(a), a) == -3.0
    signatures = set(combine.signatures)
    plain, smart = numba.typeof(x), a._numba_type_
    assert signatures == {
        (plain, plain),
        (smart, plain),
        (plain, smart),
        (smart, smart),
        (In(a)._numba_type_, smart),
    }


def test_parallel_prange() -> None:
    a = arange(100)
    s = parallel_square(a)
    assert s == float(np.sum(np.arange(100.0) ** 2))
    np.testing.assert_array_equal(a.get("host"), np.arange(100.0) ** 2)


def test_fastmath_nogil() -> None:
    a = arange(4)
    assert fast_norm(a) == pytest.approx(np.sqrt(14.0))
    assert fast_norm(In(a)) == pytest.approx(np.sqrt(14.0))


def test_jit_calling_jit() -> None:
    r = outer(arange(3))
    assert isinstance(r, SmartArray)
    np.testing.assert_array_equal(r.get("host"), [1.0, 3.0, 5.0])


def test_cache_true_in_fresh_processes(tmp_path: Path) -> None:
    script = tmp_path / "cached.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import numpy as np
            from numba import njit
            import smartarray
            import smartarray._numba.types as numba_types

            numba_types.BOXING_VERSION = int(sys.argv[1])  # before any SmartArray type exists

            @njit(cache=True)
            def bump(a):
                a[0] += 1.0
                return a, a[1:], a * 2.0

            @njit("float64(float64[:])", cache=True)
            def total(a):  # explicit signature: its SmartArray twin is cached too
                return a.sum()

            a = smartarray.asarray(np.arange(4.0))
            same, view, new = bump(a)
            assert same is a and view.base is a and isinstance(new, smartarray.SmartArray)
            assert a[0] == 1.0 and new[0] == 2.0
            assert total(a) == 7.0 and total(np.arange(3.0)) == 3.0
            for f in (bump, total):
                hits = sum(f.stats.cache_hits.values())
                misses = sum(f.stats.cache_misses.values())
                print(hits, misses, end=" ")
            """
        )
    )
    # This checkout's smartarray, not whichever one is installed (the script runs elsewhere).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": path}

    def run(version: int) -> str:
        out = subprocess.run(
            [sys.executable, str(script), str(version)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=180,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    # bump: hits, misses; total (plain signature and SmartArray twin): hits, misses
    assert run(BOXING_VERSION) == "0 1 0 2"  # compiled and saved
    assert run(BOXING_VERSION) == "1 0 2 0"  # loaded from the cache
    # Another boxing protocol never loads old SmartArray code (the plain signature loads).
    assert run(BOXING_VERSION + 1) == "0 1 1 1"


# --- explicit signatures ---------------------------------------------------------------------


def test_explicit_plain_signature_takes_a_smartarray() -> None:
    # Through its SmartArray twin (tests/test_numba_signatures.py has the details).
    assert explicit_plain(arange()) == 45.0
    assert explicit_plain(np.arange(3.0)) == 3.0


def test_jit_to_jit_call_into_explicit_plain_signature() -> None:
    assert calls_explicit_plain(arange(4)) == 6.0


def test_numba_type_signatures() -> None:
    a = arange(4)
    assert explicit_smart(a) == 13.0
    assert a[0] == 7.0
    view = arange(6)[::2]  # 'A' layout accepts strided views
    assert explicit_smart(view) == 13.0
    x = np.arange(4.0)  # an ndarray converts to the SmartArray type too
    assert explicit_smart(x) == 13.0 and x[0] == 7.0
    assert calls_explicit_smart(arange(4)) == 13.0
    assert explicit_smart_readonly(In(a)) == 13.0
    assert explicit_smart_readonly(a) == 13.0


def test_plain_and_smartarray_signatures_together(
    slow_path_calls: tuple[list[bool], Any, Any],
) -> None:
    calls, _, _ = slow_path_calls
    smart = numba.float64(smartarray.numba_type(np.float64, 1))

    @njit(["float64(float64[:])", smart])
    def both(u: Any) -> float:
        return u.sum()

    assert both(np.arange(3.0)) == 3.0  # the plain signature, not ambiguous
    assert calls == []
    assert both(arange(3)) == 3.0  # the SmartArray signature (not refused by the plain one)
    assert calls == [False]  # u.sum() only reads u: inferred read-only, device copy kept


def test_readonly_argument_rejected_by_writable_signature() -> None:
    with pytest.raises(TypeError, match="No matching definition"):
        explicit_smart(In(arange()))


# --- object mode -----------------------------------------------------------------------------


def test_forceobj_sees_a_smartarray() -> None:
    name, s, second, n, plus = object_mode(arange(3))
    assert (name, s, second, n) == ("SmartArray", 3.0, 1.0, 3)
    assert isinstance(plus, SmartArray)


def test_objmode_block_sees_the_same_smartarray() -> None:
    assert through_objmode(arange(3)) == ("SmartArray", 3.0)


# --- misuse ----------------------------------------------------------------------------------


def test_misuse_errors() -> None:
    with pytest.raises(TypingError, match="non-precise"):
        ident(smartarray.asarray(np.array([1, "a"], dtype=object)))
    with pytest.raises(TypeError, match="takes a SmartArray"):
        ident(In(np.zeros(3)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cannot pass"):
        numba_cpu.host_for_jit(object())
    with pytest.raises(ValueError, match="read-only"):
        numba_cpu.host_for_jit(smartarray.asarray(np.ones((2, 2))).diagonal(), write=True)


def test_stale_compiled_layout_is_refused() -> None:
    with pytest.raises(RuntimeError, match="stale"):
        numba_cpu._jit_constants(("SmartArray",))
    assert len(numba_cpu._jit_constants(numba_cpu._LAYOUT)) == len(numba_cpu._LAYOUT)


# --- fast path and overhead ------------------------------------------------------------------


def _count_slow_path_calls(
    monkeypatch: pytest.MonkeyPatch, nrt: bool
) -> tuple[list[bool], Any, Any]:
    """Fresh jitted functions (a writer and a reader), compiled with NRT or without it
    (``_nrt=False``: the unboxing takes the jit view itself, and its slow path is
    ``host_for_jit_nonrt``), and the list of their slow-path calls (their ``write`` flag)."""
    calls: list[bool] = []
    name = "host_for_jit" if nrt else "host_for_jit_nonrt"
    original = getattr(numba_cpu, name)

    def counting(obj: Any, write: bool = True) -> np.ndarray:
        calls.append(write)
        return original(obj, write)

    # Compiled code fetches its helpers on its first call: a function compiled and first
    # called after this patch calls the counting helper whenever it takes the slow path.
    monkeypatch.setattr(numba_cpu, name, counting)

    @njit(_nrt=nrt)
    def touch(a: Any) -> None:
        if a.size < 0:  # never runs, but makes ``a`` a possibly written argument
            a[0] = 0

    @njit(_nrt=nrt)
    def look(a: Any) -> None:  # a reader: inferred read-only
        pass

    return calls, touch, look


@pytest.fixture
def slow_path_calls(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bool], Any, Any]:
    """:func:`_count_slow_path_calls` with NRT (the list counts any function compiled with
    NRT after the patch)."""
    return _count_slow_path_calls(monkeypatch, nrt=True)


@pytest.fixture(params=[True, False], ids=["nrt", "without nrt"])
def slow_path_calls_any_runtime(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[bool], Any, Any]:
    """:func:`_count_slow_path_calls` with NRT and without it."""
    return _count_slow_path_calls(monkeypatch, nrt=request.param)


def test_fast_path_skips_python_once_state_is_settled(
    slow_path_calls_any_runtime: tuple[list[bool], Any, Any],
) -> None:
    calls, touch, look = slow_path_calls_any_runtime
    a = arange()
    for _ in range(5):
        touch(a)
    assert calls == [True]  # first call only: the jit view did not exist yet
    for _ in range(5):
        look(In(a))
    assert calls == [True, False]
    for _ in range(5):
        look(a)  # inferred read-only: the same read-only jit view, already made
    assert calls == [True, False]


def test_overhead_measurement_keys_and_size_independence() -> None:
    result = measure_njit_overhead(repeats=2, calls=300, large_size=1 << 20)
    for key in (
        "ndarray_us",
        "smartarray_us",
        "ratio",
        "ndarray_large_us",
        "smartarray_large_us",
        "ratio_large",
        "readonly_us",
        "ratio_readonly",
        "readonly_new_intent_us",
        "floor_us",
        "ratio_floor",
    ):
        assert result[key] > 0, key
    # Copying 8 MiB would take hundreds of microseconds; a call takes well under one.
    assert result["smartarray_large_us"] < 20 * result["smartarray_us"] + 5


# --- coherence with a device (simulator or GPU) ----------------------------------------------


@pytest.mark.device
def test_write_call_invalidates_device_copy() -> None:
    a = arange(4).to_gpu()
    assert a.location == "both"
    scale(a, 2.0)
    assert a.location == "host"
    with smartarray.track_transfers() as t:
        a.to_gpu()
    assert (t.h2d_count, t.d2h_count) == (1, 0)


@pytest.mark.device
def test_readonly_call_leaves_device_copy_valid() -> None:
    a = arange(4).to_gpu()
    with smartarray.track_transfers() as t:
        assert total(In(a)) == 6.0
        assert total(a.readonly()) == 6.0
        assert explicit_smart_readonly(In(a)) == 6.0
        assert a.location == "both"
        a.to_gpu()
    assert (t.h2d_count, t.d2h_count) == (0, 0)


@pytest.mark.device
def test_device_only_array_is_downloaded_once() -> None:
    a = smartarray.zeros(8, where="gpu")
    inc[1, 32](a)
    with smartarray.track_transfers() as t:
        assert total(In(a)) == 8.0
        assert total(In(a)) == 8.0  # fast path: state BOTH is fine for a reader
        scale(a, 2.0)
        scale(a, 2.0)  # fast path: state HOST
    assert (t.h2d_count, t.d2h_count) == (0, 1)
    assert a.location == "host"
    np.testing.assert_array_equal(a.get("host"), np.full(8, 4.0))


@pytest.mark.device
def test_kernel_njit_kernel_transfer_counts() -> None:
    a = smartarray.zeros(16)
    with smartarray.track_transfers() as t:
        inc[1, 32](a)  # no copy: zeros are made and filled on the device where first used
        scale(a, 2.0)  # D2H, device stale
        inc[1, 32](a)  # H2D
        assert total(In(a)) == 48.0  # D2H, device stays valid
        inc[1, 32](a)  # no copy
        scale(a, 0.5)  # D2H
        inc[1, 32](a)  # H2D
        r = ident(a)  # D2H
        assert r is a
    assert (t.h2d_count, t.d2h_count) == (2, 4)
    np.testing.assert_array_equal(a.get("host"), np.full(16, 3.0))


@pytest.mark.device
def test_view_returned_from_jit_shares_device_state() -> None:
    a = smartarray.zeros(8)
    v = middle(a)
    inc[1, 32](a)  # device now current: the view must see it
    assert v.location == "gpu"
    with smartarray.track_transfers() as t:
        np.testing.assert_array_equal(v.get("host"), [1.0, 1.0])
    assert t.d2h_count == 1


@pytest.mark.device
def test_fast_path_only_when_nothing_to_do(
    slow_path_calls_any_runtime: tuple[list[bool], Any, Any],
) -> None:
    calls, touch, look = slow_path_calls_any_runtime
    a = arange(4).to_gpu()
    look(In(a))
    look(In(a))
    assert calls == [False]  # state BOTH: fine for a reader
    a._alloc._device_event = object()  # device work pending: the slow path waits for it
    try:
        look(In(a))
    finally:
        a._alloc._device_event = None
    assert calls == [False, False]
    touch(a)  # a writer needs state HOST: slow path, then fast
    touch(a)
    assert calls == [False, False, True]
    assert a.location == "host"
    inc[1, 32](a)  # device current: the next call must download
    with smartarray.track_transfers() as t:
        touch(a)
    assert calls == [False, False, True, True] and t.d2h_count == 1


def test_unaligned_field_view_round_trips() -> None:
    records = SmartArray(np.zeros(3, dtype=[("a", "i4"), ("b", "f8")]))
    field = records["b"]
    scale(field, 2.0)
    field[:] = 1.5
    scale(field, 2.0)
    assert total(field) == 9.0
    assert ident(field) is field
    assert np.asarray(records)["b"].tolist() == [3.0, 3.0, 3.0]
