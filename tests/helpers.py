"""Shared test helpers (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

import os
import subprocess
import sys
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
