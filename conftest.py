"""Hypothesis profiles for the property tests: `ci` (default, fast) and `nightly` (thorough), selected with
`pytest --hypothesis-profile nightly`; and the slow tier, tests marked `slow` that run with `pytest --run-slow`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


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
