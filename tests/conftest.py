"""Test tiers.

One suite runs in three tiers, chosen by the environment *before* numba is first imported:

1. host-only: ``pytest`` on a machine without CUDA; device paths must raise
   ``DeviceUnavailableError``.
2. simulator: ``NUMBA_ENABLE_CUDASIM=1 pytest``; every CUDA path the simulator supports.
3. GPU: ``pytest`` on a machine with a CUDA GPU; tests marked ``gpu`` run too.

Markers: ``device`` (needs a GPU or the simulator), ``gpu`` (needs real hardware),
``hostonly`` (only meaningful without any CUDA).
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

import smartarray

TIER = smartarray.tier()


def pytest_report_header(config: pytest.Config) -> str:
    return f"smartarray tier: {TIER}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_device = pytest.mark.skip(reason="needs a CUDA GPU or NUMBA_ENABLE_CUDASIM=1")
    skip_gpu = pytest.mark.skip(reason="needs a real CUDA GPU (tier 3)")
    skip_hostonly = pytest.mark.skip(reason="only meaningful without CUDA (tier 1)")
    for item in items:
        if "device" in item.keywords and TIER == "host-only":
            item.add_marker(skip_device)
        if "gpu" in item.keywords and TIER != "gpu":
            item.add_marker(skip_gpu)
        if "hostonly" in item.keywords and TIER != "host-only":
            item.add_marker(skip_hostonly)


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    smartarray.reset_transfer_stats()


def _exported_device_copies() -> bool:
    from smartarray._core import memory as _memory

    entries = list(_memory._BUDGET.entries.values())
    allocs = (ref() for ref, _ in entries)
    return any(alloc is not None and alloc._exported_device is not None for alloc in allocs)


@pytest.fixture(autouse=True)
def _isolated_device_memory() -> Iterator[None]:
    """Each test starts with the device memory limit it found, whatever the last one did.

    On a GPU, earlier tests' garbage is collected first too: arrays exported through
    ``__cuda_array_interface__`` (to CuPy, PyTorch) keep their device buffers charged until
    they die, and reference cycles would otherwise keep them into tests that measure device
    memory use. (Only then: a collection before each of the suite's tests more than doubled
    the GPU tier's time. The simulator exports nothing.)
    """
    if TIER == "gpu" and _exported_device_copies():
        gc.collect()
    limit = smartarray.device_memory_limit()
    yield
    if smartarray.device_memory_limit() != limit:
        smartarray.set_device_memory_limit(limit)


@pytest.fixture
def empty_budget() -> Iterator[None]:
    """No device copy held by earlier tests' arrays (dead or alive), and no limit."""
    gc.collect()
    smartarray.set_device_memory_limit(0)  # evicts whatever can be evicted
    smartarray.set_device_memory_limit(None)
    yield
    smartarray.set_device_memory_limit(None)


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Thread switches as often as CPython allows, for the tests of races between threads."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)
