"""Run the hypothesis state machines of the test suite for longer than the suite does.

    NUMBA_ENABLE_CUDASIM=1 python tools/long_machines.py --examples 1500 --steps 40

Runs ``CoherenceMachine`` (tests/test_stateful.py: coherence against a numpy model, exact
transfer counts), ``BudgetMachine`` (tests/test_stateful_memory.py: the device memory
budget under a small random limit) and ``RangeMachine`` (tests/test_ranges.py: random slices
read and written on both sides, validity per byte), each with the given number of examples
and steps; ``--machines`` also takes ``streams`` and ``pooled`` (tests/test_stream_ordering.py:
cross-stream ordering against a happens-before model, the second with a stream-ordered
device pool), and ``perbyte`` (tests/test_per_byte.py: an outside per-byte reference
model, every byte of both buffers checked against numpy after every step). It prints one
line per machine: examples, steps, seconds and the outcome. A failure prints hypothesis's
shortest failing sequence and makes the exit status 1. The results of the last run are
recorded in docs/testing.md.
"""

from __future__ import annotations

import argparse
import sys
import time
import unittest
from pathlib import Path

from hypothesis import Phase, settings

TESTS = Path(__file__).resolve().parent.parent / "tests"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=1500)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--machines",
        nargs="*",
        default=["coherence", "budget", "ranges"],
        choices=["coherence", "budget", "ranges", "streams", "pooled", "perbyte"],
    )
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    import test_per_byte
    import test_ranges
    import test_stateful
    import test_stateful_memory
    import test_stream_ordering

    machines = {
        "coherence": test_stateful.CoherenceMachine,
        "budget": test_stateful_memory.BudgetMachine,
        "ranges": test_ranges.RangeMachine,
        "streams": test_stream_ordering.StreamOrderingMachine,
        "pooled": test_stream_ordering.PooledStreamOrderingMachine,
        "perbyte": test_per_byte.PerByteMachine,
    }
    failed = False
    for name in args.machines:
        machine = machines[name]
        machine.TestCase.settings = settings(
            # perbyte keeps its own health-check choices (its steps are slow on purpose)
            machine.TestCase.settings if name == "perbyte" else settings.default,
            max_examples=args.examples,
            stateful_step_count=args.steps,
            deadline=None,
            phases=tuple(Phase),  # shrink failures, whatever the machine does by default
        )
        start = time.perf_counter()
        result = unittest.TextTestRunner(verbosity=0).run(machine.TestCase("runTest"))
        seconds = time.perf_counter() - start
        ok = result.wasSuccessful()
        failed |= not ok
        print(
            f"{name}: {args.examples} examples x {args.steps} steps, {seconds:.0f} s: "
            f"{'0 failures' if ok else 'FAILED'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
