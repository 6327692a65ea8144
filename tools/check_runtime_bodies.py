"""mypy over the methods SmartArray defines for the run time only.

Eight methods of ``SmartArray`` (smartarray/_array.py) return types that depend on their
arguments; type checkers read their overloads in smartarray/_array_typing.py, and their
definitions in the class body are hidden from them (``if not TYPE_CHECKING:``), so that
their plain signatures do not replace the overloads. mypy therefore skips their bodies in
the package check. This script checks them: it copies the package to a temporary directory,
makes those blocks visible there (``if True:``) and runs mypy with the project's settings on
the copy. Used by .ci/run; exits with mypy's status.

    python tools/check_runtime_bodies.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "    if not TYPE_CHECKING:  # (typed in _array_typing: see above)\n"
EXPECTED = 8  # the constructor, get, __getitem__, __array__, astype, reshape, getfield, view


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "smartarray"
        shutil.copytree(ROOT / "smartarray", copy, ignore=shutil.ignore_patterns("__pycache__"))
        array = copy / "_array.py"
        text = array.read_text()
        found = text.count(MARK)
        if found != EXPECTED:
            print(f"expected {EXPECTED} run-time-only blocks in _array.py, found {found}")
            return 2
        array.write_text(text.replace(MARK, "    if True:  # (visible to mypy in this copy)\n"))
        # The copy's definitions override the overloads of the typing-only base with their
        # plain signatures (what the hiding avoids): mypy's override checks do not apply.
        command = [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(Path(tmp) / ".mypy_cache"),
            "--disable-error-code",
            "override",
            "smartarray",
        ]
        return subprocess.run(command, cwd=tmp, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
