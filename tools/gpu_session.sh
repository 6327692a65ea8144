#!/usr/bin/env bash
# One GPU session's checks, in one command: the GPU tier of the tests, then the benchmarks
# with the device memory pool (the default) and without it (SMARTARRAY_DEVICE_POOL=0), in
# the same run on the same machine. Written for the lent device machine (see
# docs/testing.md, "On a GPU"); it runs anywhere with an NVIDIA GPU.
#
#   bash tools/gpu_session.sh          # in the repository root
#
# Results go to $OUT (the device tool's folder that comes back), else ./gpu-out: versions
# and the device, the GPU tier's log, and each benchmark run's log and JSON. Wheels in .whl/
# (numba-cuda of the version pyproject.toml pins, and what it needs) are installed first,
# into /tmp/site, when the folder is there. Each step has its own time limit, so that a
# hang in one still leaves the others' results.
set -uo pipefail
out="${OUT:-gpu-out}"
mkdir -p "$out"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
unset NUMBA_ENABLE_CUDASIM

{
    date -u
    nvidia-smi -L
    python3 - <<'EOF'
import importlib.metadata as m
for name in ("numpy", "numba", "numba-cuda", "cuda-core", "cuda-bindings", "dask", "distributed"):
    try:
        print(name, m.version(name))
    except m.PackageNotFoundError:
        print(name, "not installed")
EOF
} 2>&1 | tee "$out/versions.txt"

# The GPU tier: the tests marked gpu, the pool's among them (a few minutes).
timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu -x --timeout=120 tests \
    2>&1 | tee "$out/gpu-tier.log"

# The benchmarks, pool on (default) then off, same machine, same run.
timeout 150 python3 -m smartarray.bench --quick --no-plot --out "$out/pool" \
    2>&1 | tee "$out/bench-pool.log"
SMARTARRAY_DEVICE_POOL=0 timeout 150 python3 -m smartarray.bench --quick --no-plot \
    --out "$out/no-pool" 2>&1 | tee "$out/bench-no-pool.log"
