"""Hypothesis profiles for the property tests: `ci` (default, fast) and `nightly` (thorough), selected with
`pytest --hypothesis-profile nightly`; and the slow tier, tests marked `slow` that run with `pytest --run-slow`.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

# `ci` (the default): hypothesis's 100 examples a test, and no deadline, since a loaded 2-core machine can take
# seconds for one example; `nightly`: 5000 (pytest --hypothesis-profile=nightly tests/test_fuzz_files.py).
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", parent=settings.get_profile("ci"), max_examples=5000)
settings.load_profile("ci")


def _pin_xdist_worker() -> None:
    """Under `pytest -n N`, each worker and the processes it starts keep to cores of their own: a CPU-timing test
    (the selfcheck, an injected delay, a floor judged on CPU times) would otherwise time whatever ran beside it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    cpus = sorted(os.sched_getaffinity(0))
    if not worker.startswith("gw") or not 0 < count <= len(cpus):
        return
    share = len(cpus) // count
    index = int(worker[2:])
    os.sched_setaffinity(0, cpus[index * share : (index + 1) * share])
    if "torch" in sys.modules:  # imported already (by the plugin): its pool was sized to every core
        sys.modules["torch"].set_num_threads(share)


_pin_xdist_worker()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the tests marked slow (4 minutes on 2 cores)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow(seconds): a test of over a minute on 2 cores; runs with --run-slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """CI runs the rest within its budget; a slow test says what it costs and how to run it."""
    if config.getoption("--run-slow"):
        return
    for item in items:
        if (mark := item.get_closest_marker("slow")) is not None:
            seconds = mark.args[0] if mark.args else "over 60"
            item.add_marker(pytest.mark.skip(reason=f"slow ({seconds} s on 2 cores): pytest --run-slow"))
