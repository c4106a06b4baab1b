"""Hooks a conftest.py can implement to customise pytest-vitperf."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_vitperf_model_built(config: pytest.Config, name: str, model: Any) -> Any:
    """Called with each zoo model right after it is built (random weights, eval mode), before an engine is
    prepared from it. Return a replacement module (trained weights loaded, a layer swapped, a wrapper), or
    None to keep it."""
