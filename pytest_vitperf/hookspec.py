"""Hooks a conftest.py can implement to customise pytest-vitperf."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_vitperf_model_built(config: pytest.Config, name: str, model: Any) -> Any:
    """Called with each zoo model right after it is built (random weights, eval mode), before an engine is
    prepared from it. Return a replacement module (trained weights loaded, a layer swapped, a wrapper), or
    None to keep it."""


@pytest.hookspec
def pytest_vitperf_backend_names(config: pytest.Config) -> list[str]:
    """The backends this plugin or conftest.py makes, in order of preference for `--vitperf-backend auto`
    (the built-in ones come first). A name listed here can be selected with `--vitperf-backend NAME`."""
    return []


@pytest.hookspec(firstresult=True)
def pytest_vitperf_make_backend(config: pytest.Config, name: str) -> Any:
    """Return a new backend (an object following `pytest_vitperf.backends.Backend`) for `name`, or None when the
    name is not yours. The built-in backends (tensorrt, tensorrt-rtx, torch) are made through this hook too."""


def backend_names(config: pytest.Config) -> list[str]:
    """Every backend name the run's plugins and conftest.py files provide, built-in ones first, once each."""
    return list(dict.fromkeys(n for group in config.hook.pytest_vitperf_backend_names(config=config) for n in group))
