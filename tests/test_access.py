"""smartarray._numba.access: which parameters a function may write or read.

The analysis reads Numba IR and runs no kernel, so these tests run in every tier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import pytest
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
