"""Hooks a conftest.py can implement to customise pytest-vitperf, and the built-in backends' own implementation of
them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_vitperf.engines.backends import Backend
    from pytest_vitperf.engines.models.zoo import ModelFactory


@pytest.hookspec(firstresult=True)
def pytest_vitperf_model_built(config: pytest.Config, name: str, model: Any) -> Any:
    """Called with each zoo model right after it is built (random weights, eval mode), before an engine is
    prepared from it. Return a replacement module (trained weights loaded, a layer swapped, a wrapper), or
    None to keep it."""


@pytest.hookspec
def pytest_vitperf_models(config: pytest.Config) -> dict[str, ModelFactory]:
    """Models that timm cannot create, by name: each a factory that returns a `torch.nn.Module` (FP32, random or
    trained weights; `--vitperf-weights NAME=FILE` loads a file into it) and the (channels, height, width) of one
    input. `--vitperf-models NAME` then benchmarks it like any other: its engines, exports, baselines and verdicts
    are keyed by NAME (letters, digits, '_' and '.')."""
    return {}


@pytest.hookspec
def pytest_vitperf_backend_names(config: pytest.Config) -> list[str]:
    """The backends this plugin or conftest.py makes, in order of preference for `--vitperf-backend auto`
    (the built-in ones come first). A name listed here can be selected with `--vitperf-backend NAME`."""
    return []


@pytest.hookspec(firstresult=True)
def pytest_vitperf_make_backend(config: pytest.Config, name: str) -> Any:
    """Return a new backend (an object following `pytest_vitperf.Backend`) for `name`, or None when the name is not
    yours. The built-in backends (tensorrt, tensorrt-rtx, torch) are made through this hook too."""


def backend_names(config: pytest.Config) -> list[str]:
    """Every backend name the run's plugins and conftest.py files provide, built-in ones first, once each."""
    return list(dict.fromkeys(n for group in config.hook.pytest_vitperf_backend_names(config=config) for n in group))


def model_hooks(config: pytest.Config | None) -> tuple[object, ...]:
    """The hook implementations a model is built with; a conftest.py collected after a build may add one."""
    if config is None:
        return ()
    names = ("pytest_vitperf_models", "pytest_vitperf_model_built")
    return tuple(impl.function for name in names for impl in getattr(config.hook, name).get_hookimpls())


def registered_models(config: pytest.Config) -> dict[str, ModelFactory]:
    """Every model the run's plugins and conftest.py files register, by name."""
    out: dict[str, ModelFactory] = {}
    for group in config.hook.pytest_vitperf_models(config=config):
        out.update(group or {})
    return out


class BuiltinBackends:
    """The built-in backends as a pytest plugin: they register through the same hooks as a user's."""

    @pytest.hookimpl(tryfirst=True)  # first in the list: auto prefers them
    def pytest_vitperf_backend_names(self) -> list[str]:
        from pytest_vitperf.engines.backends import BUILTIN

        return list(BUILTIN)

    @pytest.hookimpl(trylast=True)  # a conftest.py may replace a built-in under its name
    def pytest_vitperf_make_backend(self, name: str) -> Backend | None:
        from pytest_vitperf.engines.backends import BUILTIN

        factory = BUILTIN.get(name)
        return factory() if factory is not None else None


def hook_maker(config: Any) -> tuple[Callable[[str], Backend], list[str]]:
    """The make function and the names of every backend the run's plugins and conftest.py files provide."""
    names = backend_names(config)

    def make(name: str) -> Backend:
        backend = config.hook.pytest_vitperf_make_backend(config=config, name=name)
        if backend is None:
            raise ValueError(f"unknown backend {name!r}; valid: auto, {', '.join(names)}")
        return backend

    return make, names
