"""Shared test helpers (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(
    args: list[str], *, simulator: bool, timeout: int
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` from the repository root, in the simulator tier or without it."""
    env = dict(os.environ)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def run_in_threads(worker: Callable[[int], None], count: int) -> None:
    """Run ``worker(0) … worker(count - 1)`` in threads at once; re-raise any failure here."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(k: int) -> None:
        try:
            barrier.wait()
            worker(k)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
