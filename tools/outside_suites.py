"""Run test suites smartarray did not write with SmartArray arguments, and compare.

Two suites, each run twice (a *baseline* run as shipped, and a *shim* run in which every plain
``np.ndarray`` argument is replaced by a SmartArray for the call), then compared test by test:

* ``cpu``: array-heavy modules of numba's own test suite (``numba.tests.test_array_*``,
  ``test_dyn_array``, ``test_indexing``...). The shim wraps ``Dispatcher.__call__``, the call of
  every ``@jit``/``@njit`` function from Python.
* ``cuda``: numba-cuda's ``cudapy`` tests in the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).
  The shim wraps ``FakeCUDAKernel.__call__``, the simulator's kernel launch, *around*
  smartarray's own launch hook (so bare arguments get inferred intents as in user code).

What the shim does for a call, as Numba's automatic transfer does for ndarrays:

* each top-level ``np.ndarray`` argument (also inside tuples) becomes ``SmartArray(arg)`` (a
  copy; the same ndarray passed twice becomes the same SmartArray); a read-only ndarray is
  passed as ``smartarray.In(SmartArray(arg))``, the documented read-only form;
* after the call (also when it raises), each writable original gets the SmartArray's host
  data back (``np.copyto``), so the test sees the writes;
* results: a SmartArray result that is (a view of) a wrapped argument becomes the same view of
  the original ndarray when the layouts allow it (so identity and aliasing checks see the
  ndarray the test passed); any other SmartArray result becomes its host ndarray.

An argument SmartArray refuses (an object or structured dtype it does not take) is passed
unchanged and counted in ``<suite>-shim-stats.json``.

Usage (from the repository root, with the project's virtual environment active)::

    python tools/outside_suites.py cpu            # baseline + shim, then the comparison
    python tools/outside_suites.py cuda
    python tools/outside_suites.py cpu --mode shim --modules test_array_return
    python tools/outside_suites.py cpu --mode recheck   # baseline of the shim's failures only
    python tools/outside_suites.py cuda -k TestCudaArrayArg test_slicing  # id substrings

Results go to ``--out`` (default ``/tmp/outside-suites``): per run a log and a JSON file of
every test's outcome, and a ``<suite>-report.json`` with the counts, the regressions (pass in
the baseline, not with the shim), the improvements and the shim statistics. Each run is a
separate process (``python -m outside_suites --worker ...``) that loads the modules with
``unittest`` (numba-cuda's test package cannot be collected by pytest from its install path).
The exit status is 1 when there are regressions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import unittest
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(__import__("sysconfig").get_paths()["purelib"])

CPU_MODULES = (
    "test_array_attr",
    "test_array_iterators",
    "test_array_manipulation",
    "test_array_methods",
    "test_array_reductions",
    "test_array_return",
    "test_array_exprs",
    "test_dyn_array",
    "test_fancy_indexing",
    "test_indexing",
    "test_slices",
    "test_storeslice",
)
CUDA_DIR = "numba_cuda/numba/cuda/tests/cudapy"

# --- the shim (runs inside the pytest process) -----------------------------------------------

_state = threading.local()
_stats: Counter[str] = Counter()


class _Call:
    """The SmartArrays of one shimmed call.

    ``pairs`` maps each wrapped ndarray argument to the SmartArray passed for it; ``roots``
    maps each ndarray whose memory they use (the outermost ndarray of an argument's ``base``
    chain) to one SmartArray copy of it. An argument that is a view is passed as the same view
    of its root's SmartArray: its strides, flags and aliasing with other arguments (``a`` and
    ``a[1:]`` in one call) are those of the ndarray.
    """

    def __init__(self) -> None:
        self.pairs: list[tuple[Any, Any]] = []
        self.roots: list[tuple[Any, Any]] = []
        self.direct: list[tuple[Any, Any]] = []  # (copied alone: a root that is no block)


def _root_of(value: Any) -> Any:
    """The outermost ndarray of ``value``'s base chain (``value`` itself if it owns its data)."""
    import numpy as np

    root = value
    while type(root.base) is np.ndarray:
        root = root.base
    return root


def _wrap(value: Any, call: _Call) -> Any:
    """The SmartArray passed for the ndarray ``value``: its root's SmartArray or a view of it."""
    import smartarray

    root = _root_of(value)
    if not (root.flags.c_contiguous or root.flags.f_contiguous):
        wrapped = smartarray.SmartArray(value)  # (a copy: C order)
        call.direct.append((value, wrapped))
        return wrapped
    known = [wrapped for original, wrapped in call.roots if original is root]
    if known:
        wrapped_root = known[0]
    else:
        wrapped_root = smartarray.SmartArray(root)  # (a copy keeps contiguous layouts)
        call.roots.append((root, wrapped_root))
    if root is value:
        return wrapped_root
    offset = value.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    _stats["arguments wrapped as views of their root"] += 1
    return smartarray.SmartArray._view(
        wrapped_root._alloc,
        wrapped_root._offset + offset,
        value.shape,
        value.strides,
        value.dtype,
        bool(value.flags.writeable),
        wrapped_root,
    )


def _to_smartarray(value: Any, call: _Call) -> Any:
    """``value`` with its ndarrays (also in tuples) replaced by SmartArrays."""
    import numpy as np

    import smartarray

    if type(value) is np.ndarray:
        for original, wrapped in call.pairs:
            if original is value:
                _stats["arguments passed twice"] += 1
                return wrapped if value.flags.writeable else smartarray.In(wrapped)
        try:
            wrapped = _wrap(value, call)
        except (TypeError, ValueError, NotImplementedError) as exc:
            _stats[f"refused {value.dtype}: {type(exc).__name__}"] += 1
            return value
        call.pairs.append((value, wrapped))
        _stats["arguments wrapped"] += 1
        return wrapped if value.flags.writeable else smartarray.In(wrapped)
    if type(value) is tuple:
        return tuple(_to_smartarray(item, call) for item in value)
    return value


def _copy_back(call: _Call) -> None:
    import numpy as np

    for original, wrapped in call.roots:
        if original.flags.writeable:
            np.copyto(original, np.asarray(wrapped), casting="no")
    for original, wrapped in call.direct:
        if original.flags.writeable:
            np.copyto(original, np.asarray(wrapped), casting="no")


class _Memory:
    """Holds an ``__array_interface__`` (and the ndarray whose memory it describes)."""

    def __init__(self, interface: dict[str, Any], owner: Any) -> None:
        self.__array_interface__ = interface
        self.owner = owner


def _argument_holding(result: Any, call: _Call) -> Any:
    """The ndarray argument whose memory holds all of ``result``'s (None if none does)."""
    import numpy as np

    if not result.size:
        return None
    lo, hi = np.lib.array_utils.byte_bounds(np.asarray(result))
    for original, wrapped in call.pairs:
        if wrapped._alloc is result._alloc and wrapped.size:
            start, end = np.lib.array_utils.byte_bounds(np.asarray(wrapped))
            if start <= lo and hi <= end:
                return original
    return None


def _view_of_original(result: Any, call: _Call) -> Any:
    """The ndarray a SmartArray result stands for (see the module docstring)."""
    import numpy as np

    for original, wrapped in call.pairs:
        if result is wrapped:
            _stats["results mapped to the original"] += 1
            return original
    host = result.get() if result.flags.writeable else np.asarray(result)
    for original, wrapped in call.roots + call.direct:
        if result._alloc is not wrapped._alloc:
            continue
        whole = wrapped.get()
        if original.shape != whole.shape or original.strides != whole.strides:
            break
        offset = host.__array_interface__["data"][0] - whole.__array_interface__["data"][0]
        interface = dict(host.__array_interface__)
        address = original.__array_interface__["data"][0] + offset
        interface["data"] = (address, not host.flags.writeable)
        # The view keeps alive the argument whose memory it lies in (as numpy's and Numba's
        # views do; tests count references), else the root the arguments are views of.
        holder = _argument_holding(result, call)
        view = np.asarray(_Memory(interface, original if holder is None else holder))
        if view.dtype != host.dtype:
            view = view.view(host.dtype)
        _stats["results mapped to a view of the original"] += 1
        return view
    _stats["results converted to host ndarrays"] += 1
    return host


def _to_ndarray(value: Any, call: _Call) -> Any:
    import smartarray

    if isinstance(value, smartarray.SmartArray):
        return _view_of_original(value, call)
    if type(value) is tuple:
        return tuple(_to_ndarray(item, call) for item in value)
    if type(value) is list:
        return [_to_ndarray(item, call) for item in value]
    return value


def _shimmed(call: Any, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``call(self, *args, **kwargs)`` with SmartArray arguments (outermost calls only)."""
    if getattr(_state, "inside", False):
        return call(self, *args, **kwargs)
    shimmed_call = _Call()
    new_args = tuple(_to_smartarray(value, shimmed_call) for value in args)
    new_kwargs = {name: _to_smartarray(value, shimmed_call) for name, value in kwargs.items()}
    if not shimmed_call.pairs:
        return call(self, *args, **kwargs)
    _stats["calls with SmartArrays"] += 1
    _state.inside = True
    try:
        result = call(self, *new_args, **new_kwargs)
    finally:
        _state.inside = False
        _copy_back(shimmed_call)
    return _to_ndarray(result, shimmed_call)


def install_cpu_shim() -> None:
    """Make every Python call of a CPU dispatcher pass SmartArrays."""
    import numba._dispatcher as c_dispatcher
    from numba.core.dispatcher import Dispatcher

    import smartarray  # noqa: F401  (its dispatcher hooks are installed first)

    c_call = c_dispatcher.Dispatcher.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _shimmed(c_call, self, args, kwargs)

    Dispatcher.__call__ = __call__  # type: ignore[method-assign, assignment]


def install_cuda_shim() -> None:
    """Make every simulator kernel launch pass SmartArrays (outside smartarray's hook)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    import smartarray

    smartarray.install_launch_hooks()
    launch = FakeCUDAKernel.__call__

    def __call__(self: Any, *args: Any) -> Any:
        if self._device:
            return launch(self, *args)
        return _shimmed(launch, self, args, {})

    FakeCUDAKernel.__call__ = __call__  # type: ignore[method-assign]


def install_shim(suite: str) -> None:
    """Install the shim of ``suite`` ('cpu' or 'cuda')."""
    if suite == "cpu":
        install_cpu_shim()
    elif suite == "cuda":
        install_cuda_shim()
    else:
        raise ValueError(f"suite must be 'cpu' or 'cuda', got {suite!r}")


# --- the worker: one unittest run in its own process ----------------------------------------


class _Recorder(unittest.TextTestResult):
    """A unittest result that also keeps every test's outcome and first message line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: dict[str, list[str]] = {}

    def _note(self, test: Any, outcome: str, detail: str = "") -> None:
        previous = self.outcomes.get(test.id())
        if previous is not None and previous[0] in ("failed", "error"):
            return  # a subtest already failed: the test failed
        self.outcomes[test.id()] = [outcome, detail]

    @staticmethod
    def _first_line(err: Any) -> str:
        kind, value, _ = err
        text = f"{kind.__name__}: {value}".replace("\n", " ")
        return text[:300]

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self.outcomes.setdefault(test.id(), ["passed", ""])

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._note(test, "failed", self._first_line(err))

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._note(test, "error", self._first_line(err))

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        self._note(test, "skipped", reason[:300])

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self._note(test, "xfailed")

    def addUnexpectedSuccess(self, test: Any) -> None:
        super().addUnexpectedSuccess(test)
        self._note(test, "xpassed")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._note(test, "failed" if failed else "error", self._first_line(err))


def _selected(suite: unittest.TestSuite, patterns: list[str]) -> unittest.TestSuite:
    """The tests of ``suite`` whose id contains one of ``patterns`` (all if none)."""
    chosen = unittest.TestSuite()
    for test in _flatten(suite):
        if not patterns or any(p in test.id() for p in patterns):
            chosen.addTest(test)
    return chosen


def _flatten(suite: Any) -> list[Any]:
    if isinstance(suite, unittest.TestSuite):
        return [test for item in suite for test in _flatten(item)]
    return [suite]


def worker(suite: str, mode: str, modules: list[str], patterns: list[str], out: Path) -> int:
    """Run ``modules`` with unittest (shim installed in mode 'shim'); write the outcomes."""
    if mode == "shim":
        install_shim(suite)
    loader = unittest.defaultTestLoader
    tests = unittest.TestSuite()
    outcomes: dict[str, list[str]] = {}
    for module in modules:
        try:
            tests.addTests(loader.loadTestsFromName(module))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # an import error or skip is an outcome of the module
            kind = "skipped" if "Skip" in type(exc).__name__ else "error"
            outcomes[module] = [kind, f"{type(exc).__name__}: {exc}"[:300]]
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=_Recorder)
    result = runner.run(_selected(tests, patterns))
    assert isinstance(result, _Recorder)
    outcomes.update(result.outcomes)
    (out / f"{suite}-{mode}.json").write_text(json.dumps(outcomes, indent=1) + "\n")
    if mode == "shim":
        stats = dict(sorted(_stats.items()))
        (out / f"{suite}-shim-stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return 0


# --- the runner ------------------------------------------------------------------------------


def _modules(suite: str, names: list[str] | None) -> list[str]:
    if suite == "cpu":
        return [f"numba.tests.{name}" for name in (names or CPU_MODULES)]
    if not names:
        names = sorted(p.stem for p in (SITE / CUDA_DIR).glob("test_*.py"))
    return [f"numba.cuda.tests.cudapy.{name}" for name in names]


def _run(suite: str, mode: str, args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tools")])
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if suite == "cuda":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    modules = _modules(suite, args.modules)
    command = [sys.executable, "-m", "outside_suites", "--worker", mode, suite]
    command += ["--out", str(out), *(["-k", *args.k] if args.k else []), "--modules", *modules]
    started = time.monotonic()
    print(f"[{suite} {mode}] {len(modules)} module(s) ...", flush=True)
    log = out / f"{suite}-{mode}.log"
    with log.open("w") as stream:  # written as the run goes: `tail -f` shows its progress
        completed = subprocess.run(
            command, cwd=out, env=env, stdout=stream, stderr=subprocess.STDOUT, check=False
        )
    summary = _last_line(log.read_text())
    print(
        f"[{suite} {mode}] {time.monotonic() - started:.0f} s, exit {completed.returncode}: "
        f"{summary}",
        flush=True,
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def compare(suite: str, out: Path) -> dict[str, Any]:
    """Counts of both runs and the tests whose outcome differs; written as JSON and printed."""
    baseline = json.loads((out / f"{suite}-baseline.json").read_text())
    shim = json.loads((out / f"{suite}-shim.json").read_text())
    missing = ["missing", "no outcome: the run crashed"]
    regressions = sorted(
        t for t, o in baseline.items() if o[0] == "passed" != shim.get(t, missing)[0]
    )
    improvements = sorted(
        t for t, o in shim.items() if o[0] == "passed" != baseline.get(t, missing)[0]
    )
    stats_path = out / f"{suite}-shim-stats.json"
    report = {
        "suite": suite,
        "baseline": dict(Counter(o[0] for o in baseline.values())),
        "shim": dict(Counter(o[0] for o in shim.values())),
        "regressions": {t: shim.get(t, missing) for t in regressions},
        "improvements": improvements,
        "shim_stats": json.loads(stats_path.read_text()) if stats_path.exists() else {},
    }
    (out / f"{suite}-report.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{suite}: baseline {report['baseline']}\n{suite}: shim     {report['shim']}")
    print(f"shim statistics: {report['shim_stats']}")
    print(f"{len(regressions)} regression(s) (pass without the shim, not with it):")
    for test, (outcome, message) in report["regressions"].items():
        print(f"  {outcome:7} {test}\n          {message}")
    if improvements:
        print(f"{len(improvements)} test(s) pass only with the shim: {improvements}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", choices=("cpu", "cuda"))
    parser.add_argument(
        "--mode",
        choices=("both", "baseline", "shim", "recheck"),
        default="both",
        help="recheck: after a shim run, run the baseline of its failures only",
    )
    parser.add_argument("--modules", nargs="*", help="test module names (default: the suite's)")
    parser.add_argument("-k", nargs="*", help="run only tests whose id contains one of these")
    parser.add_argument("--out", default="/tmp/outside-suites")
    parser.add_argument("--worker", choices=("baseline", "shim"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.worker:
        return worker(args.suite, args.worker, args.modules, args.k or [], out)
    if args.mode == "recheck":
        # Baseline only for the tests that did not pass with the shim (a quick comparison).
        shim = json.loads((out / f"{args.suite}-shim.json").read_text())
        args.k = [test for test, (outcome, _) in shim.items() if outcome in ("failed", "error")]
        prefix = "numba.tests." if args.suite == "cpu" else "numba.cuda.tests.cudapy."
        args.modules = sorted({t.removeprefix(prefix).split(".")[0] for t in args.k})
    modes = ("baseline", "shim") if args.mode == "both" else (args.mode,)
    for mode in modes:
        _run(args.suite, "baseline" if mode == "recheck" else mode, args)
    if (out / f"{args.suite}-baseline.json").exists() and (
        out / f"{args.suite}-shim.json"
    ).exists():
        report = compare(args.suite, out)
        return 1 if report["regressions"] else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
