"""smartarray._numba.access: which parameters a function may write or read.

The analysis reads Numba IR and runs no kernel, so these tests run in every tier.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from operator import setitem
from typing import Any

import numba
import numpy as np
import pytest
from helpers import libc_memset
from numba import cuda, njit

import smartarray
from smartarray._numba import access as _access
from smartarray._numba import jit_intents as _jit_intents
from smartarray._numba.access import analyse


@cuda.jit(device=True)
def _store(a, v):  # type: ignore[no-untyped-def]
    a[0] = v


@cuda.jit(device=True)
def _load(a):  # type: ignore[no-untyped-def]
    return a[0]


@cuda.jit(device=True)
def _same(a):  # type: ignore[no-untyped-def]
    return a


def _opaque(a: Any) -> None:
    """A plain Python function: the analysis cannot see what it does."""


# --- kernels that write ``x`` through an alias and only read ``y`` --------------------------


def k_slice(x, y):  # type: ignore[no-untyped-def]
    v = x[1:]
    v[0] = y[0]


def k_transpose(x, y):  # type: ignore[no-untyped-def]
    t = x.T
    t[0, 0] = y[0]


def k_reshape(x, y):  # type: ignore[no-untyped-def]
    r = x.reshape(x.size)
    r[0] = y[0]


def k_tuple_unpacking(x, y):  # type: ignore[no-untyped-def]
    pair = (y, x)
    a, b = pair
    b[0] = a[0]


def k_reassignment_in_a_loop(x, y):  # type: ignore[no-untyped-def]
    z = y[:0]
    for i in range(2):
        if i == 1:
            z = x
    z[0] = 1


def k_row_view(x, y):  # type: ignore[no-untyped-def]
    row = x[0]
    row[0] = y[0]


def k_device_function(x, y):  # type: ignore[no-untyped-def]
    _store(x[1:], _load(y))


def k_view_returned_by_device_function(x, y):  # type: ignore[no-untyped-def]
    v = _same(x)
    v[0] = y[0]


def k_atomic(x, y):  # type: ignore[no-untyped-def]
    cuda.atomic.add(x, 0, y[0])


def k_atomic_max_on_a_view(x, y):  # type: ignore[no-untyped-def]
    cuda.atomic.max(x[2:], 0, y[0])


def k_inplace_operator(x, y):  # type: ignore[no-untyped-def]
    v = x[:2]
    v += y[0]


def k_record_field(x, y):  # type: ignore[no-untyped-def]
    r = x[0]
    r.f = y[0]


def k_writing_method(x, y):  # type: ignore[no-untyped-def]
    x.fill(y[0])


def k_numpy_out_keyword(x, y):  # type: ignore[no-untyped-def]
    np.add(y, y, out=x)


def k_numpy_positional_output(x, y):  # type: ignore[no-untyped-def]
    np.multiply(y, 2, x)


def k_unknown_function(x, y):  # type: ignore[no-untyped-def]
    _opaque(x)
    y.sum()


def k_container(x, y):  # type: ignore[no-untyped-def]
    keep = [x]
    y.sum()
    return len(keep)


def k_returned(x, y):  # type: ignore[no-untyped-def]
    y.sum()
    return x[1:]


def k_captured(x, y):  # type: ignore[no-untyped-def]
    def inner():  # type: ignore[no-untyped-def]
        x[0] = 1

    y.sum()


def k_with_block(x, y):  # type: ignore[no-untyped-def]
    with numba.objmode():
        pass
    y.sum()


WRITES_X = [
    k_slice,
    k_transpose,
    k_reshape,
    k_tuple_unpacking,
    k_row_view,
    k_device_function,
    k_view_returned_by_device_function,
    k_atomic,
    k_atomic_max_on_a_view,
    k_inplace_operator,
    k_record_field,
    k_writing_method,
    k_numpy_out_keyword,
    k_numpy_positional_output,
    k_unknown_function,
    k_container,
    k_returned,
    k_captured,
]


@pytest.mark.parametrize("kernel", WRITES_X, ids=lambda f: f.__name__)
def test_writes_through_every_alias_kind_are_seen(kernel: Callable[..., Any]) -> None:
    access = analyse(kernel)
    assert [p.name for p in access.params] == ["x", "y"]
    assert access.may_write(0), access
    assert access.params[0].reasons or 0 in access.returns
    assert not access.may_write(1), access  # precision: y is still provably read-only


def test_reassignment_in_a_loop_may_write_both() -> None:
    x, y = analyse(k_reassignment_in_a_loop).params
    assert x.writes and y.writes  # flow-insensitive: z may be either


def test_with_blocks_such_as_objmode_are_pessimistic() -> None:
    x, y = analyse(k_with_block).params
    assert x.writes and y.writes and "objmode" in x.reasons[0]


def k_reads_only(x, y, n):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < x.shape[0] and i < len(y):
        t = x[i] * 2 + y[i]
        return t + n + x.T[0, 0] + np.sum(y) + y.reshape(y.size)[0] + abs(x[0]) + min(n, 1)
    return 0


def test_provably_read_only_parameters() -> None:
    access = analyse(k_reads_only)
    assert [p.writes for p in access.params] == [False, False, False]
    assert [p.reads for p in access.params] == [True, True, True]


def k_reductions(x, y, out):  # type: ignore[no-untyped-def]
    s = 0.0
    p = 1.0
    n = 0
    for j in range(x.shape[0]):
        s += x[j]  # a number accumulating elements (or, for a 2-d x, a new array)
        s = s - y[j] * 2
        p *= x[j, 0] if x.ndim > 1 else x[j]
        n += 1
    out[0] = -s + p + n


def k_int_product_of_rows(x, out):  # type: ignore[no-untyped-def]
    q = 1
    for j in range(x.shape[0]):
        q *= x[j]  # int * tuple repeats the tuple: x[j] could hold x's arrays
    out[0] = q


def k_number_then_view(x, out):  # type: ignore[no-untyped-def]
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j]
    s = x[1:]  # another definition: s may be a view of x
    s += 1.0


def k_tuple_concatenation(x, out):  # type: ignore[no-untyped-def]
    t = (out,)
    t += (x,)  # a tuple holding x, not a number
    t[1][0] = 1.0


def test_reductions_into_numbers_do_not_write_what_they_read() -> None:
    x, y, out = analyse(k_reductions).params
    assert not x.writes and not y.writes and x.reads and y.reads
    assert out.writes


@pytest.mark.parametrize(
    "kernel", [k_int_product_of_rows, k_number_then_view, k_tuple_concatenation]
)
def test_accumulators_that_may_hold_parameter_memory_still_write(kernel: Any) -> None:
    assert analyse(kernel).params[0].writes


def out_read(val, out):  # type: ignore[no-untyped-def]
    out[0] *= val[0]


def out_written_only(val, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        out[i] = val[i] + len(out)


def out_read_through_a_loop_variable(val, out):  # type: ignore[no-untyped-def]
    total = 0.0
    for v in out:
        total += v
    out[0] = total + val[0]


def test_reads_of_outputs() -> None:
    assert analyse(out_read).params[1].reads
    assert not analyse(out_written_only).params[1].reads
    assert analyse(out_read_through_a_loop_variable).params[1].reads


def varargs(x, *rest):  # type: ignore[no-untyped-def]
    rest[1][0] = x[0]


def test_star_args_map_every_extra_argument_to_one_parameter() -> None:
    access = analyse(varargs)
    assert access.vararg == 1
    assert [access.writes_at(i) for i in range(4)] == [False, True, True, True]


def recursive(x, y):  # type: ignore[no-untyped-def]
    return recursive_device(x, y)


@cuda.jit(device=True)
def recursive_device(x, y):  # type: ignore[no-untyped-def]
    return recursive_device(y, x)


def test_recursion_is_pessimistic() -> None:
    assert all(p.writes for p in analyse(recursive).params)


def test_results_are_cached_per_function() -> None:
    assert analyse(k_slice) is analyse(k_slice)
    assert analyse(_store) is analyse(_store.py_func if hasattr(_store, "py_func") else _store)


def test_functions_without_ir_are_pessimistic() -> None:
    access = _access._analyse_untyped(print)  # a builtin: no bytecode
    assert access.params == ()
    assert analyse(len).params == ()


# --- @njit: the typed analysis, decided when an overload is compiled -----------------------


@njit
def _writes_first(a, b):  # type: ignore[no-untyped-def]
    a[0] = b[0]


@njit
def nj_scalar_copy(x, y):  # type: ignore[no-untyped-def]
    t = x[0]
    t += 1.0  # typed IR: t is a float, not a view of x
    return t + y.sum()


@njit
def nj_calls_a_writer(x, y):  # type: ignore[no-untyped-def]
    _writes_first(x[1:], y)


@njit
def nj_list_of_arrays(x, y):  # type: ignore[no-untyped-def]
    arrays = [y[:1]]
    arrays.append(x)
    arrays[1][0] = 5.0
    return y[0]


@njit
def nj_returns_its_argument(x, y):  # type: ignore[no-untyped-def]
    return x if y[0] > 0 else x[:1]


def _compiled_access(dispatcher: Any, *args: Any) -> _access.FunctionAccess:
    dispatcher(*args)
    signature = dispatcher.signatures[-1]
    access = _jit_intents.overload_access(dispatcher, signature)
    assert access is not None
    return access


def test_njit_typed_analysis() -> None:
    x, y = smartarray.SmartArray(np.ones(3)), smartarray.SmartArray(np.ones(3))
    scalar = _compiled_access(nj_scalar_copy, x, y)
    assert [p.writes for p in scalar.params] == [False, False]
    writer = _compiled_access(nj_calls_a_writer, x, y)
    assert [p.writes for p in writer.params] == [True, False]
    assert "_writes_first" in writer.params[0].reasons[0]
    lists = _compiled_access(nj_list_of_arrays, x, y)
    assert lists.params[0].writes  # x stored in a list, then written through it
    returned = _compiled_access(nj_returns_its_argument, x, y)
    assert returned.may_write(0) and not returned.may_write(1)


def test_njit_overloads_without_analysis_report_none() -> None:
    @njit
    def untouched(a):  # type: ignore[no-untyped-def]
        return a

    untouched(np.ones(2))  # no SmartArray argument: the unboxing never asked
    assert _jit_intents.overload_access(untouched, untouched.signatures[0]) is None
    assert _jit_intents.compilation_access(None) is None


# --- smartarray.explain_intents -----------------------------------------------------------


def test_explain_intents_of_a_jit_function() -> None:
    x = smartarray.SmartArray(np.ones(3))
    y = smartarray.SmartArray(np.ones(3))
    report = smartarray.explain_intents(nj_calls_a_writer, x, y)
    assert report.intents() == ("InOut", "In")
    assert report.arguments[0].parameter == "x" and report.arguments[0].source == "inferred"
    assert "_writes_first" in report.arguments[0].reasons[0]
    assert "x -> InOut" in str(report) and "y -> In" in str(report)
    explicit = smartarray.explain_intents(nj_calls_a_writer, smartarray.InOut(x), np.ones(3))
    assert explicit.intents() == ("InOut", "-")
    assert explicit.arguments[1].source == "not a SmartArray"


def test_explain_intents_of_a_python_function_and_bad_input() -> None:
    x = smartarray.SmartArray(np.ones(3))
    report = smartarray.explain_intents(k_slice, x, x)
    # one allocation behind both arguments, one of which is written
    assert report.intents() == ("InOut", "InOut")
    assert "shared" in report.arguments[1].reasons[0]
    with pytest.raises(TypeError, match="explain_intents"):
        smartarray.explain_intents(42, x)


# --- the launch hook of the GPU tier, driven without a GPU ----------------------------------


def test_gpu_launch_hook_plans_intents_per_allocation() -> None:
    from smartarray._cuda.launch import _hooked_call, bare_intent

    seen: list[list[str]] = []

    def original(self: Any, args: Any, launch_config: Any) -> None:
        # what numba-cuda's CUDADispatcher.call leads to: to_device of each argument
        seen.append([bare_intent(a) for a in args if isinstance(a, smartarray.SmartArray)])

    class Dispatcher:  # the attributes of CUDADispatcher the hook uses
        def __init__(self, func: Callable[..., Any]) -> None:
            self.py_func = func

    call = _hooked_call(original)
    dispatcher = Dispatcher(k_slice)  # writes x, only reads y
    x = smartarray.SmartArray(np.zeros((2, 2)))
    y = smartarray.SmartArray(np.ones(1))
    call(dispatcher, (x, y), None)
    call(dispatcher, (x, x[1:]), None)  # one allocation, written through x
    call(dispatcher, (np.zeros(2), np.ones(1)), None)
    assert seen == [["inout", "in"], ["inout", "inout"], []]
    assert bare_intent(y) == "inout"  # outside a launch: pessimistic
    assert "_smartarray_write_mask" in vars(dispatcher)  # analysed once, cached


def test_launch_hooks_are_installed_for_this_tier() -> None:
    from smartarray._cuda.launch import install_launch_hooks

    assert install_launch_hooks()  # idempotent
    if smartarray.tier() == "simulator":
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        hooked = FakeCUDAKernel.__call__
    else:
        from numba.cuda.dispatcher import CUDADispatcher

        hooked = CUDADispatcher.call
    assert getattr(hooked, "__smartarray_launch_hook__", False)
    assert not getattr(hooked.__wrapped__, "__smartarray_launch_hook__", False)


@njit
def nj_recursive(x, n):  # type: ignore[no-untyped-def]
    if n > 0:
        return nj_recursive(x, n - 1)
    return x[0]


def test_njit_recursion_terminates_and_is_pessimistic() -> None:
    x = smartarray.SmartArray(np.arange(3.0))
    assert nj_recursive(x, 3) == 0.0
    access = _jit_intents.overload_access(nj_recursive, nj_recursive.signatures[0])
    assert access is not None and access.may_write(0)
    assert any("recursive" in reason for reason in access.params[0].reasons)


# --- writes through the operator module, a positional ``out``, a raw address (issue 24) ----

_MEMSET = libc_memset()
needs_memset = pytest.mark.skipif(_MEMSET is None, reason="no C library memset via ctypes")

#: Every in-place function of the operator module, by name and by dunder alias.
_INPLACE_NAMES = _access._names(
    "iadd isub imul imatmul itruediv ifloordiv imod ipow ilshift irshift iand ior ixor iconcat"
)


def _kernel_calling(fn: Any, store: bool) -> Callable[..., Any]:
    """A kernel ``k(x, y)`` that calls ``fn(x[1:], 0, y[0])`` (a store) or ``fn(x[1:], y[0])``
    (``fn``, a free variable, is resolved as a global would be)."""

    def k_store(x, y):  # type: ignore[no-untyped-def]
        fn(x[1:], 0, y[0])

    def k_inplace(x, y):  # type: ignore[no-untyped-def]
        fn(x[1:], y[0])

    return k_store if store else k_inplace


@pytest.mark.parametrize(
    "name",
    [
        *sorted(_INPLACE_NAMES),
        *(f"__{n}__" for n in sorted(_INPLACE_NAMES)),
        "setitem",
        "__setitem__",
    ],
)
def test_operator_functions_that_write_their_first_argument(name: str) -> None:
    fn = getattr(operator, name)
    access = analyse(_kernel_calling(fn, store="setitem" in name))
    assert access.may_write(0) and not access.may_write(1), access
    assert f"operator.{fn.__name__}()" in access.params[0].reasons[0]


def k_operator_setitem(x, y):  # type: ignore[no-untyped-def]
    operator.setitem(x, 0, y[0])


def k_imported_setitem(x, y):  # type: ignore[no-untyped-def]
    setitem(x[1:], 0, y[0])  # from operator import setitem


def k_operator_delitem(x, y):  # type: ignore[no-untyped-def]
    operator.delitem(x, y[0])


def k_operator_iadd_on_a_view(x, y):  # type: ignore[no-untyped-def]
    v = x.T
    operator.iadd(v, y)


def k_operator_call(x, y):  # type: ignore[no-untyped-def]
    operator.call(_opaque, x)  # (Python 3.11+) calls _opaque(x)
    y.sum()


def k_operator_reads(x, y):  # type: ignore[no-untyped-def]
    return operator.getitem(x, 0) + operator.add(y[0], x[1]) + operator.neg(operator.mul(x, 2))


def k_positional_out(x, y):  # type: ignore[no-untyped-def]
    np.clip(y, 0.0, 1.0, x)


def k_positional_out_of_a_method(x, y):  # type: ignore[no-untyped-def]
    y.clip(0.0, 1.0, x[1:])


def k_positional_out_of_around(x, y):  # type: ignore[no-untyped-def]
    np.around(y, 1, x)


def k_positional_out_of_outer(x, y):  # type: ignore[no-untyped-def]
    np.outer(y, y, x)


def k_out_through_star_args(x, y):  # type: ignore[no-untyped-def]
    rest = (0.0, 1.0, x)
    np.clip(y, *rest)


def k_overwrite_input(x, y):  # type: ignore[no-untyped-def]
    np.median(x, None, None, True)
    np.percentile(y, 50.0, overwrite_input=False)


@cuda.jit(device=True)
def _store_second(a, b):  # type: ignore[no-untyped-def]
    b[0] = a[0]


def k_star_args_to_a_device_function(x, y):  # type: ignore[no-untyped-def]
    _store_second(*(y, x))


def k_address_passed_to_c(x, y):  # type: ignore[no-untyped-def]
    _MEMSET(x.ctypes.data, 0, 8)
    y.sum()


def k_address_accumulated(x, y):  # type: ignore[no-untyped-def]
    p = 0
    p += x.ctypes.data  # a number plus an address: an address, not a number
    _MEMSET(p + 8, 0, 8)
    s = 0.0
    s += y[0]


def k_buffer_passed_on(x, y):  # type: ignore[no-untyped-def]
    _opaque(x.data)
    y.sum()


WRITES_X_ISSUE_24 = [
    k_operator_setitem,
    k_imported_setitem,
    k_operator_delitem,
    k_operator_iadd_on_a_view,
    k_positional_out,
    k_positional_out_of_a_method,
    k_positional_out_of_around,
    k_positional_out_of_outer,
    k_out_through_star_args,
    k_overwrite_input,
    k_star_args_to_a_device_function,
    k_address_passed_to_c,
    k_address_accumulated,
    k_buffer_passed_on,
]
if hasattr(operator, "call"):
    WRITES_X_ISSUE_24.append(k_operator_call)


@pytest.mark.parametrize("kernel", WRITES_X_ISSUE_24, ids=lambda f: f.__name__)
def test_writes_through_operators_outputs_and_addresses_are_seen(kernel: Any) -> None:
    test_writes_through_every_alias_kind_are_seen(kernel)


def test_operator_reads_and_calls_without_out_stay_reads() -> None:
    assert [p.writes for p in analyse(k_operator_reads).params] == [False, False]

    def reads(x, y):  # type: ignore[no-untyped-def]
        np.clip(x, 0.0, 1.0)
        np.clip(x, 0.0, 1.0, None)
        x.clip(0.0, 1.0, out=None)
        np.median(y, None, None, False)
        return np.sum(x, 0) + np.around(y, 2) + np.outer(x, y) + x.sum(0) + y.round(1)

    assert [p.writes for p in analyse(reads).params] == [False, False]


def k_sums_a_record_field_named_data(x, out):  # type: ignore[no-untyped-def]
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j].data  # a field of a record, not an address: s stays a number
    out[0] = s


def test_a_number_accumulating_a_field_named_data_is_still_a_number() -> None:
    x, out = analyse(k_sums_a_record_field_named_data).params
    assert not x.writes and x.reads and out.writes


def test_explain_intents_names_the_write() -> None:
    x = smartarray.SmartArray(np.ones(3))
    y = smartarray.SmartArray(np.ones(3))
    cases = {
        k_operator_setitem: "a store through operator.setitem()",
        k_operator_iadd_on_a_view: "an in-place operator (operator.iadd())",
        k_positional_out: "out of np.clip() (argument 4, by position)",
        k_positional_out_of_a_method: "out of .clip() (argument 3, by position)",
        k_overwrite_input: "overwrite_input of np.median()",
        k_address_passed_to_c: "a raw address of its memory passed to",
    }
    for kernel, why in cases.items():
        report = smartarray.explain_intents(kernel, x, y)
        assert report.intents() == ("InOut", "In"), report
        assert why in report.arguments[0].reasons[0], report


def _signature_positions(func: Any, name: str, skip: int = 0) -> int | None:
    """The position of parameter ``name`` among the positional parameters of ``func`` (after
    ``skip`` leading ones: ``self``), None when it has none by that name."""
    import inspect

    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = [p.name for p in inspect.signature(func).parameters.values() if p.kind in kinds]
    params = params[skip:]
    return params.index(name) if name in params else None


def test_out_positions_match_numpy_signatures() -> None:
    # Every NumPy function and ndarray method the analysis lists as read-only, against the
    # installed numpy: a positional ``out`` (or ``overwrite_input``) the table lacks would be
    # a missed write.
    checked = 0
    for name in sorted(_access._NUMPY_PURE):
        func = getattr(np, name)
        if isinstance(func, np.ufunc):
            continue  # ufuncs: every positional argument after the inputs is an output
        assert _access._NUMPY_OUT_POSITION.get(name) == _signature_positions(func, "out"), name
        overwrite = _signature_positions(func, "overwrite_input")
        assert _access._NUMPY_OVERWRITE_POSITION.get(name) == overwrite, name
        checked += 1
    for name in sorted(_access._NUMPY_LINALG_PURE):
        assert _signature_positions(getattr(np.linalg, name), "out") is None, name
    for name in sorted(_access._READONLY_METHODS):
        method = getattr(np.ndarray, name, None)
        if not callable(method):
            assert name in ("count", "index", "real", "imag"), name  # tuple methods, attributes
            continue
        position = _signature_positions(method, "out", skip=1)
        assert _access._METHOD_OUT_POSITION.get(name) == position, name
        checked += 1
    assert checked > 80


# --- @njit (typed IR): the same writes, decided per compiled overload -----------------------


@njit
def nj_operator_setitem(x, y):  # type: ignore[no-untyped-def]
    operator.setitem(x, 0, y[0])


@njit
def nj_operator_iadd(x, y):  # type: ignore[no-untyped-def]
    operator.iadd(x, y[0])


@njit
def nj_operator_dunder_isub(x, y):  # type: ignore[no-untyped-def]
    operator.__isub__(x[1:], y[0])


@njit
def nj_clip_out(x, y):  # type: ignore[no-untyped-def]
    np.clip(y, 0.0, 1.0, x)


@njit
def nj_around_out(x, y):  # type: ignore[no-untyped-def]
    np.around(y, 1, x)


@njit
def nj_method_clip_out(x, y):  # type: ignore[no-untyped-def]
    y.clip(0.0, 1.0, x)


@njit
def nj_outer_out(x, y):  # type: ignore[no-untyped-def]
    np.outer(y[:1], y[:3], x.reshape(1, 3))


@njit
def nj_memset(x, y):  # type: ignore[no-untyped-def]
    _MEMSET(x.ctypes.data, 0, x.nbytes)
    return y[0]


@njit
def nj_memset_ctypes(x, y):  # type: ignore[no-untyped-def]
    _MEMSET(x.ctypes, 0, x.nbytes)
    return y[0]


@njit
def _memset_at(address, count):  # type: ignore[no-untyped-def]
    _MEMSET(address, 0, count)


@njit
def nj_address_to_a_jit_function(x, y):  # type: ignore[no-untyped-def]
    _memset_at(x.ctypes.data + 8, 8)
    return y[0]


@njit
def _memset_second(pair):  # type: ignore[no-untyped-def]
    _MEMSET(pair[1], 0, 8)
    return pair[0][0]


@njit
def nj_address_in_a_tuple(x, y):  # type: ignore[no-untyped-def]
    return _memset_second((y, x.ctypes.data))


@njit
def nj_address_stored(x, y):  # type: ignore[no-untyped-def]
    y[0] = x.ctypes.data  # (y holds integers)


@njit
def nj_address_returned(x, y):  # type: ignore[no-untyped-def]
    return x.ctypes.data + y.size


@njit
def _writes_second(a, b):  # type: ignore[no-untyped-def]
    b[0] = a[0]


@njit
def nj_star_args(x, y):  # type: ignore[no-untyped-def]
    _writes_second(*(y, x))


NJ_WRITES_X = [
    nj_operator_setitem,
    nj_operator_iadd,
    nj_operator_dunder_isub,
    nj_clip_out,
    nj_around_out,
    nj_method_clip_out,
    nj_outer_out,
    nj_star_args,
]
NJ_ADDRESS_ESCAPES = [
    nj_memset,
    nj_memset_ctypes,
    nj_address_to_a_jit_function,
    nj_address_in_a_tuple,
    nj_address_stored,
    nj_address_returned,
]


@pytest.mark.parametrize("function", NJ_WRITES_X, ids=lambda f: f.__name__)
def test_njit_writes_through_operators_and_positional_outputs(function: Any) -> None:
    x, y = smartarray.SmartArray(np.zeros(3)), smartarray.SmartArray(np.full(3, 0.25))
    access = _compiled_access(function, x, y)
    assert access.may_write(0) and not access.may_write(1), access
    assert smartarray.explain_intents(function, x, y).intents() == ("InOut", "In")


@needs_memset
@pytest.mark.parametrize("function", NJ_ADDRESS_ESCAPES, ids=lambda f: f.__name__)
def test_njit_raw_addresses_escaping_count_as_writes(function: Any) -> None:
    x = smartarray.SmartArray(np.ones(3))
    dtype = np.uintp if function is nj_address_stored else np.float64
    y = smartarray.SmartArray(np.zeros(3, dtype=dtype))
    access = _compiled_access(function, x, y)
    assert access.may_write(0), access
    assert function is nj_address_stored or not access.may_write(1), access  # precision
    report = smartarray.explain_intents(function, x, y)
    assert report.intents()[0] == "InOut"
    assert "a raw address of its memory" in report.arguments[0].reasons[0], report


@njit
def nj_reads_through_operators_and_addresses(x, y, n):  # type: ignore[no-untyped-def]
    total = operator.getitem(x, 0) + operator.add(y, 1.0)[0] + np.clip(x, 0.0, 1.0).sum()
    total += x.clip(0.0, 1.0).sum() + np.around(y, 1).sum() + np.outer(x, y).sum()
    address = x.ctypes.data  # taken, compared, never handed out
    k = n + x.shape[0] + int(y[0])
    return total + k + (address == 0)


def test_njit_reads_stay_reads() -> None:
    x, y = smartarray.SmartArray(np.ones(3)), smartarray.SmartArray(np.ones(3))
    access = _compiled_access(nj_reads_through_operators_and_addresses, x, y, 2)
    assert not access.may_write(0) and not access.may_write(1), access
